"""Reading one command's output and status from the persistent sandbox (see ``server``).

The zygote reports a command's wait status on the socket once it has killed and reaped
everything of that command; the pipes reach end-of-file then too. ``CommandPump``
reads both pipes into their captures and the socket for the status until all three
are done, or until the deadline, the output cap, the disk watch (commands only: a
check cannot write the workspace) or an abort stops it (the caller then kills the
sandbox and drains what is left).
"""

from __future__ import annotations

import os
import selectors
import signal
import socket
import threading
import time
from typing import Any

from .disk import DiskWatch

__all__ = ["CommandPump", "returncode"]

_POLL_S = 0.05


class CommandPump:
    """Reads a command's pipes and the zygote's status until both are done."""

    def __init__(self, sock: socket.socket, sinks: dict[int, Any],
                 watch: DiskWatch | None) -> None:
        self._sock = sock
        self._sinks = sinks
        self._selector = selectors.DefaultSelector()
        for fd in sinks:
            os.set_blocking(fd, False)
            self._selector.register(fd, selectors.EVENT_READ)
        self._selector.register(sock, selectors.EVENT_READ)
        self._watch = watch
        self._next_watch = time.monotonic() + watch.poll_s if watch else float("inf")
        self._bytes = 0
        self.status: int | None = None
        self.timed_out = self.output_limited = self.disk_limited = False

    def run(self, deadline: float, max_bytes: int, aborted: threading.Event) -> None:
        while len(self._selector.get_map()) > 0:
            now = time.monotonic()
            if now >= deadline:
                self.timed_out = True
                return
            if aborted.is_set():
                return
            if self._read_ready(min(deadline - now, _POLL_S)) is False:
                return  # the zygote died without reporting
            if self._bytes > max_bytes:
                self.output_limited = True
                return
            if self._watch is not None and now >= self._next_watch:
                self._next_watch = now + self._watch.poll_s
                if self._watch.over():
                    self.disk_limited = True
                    return

    def drain(self, deadline: float, max_bytes: int) -> None:
        """After a kill: take what is left in the pipes, up to the byte cap."""
        while (any(fd in self._sinks for fd in self._fds()) and time.monotonic() < deadline
               and self._bytes <= max_bytes):
            self._read_ready(_POLL_S)

    def _fds(self) -> list[int]:
        return [key.fd for key in self._selector.get_map().values()]

    def _read_ready(self, wait_s: float) -> bool | None:
        for key, _ in self._selector.select(max(wait_s, 0.0)):
            if key.fd in self._sinks:
                try:
                    data = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if data:
                    self._bytes += len(data)
                    self._sinks[key.fd](data)
                else:
                    self._selector.unregister(key.fd)
                continue
            try:
                message = self._sock.recv(4096)
            except BlockingIOError:
                continue
            self._selector.unregister(self._sock)
            if not message:
                return False
            self.status = int(message.split()[1])  # b"status WAITSTATUS"
        return None

    def close(self) -> None:
        for fd in self._sinks:
            os.close(fd)
        self._selector.close()


def returncode(status: int | None) -> int | None:
    if status is None:
        return -signal.SIGKILL
    return os.waitstatus_to_exitcode(status)
