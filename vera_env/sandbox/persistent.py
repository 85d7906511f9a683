"""One long-lived bwrap sandbox running the zygote, and the commands sent to it.

``server`` explains why a workspace keeps such sandboxes (one for its commands, one
for its checks); this is the host's side of one of them: start it (in its memory
cgroup) and wait for the zygote's hello, send a command with its pipes and read its
output and status (``server_io``), kill it from outside on a timeout, a limit, an abort
or close, and replace it when the zygote says the command left something it could not
undo.

The zygote reports a command's status as soon as the command's processes are dead and
reaped, then cleans (``/tmp``, ``/dev/shm``, SysV objects) and sends a second message:
whether it is still as it started. The result goes back to the caller at the first;
the second is read before the next command is sent (``settle``), so the cleaning
overlaps the harness's own work on the result instead of adding to every command's
latency, and no command starts before the last one's traces are gone.

The messages are plain bytes: ``$`` and the command (with the write ends of its stdout
and stderr pipes), then ``status N`` (the wait status) and ``clean`` or ``replace``.
The zygote holds its copies of the write ends until the command's last process is
reaped, so the pipes' end and the status reach the harness together: one wake-up per
command instead of two, which is what a loaded machine charges for.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable

from vera_env.errors import SandboxError

from .bwrap import BwrapSandbox, launch_fds
from .cgroup import CommandCgroup, MemoryCgroups
from .disk import DiskWatch
from .entropy import fixed_address_layout
from .output import StreamCapture
from .process import ProcessOutcome, cpu_used, exit_code
from .result import SandboxLimits
from .server_io import CommandPump, returncode
from .tree import parent_of, read_child_pid

__all__ = ["ArgvBuilder", "PersistentServer"]

_START_TIMEOUT_S = 30.0
_SETTLE_S = 30.0  # the zygote's cleaning of what a command left (a huge /tmp tree)
_DRAIN_S = 1.0
_REAP_S = 5.0
ArgvBuilder = Callable[[list[str], int], list[str]]
"""(bwrap's lockdown options, the zygote's socket fd) -> the server's argv."""


class PersistentServer:
    """One long-lived bwrap sandbox running the zygote, and the commands sent to it."""

    def __init__(self, argv: ArgvBuilder, sandbox: BwrapSandbox,
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
        self._unsettled = False  # the zygote's word on the last command is still due

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

    def settle(self) -> None:
        """Wait for the zygote's word that the last command left nothing behind, and
        stop the server if it did (the zygote then exits: the next start is fresh).

        Call it with ``lock`` held, before ``alive`` and ``execute``.
        """
        if not self._unsettled or self._sock is None:
            return
        self._unsettled = False
        self._sock.settimeout(_SETTLE_S)
        try:
            message = self._sock.recv(4096)
        except OSError:
            message = b""
        finally:
            self._sock.setblocking(False)
        if message != b"clean":
            self.stop()

    def execute(self, command: str, limits: SandboxLimits, timeout_s: float,
                watch: DiskWatch | None, *, rerunnable: bool = False) -> ProcessOutcome | None:
        """Run one command in the server (the caller holds ``lock``); ``watch`` is None
        for a check, which cannot write the workspace.

        Args:
            rerunnable: Running the command again changes nothing (a check: read-only,
                its ``/tmp`` wiped), so if the server dies under it for a reason of
                its own (the thread that started it exited: ``--die-with-parent``),
                report that as nothing having run.

        Returns:
            What happened, or None when nothing ran, or nothing that counts: the server
            was gone before the command was sent, or died under a rerunnable one (the
            caller may run it elsewhere).
        """
        self._aborted.clear()
        start = time.monotonic()
        ooms = self._memory.oom_kills() if self._memory is not None else 0
        cpu = self._memory.cpu() if self._memory is not None else None
        pipes = self._send(command)
        if pipes is None:
            return None
        out, err = StreamCapture(limits.max_output_chars), StreamCapture(limits.max_output_chars)
        assert self._sock is not None
        pump = CommandPump(self._sock, {pipes[0]: out.feed, pipes[1]: err.feed}, watch)
        pump.run(start + timeout_s, limits.max_output_bytes, self._aborted)
        memory = self._memory
        used = cpu_used(memory, cpu)  # before a kill: stop() gives the leaf back
        if pump.status is None:
            self.kill()  # timeout, a limit, an abort, or the zygote died
            pump.drain(time.monotonic() + _DRAIN_S, limits.max_output_bytes)
            self.stop()
        else:
            self._unsettled = True  # it is cleaning up after the command now
        pump.close()
        stopped = pump.timed_out or pump.output_limited or pump.disk_limited
        if pump.status is None and not stopped and rerunnable and not self._aborted.is_set():
            return None
        return ProcessOutcome(
            stdout=out.text(), stderr=err.text(), stdout_truncated=out.truncated,
            stderr_truncated=err.truncated,
            returncode=exit_code(returncode(pump.status)),
            timed_out=pump.timed_out, output_limited=pump.output_limited,
            aborted=pump.status is None and not stopped,
            started=True, bytes_read=out.total_bytes + err.total_bytes,
            duration_s=time.monotonic() - start, disk_limited=pump.disk_limited,
            memory_limited=memory is not None and memory.oom_kills() > ooms, **used)

    def _send(self, command: str) -> tuple[int, int] | None:
        """Hand the zygote the command and the write ends of two new pipes.

        Returns:
            The read ends (stdout, stderr), or None when the server was gone (stopped).
        """
        assert self._sock is not None
        out_read, out_write = os.pipe()
        err_read, err_write = os.pipe()
        # Plain bytes (json costs every zygote start 5 ms); b"$" first, so that an
        # empty command is not an empty message, which reads as the harness gone.
        request = b"$" + command.encode("utf-8", "surrogateescape")
        try:
            socket.send_fds(self._sock, [request], [out_write, err_write])
        except OSError:
            _close(out_read, err_read)
            self.stop()
            return None
        finally:
            _close(out_write, err_write)
        return out_read, err_read

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
        self._unsettled = False

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
