"""The default bwrap backend: one long-lived sandbox per workspace for ``run()``.

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
the next command starts another.

Nothing survives a command here either: the zygote also removes every SysV
IPC object (this sandbox's IPC namespace outlives commands), the keyring and POSIX
message-queue calls fail (``seccomp``), ``/dev`` is read-only and ``/dev/shm`` capped,
and a listener on an abstract socket dies with its command. The server's memory cgroup
(``cgroup``) holds the zygote and the command running, so the tree's limit holds.

Checks do **not** take this path: a check also needs a read-only workspace, constant
entropy and maybe a mutant in place of a file, which are mounts fixed when a sandbox
starts, so ``run_check`` keeps a fresh sandbox per check. So does any ``run`` while
another thread is using the workspace's server, and any ``run`` on a machine where the
server cannot start (no ``python3`` inside): those fall back to the per-command path.
The workspace reaches the server through ``BaseWorkspace``'s extension points
(``_run_outcome``, ``_on_close``), not by wrapping another workspace.

It is the default (``make_sandbox("auto")``) because strength replays the
episode's file-writing commands in workspaces of their own, which multiplies command
runs, and a workspace that runs four or more commands is cheaper here from start to
close (``benchmarks/sandbox_latency.py``).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from vera_env.errors import SandboxError

from .bwrap import BwrapSandbox, BwrapWorkspace, launch_fds
from .cgroup import CommandCgroup, MemoryCgroups
from .config import SandboxConfig
from .disk import DiskWatch
from .entropy import fixed_address_layout
from .output import StreamCapture
from .process import ProcessOutcome, exit_code
from .result import SandboxLimits
from .server_io import CommandPump, returncode
from .tree import parent_of, read_child_pid

__all__ = ["ServerSandbox", "ServerWorkspace"]

_ZYGOTE_INSIDE = "/opt/vera/zygote.py"
_START_TIMEOUT_S = 30.0
_DRAIN_S = 1.0
_REAP_S = 5.0
ArgvBuilder = Callable[[list[str], int], list[str]]


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
    """A ``BwrapWorkspace`` whose ``run()`` goes through a persistent sandbox."""

    def __init__(self, sandbox: ServerSandbox, path: Path, root: Path,
                 memory: MemoryCgroups | None = None) -> None:
        super().__init__(sandbox, path, root, memory)
        self._server_box = sandbox
        # The argv builder must not hold the workspace: the closer holds the server.
        self._server = _Server(_argv_builder(sandbox, path), sandbox, self.memory)
        self._on_close(self._server.shutdown)

    def _run_outcome(self, command: str, *, timeout_s: float, check: bool,
                     overlay: Mapping[str, Path], watch: DiskWatch | None) -> ProcessOutcome:
        def fallback() -> ProcessOutcome:  # a fresh sandbox for this one (module docstring)
            return super(ServerWorkspace, self)._run_outcome(
                command, timeout_s=timeout_s, check=check, overlay=overlay, watch=watch)

        if (check or overlay or watch is None or self._server_box.server_failure
                or not self._server.lock.acquire(blocking=False)):
            return fallback()
        try:
            if not self._server.alive:
                try:
                    self._server.start()
                except SandboxError as exc:
                    self._server_box.server_failure = str(exc)
                    return fallback()
            outcome = self._server.execute(command, self.limits, timeout_s, watch)
        finally:
            self._server.lock.release()
        return fallback() if outcome is None else outcome  # None: the server had died

    def abort(self) -> None:
        """Kill whatever is running now (its result gets status ``killed``).

        An idle server is stopped too, so nothing of this workspace is left running.
        """
        self._server.abort()
        super().abort()

    @property
    def server_pid(self) -> int | None:
        """The host pid of this workspace's running server (bwrap), None when none runs."""
        return self._server.pid


def _argv_builder(sandbox: ServerSandbox, path: Path) -> ArgvBuilder:
    limits = sandbox.limits
    rlimits = [str(limits.memory_mb * 1024), str(limits.max_processes),
               str(limits.max_file_mb * 1024)]  # as the ulimit wrapper: KB, count, KB

    def argv(lockdown: list[str], socket_fd: int) -> list[str]:
        # The commands' constant entropy (``entropy``), as on the per-command path.
        return [*sandbox.base_args(), *lockdown, "--bind", str(path), "/work",
                "--ro-bind", str(sandbox.zygote), _ZYGOTE_INSIDE, *sandbox.entropy_args(),
                "--chdir", "/work", "--remount-ro", "/", "--",
                "python3", "-I", "-S", _ZYGOTE_INSIDE, str(socket_fd), *rlimits]
    return argv


