"""Every exception vera_env raises on purpose, in one tree under ``VeraError``.

Two channels keep a bad rollout from looking like a bad model: a model that
misbehaves produces a value (``Emission.error``, a failed ``CheckResult``,
``info["error"]``); a broken task file, a missing sandbox or an unreachable
endpoint raises one of these, and the episode is recorded as ``unscorable``
instead of earning a fake reward of 0.

The tree separates the two kinds of raise a caller handles differently, as httpx
does. A ``UsageError`` is the calling code's mistake (call ``reset()`` first, ask for
a task that exists): fix the code, do not retry. A ``FaultError`` is something
outside the calling code failing at run time (a broken file, the sandbox, a grader,
an endpoint, a server): record the episode as unscorable, retry, or report the setup.
Where callers already catch a builtin, the error keeps it as a second base
(``UnknownTaskError`` is still a ``KeyError``), so catching either works.

Hierarchy::

    VeraError
    ├── UsageError             the calling code misused the API
    │   ├── ResetNeeded          (RuntimeError) step() before reset() or after the end
    │   ├── UnknownTaskError     (KeyError) a task id the source does not have
    │   └── RunSettingsMismatch  (ValueError) --resume on a run made with other settings
    └── FaultError             something outside the calling code failed at run time
        ├── TaskFileError        a task file or row is broken (.file, .field, .message)
        ├── GoldenError          (ValueError) a golden scenario file is malformed
        ├── MissingSourceError   a real-data archive is not fetched (or another release)
        ├── UnsafeArchiveError   (ValueError) an archive member would land outside its folder
        ├── SandboxError         the sandbox cannot stage or run (bwrap missing, staging)
        │   ├── SandboxStartTimeout  it did not start within the run's timeout (.timeout_s)
        │   ├── StrengthStarved    strength's runs got too little CPU (a busy machine)
        │   └── RemoteEnvError     the env server refused or lost the session (.code)
        ├── GraderError          a grader cannot decide (judge unreachable, bad spec)
        ├── PolicyError          a policy's transport or response failed (.status, .endpoint)
        ├── StrengthDeadline     strength work ran past the step's deadline
        │   └── ShadowBudgetSpent  the shadows' disk budget is full
        ├── ServerBusy           the server holds its maximum number of sessions
        ├── SessionClosed        a served session was closed (idle expiry, shutdown)
        └── ErrorFrame           the server answered with an error frame (.message, .code)

The modules that raise an error re-export it (``from vera_env.tasks import
UnknownTaskError`` works), but it is defined here: this module imports nothing from
vera_env, so every layer can raise from it. Exceptions named with a leading
underscore (``vera_env.llm._Retry``) are control flow inside one module and never
reach a caller. Every error pickles with its fields (a worker process's error reaches
its parent intact).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ErrorFrame",
    "FaultError",
    "GoldenError",
    "GraderError",
    "MissingSourceError",
    "PolicyError",
    "RemoteEnvError",
    "ResetNeeded",
    "RunSettingsMismatch",
    "SandboxError",
    "SandboxStartTimeout",
    "ServerBusy",
    "SessionClosed",
    "ShadowBudgetSpent",
    "StrengthDeadline",
    "StrengthStarved",
    "TaskFileError",
    "UnknownTaskError",
    "UnsafeArchiveError",
    "UsageError",
    "VeraError",
]


def _rebuild(cls: type[VeraError], args: tuple[Any, ...], state: dict[str, Any]) -> VeraError:
    """Unpickle an error without calling its ``__init__`` (whose signature may differ
    from its ``args``), then restore its fields."""
    exc = cls.__new__(cls, *args)
    exc.args = args
    exc.__dict__.update(state)
    return exc


class VeraError(Exception):
    """Base class of every error vera_env raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        return _rebuild, (type(self), self.args, dict(self.__dict__))


class UsageError(VeraError):
    """The calling code used the API wrongly: fix the call, retrying cannot help."""


