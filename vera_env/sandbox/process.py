"""Spawning, capped reading and killing, shared by both backends.

Three properties a model-written command must never break, whatever backend runs it:

* **It ends.** Every command has a wall-clock deadline. At the deadline, on an abort
  and on ``close()``, the whole tree is killed. Under bwrap the command is pid 1 of its
  own pid namespace; bwrap reports that pid (``--info-fd``) and it is killed first,
  which makes the kernel kill everything in the namespace, ``setsid nohup sleep &``
  daemons included, and lets bwrap reap it and exit. (Killing bwrap first would
  orphan the namespace's init to the host's pid 1, a zombie where that init does not
  reap, as in a container whose pid 1 is the training script.) Then the command's
  process *group* gets SIGKILL (it starts in a new session). The local backend has no
  namespace, so it also sweeps ``/proc`` for processes carrying the command's unique
  environment token.
* **Background jobs do not outlive the command.** When the command's leader exits,
  the group is killed too. Otherwise a ``sleep 1000 &`` holds the output pipe open and
  the harness waits for the full timeout, or the job keeps running into the next step.
* **Output is bounded.** Streams are read in chunks into ``StreamCapture``; after
  ``max_output_bytes`` the command is killed with status ``output_limit``.
* **Disk is bounded.** An optional ``watchdog`` (the workspace-size limit) is polled
  while the command runs; when it reports the limit crossed, the command is killed.
* **The address layout is fixed.** Every launcher is started without address
  randomisation (``entropy.fixed_address_layout``), inherited by the whole tree.
* **Memory is bounded per tree.** A launcher that can hold its sandbox before the
  command starts (bwrap ``--block-fd``) gets it placed in a memory cgroup first
  (``LaunchSpec.memory``): the harness reads the sandbox's pid from the info pipe,
  moves it, then opens the gate, so no process of the command runs outside the cgroup.

The leader's exit is observed with ``waitid(WNOWAIT)`` so the process group is killed
*before* the leader is reaped: a reaped pid could be recycled and the kill would land
on an unrelated process.
"""

from __future__ import annotations

import os
import re
import selectors
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from vera_env.errors import SandboxError

from .entropy import fixed_address_layout
from .output import StreamCapture
from .tree import kill_tagged, leader_exited, parent_of, read_child_pid, signal_kill

__all__ = ["CpuUsage", "LaunchSpec", "ProcessOutcome", "ProcessTracker", "TreeMemory", "Watchdog",
           "cpu_used", "exit_code", "run_process"]

_CHUNK_BYTES = 65536
_POLL_S = 0.05
# How long pipes may stay open after the leader exited before the group is killed.
_EXIT_GRACE_S = 0.2
# How long to drain pipes after a kill; pipes held by unkillable processes are abandoned.
_DRAIN_S = 1.0
_REAP_S = 5.0
_INFO_BYTES = 4096
_CHILD_PID = re.compile(rb'"child-pid"\s*:\s*(\d+)')  # as bwrap --info-fd writes it
# How long a launcher may take to report its sandbox's pid (bwrap sets up the mounts first).
_PLACE_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class CpuUsage:
    """A cgroup's CPU counters since it was made (callers take differences).

    Attributes:
        cpu_s: CPU seconds its processes used, user and system, exited ones included.
        wait_s: Seconds in which some process of it was runnable but waited for a CPU
            (``cpu.pressure``, "some"); None where the kernel has no PSI.
    """

    cpu_s: float
    wait_s: float | None


class TreeMemory(Protocol):
    """A memory cgroup a command's sandbox is placed in (``cgroup.CommandCgroup``)."""

    def attach(self, pid: int) -> None: ...

    def oom_kills(self) -> int: ...

    def cpu(self) -> CpuUsage | None: ...


