"""One description of an environment setup, from which every entry point builds it.

The CLI, training scripts, Ray workers and ``vera-env serve`` all need "a VeraEnv on
these tasks, with these wrappers, limits and reward": written once as a frozen pydantic
model it is validated once, compared (``--resume`` refuses a run made with another
spec), serialised (sent to a Ray worker or a server) and built the same way everywhere.
Built in several places, an environment and its wrappers drift apart (two tables of
wrapper names), and a ``--resume`` that compares a hand-picked subset of the settings
resumes a run under a setup it never had.

Example:
    >>> from vera_env.spec import EnvSpec
    >>> spec = EnvSpec(tasks="builtin", max_steps=12, wrappers=("forced", "gate"))
    >>> spec.max_steps
    12
    >>> EnvSpec.model_validate_json(spec.model_dump_json()) == spec
    True
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vera_env.env import VeraEnv
from vera_env.observation.prompts import ObservationVariant
from vera_env.sandbox import SandboxLimits
from vera_env.sandbox.config import SandboxConfig
from vera_env.verification.rewards import RewardConfig, step_bound_s
from vera_env.wrappers import DEFAULT_WRAPPERS, WRAPPER_NAMES, WrapperName, apply_wrappers

if TYPE_CHECKING:
    import gymnasium as gym

    from vera_env.tasks import Task, TaskSource
    from vera_env.verification.grading import Judge

__all__ = ["NON_BINDING", "SANDBOX_NAMES", "WRAPPER_NAMES", "EnvSpec", "JudgeEndpoint",
           "SandboxName", "WrapperName"]

SandboxName = Literal["auto", "bwrap", "bwrap-server", "local"]
SANDBOX_NAMES: tuple[str, ...] = get_args(SandboxName)
"""Every sandbox backend name, for command-line choices."""

NON_BINDING: tuple[str, ...] = ("sandbox", "judge.base_url", "judge.api_key_env")
"""Fields that cannot change an episode's outcome: a resumed run may change them."""


class JudgeEndpoint(BaseModel):
    """The LLM judge of ``llm``-graded tasks, as an OpenAI-compatible endpoint."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base_url: str
    """The endpoint, e.g. ``http://127.0.0.1:8000/v1``."""
    model: str
    """The judge's served model id."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the API key."""

    def build(self) -> Judge:
        """A ``RubricJudge`` over the endpoint (its own HTTP client)."""
        from vera_env.verification.grading import RubricJudge  # noqa: PLC0415 - httpx on use

        return RubricJudge.from_endpoint(self.base_url, self.model,
                                         api_key_env=self.api_key_env)


class EnvSpec(BaseModel):
    """A ``VeraEnv`` and its wrappers, as data.

    ``wrappers`` are applied innermost first: ``("gate", "forced")`` is
    ``ForcedAnswer(EmissionGate(env))``. ``forced`` takes ``reserve`` (clipped to
    ``max_steps``: ``forced_reserve``, which the env is built with).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    tasks: str = "builtin"
    """A task source: ``"builtin"``, a suite folder, a JSONL file or a BioMysteryBench
    folder (``vera_env.tasks.load_tasks``). ``build(tasks=...)`` may pass a ready
    ``TaskSource`` instead."""
    max_steps: int = Field(50, ge=1)
    """The step budget of an episode."""
    wrappers: tuple[WrapperName, ...] = DEFAULT_WRAPPERS
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
    max_observation_chars: int = Field(100_000, ge=1)
    """Observations are middle-clipped to this length."""
    max_action_chars: int = Field(50_000, ge=1)
    """Longer turns are rejected with an error."""
    judge: JudgeEndpoint | None = None
    """The judge of ``llm``-graded tasks (None: their answers are unscorable)."""
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
                "max_observation_chars": self.max_observation_chars,
                "max_action_chars": self.max_action_chars,
                "observation_variant": self.observation_variant,
                "forced_reserve": self.forced_reserve}

    @property
    def forced_reserve(self) -> int:
        """The env's ``forced_reserve``: ``reserve`` clipped to the budget when the
        ``forced`` wrapper is named, else 0 (derived, so not a field to compare)."""
        return min(self.reserve, self.max_steps) if "forced" in self.wrappers else 0

    def step_bound_s(self) -> float:
        """The longest a step of this environment may take, from its limits and reward
        settings (``vera_env.verification.rewards.step_bound_s``, worst case: 16 checks).

        Example:
            >>> EnvSpec().step_bound_s()                 # 60 + 3 + 16 x 30 + 4 x 120
            1023.0
        """
        return step_bound_s(self.limits, self.reward)

    def differences(self, other: EnvSpec) -> list[str]:
        """Fields that differ and could change an outcome (not ``NON_BINDING``), as
        ``name: was X, now Y`` with dotted names (``reward.strength``)."""
        dumps = self.model_dump(mode="json"), other.model_dump(mode="json")
        mine, theirs = _flat(dumps[0]), _flat(dumps[1])
        names = set(mine) | set(theirs)
        # a section set on one side and None on the other (``reward.strength`` on and
        # off) is one difference, not one per field of the section
        whole = {n for n in names if any(m.startswith(n + ".") for m in names)}
        out = []
        for name in sorted(names):
            if name in NON_BINDING or name.split(".")[0] in NON_BINDING or \
                    any(name.startswith(w + ".") for w in whole):
                continue
            was, now = (_at(d, name) for d in dumps)
            if was != now:
                out.append(f"{name}: was {was!r}, now {now!r}")
        return out

    def build(self, *, tasks: str | TaskSource | list[Task] | None = None,
              judge: Judge | None = None) -> gym.Env:
        """A new environment: ``VeraEnv`` with the spec's wrappers.

        Args:
            tasks: Overrides ``self.tasks`` (e.g. a source already loaded, shared by many
                environments of one process).
            judge: Grades ``llm`` tasks (``vera_env.verification.grading.RubricJudge``);
                None builds one from ``self.judge`` when set. Pass one to share a judge
                (and its connection pool) between environments.
        """
        if judge is None and self.judge is not None:
            judge = self.judge.build()
        env = VeraEnv(self.tasks if tasks is None else tasks, judge=judge,
                      **self.env_kwargs())
        return apply_wrappers(env, self.wrappers, {"forced": {"reserve": self.forced_reserve}})


def _flat(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _at(data: dict[str, Any], dotted: str) -> Any:
    """The value at a dotted name of a nested dump (None where a section is None)."""
    value: Any = data
    for key in dotted.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value
