"""Where model-written shell runs: staged workspaces behind a security boundary.

``make_sandbox()`` returns the bubblewrap backend when this machine can run it and
otherwise refuses (``SandboxError``): the default ``"auto"`` used to fall back to the
local backend with only a warning, so a machine without bubblewrap ran model-written
shell unisolated by default, and a warning in a long log is easily missed. The local
backend is there for whoever names it (``"local"``), and it still warns. The answer of
the bwrap probe is cached for the process: probing costs a sandbox start, and the
machine does not grow user namespaces halfway through a run.

The default bubblewrap backend is ``bwrap-server`` (``server``): each workspace runs
its commands in one long-lived sandbox, with the same guarantees as a sandbox per
command (limits, the tree killed, nothing surviving a command; checks keep a fresh
sandbox each). Measured (``benchmarks/sandbox_latency.py``): a command costs 1.1-1.9x
a bare subprocess there against ~7.5x per command, and a workspace that runs 4 or more
commands is cheaper from start to close; strength replays multiply commands.
``"bwrap"`` names the sandbox-per-command backend.

    >>> from pathlib import Path
    >>> from vera_env.sandbox import make_sandbox
    >>> src = Path("counts.tsv")
    >>> _ = src.write_text("gene,count\\nTP53,4\\n")
    >>> sandbox = make_sandbox("auto")
    >>> with sandbox.stage({"counts.tsv": src.resolve()}) as ws:
    ...     print(ws.run("wc -l < counts.tsv").stdout.strip())
    2
"""

from __future__ import annotations

import threading
from typing import Literal

from vera_env.errors import SandboxError

from .bwrap import BwrapSandbox, BwrapWorkspace
from .capped import CappedArea
from .config import SandboxConfig
from .local import LOCAL_WARNING, LocalSandbox, LocalWorkspace
from .result import ExecResult, ExecStatus, SandboxLimits
from .server import ServerSandbox, ServerWorkspace
from .staging import StagingReport
from .workspace import BaseWorkspace, Sandbox, Workspace

__all__ = [
    "LOCAL_WARNING",
    "BaseWorkspace",
    "Backend",
    "BwrapSandbox",
    "BwrapWorkspace",
    "CappedArea",
    "ExecResult",
    "ExecStatus",
    "LocalSandbox",
    "LocalWorkspace",
    "Sandbox",
    "SandboxConfig",
    "SandboxLimits",
    "ServerSandbox",
    "ServerWorkspace",
    "StagingReport",
    "Workspace",
    "make_sandbox",
    "probe_bwrap",
    "sandbox_refusal",
]

Backend = Literal["auto", "bwrap", "bwrap-server", "local"]
_probe_lock = threading.Lock()
_probe_cache: dict[tuple[str, int, int], str] = {}


def probe_bwrap(config: SandboxConfig | None = None) -> str:
    """Check once per process that bwrap can start a sandbox and run ``true``.

    Returns:
        "" when it can; otherwise why not (bwrap's own message).
    """
    config = config or SandboxConfig()
    key = (config.bwrap_path, config.host_uid, config.host_gid)
    with _probe_lock:
        if key not in _probe_cache:
            _probe_cache[key] = _probe(config)
        return _probe_cache[key]


def _probe(config: SandboxConfig) -> str:
    limits = SandboxLimits(timeout_s=30)
    try:
        with BwrapSandbox(limits, config) as sandbox, sandbox.stage({}) as workspace:
            result = workspace.run("true")
    except SandboxError as exc:
        return str(exc)
    if not result.ok:
        return f"bwrap probe: 'true' ended with {result.status}, exit {result.exit_code}"
    return ""


def make_sandbox(
    backend: Backend = "auto",
    limits: SandboxLimits | None = None,
    *,
    config: SandboxConfig | None = None,
) -> BwrapSandbox | LocalSandbox:
    """Build a sandbox backend.

    Args:
        backend: ``"bwrap-server"`` (bubblewrap, ``run()`` through one long-lived
            sandbox per workspace: see ``server``; fail if bwrap cannot run),
            ``"bwrap"`` (the same isolation, a sandbox per command), ``"local"`` (no
            isolation, warns) or ``"auto"`` (``bwrap-server``; never local).
        limits: Resource limits for every command.
        config: Toolbox and identity.

    Raises:
        ValueError: ``backend`` is not one of the four names.
        SandboxError: Any backend but ``"local"``, and bwrap cannot start a sandbox
            here; for ``"auto"`` the message says how to install bubblewrap or to
            choose ``"local"`` explicitly.
    """
    if backend not in ("auto", "bwrap", "bwrap-server", "local"):
        raise ValueError(f"backend must be 'auto', 'bwrap', 'bwrap-server' or 'local', "
                         f"got {backend!r}")
    if backend == "local":
        return LocalSandbox(limits, config)
    refusal = sandbox_refusal(backend, config)
    if refusal:
        raise SandboxError(refusal)
    return BwrapSandbox(limits, config) if backend == "bwrap" else ServerSandbox(limits, config)


def sandbox_refusal(backend: Backend, config: SandboxConfig | None = None) -> str:
    """Why ``make_sandbox(backend)`` would refuse on this machine; "" when it would not.

    Commands that play many episodes ask this once before the first (``vera-env eval``
    recorded every attempt as a sandbox exclusion instead, and ``demo`` ended in a
    traceback), and print the line.
    """
    if backend == "local":
        return ""
    reason = probe_bwrap(config)
    if not reason:
        return ""
    if backend in ("bwrap", "bwrap-server"):
        return f"bwrap backend unavailable: {reason}"
    return (f"sandbox 'auto' needs bubblewrap, which cannot start a sandbox here ({reason}): "
            "install it (`vera-env setup`), or choose --sandbox local / sandbox=\"local\" "
            "explicitly (plain subprocesses, NO isolation)")