class _Server:
    """One long-lived bwrap sandbox running the zygote, and the commands sent to it."""

    def __init__(self, argv: ArgvBuilder, sandbox: ServerSandbox,
                 pool: MemoryCgroups | None) -> None:
        self._argv = argv
        self._sandbox = sandbox
        self._pool = pool
        self.lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._inner_pid: int | None = None
        self._memory: CommandCgroup | None = None
        self._aborted = threading.Event()
        self._closed = False

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def start(self) -> None:
        """Start the sandbox (placed in its memory cgroup) and wait for the zygote's hello.

        Raises:
            SandboxError: It did not start (bwrap's or python's message attached).
        """
        if self._closed:
            raise SandboxError("workspace is closed")
        self.stop()
        memory = self._pool
        self._memory = memory.acquire() if memory is not None else None
        fds, gate, lockdown = launch_fds(gated=self._memory is not None, constant_entropy=True)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        uid, gid = self._sandbox.host_ids
        root = self._sandbox.as_root
        try:
            with fixed_address_layout():  # the zygote and every command inherit it
                self._proc = subprocess.Popen(  # argv, never a shell string
                    self._argv(lockdown, theirs.fileno()), stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/",
                    env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                    pass_fds=(*fds[1:], theirs.fileno()), start_new_session=True,
                    user=uid if root else None, group=gid if root else None,
                    extra_groups=[] if root else None)
        except OSError as exc:
            _close(fds[0], gate)
            raise SandboxError(f"cannot start the bwrap server: {exc}") from exc
        finally:
            theirs.close()
            _close(*fds[1:])
        self._sock = ours
        self._hello(fds[0], gate)

    def _hello(self, info_fd: int, gate: int | None) -> None:
        assert self._sock is not None
        try:
            self._inner_pid = read_child_pid(info_fd, _START_TIMEOUT_S)
            if self._memory is not None and self._inner_pid is not None:
                self._memory.attach(self._inner_pid)  # before the gate opens: see cgroup
            if gate is not None:
                os.write(gate, b"g")
            self._sock.settimeout(_START_TIMEOUT_S)
            hello = self._sock.recv(4096)
        except (OSError, SandboxError):
            self.kill()  # before the gate closes: closing it would release the sandbox
            hello = b""
        finally:
            _close(info_fd, gate)
        if not hello:
            message = self._failure()
            raise SandboxError(f"the bwrap server did not start: {message or 'no message'}")
        self._sock.setblocking(False)
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
        ooms = self._memory.oom_kills() if self._memory is not None else 0
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        request = json.dumps({"command": command})
        try:
            socket.send_fds(self._sock, [request.encode()], [out_write, err_write])
        except OSError:
            _close(out_read, err_read)
            self.stop()
            return None
        finally:
            _close(out_write, err_write)
        out, err = StreamCapture(limits.max_output_chars), StreamCapture(limits.max_output_chars)
        pump = CommandPump(self._sock, {out_read: out.feed, err_read: err.feed}, watch)
        pump.run(start + timeout_s, limits.max_output_bytes, self._aborted)
        memory = self._memory
        if pump.status is None or pump.replace:
            self.kill()  # timeout, a limit, an abort, or the zygote asked to be replaced
            pump.drain(time.monotonic() + _DRAIN_S, limits.max_output_bytes)
            self.stop()
        pump.close()
        return ProcessOutcome(
            stdout=out.text(), stderr=err.text(), stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            returncode=exit_code(returncode(pump.status)),
            timed_out=pump.timed_out, output_limited=pump.output_limited,
            aborted=pump.status is None and not (
                pump.timed_out or pump.output_limited or pump.disk_limited),
            started=True, bytes_read=out.total_bytes + err.total_bytes,
            duration_s=time.monotonic() - start, disk_limited=pump.disk_limited,
            memory_limited=memory is not None and memory.oom_kills() > ooms)

    def kill(self) -> None:
        """SIGKILL the zygote, pid 1 of the namespace: the kernel kills the rest.

        bwrap then reaps it and exits by itself; killing bwrap too would orphan the
        zygote to the host's init, a zombie where that init does not reap.
        """
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        if self._inner_pid is not None and parent_of(self._inner_pid) == proc.pid:
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
        if self._memory is not None and self._pool is not None:
            self._pool.release(self._memory)
        self._proc, self._sock, self._inner_pid, self._memory = None, None, None, None

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


def _close(*fds: int | None) -> None:
    for fd in fds:
        if fd is not None:
            os.close(fd)


def _kill(send: Callable[[int, int], None], target: int) -> None:
    try:
        send(target, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
