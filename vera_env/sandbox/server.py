"""The bwrap backend's fast path: one long-lived sandbox per workspace for ``run()``.

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
is pid 1 and calls ``kill(-1)``); ``/tmp``, ``/dev/shm`` and new ``/dev`` entries are
wiped after each command, and a sandbox whose visible state changed otherwise is
replaced; on timeout, output or disk limit, abort or close the harness kills the
zygote from outside, the kernel kills the namespace, and the next command starts a
fresh sandbox. One difference is visible: the command is no longer its namespace's
pid 1, which ignores signals it has no handler for, so ``kill -9 $$`` now kills the
shell (exit 137) as it would anywhere else instead of doing nothing.

Between commands an idle server (bwrap and the zygote, ~12 MB) stays up per
workspace; ``close()`` (or ``abort()``) kills it. A server started from a thread that
then exits dies with it (bwrap's ``--die-with-parent`` follows the spawning thread);
the next command starts another.

Checks do **not** take this path. A long-lived sandbox keeps state between commands
that wiping files does not reach (SysV IPC in its ipc namespace, keyrings, anything
new in a writable ``/dev``); for the agent's own commands that is harmless, but a
check that could leave state for the next check could fake its verdict, and strength
testing re-runs checks against mutants precisely to catch checks that do not depend on
the data. So ``run_check`` keeps a fresh sandbox per check, as does any ``run`` while
another thread is using the workspace's server, and any ``run`` on a machine where the
server cannot start (no ``python3`` inside): those fall back to the per-command path.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import weakref
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from vera_env.errors import SandboxError

from .bwrap import BwrapSandbox, BwrapWorkspace
from .config import SandboxConfig
from .disk import DiskWatch
from .entropy import seccomp_fd, seccomp_program
from .output import StreamCapture
from .process import ProcessOutcome, _exit_code, _parent_of
from .result import ExecResult, SandboxLimits
from .server_io import CommandPump, returncode
from .workspace import _command_problem, _timeout

__all__ = ["ServerSandbox", "ServerWorkspace"]

_ZYGOTE_INSIDE = "/opt/vera/zygote.py"
_START_TIMEOUT_S = 30.0
_DRAIN_S = 1.0
_REAP_S = 5.0
_SECCOMP = seccomp_program()


class ServerSandbox(BwrapSandbox):
    """The bwrap backend whose workspaces run ``run()`` in one long-lived sandbox each.

    Same arguments, isolation and errors as ``BwrapSandbox`` (see the module docstring
    for what differs: only speed, and only for ``run``).
    """

    def __init__(self, limits: SandboxLimits | None = None,
                 config: SandboxConfig | None = None) -> None:
        super().__init__(limits, config)
        self.zygote = self.root / "zygote.py"
        self.zygote.write_text(Path(__file__).with_name("zygote.py").read_text())
        self.zygote.chmod(0o444)
        self._serving: weakref.WeakSet[ServerWorkspace] = weakref.WeakSet()
        self.server_failure = ""  # why the server could not start here ("" if it can)

    def stage(self, files: Mapping[str, Path]) -> ServerWorkspace:  # type: ignore[override]
        """Create a workspace holding ``files`` (see ``BwrapSandbox.stage``)."""
        workspace = ServerWorkspace(self, super().stage(files))
        self._serving.add(workspace)
        return workspace

    def close(self) -> None:
        """Stop every workspace's server, then close as ``BwrapSandbox`` does."""
        for workspace in list(self._serving):
            workspace.close()
        super().close()


