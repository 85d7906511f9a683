"""The same episode earns the same reward on a quiet machine and beside two busy loops.

Strength's deadline was wall-clock seconds: beside two busy loops the reference turns of
``real.h5ad.detected_cells`` lost 4-21 of 24 checks to it. Its budget is now its runs'
own time (``strength.budget``), so load makes a node take longer, not earn less. Here the
reference turns of a builtin task, each check made slow (a CPU burn before it), are
played twice: alone, and beside two busy loops this test starts and stops.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from vera_env import VeraEnv
from vera_env.sandbox import SandboxLimits
from vera_env.tasks.builtin import builtin_source
from vera_env.verification.rewards import RewardConfig

LIMITS = SandboxLimits(timeout_s=30, check_timeout_s=30)
# A tight deadline (10 x the checks' own time, no floor to speak of): the old wall-clock
# deadline let these nodes finish on a quiet 2-CPU machine and cut them beside the loops.
CONFIG = RewardConfig(strength={"deadline_floor_s": 1.0})
BURN = ("python3 -c 'import time; t = time.process_time(); "
        "all(iter(lambda: time.process_time() - t < 0.15, False))' && ")


@contextmanager
def busy_loops(n: int) -> Iterator[None]:
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def _play(turns: tuple[str, ...], task_id: str) -> tuple[float, list[tuple[bool, str]]]:
    env = VeraEnv(builtin_source(), max_steps=len(turns) + 1, limits=LIMITS, reward=CONFIG)
    try:
        env.reset(seed=0, options={"task_id": task_id})
        verdicts = []
        for turn in turns:
            info = env.step(turn)[-1]
            assert not info["unscorable"], info["error"]
            verdicts += [(c["discriminating"], c["evidence"]) for c in info["checks"]]
        return info["verification_total"], verdicts
    finally:
        env.close()


# Alone (make test's serial phase): the two busy loops are the load this test controls.
# Beside another test process at load 10-40, the sandbox starts -- charged as wall time
# (strength.budget, "Degraded") -- spent the tight budget below and cut the busy run's
# checks (measured: 0.146 quiet, 0.042 busy).
@pytest.mark.serial
def test_slow_checks_earn_the_same_quiet_and_beside_busy_loops():
    task = builtin_source().get("tab.sentinel_mean.easy.s0")
    turns = tuple(t.replace(" :: ", f" :: {BURN}") for t in task.solution[:2])
    assert all(BURN in t for t in turns)
    quiet = _play(turns, task.id)
    with busy_loops(2):
        busy = _play(turns, task.id)
    assert quiet == busy
    assert quiet[0] > 0 and all(d for d, _ in quiet[1])  # every slow check earned
