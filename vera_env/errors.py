"""Exceptions raised when the *setup* is broken, never because of model text.

Two channels keep a bad rollout from looking like a bad model: a model that
misbehaves produces a value (``Emission.error``, a failed ``CheckResult``,
``info["error"]``); a broken task file, a missing sandbox or an unreachable
endpoint raises one of these, and the episode is recorded as ``unscorable``
instead of earning a fake reward of 0.

Hierarchy::

    VeraError
    ├── TaskFileError     a task file or task row is broken (names file and field)
    ├── SandboxError      the sandbox cannot stage or run (bwrap missing, staging failed)
    ├── GraderError       a grader cannot decide (judge unreachable, bad grader spec)
    ├── ResetNeeded       step() called before reset() or after the episode ended
    └── PolicyError       a policy's transport or response failed (provider fault)
"""

from __future__ import annotations

__all__ = [
    "GraderError",
    "PolicyError",
    "ResetNeeded",
    "SandboxError",
    "TaskFileError",
    "VeraError",
]


class VeraError(Exception):
    """Base class of every error vera_env raises on purpose."""


class TaskFileError(VeraError):
    """A task source is broken.

    Args:
        file: The file (or folder) that holds the broken task.
        field: The field, row or key that is wrong.
        message: What is wrong and what was expected.
    """

    def __init__(self, file: str, field: str, message: str) -> None:
        self.file = str(file)
        self.field = field
        self.message = message
        super().__init__(f"{self.file}: {field}: {message}")


class SandboxError(VeraError):
    """The sandbox could not stage a workspace or start a command."""


class GraderError(VeraError):
    """A grader could not reach a verdict for reasons outside the answer."""


class ResetNeeded(VeraError):
    """The environment must be reset before this call."""


class PolicyError(VeraError):
    """A policy could not produce a turn (transport fault, malformed response)."""
