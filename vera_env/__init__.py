"""vera_env: verification-executed reward as a Gymnasium environment for LLM agents.

An agent analyses data files by running shell commands in a sandboxed workspace and
declares its findings as nodes of an analysis graph with checks; the harness runs the
checks read-only and the verification score is the reward. The model never sets its
own score.

    >>> import gymnasium as gym, vera_env
    >>> env = gym.make("vera_env/Vera-v0", tasks="builtin", max_steps=50)

Public names are loaded on first use, so ``import vera_env.sandbox`` (or a Gymnasium
registry scan) does not pay for the whole package.
"""

from __future__ import annotations

import importlib
from typing import Any

from gymnasium.envs.registration import register, registry

__all__ = [
    "ENV_ID", "FaultError", "GraderError", "PolicyError", "REMOTE_ENV_ID", "ResetNeeded",
    "RewardConfig", "SandboxError", "StepRecord", "Task", "TaskFileError", "UsageError",
    "VeraEnv", "VeraError", "load_tasks",
]
# The one source of the version: pyproject.toml reads it ([tool.setuptools.dynamic]) and
# `vera-env --version` prints it. A literal, so the build parses it without importing.
__version__ = "0.1.0"

ENV_ID = "vera_env/Vera-v0"
REMOTE_ENV_ID = "vera_env/VeraRemote-v0"  # a served env: gym.make_vec(REMOTE_ENV_ID, base_url=...)

_LAZY = {
    "VeraEnv": "vera_env.env",
    "RewardConfig": "vera_env.verification.rewards",
    "StepRecord": "vera_env.records",
    "Task": "vera_env.tasks",
    "load_tasks": "vera_env.tasks",
    "FaultError": "vera_env.errors",
    "GraderError": "vera_env.errors",
    "PolicyError": "vera_env.errors",
    "ResetNeeded": "vera_env.errors",
    "SandboxError": "vera_env.errors",
    "TaskFileError": "vera_env.errors",
    "UsageError": "vera_env.errors",
    "VeraError": "vera_env.errors",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'vera_env' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if ENV_ID not in registry:
    # No TimeLimit: the environment owns its step budget (max_steps) and reports
    # truncation itself, so the forced-answer wrapper can see the budget end.
    register(id=ENV_ID, entry_point="vera_env.env:VeraEnv")
if REMOTE_ENV_ID not in registry:
    register(id=REMOTE_ENV_ID, entry_point="vera_env.serve.client:VeraRemoteEnv")
