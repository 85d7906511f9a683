"""A node's strength budget: charged its runs' own time; a backstop that cuts starved runs
makes the episode unscorable, never a silent 0 (``strength.budget``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vera_env import VeraEnv
from vera_env.errors import StrengthStarved
from vera_env.sandbox import ExecResult, SandboxLimits
from vera_env.tasks.builtin import builtin_source
from vera_env.verification.checks import run_checks
from vera_env.verification.rewards import StrengthConfig
from vera_env.verification.strength import StrengthSession, StrengthTask
from vera_env.verification.strength.budget import Budget, run_cost, run_starved
from vera_env.wire.protocol import CheckSpec

LIMITS = SandboxLimits(timeout_s=20, check_timeout_s=20)
V = " && echo True || echo False"


class Clock:
    """A wall clock and a thread CPU clock the test moves by hand."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.cpu = 0.0


def _budget(clock: Clock, seconds: float = 10.0, backstop_s: float = 40.0) -> Budget:
    return Budget(seconds, backstop_s=backstop_s, monotonic=lambda: clock.wall,
                  thread_cpu=lambda: clock.cpu)


def _run(duration_s: float, cpu_s: float | None, wait_s: float | None, *,
         timed_out: bool = False) -> ExecResult:
    return ExecResult("", "", -1 if timed_out else 0, timed_out, duration_s,
                      status="timeout" if timed_out else "ok", cpu_s=cpu_s, cpu_wait_s=wait_s)


def test_run_cost_is_wall_less_cpu_wait_at_least_cpu_and_wall_where_uncounted():
    assert run_cost(3.0, 1.0, 2.0) == 1.0     # a CPU-bound run that waited 2 s: 1 s
    assert run_cost(3.0, 0.0, 0.0) == 3.0     # a sleep: its sleep
    assert run_cost(1.0, 1.8, 0.5) == 1.8     # two processes: their CPU
    assert run_cost(3.0, 1.0, None) == 3.0    # no PSI: wall time, as the old deadline


def test_budget_spent_by_work_is_the_checks_cost_not_starvation():
    clock = Clock()
    budget = _budget(clock)
    budget.charge(_run(30.0, 6.0, 24.0))      # a busy machine: 30 s of wall, 6 s own
    clock.wall = 30.0
    assert budget() == pytest.approx(10.0) and budget.spent is None
    budget.charge(_run(20.0, 5.0, 15.0))
    assert budget() == 0.0 and budget.spent == "work" and not budget.starved
    clock.wall = 100.0                        # the backstop, later: still the work's
    assert budget() == 0.0 and budget.spent == "work"
    budget.raise_if_starved()
    assert "strength budget (10 s" in budget.describe()


def test_budget_charges_the_harness_threads_cpu():
    clock = Clock()
    budget = _budget(clock)
    budget()                                  # the thread's first look: its baseline
    clock.cpu = 4.0
    budget()
    assert budget.work_s == pytest.approx(4.0)
    clock.cpu = 11.0
    assert budget() == 0.0 and budget.spent == "work"


def test_backstop_with_the_work_under_budget_is_starved_and_unscorable():
    clock = Clock()
    budget = _budget(clock)
    budget.charge(_run(39.0, 2.0, 37.0))      # waited for a CPU nearly all along
    clock.wall = 40.0
    assert budget() == 0.0 and budget.spent == "backstop" and budget.starved
    with pytest.raises(StrengthStarved, match="other load starved the node's runs"):
        budget.raise_if_starved()


def test_backstop_after_the_runs_it_cut_are_charged_over_budget_is_the_checks():
    clock = Clock()
    budget = _budget(clock)
    clock.wall = 40.0
    assert budget() == 0.0 and budget.spent == "backstop"
    budget.charge(_run(39.0, 0.0, 0.0))       # a check that slept through it
    assert not budget.starved
    budget.raise_if_starved()


def test_a_run_cut_while_starved_is_starved_one_cut_while_slow_is_not():
    assert run_starved(_run(10.0, 0.5, 9.0, timed_out=True), 10.0)
    assert not run_starved(_run(10.0, 9.5, 0.3, timed_out=True), 10.0)   # it ran: slow
    assert not run_starved(_run(10.0, 0.0, 0.0, timed_out=True), 10.0)   # it slept
    assert not run_starved(_run(10.0, 0.5, None, timed_out=True), 10.0)  # unknown: no
    assert not run_starved(_run(3.0, 0.5, 2.5), 10.0)                    # it finished


def test_starve_after_the_work_was_spent_is_still_the_checks():
    clock = Clock()
    budget = _budget(clock)
    budget.charge(_run(11.0, 11.0, 0.0))
    budget()
    budget.starve("a run waited")
    assert budget.spent == "work" and not budget.starved


def test_budget_refuses_a_backstop_shorter_than_itself():
    with pytest.raises(ValueError, match="seconds <= backstop_s"):
        Budget(10.0, backstop_s=5.0)
    with pytest.raises(ValueError, match="deadline_s <= max_deadline_s"):
        Budget.for_deadline(30.0, max_deadline_s=20.0)


def test_assess_with_variant_runs_starved_raises_strength_starved(sandbox, tmp_path: Path):
    """Every variant run is cut at its timeout having waited for a CPU nearly all of it
    (what two busy loops per CPU do): no verdict on the check, an infrastructure fault."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "t.txt").write_text("a\nb\nc\n")
    sources = {"t.txt": data / "t.txt"}
    ws = sandbox.stage(sources)
    session = StrengthSession(sandbox, StrengthTask(sources), ws, StrengthConfig(), LIMITS)
    real = ws.run_check

    def run_check(command, *, timeout_s=None, overlay=None):
        if overlay:  # a frozen variant run
            return _run(timeout_s, 0.1, timeout_s - 0.2, timed_out=True)
        return real(command, timeout_s=timeout_s)
    ws.run_check = run_check
    try:
        results = run_checks([CheckSpec("range", "c", "test $(wc -l < t.txt) -eq 3" + V)], ws,
                             timeout_s=LIMITS.check_timeout_s)
        assert results[0].passed
        with pytest.raises(StrengthStarved, match="waiting for a CPU"):
            session.assess(results)
    finally:
        session.close()
        ws.close()


def test_env_episode_whose_strength_was_starved_is_unscorable_not_zero(monkeypatch):
    source = builtin_source()
    task = source.get("tab.sentinel_mean.easy.s0")
    env = VeraEnv(source, max_steps=6, limits=LIMITS)
    try:
        env.reset(seed=0, options={"task_id": task.id})

        def starved(self, results, *, artifact=""):
            raise StrengthStarved("strength: other load starved the node's runs of CPU")
        monkeypatch.setattr(StrengthSession, "assess", starved)
        _obs, reward, _term, _trunc, info = env.step(task.solution[0])
    finally:
        env.close()
    assert info["unscorable"] is True and reward == 0.0
    assert "starved" in info["error"]
