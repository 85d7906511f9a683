"""Host processes and workspace roots, as the cleanup tests look for them (sandbox,
serve and vector tests share these)."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path


def processes_with(marker: str, *, settle_s: float = 3.0) -> list[int]:
    """Host pids (this test process aside) whose command line contains ``marker``; with
    any found, look again until ``settle_s`` has passed, to let kills land."""
    deadline = time.monotonic() + settle_s
    needle = marker.encode()
    while True:
        found = []
        for name in filter(str.isdigit, os.listdir("/proc")):
            if int(name) == os.getpid():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as handle:  # args NUL-separated
                    if needle in handle.read().replace(b"\0", b" "):
                        found.append(int(name))
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def owned_roots(pid: int) -> list[Path]:
    """The workspace roots the process ``pid`` owns (``vera_env.sandbox.reaper``)."""
    return list(Path(tempfile.gettempdir()).glob(f"vera-owned-*-{pid}-*"))