class ServerWorkspace:
    """A ``BwrapWorkspace`` whose ``run()`` goes through a persistent sandbox.

    Everything but ``run``, ``abort`` and ``close`` is the wrapped workspace's.
    """

    backend = "bwrap"

    def __init__(self, sandbox: ServerSandbox, inner: BwrapWorkspace) -> None:
        self._sandbox = sandbox
        self._inner = inner
        self.path = inner.path
        # The argv builder must not hold the workspace: the finalizer holds the server.
        self._server = _Server(_argv_builder(sandbox, inner.path), sandbox)
        self._finalizer = weakref.finalize(self, self._server.shutdown)

    def __getattr__(self, name: str) -> Any:
        if name == "_inner":  # not set yet (copying, unpickling): no recursion
            raise AttributeError(name)
        return getattr(self._inner, name)

    def run(self, command: str, *, timeout_s: float | None = None) -> ExecResult:
        """Run a shell command with the workspace writable (``Workspace.run``)."""
        inner = self._inner
        timeout = _timeout(timeout_s, inner.limits.timeout_s)
        if inner.closed:
            raise SandboxError(f"bwrap workspace {self.path} is closed")
        problem = _command_problem(command)
        if problem or self._sandbox.server_failure or not self._server.lock.acquire(False):
            return inner.run(command, timeout_s=timeout)
        try:
            if not self._server.alive:
                try:
                    self._server.start()
                except SandboxError as exc:
                    self._sandbox.server_failure = str(exc)
                    return inner.run(command, timeout_s=timeout)
            limits = inner.limits
            watch = DiskWatch(self.path, limits.max_workspace_mb * 2**20, inner._staged,
                              limits.disk_poll_s)
            outcome = self._server.execute(command, limits, timeout, watch)
        finally:
            self._server.lock.release()
        if outcome is None:  # the server died between commands (its thread exited)
            return inner.run(command, timeout_s=timeout)
        if not outcome.disk_limited and watch.over():
            outcome = replace(outcome, disk_limited=True)  # it finished between two polls
        return inner._to_result(outcome)

    def run_check(self, command: str, *, timeout_s: float | None = None,
                  overlay: Mapping[str, Path] | None = None) -> ExecResult:
        """A fresh sandbox per check, as in ``BwrapWorkspace`` (see the module docstring)."""
        return self._inner.run_check(command, timeout_s=timeout_s, overlay=overlay)

    def abort(self) -> None:
        """Kill whatever is running now (its result gets status ``killed``).

        An idle server is stopped too, so nothing of this workspace is left running.
        """
        self._server.abort()
        self._inner.abort()

    @property
    def closed(self) -> bool:
        """``close()`` has run."""
        return self._inner.closed

    def close(self) -> None:
        """Stop the server (killing its namespace), then close the workspace. Idempotent."""
        self._finalizer()
        self._inner.close()

    def __enter__(self) -> ServerWorkspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _argv_builder(sandbox: ServerSandbox, path: Path) -> Any:
    limits = sandbox.limits
    rlimits = [str(limits.memory_mb * 1024), str(limits.max_processes),
               str(limits.max_file_mb * 1024)]  # as the ulimit wrapper: KB, count, KB

    def argv(info_fd: int, socket_fd: int, seccomp: int | None) -> list[str]:
        # The commands' constant entropy (``entropy``), as on the per-command path.
        extra = sandbox.entropy_args() + (["--seccomp", str(seccomp)] if seccomp else [])
        return [*sandbox.base_args(), "--info-fd", str(info_fd), "--bind", str(path), "/work",
                "--ro-bind", str(sandbox.zygote), _ZYGOTE_INSIDE, *extra,
                "--chdir", "/work", "--remount-ro", "/", "--",
                "python3", "-I", "-S", _ZYGOTE_INSIDE, str(socket_fd), *rlimits]
    return argv


