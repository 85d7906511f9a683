"""Questions asked of the host's process table about one command's processes.

Split from ``process`` (spawning and reading): the launcher's report of its sandbox's
pid, whether the leader has exited, a process's parent, and the sweep for processes
that left the group. Each guards against the same hazard: a pid read once may be
reaped and recycled before it is signalled, so the leader is only waited on with
WNOWAIT, a reported pid is killed only while its parent is still the launcher, and a
straggler only while its environment still carries the command's token.
"""

from __future__ import annotations

import os
import re
import selectors
import signal
import time
from collections.abc import Callable, Sequence
from contextlib import suppress

__all__ = ["kill_tagged", "leader_exited", "parent_of", "read_child_pid", "signal_kill"]

_INFO_BYTES = 4096
_CHILD_PID = re.compile(rb'"child-pid"\s*:\s*(\d+)')


def read_child_pid(info_fd: int, timeout_s: float) -> int | None:
    """The ``child-pid`` a launcher reports on ``info_fd`` (read to end of file)."""
    data = b""
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as selector:
        selector.register(info_fd, selectors.EVENT_READ)
        while len(data) < _INFO_BYTES and time.monotonic() < deadline:
            if not selector.select(deadline - time.monotonic()):
                continue
            chunk = os.read(info_fd, _INFO_BYTES)
            if not chunk:
                break
            data += chunk
    found = _CHILD_PID.search(data)
    return int(found.group(1)) if found else None


def leader_exited(pid: int) -> bool:
    """Our child ``pid`` has exited (it is left unreaped: WNOWAIT keeps its pid ours)."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return True
    return info is not None


def parent_of(pid: int) -> int | None:
    """The parent pid, or None; checked before a reported pid is killed as root."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return int(handle.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def signal_kill(send: Callable[[int, int], None], target: int) -> None:
    """SIGKILL ``target`` through ``send`` (``os.kill`` or ``os.killpg``); gone is fine."""
    with suppress(ProcessLookupError, PermissionError):
        send(target, signal.SIGKILL)


def kill_tagged(tag: str, *, rounds: int = 5) -> int:
    """SIGKILL every process whose environment carries ``tag``; repeat to beat forks.

    Returns:
        How many processes were signalled.
    """
    needle = tag.encode()
    killed = 0
    for _ in range(rounds):
        found = [pid for pid in _pids() if _environ_has(pid, needle)]
        if not found:
            break
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
    return killed


def _pids() -> Sequence[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _environ_has(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return needle in handle.read().split(b"\0")
    except OSError:
        return False
