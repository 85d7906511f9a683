"""The default bwrap backend: long-lived sandboxes per workspace for ``run()`` and checks.

Where a sandboxed ``true`` spends its ~11.8 ms (2-core VM, where a bare ``bash -c
true`` takes 1.3 ms; ``benchmarks/sandbox_latency.py --breakdown``): spawning ``true``
0.7 ms, bwrap itself 1.5 ms, the user and pid namespaces 2.5 ms, the net, ipc, uts and
cgroup namespaces 0.9 ms, the mounts (``/proc``, ``/dev``, ``/tmp``, the ``/etc``
files, binds, the read-only remount) 2.7 ms, and the limits wrapper (a bash that runs
``ulimit`` and execs a second bash) 3.4 ms. All of it is paid per command, because each
command gets a fresh sandbox; fewer binds or no wrapper would save a few ms, and no
per-command sandbox gets under ~5 ms.

So here a workspace starts its sandbox once, with the same arguments, and runs a small
zygote (``zygote.py``) as its pid 1; each ``run()`` sends the command over a socket
with its stdout/stderr pipes, and the zygote spawns ``bash -c`` (vfork+exec), which
inherits the rlimits the zygote set on itself at start. Per command that is one
spawn of bash and two socket messages (1.5 ms for ``true``, 1.2x bare). What the
per-command sandbox guaranteed still holds: the same namespaces, uid, dropped
capabilities, mounts and rlimits (the command is the sandbox's child either way); when
the command's leader exits every other process in the namespace is killed (the zygote
is pid 1 and calls ``kill(-1)``); ``/tmp`` and ``/dev/shm`` are wiped after each
command, and a sandbox whose visible state changed otherwise is replaced; on timeout,
output or disk limit, abort or close the harness kills the
zygote from outside, the kernel kills the namespace, and the next command starts a
fresh sandbox. One difference is visible: the command is no longer its namespace's
pid 1, which ignores signals it has no handler for, so ``kill -9 $$`` now kills the
shell (exit 137) as it would anywhere else instead of doing nothing.

Between commands an idle server (bwrap and the zygote, ~12 MB) stays up per
workspace; ``close()`` (or ``abort()``) kills it. A server started from a thread that
then exits dies with it (bwrap's ``--die-with-parent`` follows the spawning thread);
the next command starts another, and a check it killed mid-run is run again on a fresh
sandbox (a check changes nothing, so running it twice is safe; a command is not rerun).
So callers keep the threads that use a workspace as long as the workspace (strength's
shadows: ``vera_env.verification.strength.run_pool``). Such a death also hides the
server's CPU from ``getrusage`` (bwrap is killed before it reaps the zygote).

Nothing survives a command here either: the zygote also removes every SysV
IPC object (this sandbox's IPC namespace outlives commands) and is replaced after a
command that made one (the id sequence moved on) or moved a network counter (traffic,
a ``TIME_WAIT`` socket, a failed route), the keyring and POSIX message-queue calls
fail (``seccomp``), ``/dev`` is read-only and ``/dev/shm`` capped, and a listener on an
abstract socket dies with its command. The server's memory cgroup (``cgroup``) holds
the zygote and the command running, so the tree's limit holds.

Checks take this path too, through a second server per workspace (strength's
shadows are workspaces, so each gets its own): started on the first ``run_check`` with
what the per-check sandbox mounts (``/work`` read-only, the same constant entropy and
seccomp filter), so a check costs one bash spawn and two socket messages: 1.3-1.4x
a bare subprocess of the same command in the same run (up to 2x at load 9 on two
cores), against 7-12x for a sandbox per check; its start costs about two fresh
checks (``benchmarks/sandbox_latency.py``). It is not the command server:
the agent's processes are in another pid namespace, out of a check's sight, and the
agent's writes to ``/work`` reach the next check through the bind. All the above holds
between checks; what a check can still see of earlier ones is how many pids the
namespace has handed out (``$$`` was 1 per check). Constant entropy never covered pids
or the clock; strength's controls and confirmations bound what such a check earns.

Still on a fresh sandbox each: a check with an ``overlay`` (a mutant bound over one
file: a mount cannot change in a running sandbox), any ``run`` or check while another
thread is using that server, and everything on a machine where a server cannot start
(no ``python3`` inside). The workspace reaches the servers through ``BaseWorkspace``'s
extension points (``_run_outcome``, ``_on_close``), not by wrapping another workspace.

It is the default (``make_sandbox("auto")``) because strength replays the
episode's file-writing commands in workspaces of their own, which multiplies command
runs, and a workspace that runs four or more commands is cheaper here from start to
close (``benchmarks/sandbox_latency.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from vera_env.errors import SandboxError

from .bwrap import BwrapSandbox, BwrapWorkspace
from .cgroup import MemoryCgroups
from .config import SandboxConfig
from .disk import DiskWatch
from .persistent import ArgvBuilder, PersistentServer
from .process import ProcessOutcome
from .result import SandboxLimits

__all__ = ["ServerSandbox", "ServerWorkspace"]

_ZYGOTE_INSIDE = "/opt/vera/zygote.py"
_Server = PersistentServer  # the name benchmarks/step_profile.py wraps to count starts


class ServerSandbox(BwrapSandbox):
    """The bwrap backend whose workspaces run commands and checks in long-lived sandboxes.

    Same arguments, isolation and errors as ``BwrapSandbox`` (see the module docstring
    for what differs: speed, and the pid a command or check sees).
    """

    def __init__(self, limits: SandboxLimits | None = None,
                 config: SandboxConfig | None = None) -> None:
        super().__init__(limits, config)
        self.zygote = self.root / "zygote.py"
        self.zygote.write_text(Path(__file__).with_name("zygote.py").read_text())
        self.zygote.chmod(0o444)
        self.server_failure = ""  # why the server could not start here ("" if it can)

    def stage(self, files: Mapping[str, Path], *, under: Path | None = None,
              memory: MemoryCgroups | None = None) -> ServerWorkspace:
        """Create a workspace holding ``files`` (see ``BwrapSandbox.stage``)."""
        workspace = super().stage(files, under=under, memory=memory)
        assert isinstance(workspace, ServerWorkspace)
        return workspace

    def _workspace(self, path: Path, root: Path,
                   memory: MemoryCgroups | None) -> ServerWorkspace:
        return ServerWorkspace(self, path, root, memory)


class ServerWorkspace(BwrapWorkspace):
    """A ``BwrapWorkspace`` whose ``run()`` and ``run_check()`` (without an overlay) go
    through a persistent sandbox each."""

    def __init__(self, sandbox: ServerSandbox, path: Path, root: Path,
                 memory: MemoryCgroups | None = None) -> None:
        super().__init__(sandbox, path, root, memory)
        self._server_box = sandbox
        # The argv builders must not hold the workspace: the closers hold the servers.
        self._server = PersistentServer(_argv_builder(sandbox, path), sandbox, self.memory)
        self._checker = PersistentServer(_argv_builder(sandbox, path, writable=False),
                                         sandbox, self.memory)
        self._on_close(self._server.shutdown)
        self._on_close(self._checker.shutdown)

    def _run_outcome(self, command: str, *, timeout_s: float, check: bool,
                     overlay: Mapping[str, Path], watch: DiskWatch | None) -> ProcessOutcome:
        def fallback() -> ProcessOutcome:  # a fresh sandbox for this one (module docstring)
            return super(ServerWorkspace, self)._run_outcome(
                command, timeout_s=timeout_s, check=check, overlay=overlay, watch=watch)

        # A mount cannot change in a running sandbox: an overlay needs a fresh one.
        server = self._checker if check else self._server
        if (overlay or (watch is None and not check) or self._server_box.server_failure
                or not server.lock.acquire(blocking=False)):
            return fallback()
        try:
            server.settle()
            if not server.alive:
                try:
                    server.start()
                except SandboxError as exc:
                    self._server_box.server_failure = str(exc)
                    return fallback()
            outcome = server.execute(command, self.limits, timeout_s, watch,
                                     rerunnable=check)
        finally:
            server.lock.release()
        return fallback() if outcome is None else outcome  # None: nothing ran there

    def abort(self) -> None:
        """Kill whatever is running now (its result gets status ``killed``).

        Idle servers are stopped too, so nothing of this workspace is left running.
        """
        self._server.abort()
        self._checker.abort()
        super().abort()

    @property
    def server_pid(self) -> int | None:
        """The host pid of this workspace's running command server (bwrap), or None."""
        return self._server.pid

    @property
    def check_server_pid(self) -> int | None:
        """The host pid of this workspace's running check server (bwrap), or None."""
        return self._checker.pid


def _argv_builder(sandbox: ServerSandbox, path: Path, *, writable: bool = True) -> ArgvBuilder:
    """How to start a server: ``writable`` for commands, read-only ``/work`` for checks
    (as ``BwrapWorkspace._launch`` mounts it for each)."""
    limits = sandbox.limits
    rlimits = [str(limits.memory_mb * 1024), str(limits.max_processes),
               str(limits.max_file_mb * 1024)]  # as the ulimit wrapper: KB, count, KB
    bind = "--bind" if writable else "--ro-bind"

    def argv(lockdown: list[str], socket_fd: int) -> list[str]:
        # The commands' constant entropy (``entropy``), as on the per-command path.
        return [*sandbox.base_args(), *lockdown, bind, str(path), "/work",
                "--ro-bind", str(sandbox.zygote), _ZYGOTE_INSIDE, *sandbox.entropy_args(),
                "--chdir", "/work", "--remount-ro", "/", "--",
                "python3", "-I", "-S", _ZYGOTE_INSIDE, str(socket_fd), *rlimits]
    return argv