class _Server:
    """One long-lived bwrap sandbox running the zygote, and the commands sent to it."""

    def __init__(self, argv: Any, sandbox: ServerSandbox) -> None:
        self._argv = argv
        self._sandbox = sandbox
        self.lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._inner_pid: int | None = None
        self._aborted = threading.Event()
        self._closed = False

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the sandbox and wait for the zygote's hello.

        Raises:
            SandboxError: It did not start (bwrap's or python's message attached).
        """
        if self._closed:
            raise SandboxError("workspace is closed")
        self.stop()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        info_read, info_write = os.pipe()
        seccomp = seccomp_fd(_SECCOMP) if _SECCOMP is not None else None
        fds = (info_write, theirs.fileno(), *([seccomp] if seccomp is not None else []))
        uid, gid = self._sandbox.host_ids
        root = self._sandbox.as_root
        try:
            self._proc = subprocess.Popen(  # argv, never a shell string
                self._argv(info_write, theirs.fileno(), seccomp), stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/",
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                pass_fds=fds, start_new_session=True,
                user=uid if root else None, group=gid if root else None,
                extra_groups=[] if root else None)
        except OSError as exc:
            raise SandboxError(f"cannot start the bwrap server: {exc}") from exc
        finally:
            theirs.close()
            os.close(info_write)
            if seccomp is not None:
                os.close(seccomp)
        self._sock = ours
        try:
            ours.settimeout(_START_TIMEOUT_S)
            hello = ours.recv(4096)
            self._inner_pid = _child_pid(info_read)
        except OSError:
            hello = b""
        finally:
            os.close(info_read)
        if not hello:
            message = self._failure()
            raise SandboxError(f"the bwrap server did not start: {message or 'no message'}")
        ours.setblocking(False)
        self._aborted.clear()

    def _failure(self) -> str:
        self.kill()
        assert self._proc is not None and self._proc.stderr is not None
        try:
            self._proc.wait(_REAP_S)
            message = self._proc.stderr.read().decode(errors="replace").strip()[-2000:]
        except subprocess.TimeoutExpired:
            message = ""
        self.stop()
        return message

    def execute(self, command: str, limits: SandboxLimits, timeout_s: float,
                watch: DiskWatch) -> ProcessOutcome | None:
        """Run one command in the server (the caller holds ``lock``).

        Returns:
            What happened, or None when the server was gone before the command was
            sent (nothing ran: the caller may run it elsewhere).
        """
        assert self._sock is not None
        self._aborted.clear()
        start = time.monotonic()
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        request = json.dumps({"command": command})
        try:
            socket.send_fds(self._sock, [request.encode()], [out_write, err_write])
        except OSError:
            for fd in (out_read, err_read):
                os.close(fd)
            self.stop()
            return None
        finally:
            os.close(out_write)
            os.close(err_write)
        out, err = StreamCapture(limits.max_output_chars), StreamCapture(limits.max_output_chars)
        pump = CommandPump(self._sock, {out_read: out.feed, err_read: err.feed}, watch)
        pump.run(start + timeout_s, limits.max_output_bytes, self._aborted)
        if pump.status is None or pump.replace:
            self.kill()  # timeout, a limit, an abort, or the zygote asked to be replaced
            pump.drain(time.monotonic() + _DRAIN_S, limits.max_output_bytes)
            self.stop()
        pump.close()
        return ProcessOutcome(
            stdout=out.text(), stderr=err.text(), stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            returncode=_exit_code(returncode(pump.status)),
            timed_out=pump.timed_out, output_limited=pump.output_limited,
            aborted=pump.status is None and not (
                pump.timed_out or pump.output_limited or pump.disk_limited),
            started=True, bytes_read=out.total_bytes + err.total_bytes,
            duration_s=time.monotonic() - start, disk_limited=pump.disk_limited)

    def kill(self) -> None:
        """SIGKILL the zygote, pid 1 of the namespace: the kernel kills the rest.

        bwrap then reaps it and exits by itself; killing bwrap too would orphan the
        zygote to the host's init, a zombie where that init does not reap.
        """
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        if self._inner_pid is not None and _parent_of(self._inner_pid) == proc.pid:
            _kill(os.kill, self._inner_pid)
        else:
            _kill(os.killpg, proc.pid)

    def abort(self) -> None:
        """Kill the command running now, or stop the idle server."""
        self._aborted.set()
        self.kill()
        if self.lock.acquire(blocking=False):
            try:
                self.stop()
            finally:
                self.lock.release()

    def stop(self) -> None:
        """Kill, reap and forget the server (not while a command runs)."""
        self.kill()
        if self._proc is not None:
            for stream in (self._proc.stdout, self._proc.stderr):
                if stream is not None:
                    stream.close()
            try:
                self._proc.wait(_REAP_S)
            except subprocess.TimeoutExpired:
                _kill(os.killpg, self._proc.pid)  # bwrap did not exit after its child
                try:
                    self._proc.wait(_REAP_S)
                except subprocess.TimeoutExpired as exc:
                    raise SandboxError(
                        f"bwrap server {self._proc.pid} survived SIGKILL") from exc
        if self._sock is not None:
            self._sock.close()
        self._proc, self._sock, self._inner_pid = None, None, None

    def shutdown(self) -> None:
        """For close(): kill what runs, wait for its reader, and refuse new starts."""
        self._closed = True
        self._aborted.set()
        self.kill()
        if self.lock.acquire(timeout=10):
            try:
                self.stop()
            finally:
                self.lock.release()


def _child_pid(info_fd: int) -> int | None:
    data = os.read(info_fd, 4096)
    try:
        return int(json.loads(data)["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _kill(send: Any, target: int) -> None:
    try:
        send(target, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