class FaultError(VeraError):
    """Something outside the calling code failed at run time (file, sandbox, grader,
    endpoint, server): the episode is unscorable, the setup is to blame."""


class ResetNeeded(UsageError, RuntimeError):
    """The environment must be reset before this call (none started, or it ended)."""


class UnknownTaskError(UsageError, KeyError):
    """A task id that the source does not have (a caller's mistake, not a broken file)."""

    def __str__(self) -> str:  # KeyError would print the message inside quotes
        return str(self.args[0]) if self.args else "unknown task"


class RunSettingsMismatch(UsageError, ValueError):
    """``--resume`` on a folder made with different settings."""


class TaskFileError(FaultError):
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


class GoldenError(FaultError, ValueError):
    """A malformed scenario. Raised loudly: a broken fixture is not a skip."""


class MissingSourceError(FaultError):
    """A real-data file is not available (archive not fetched, or a different release)."""


class UnsafeArchiveError(FaultError, ValueError):
    """An archive member would land outside its folder, or is not a plain file."""


class SandboxError(FaultError):
    """The sandbox could not stage a workspace or start a command."""


class SandboxStartTimeout(SandboxError):
    """The sandbox did not start within the timeout its run was given.

    A fault when the run had its full timeout. Strength gives its runs what is left
    of a node's deadline, which under load can be less than bwrap needs to start: the
    caller that cut the timeout reads this as its deadline passing, not as a fault.

    Args:
        message: What happened.
        timeout_s: The timeout the run was given.
    """

    def __init__(self, message: str, timeout_s: float) -> None:
        super().__init__(message)
        self.timeout_s = timeout_s


class StrengthStarved(SandboxError):
    """Strength's runs of a node got too little CPU to finish before its wall-clock
    backstop: other load starved them (``vera_env.verification.strength.budget``).

    A ``SandboxError`` because it is the same fault to the episode as a sandbox that
    cannot run: it is unscorable, not a check that earned nothing.
    """


class RemoteEnvError(SandboxError):
    """The environment server refused or lost the session (busy, expired, unreachable).

    A ``SandboxError`` because, to the episode, the remote environment is where its
    commands run: losing it is the same fault as losing a local sandbox.

    Args:
        message: What happened.
        code: The protocol's error code (``CAPACITY_REACHED``, ...) or ``DISCONNECTED``.
    """

    def __init__(self, message: str, code: str = "DISCONNECTED") -> None:
        super().__init__(message)
        self.code = code


class GraderError(FaultError):
    """A grader could not reach a verdict for reasons outside the answer."""


class PolicyError(FaultError):
    """A policy could not produce a turn (transport fault, malformed response).

    Args:
        message: What failed, for people.
        status: The HTTP status the endpoint answered, when it answered one.
        endpoint: The URL the policy posted to, for a remote policy.
    """

    def __init__(self, message: str, *, status: int | None = None,
                 endpoint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.endpoint = endpoint


class StrengthDeadline(FaultError):
    """Harness work for a step ran past the step's deadline; what is undecided earns
    nothing."""


class ShadowBudgetSpent(StrengthDeadline):
    """The shadows' disk budget is full: a shadow could not be staged.

    A bound on the step's harness work was reached, like the deadline: what it leaves
    undecided earns nothing. A subclass, so that a caller catching ``StrengthDeadline``
    fails closed; catch it first to say why.
    """


class ServerBusy(FaultError):
    """The server holds its maximum number of sessions; retry later."""


class SessionClosed(FaultError):
    """The session was closed (idle expiry, shutdown, or the client's close)."""


class ErrorFrame(FaultError):
    """The server answered a request with an error frame (a reply, not a lost socket).

    Args:
        message: The frame's ``message`` (``str(exc)`` of the server-side exception).
        code: The protocol's error code (``EXECUTION_ERROR``, ``CAPACITY_REACHED``, ...).
    """

    def __init__(self, message: str, code: str) -> None:
        super().__init__(f"{message} (code: {code})")
        self.message = message
        self.code = code
