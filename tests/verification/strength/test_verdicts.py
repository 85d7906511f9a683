"""The verdict store: what it serves, what it never serves, and that no reward moves."""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from vera_env.sandbox import ExecResult, SandboxLimits
from vera_env.verification.checks import CheckResult, run_checks
from vera_env.verification.rewards import StrengthConfig
from vera_env.verification.strength import StrengthSession, StrengthTask
from vera_env.verification.strength.budget import Budget
from vera_env.verification.strength.session import _PhaseRunner, _Site
from vera_env.verification.strength.verdicts import (
    VerdictKey,
    VerdictStore,
    read_tree,
    shareable,
)
from vera_env.wire.protocol import CheckSpec

LIMITS = SandboxLimits(timeout_s=20, check_timeout_s=20)
V = " && echo True || echo False"
COIN = "[ $((RANDOM % 2)) = 0 ] && echo True || echo False"


def _result(stdout: str, **kw: object) -> ExecResult:
    return ExecResult(stdout=stdout, stderr="", exit_code=0, timed_out=False,
                      duration_s=0.01, cpu_s=0.005, cpu_wait_s=0.0, **kw)  # type: ignore[arg-type]


KEY = VerdictKey("grep -c x f", "view", "setting")


# ----- the rules, on the store alone -----

@pytest.mark.parametrize("command", [
    COIN, "head -c1 /dev/urandom | od -An -tu1", "date +%s", "stat -c %i data.txt",
    "cat /proc/self/stat", "echo $$", "ls -li", "find . -newer a.txt", "bash coin.sh",
    "./check", "awk -f prog.awk data.txt", "python3 -c 'import time; print(time.time())'",
    "sort -R data.txt | head -1", "[ a.txt -nt b.txt ]", "gzip -c data.txt | md5sum"])
def test_shareable_entropy_or_metadata_or_unseen_script_refused(command):
    assert shareable(command) is False


def test_shareable_pure_recount_accepted():
    assert shareable("awk -F'\\t' 'NR>1 && $3>0' alcohol.txt | wc -l | grep -qx 3" + V)


def test_store_serves_only_after_two_agreeing_runs():
    store = VerdictStore()
    assert store.claim(KEY, 10.0) is None
    store.observe(KEY, _result("True"), True)
    assert store.claim(KEY, 10.0) is None
    store.observe(KEY, _result("True"), True)
    decided = store.claim(KEY, 10.0)
    assert decided is not None and decided.verdict is True
    assert decided.as_result().duration_s == 0.01  # charged as its run was


def test_store_disagreement_poisons_every_key_of_the_command():
    store = VerdictStore()
    other = VerdictKey(KEY.command, "another view", KEY.setting)
    for verdict in (True, True):
        store.observe(other, _result(str(verdict)), verdict)
    store.observe(KEY, _result("True"), True)
    store.observe(KEY, _result("False"), False)
    assert store.claim(other, 10.0) is None and store.stats.poisoned == 1


def test_store_unclean_run_not_kept_and_slow_verdict_not_served_under_short_timeout():
    store = VerdictStore()
    for _ in range(2):
        store.observe(KEY, _result("", status="memory_limit"), None)
    assert len(store) == 0
    for _ in range(2):
        store.observe(KEY, _result("True"), True)
    assert store.claim(KEY, 0.015) is None and store.claim(KEY, 1.0) is not None


def test_store_bounded_least_recently_used_dropped():
    store = VerdictStore(max_entries=2)
    keys = [VerdictKey(f"c{i}", "v", "s") for i in range(3)]
    for key in keys:
        store.observe(key, _result("True"), True)
    assert len(store) == 2
    store.observe(keys[0], _result("True"), True)  # dropped: starts again at one run
    assert store.claim(keys[0], 10.0) is None


def test_store_waits_for_runs_in_flight_then_serves():
    store = VerdictStore()
    assert store.claim(KEY, 10.0) is None and store.claim(KEY, 10.0) is None  # two run

    def finish() -> None:
        for _ in range(2):
            store.observe(KEY, _result("True"), True)
            store.release(KEY)
    timer = threading.Timer(0.05, finish)
    timer.start()
    decided = store.claim(KEY, 10.0)  # a third asks meanwhile: waits, then is served
    timer.join()
    assert decided is not None and decided.verdict is True and store.stats.missed == 2


