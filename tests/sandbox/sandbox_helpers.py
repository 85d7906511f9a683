"""Helpers shared by the sandbox tests (imported by name; conftest holds fixtures)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from vera_env.sandbox import SandboxLimits, probe_bwrap

__all__ = [
    "BWRAP_REASON",
    "FAST",
    "data_files",
    "processes_of",
    "requires_bwrap",
    "requires_root",
    "snapshot",
]

FAST = SandboxLimits(timeout_s=5, check_timeout_s=5, memory_mb=1024, max_processes=64)

BWRAP_REASON = probe_bwrap()
requires_bwrap = pytest.mark.skipif(bool(BWRAP_REASON), reason=f"bwrap unusable: {BWRAP_REASON}")
requires_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs a root harness")


def data_files(data: Path) -> dict[str, Path]:
    """Relative name -> source, the shape ``Sandbox.stage`` takes."""
    return {p.name: p for p in sorted(data.iterdir())}


def snapshot(root: Path) -> dict[str, tuple[bytes, int]]:
    """Every file and directory under ``root`` with its bytes and mode."""
    found: dict[str, tuple[bytes, int]] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            rel = path.relative_to(root).as_posix()
            content = b"" if path.is_dir() else path.read_bytes()
            found[rel] = (content, path.lstat().st_mode)
    return found


def processes_of(uid: int, *, settle_s: float = 2.0, mine_only: bool = True) -> list[str]:
    """Host processes (zombies included) owned by ``uid``, as "pid state name".

    With ``mine_only`` only descendants of this test process count, so sandboxes of
    other test runs on the same machine (same host uid) cannot make the test flaky.
    """
    deadline = time.monotonic() + settle_s
    me = os.getpid()
    while True:
        found = []
        parents: dict[str, str] = {}
        for name in os.listdir("/proc"):
            try:
                with open(f"/proc/{name}/stat") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
                parents[name] = fields[1]
                if name.isdigit() and os.stat(f"/proc/{name}").st_uid == uid:
                    found.append((name, fields[0]))
            except (OSError, IndexError):
                continue
        if mine_only:
            found = [(pid, state) for pid, state in found if _descends(pid, str(me), parents)]
        result = [f"{pid} {state}" for pid, state in found]
        if not result or time.monotonic() > deadline:
            return result
        time.sleep(0.05)


def _descends(pid: str, ancestor: str, parents: dict[str, str]) -> bool:
    seen = 0
    while pid in parents and seen < 64:
        pid = parents[pid]
        if pid == ancestor:
            return True
        seen += 1
    return False
