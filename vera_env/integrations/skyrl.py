"""A SkyRL-Gym (``skyrl-gym`` 0.4) text environment that plays vera in-process.

SkyRL's generator builds an environment per trajectory with
``skyrl_gym.make(env_class, env_config=..., extras=row_extras)``, calls ``init(prompt)``
once, then ``step(model_reply)`` until ``done``. ``VeraTextEnv`` maps that onto a vera
episode: the dataset row names the task (``extra_info.task_id``, or ``task_id``), the
dataset prompt is replaced by the task's first observation (vera's observation already
states the question, the files and the rules), each reply is passed to ``env.step`` as
the raw turn text, and each step's observation comes back as one user message. SkyRL
appends those messages to the conversation itself (its generator owns the history), so
the transcript grows turn by turn there; ``observation_variant="compact"`` keeps it short.

SkyRL's reward must be a float, so an unscorable step (``info["unscorable"]``: a
sandbox fault or a missing judge, not the model's doing) cannot be expressed as "no
reward": it is reported as ``0.0`` with ``metadata["unscorable"] = True``, it ends the
trajectory, and ``get_metrics()["unscorable"]`` is 1.0. A trainer must drop such
trajectories (mask their loss) rather than learn from the 0; see
``docs/integrations/skyrl.md``.

Example (skyrl-gym is an optional extra, so this is not a doctest; the recipe in
``docs/integrations/skyrl.md`` runs it)::

    import skyrl_gym
    from vera_env.integrations.skyrl import ENV_ID, register
    register()
    env = skyrl_gym.make(ENV_ID, env_config={"max_steps": 8},
                         extras={"extra_info": {"task_id": "seq.motif_count.easy.s0"}})
    messages, info = env.init([])    # one user message: the task's first observation
    env.close()
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from skyrl_gym.envs.base_text_env import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    BaseTextEnv,
    BaseTextEnvStepOutput,
)
from skyrl_gym.envs.registration import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    register as skyrl_register,
)
from skyrl_gym.envs.registration import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
    registry,
)

from vera_env import info as keys
from vera_env.spec import EnvSpec

__all__ = ["ENTRY_POINT", "ENV_ID", "VeraTextEnv", "register"]

ENV_ID = "vera"
"""The ``env_class`` a SkyRL dataset row or config names. Plain: SkyRL looks the
environment's config up as ``environment.skyrl_gym.<env_class>``, a Hydra key."""
ENTRY_POINT = "vera_env.integrations.skyrl:VeraTextEnv"


def register() -> None:
    """Register ``VeraTextEnv`` as ``ENV_ID`` with skyrl-gym (once per process: call it
    in the training entry point, which SkyRL's workers import)."""
    if ENV_ID not in registry:
        skyrl_register(id=ENV_ID, entry_point=ENTRY_POINT)


class VeraTextEnv(BaseTextEnv):  # type: ignore[misc, unused-ignore]
    """One vera episode as a SkyRL text environment.

    Args:
        env_config: ``vera_env.spec.EnvSpec`` fields (``max_steps``, ``tasks``,
            ``observation_variant``, ...), e.g. SkyRL's
            ``environment.skyrl_gym.vera`` config.
        extras: The dataset row's extras; the task id is ``extras["extra_info"]["task_id"]``
            or ``extras["task_id"]``.

    Raises:
        ValueError: The row names no task id.
        pydantic.ValidationError: ``env_config`` holds a field ``EnvSpec`` does not have.
    """

    def __init__(self, env_config: Any = None, extras: Mapping[str, Any] | None = None) -> None:
        super().__init__()
        self.task_id = _task_id(dict(extras or {}))
        self.vera_spec = EnvSpec(**_plain(env_config))
        self.max_turns = self.vera_spec.max_steps + 1  # the one extra ask after the budget
        self.total = 0.0
        self.unscorable = False
        self._env: Any = None

    def init(self, prompt: list[dict[str, str]]) -> tuple[list[dict[str, str]], dict[str, Any]]:
        """Start the episode; the task's first observation replaces the dataset prompt."""
        self.close()
        self._env = self.vera_spec.build()
        obs, info = self._env.reset(options={"task_id": self.task_id})
        return [{"role": "user", "content": obs}], {"task_id": info[keys.TASK_ID]}

    def step(self, action: str) -> Any:
        """Play the reply as one turn; the next observation is one user message."""
        if self._env is None:
            raise RuntimeError("call init() before step()")
        self.turns += 1
        obs, reward, terminated, truncated, info = self._env.step(action)
        unscorable = bool(info.get(keys.UNSCORABLE)) or math.isnan(reward)
        self.unscorable = self.unscorable or unscorable
        value = 0.0 if unscorable else float(reward)
        self.total += value
        done = bool(terminated or truncated or unscorable)
        metadata = {"unscorable": unscorable, "error": info.get(keys.ERROR, ""),
                    "correct": info.get(keys.CORRECT), "vera_reward": float(reward)}
        observations = [] if done else [{"role": "user", "content": obs}]
        return BaseTextEnvStepOutput(observations=observations, reward=value, done=done,
                                     metadata=metadata)

    def get_metrics(self) -> dict[str, Any]:
        """The episode's return and whether it must be dropped (``unscorable`` 1.0)."""
        return {"vera_return": self.total, "unscorable": float(self.unscorable)}

    def close(self) -> None:
        """Close the vera env (its sandbox workspace)."""
        if self._env is not None:
            self._env.close()
            self._env = None


def _task_id(extras: dict[str, Any]) -> str:
    extra_info = _plain(extras.get("extra_info"))
    task_id = extra_info.get("task_id") or extras.get("task_id")
    if not task_id:
        raise ValueError("a vera row names its task: extras['extra_info']['task_id'] or "
                         f"extras['task_id']; got keys {sorted(extras)}")
    return str(task_id)


def _plain(config: Any) -> dict[str, Any]:
    """A plain dict from None, a mapping or an OmegaConf ``DictConfig`` (SkyRL's)."""
    if config is None:
        return {}
    to_container = getattr(config, "_to_content", None)
    if to_container is not None:  # omegaconf: resolve interpolations into plain values
        from omegaconf import (  # type: ignore[import-not-found, unused-ignore]  # noqa: PLC0415 - installed with skyrl-gym
            OmegaConf,
        )

        return dict(OmegaConf.to_container(config, resolve=True))  # type: ignore[arg-type, unused-ignore]
    return dict(config)
