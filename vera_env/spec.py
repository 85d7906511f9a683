"""One description of an environment setup, from which every entry point builds it.

The CLI, training scripts, Ray workers and ``vera-env serve`` all need "a VeraEnv on
these tasks, with these wrappers, limits and reward": written once as a frozen pydantic
model it is validated once, compared (``--resume`` refuses a run made with another
spec), serialised (sent to a Ray worker or a server) and built the same way everywhere.

Example:
    >>> from vera_env.spec import EnvSpec
    >>> spec = EnvSpec(tasks="builtin", max_steps=12, wrappers=("forced", "gate"))
    >>> spec.max_steps
    12
    >>> EnvSpec.model_validate_json(spec.model_dump_json()) == spec
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vera_env.observation.prompts import ObservationVariant
from vera_env.sandbox import SandboxLimits
from vera_env.sandbox.config import SandboxConfig
from vera_env.verification.rewards import RewardConfig

if TYPE_CHECKING:
    import gymnasium as gym

    from vera_env.tasks import Task, TaskSource
    from vera_env.verification.grading import Judge

__all__ = ["WRAPPER_NAMES", "EnvSpec", "WrapperName"]

WrapperName = Literal["forced", "gate"]
WRAPPER_NAMES: tuple[WrapperName, ...] = ("forced", "gate")
SandboxName = Literal["auto", "bwrap", "bwrap-server", "local"]


class EnvSpec(BaseModel):
    """A ``VeraEnv`` and its wrappers, as data.

    ``wrappers`` are applied innermost first: ``("gate", "forced")`` is
    ``ForcedAnswer(EmissionGate(env))``. ``forced`` takes ``reserve`` (clipped to
    ``max_steps``).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks: str = "builtin"
    """A task source: ``"builtin"``, a suite folder, a JSONL file or a BioMysteryBench
    folder (``vera_env.tasks.load_tasks``). ``build(tasks=...)`` may pass a ready
    ``TaskSource`` instead."""
    max_steps: int = Field(50, ge=1)
    """The step budget of an episode."""
    wrappers: tuple[WrapperName, ...] = ("gate", "forced")
    """Wrappers, innermost first."""
    reserve: int = Field(3, ge=1)
    """Final steps of the budget in which ``ForcedAnswer`` demands an answer."""
    reward: RewardConfig = Field(default_factory=RewardConfig)
    """Reward weights, bounds and strength testing."""
    sandbox: SandboxName = "auto"
    """Sandbox backend."""
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    """Sandbox limits."""
    sandbox_config: SandboxConfig | None = None
    """The agent's toolbox and the sandbox's identity (None: the defaults)."""
    state_budget: int = Field(4000, ge=1)
    """Tokens allowed for the rendered analysis graph in an observation."""
    observation_variant: ObservationVariant = "full"
    """How observations tell the rules: ``full`` or ``compact`` (short, no placeholders)."""

    @model_validator(mode="after")
    def _distinct_wrappers(self) -> EnvSpec:
        if len(set(self.wrappers)) != len(self.wrappers):
            raise ValueError(f"each wrapper may appear once, got {list(self.wrappers)}")
        return self

    def env_kwargs(self) -> dict[str, Any]:
        """The ``VeraEnv`` keyword arguments this spec sets (tasks and judge aside)."""
        return {"max_steps": self.max_steps, "reward": self.reward, "sandbox": self.sandbox,
                "limits": self.limits, "sandbox_config": self.sandbox_config,
                "state_budget": self.state_budget,
                "observation_variant": self.observation_variant}

    def build(self, *, tasks: str | TaskSource | list[Task] | None = None,
              judge: Judge | None = None) -> gym.Env:
        """A new environment: ``VeraEnv`` with the spec's wrappers.

        Args:
            tasks: Overrides ``self.tasks`` (e.g. a source already loaded, shared by many
                environments of one process).
            judge: Grades ``llm`` tasks (``vera_env.verification.grading.RubricJudge``).
        """
        from vera_env.env import VeraEnv  # noqa: PLC0415 - the spec is data first
        from vera_env.wrappers import EmissionGate, ForcedAnswer  # noqa: PLC0415

        env: gym.Env = VeraEnv(self.tasks if tasks is None else tasks, judge=judge,
                               **self.env_kwargs())
        for name in self.wrappers:
            env = (ForcedAnswer(env, reserve=min(self.reserve, self.max_steps))
                   if name == "forced" else EmissionGate(env))
        return env