@dataclass(frozen=True, slots=True)
class LaunchSpec:
    """How to start one command.

    Attributes:
        argv: The program and its arguments (never a shell string).
        env: The complete environment.
        cwd: Working directory of the spawned process on the host.
        user: Host uid to run as (root harness only), or None to keep the current one.
        group: Host gid to run as, with ``user``.
        pass_fds: Child ends of pipes handed to the process; closed here after spawn.
        marker_fd: Read end of a pipe the command writes one byte to once its sandbox
            is up, so a launcher failure can be told from the command's failure.
        info_fd: Read end of a pipe on which the launcher reports ``"child-pid": N``
            (bwrap ``--info-fd``). That pid is killed first, so the launcher reaps it
            and exits by itself instead of leaving an orphan for the host's init.
        tag: A unique ``NAME=value`` entry of ``env`` by which processes that left the
            group are found in ``/proc`` and killed (local backend; "" to skip).
        gate_fd: Write end of a pipe the launcher's sandbox blocks on (bwrap
            ``--block-fd``); the read end is in ``pass_fds``. Needs ``info_fd``.
        memory: Where the sandbox is placed before the gate opens (its pid, read from
            ``info_fd``); its OOM kills during the run make ``memory_limited``.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: Path
    user: int | None = None
    group: int | None = None
    pass_fds: tuple[int, ...] = ()
    marker_fd: int | None = None
    info_fd: int | None = None
    tag: str = ""
    gate_fd: int | None = None
    memory: TreeMemory | None = None


class Watchdog(Protocol):
    """Polled while a command runs: ``over()`` True kills it; ``poll_s`` apart."""

    poll_s: float

    def over(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class ProcessOutcome:
    """What the process did, before a backend turns it into an ``ExecResult``."""

    stdout: str
    stderr: str
    stdout_truncated: bool
    stderr_truncated: bool
    returncode: int
    timed_out: bool
    output_limited: bool
    aborted: bool
    started: bool
    bytes_read: int
    duration_s: float
    disk_limited: bool = False
    memory_limited: bool = False
    cpu_s: float | None = None
    cpu_wait_s: float | None = None


@dataclass(eq=False, slots=True)
class _Running:
    proc: subprocess.Popen[bytes]
    tag: str
    aborted: threading.Event = field(default_factory=threading.Event)
    inner_pid: int | None = None

    def stop(self) -> None:
        """Kill the command now, letting a launcher reap its own child if it can."""
        if (self.inner_pid is not None and not leader_exited(self.proc.pid)
                and parent_of(self.inner_pid) == self.proc.pid):
            signal_kill(os.kill, self.inner_pid)
        else:
            self.finish()

    def finish(self) -> None:
        """Kill whatever is left of the group, and tagged escapees."""
        signal_kill(os.killpg, self.proc.pid)
        if self.tag:
            kill_tagged(self.tag)


class ProcessTracker:
    """The commands a workspace is running, so ``abort``/``close`` can kill them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running: set[_Running] = set()
        self._closed = False

    @contextmanager
    def spawn(self, spec: LaunchSpec) -> Iterator[_Running]:
        """Start ``spec`` and track it until the block exits."""
        with self._lock:
            if self._closed:
                _close_fds(spec.pass_fds)
                raise SandboxError("workspace is closed")
            running = _Running(_popen(spec), spec.tag)
            self._running.add(running)
        try:
            yield running
        finally:
            with self._lock:  # whatever happened, nothing of it keeps running
                running.finish()
                self._running.discard(running)
                self._idle.notify_all()
            _release(running.proc)

    def kill_all(self, *, close: bool = False) -> None:
        """SIGKILL every tracked command's tree; with ``close``, refuse new ones.

        Kills under the lock: a tracked process is never reaped before it leaves the
        set, so its pid (the group id) cannot have been recycled.
        """
        with self._lock:
            self._closed = self._closed or close
            for item in self._running:
                item.aborted.set()
                item.stop()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no command is being read or reaped; False on timeout."""
        with self._lock:
            return self._idle.wait_for(lambda: not self._running, timeout=timeout_s)


def _popen(spec: LaunchSpec) -> subprocess.Popen[bytes]:
    try:
        with fixed_address_layout():  # inherited by everything the launcher starts
            return _spawn(spec)
    except OSError as exc:
        raise SandboxError(f"cannot start {spec.argv[0]!r}: {exc}") from exc
    finally:
        _close_fds(spec.pass_fds)


def _spawn(spec: LaunchSpec) -> subprocess.Popen[bytes]:
    return subprocess.Popen(  # argv, never a shell string
        list(spec.argv),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=spec.cwd,
        env=dict(spec.env),
        pass_fds=spec.pass_fds,
        start_new_session=True,
        user=spec.user,
        group=spec.group,
        extra_groups=[] if spec.user is not None else None,
    )


def _close_fds(fds: Sequence[int]) -> None:
    for fd in fds:
        os.close(fd)


def run_process(
    spec: LaunchSpec,
    tracker: ProcessTracker,
    *,
    timeout_s: float,
    max_output_chars: int,
    max_output_bytes: int,
    watchdog: Watchdog | None = None,
) -> ProcessOutcome:
    """Run one command to completion, timeout, output limit, watchdog limit or abort.

    Raises:
        SandboxError: The program could not be started, or the workspace is closed.
    """
    start = time.monotonic()
    out, err = StreamCapture(max_output_chars), StreamCapture(max_output_chars)
    ooms = spec.memory.oom_kills() if spec.memory is not None else 0
    cpu = spec.memory.cpu() if spec.memory is not None else None
    try:
        with tracker.spawn(spec) as running:
            if spec.gate_fd is not None:
                _place_and_open(running, spec)
            pump = _Pump(running, spec, out, err, max_output_bytes, watchdog)
            pump.run(start + timeout_s)
            running.stop()
            pump.drain(time.monotonic() + _DRAIN_S)
    finally:
        _close_fds([fd for fd in (spec.marker_fd, spec.info_fd, spec.gate_fd)
                    if fd is not None])
    memory_limited = spec.memory is not None and spec.memory.oom_kills() > ooms
    return ProcessOutcome(
        stdout=out.text(),
        stderr=err.text(),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        returncode=exit_code(running.proc.returncode),
        timed_out=pump.timed_out,
        output_limited=pump.output_limited,
        aborted=running.aborted.is_set() and not (pump.timed_out or pump.output_limited
                                                  or pump.disk_limited),
        started=pump.started,
        bytes_read=out.total_bytes + err.total_bytes,
        duration_s=time.monotonic() - start,
        disk_limited=pump.disk_limited,
        memory_limited=memory_limited,
        **cpu_used(spec.memory, cpu),
    )


def cpu_used(cgroup: TreeMemory | None, before: CpuUsage | None) -> dict[str, float | None]:
    """``cpu_s`` and ``cpu_wait_s`` of ``cgroup`` since it read ``before``, as
    ``ProcessOutcome`` fields (None: not counted)."""
    after = cgroup.cpu() if cgroup is not None else None
    if after is None or before is None:
        return {"cpu_s": None, "cpu_wait_s": None}
    wait = None if after.wait_s is None or before.wait_s is None \
        else max(0.0, after.wait_s - before.wait_s)
    return {"cpu_s": max(0.0, after.cpu_s - before.cpu_s), "cpu_wait_s": wait}


def _place_and_open(running: _Running, spec: LaunchSpec) -> None:
    """Read the sandbox's pid, put it in its memory cgroup, then let it run.

    The gate is opened only after a successful placement: closing it unwritten would
    also release the sandbox (a read of end-of-file), so on failure the sandbox is
    killed first.

    Raises:
        SandboxError: The sandbox could not be placed.
    """
    assert spec.gate_fd is not None and spec.info_fd is not None
    pid = read_child_pid(spec.info_fd, _PLACE_TIMEOUT_S)
    if pid is None:
        return  # the launcher failed before starting a sandbox: nothing to place
    running.inner_pid = pid
    try:
        if spec.memory is not None:
            spec.memory.attach(pid)
    except BaseException:
        running.stop()
        raise
    try:
        os.write(spec.gate_fd, b"g")
    except BrokenPipeError:
        pass  # the sandbox is gone already; the pump sees it exit


class _Pump:
    """Moves bytes from the pipes into the captures until the command is over."""

    def __init__(self, running: _Running, spec: LaunchSpec, out: StreamCapture,
                 err: StreamCapture, max_output_bytes: int,
                 watchdog: Watchdog | None = None) -> None:
        proc = running.proc
        assert proc.stdout is not None and proc.stderr is not None
        self._running = running
        self._max_bytes = max_output_bytes
        self._selector = selectors.DefaultSelector()
        self._sinks: dict[int, Callable[[bytes], None]] = {
            proc.stdout.fileno(): out.feed,
            proc.stderr.fileno(): err.feed,
        }
        if spec.marker_fd is not None:
            self._sinks[spec.marker_fd] = self._on_marker
        if spec.info_fd is not None:
            self._sinks[spec.info_fd] = self._on_info
        for fd in self._sinks:
            os.set_blocking(fd, False)
            self._selector.register(fd, selectors.EVENT_READ)
        self._out, self._err = out, err
        self._info = b""
        self.started = spec.marker_fd is None
        self.timed_out = False
        self.output_limited = False
        self.disk_limited = False
        self._watchdog = watchdog
        self._next_watch = time.monotonic() + (watchdog.poll_s if watchdog else 0.0)

    def _on_info(self, data: bytes) -> None:
        self._info = (self._info + data)[:_INFO_BYTES]
        found = _CHILD_PID.search(self._info)
        if found and self._running.inner_pid is None:
            self._running.inner_pid = int(found.group(1))

    def _on_marker(self, data: bytes) -> None:
        self.started = self.started or bool(data)

    def run(self, deadline: float) -> None:
        """Read until every stream is closed, the deadline passes or the cap is hit."""
        exited_at: float | None = None
        while self._selector.get_map():
            now = time.monotonic()
            if now >= deadline:
                self.timed_out = True
                return
            if self._running.aborted.is_set():
                return
            if exited_at is None and leader_exited(self._running.proc.pid):
                exited_at = now
            if exited_at is not None and now - exited_at > _EXIT_GRACE_S:
                return  # background jobs hold the pipes; the caller kills them
            self._read_ready(min(deadline - now, _POLL_S))
            if self._out.total_bytes + self._err.total_bytes > self._max_bytes:
                self.output_limited = True
                return
            if self._watch():
                self.disk_limited = True
                return

    def _watch(self) -> bool:
        if self._watchdog is None or time.monotonic() < self._next_watch:
            return False
        over = self._watchdog.over()
        self._next_watch = time.monotonic() + self._watchdog.poll_s
        return over

    def drain(self, deadline: float) -> None:
        """After the kill: collect what is left in the pipes, then close them."""
        while self._selector.get_map() and time.monotonic() < deadline:
            if self._out.total_bytes + self._err.total_bytes > self._max_bytes:
                break
            self._read_ready(_POLL_S)
        for key in list(self._selector.get_map().values()):
            self._selector.unregister(key.fd)
        self._selector.close()

    def _read_ready(self, wait_s: float) -> None:
        for key, _ in self._selector.select(max(wait_s, 0.0)):
            try:
                data = os.read(key.fd, _CHUNK_BYTES)
            except BlockingIOError:
                continue
            if data:
                self._sinks[key.fd](data)
            else:
                self._selector.unregister(key.fd)


def _release(proc: subprocess.Popen[bytes]) -> None:
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    try:
        proc.wait(timeout=_REAP_S)
    except subprocess.TimeoutExpired as exc:
        raise SandboxError(f"process {proc.pid} survived SIGKILL for {_REAP_S}s") from exc


def exit_code(returncode: int | None) -> int:
    """A Popen return code as a shell reports it: 128+N for signal N, -1 if unknown."""
    if returncode is None:
        return -1
    return returncode if returncode >= 0 else 128 - returncode