def test_store_bad_arguments_rejected():
    with pytest.raises(ValueError, match="min_runs >= 2"):
        VerdictStore(min_runs=1)


def test_read_tree_view_follows_content_and_mode_not_times(tmp_path):
    (tmp_path / "a.txt").write_text("1\n")
    first = read_tree(tmp_path)
    (tmp_path / "a.txt").write_text("1\n")  # new times, same content
    assert first is not None and first.view() == read_tree(tmp_path).view()  # type: ignore[union-attr]
    (tmp_path / "a.txt").chmod(0o600)
    assert read_tree(tmp_path).view() != first.view()  # type: ignore[union-attr]


# ----- the luck bound's coins are re-tossed -----

def _coin_site(calls: list[int]) -> _Site:
    def run(_cmd: str, _t: float) -> ExecResult:
        calls.append(1)
        return _result("True")
    return _Site("m#0", run, view=lambda: "view")


def test_confirmation_run_never_served_even_when_decided():
    store = VerdictStore()
    calls: list[int] = []
    site = _coin_site(calls)
    with ThreadPoolExecutor(2) as pool:
        runner = _PhaseRunner("grep -c x f", pool, 5.0,
                              Budget.for_deadline(20.0, max_deadline_s=120.0),
                              random.Random(0), store, "s")
        for _ in range(2):
            runner({"m": site})
        assert runner({"m": site}) == {"m": True} and len(calls) == 2  # served
        assert runner({"m": site}, confirm=True) == {"m": True} and len(calls) == 3


# ----- against a real sandbox: known attacks, and no reward moves -----

def _episode(sandbox, sources, store: VerdictStore | None, commands: list[str],
             checks: list[str]) -> list[tuple[object, ...]]:
    ws = sandbox.stage(sources)
    session = StrengthSession(sandbox, StrengthTask(sources), ws, StrengthConfig(), LIMITS,
                              verdicts=store)
    try:
        for command in commands:
            session.record(command, ws.run(command))
        specs = [CheckSpec("range", f"c{i}", c) for i, c in enumerate(checks)]
        results: tuple[CheckResult, ...] = tuple(
            run_checks(specs, ws, timeout_s=LIMITS.check_timeout_s))
        judged = session.assess(results)
    finally:
        session.close()
        ws.close()
    return [(r.passed, r.discriminating, r.killed_by, r.evidence, r.detail) for r in judged]


DERIVE = ["awk -F'\\t' 'NR>1 && $3>0' alcohol.txt | wc -l > n.txt"]
CHECKS = ["grep -qx 3 n.txt" + V,  # a replay-derived pin: earns
          "test $(zcat calls.vcf.gz | grep -c '0|1') = 80" + V]  # frozen recount: earns


def test_same_episode_same_verification_with_store_on_and_off(sandbox, sources):
    off = _episode(sandbox, sources, None, DERIVE, CHECKS)
    store = VerdictStore()
    seen: list[str] = []
    store.trace = lambda key, how: seen.append(how)
    on = [_episode(sandbox, sources, store, DERIVE, CHECKS) for _ in range(3)]
    assert on == [off] * 3
    assert off[0][1] is True and off[1][1] is True
    assert store.stats.served > 0 and "served" in seen


def test_episode_with_a_clock_derived_file_shares_nothing(sandbox, sources):
    derive = [*DERIVE, "date +%N > t.txt"]  # every replay writes another t.txt
    off = _episode(sandbox, sources, None, derive, CHECKS)
    store = VerdictStore()
    on = [_episode(sandbox, sources, store, derive, CHECKS) for _ in range(3)]
    assert on == [off] * 3 and store.stats.served == 0


def test_coin_check_never_reaches_the_store(sandbox, sources):
    store = VerdictStore()
    commands: list[str] = []
    store.trace = lambda key, how: commands.append(key.command)
    for _ in range(3):
        _episode(sandbox, sources, store, [], ["cat alcohol.txt > /dev/null; " + COIN])
    assert commands == [] and len(store) == 0
