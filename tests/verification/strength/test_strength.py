"""Counterfactual strength against a real sandbox: which checks earn, which do not, and why."""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from vera_env.errors import SandboxError, SandboxStartTimeout
from vera_env.sandbox import ExecResult, LocalSandbox, SandboxLimits
from vera_env.verification.checks import CheckResult, fact_of, run_checks
from vera_env.verification.rewards import RewardConfig, StrengthConfig
from vera_env.verification.strength import Reference, StrengthSession, StrengthTask
from vera_env.verification.strength import session as strength_session
from vera_env.verification.strength.budget import Budget
from vera_env.verification.strength.mutants import kind_of
from vera_env.verification.strength.session import _Site, _Sites
from vera_env.verification.strength.variants import Settings, census
from vera_env.wire.protocol import CheckSpec

LIMITS = SandboxLimits(timeout_s=20, check_timeout_s=20)
CONFIG = StrengthConfig()
V = " && echo True || echo False"


class Episode:
    """A workspace, its strength session, and the commands run so far."""

    def __init__(self, sandbox, sources, config=CONFIG, *, reference=None, same=None,
                 task_key="", **kw) -> None:
        self.ws = sandbox.stage(sources)
        task = StrengthTask(sources, reference, same, task_key)
        self.session = StrengthSession(sandbox, task, self.ws, config, LIMITS, **kw)

    def run(self, command: str) -> str:
        result = self.ws.run(command)
        self.session.record(command, result)
        return result.stdout

    def assess(self, *commands: str, artifact: str = "") -> tuple[CheckResult, ...]:
        specs = [CheckSpec("range", f"c{i}", c) for i, c in enumerate(commands)]
        results = run_checks(specs, self.ws, timeout_s=LIMITS.check_timeout_s)
        assert all(r.passed for r in results), [r.detail for r in results]
        return self.session.assess(results, artifact=artifact)

    def close(self) -> None:
        self.session.close()
        self.ws.close()


@pytest.fixture
def episode(sandbox, sources):
    ep = Episode(sandbox, sources)
    yield ep
    ep.close()


def _earns(results) -> list[bool]:
    return [r.discriminating for r in results]


def test_assess_self_written_pins_earn_nothing(episode):
    episode.run("echo 42 > a.txt; echo 7 > b.txt; head -1 alcohol.txt > /dev/null; "
                "echo x > c.txt")
    results = episode.assess('test "$(cat a.txt)" = 42' + V, 'test "$(cat b.txt)" -eq 7' + V,
                             'grep -qx x c.txt' + V)
    assert _earns(results) == [False, False, False]
    assert all("mutants of alcohol.txt (the episode replayed on each)" in r.detail
               for r in results)


def test_assess_pin_written_by_commands_naming_no_task_file_needs_no_replay(episode):
    episode.run("echo 42 > a.txt")
    [result] = episode.assess('test "$(cat a.txt)" = 42' + V)
    assert result.discriminating is False and "not derived from the data" in result.detail
    assert episode.session.bank.shadows == 0


def test_assess_pin_on_a_file_derived_from_the_data_earns(episode):
    episode.run("zcat calls.vcf.gz | grep -v '^#' | grep -c '0|1' > het.txt")
    [result] = episode.assess('test "$(cat het.txt)" -eq 80' + V)
    assert result.discriminating is True
    assert result.killed_by[0].startswith("calls.vcf.gz:")


def test_assess_check_tying_a_model_file_to_the_data_earns_frozen(episode):
    episode.run("zcat calls.vcf.gz | grep -v '^#' | cut -f10 > gt.txt")
    [result] = episode.assess("zcat calls.vcf.gz | grep -v '^#' | cut -f10 | cmp -s - gt.txt" + V)
    assert result.discriminating is True and episode.session.bank.shadows == 0


def test_assess_raw_pin_of_the_data_earns(episode):
    [result] = episode.assess("test $(wc -l < alcohol.txt) -eq 5" + V)
    assert result.discriminating is True and result.killed_by


VACUOUS = ["echo True", "test -f alcohol.txt" + V, "test -s calls.vcf.gz" + V,
           'python3 -c "print(1==1)"', "awk 'END { print \"True\" }' alcohol.txt",
           "cat alcohol.txt > /dev/null; test $(wc -l < /etc/passwd) -gt 0 && echo True"]


def test_assess_vacuous_checks_pass_but_do_not_discriminate(episode):
    results = episode.assess(*VACUOUS)
    assert _earns(results) == [False] * len(VACUOUS)
    assert all(r.detail.startswith("not discriminating") and not r.earns for r in results)


def test_assess_encoding_detector_fails_its_controls(episode):
    [result] = episode.assess(
        "python3 -c \"import gzip; d = open('calls.vcf.gz', 'rb').read(); "
        "print(gzip.compress(gzip.decompress(d), 1, mtime=0) != d)\"")
    assert result.discriminating is False and "failed on a control" in result.detail


def test_assess_metadata_detectors_do_not_discriminate(episode):
    episode.run("stat -c %Y alcohol.txt > mtime.txt; stat -c %h alcohol.txt > links.txt; "
                "stat -c %i alcohol.txt > ino.txt")
    results = episode.assess(
        'test "$(stat -c %Y alcohol.txt)" = "$(cat mtime.txt)"' + V,
        'test "$(stat -c %h alcohol.txt)" = "$(cat links.txt)"' + V,
        'test "$(stat -c %i alcohol.txt)" = "$(cat ino.txt)"' + V,
        "grep -q ' /work/alcohol.txt ' /proc/self/mountinfo && echo False || echo True")
    assert _earns(results) == [False] * 4


def test_assess_random_derivation_replays_the_same_sample(episode):
    episode.run("python3 -c \"import random; rows = open('alcohol.txt').read().split('\\n')"
                "[1:-1]; print(sum(int(r.split()[2]) for r in random.sample(rows, 2)))\" "
                "> s.txt")
    value = episode.ws.run("cat s.txt").stdout.strip()
    [result] = episode.assess(f'test "$(cat s.txt)" = "{value}"' + V)
    assert result.discriminating is True


def test_assess_clock_derivation_is_flaky(episode):
    episode.run("head -1 alcohol.txt > /dev/null; date +%N > t.txt")
    value = episode.ws.run("cat t.txt").stdout.strip()
    [result] = episode.assess(f'test "$(cat t.txt)" = "{value}"' + V)
    assert result.discriminating is False and "failed on a control" in result.detail


def test_assess_edit_in_place_then_read_earns_through_the_replay(episode):
    episode.run("sed -i 's/-999/NA/' alcohol.txt")
    [result] = episode.assess("test \"$(cut -f3 alcohol.txt | tr '\\n' ' ')\" = "
                              "'drinks 3 5 7 NA '" + V)
    assert result.discriminating is True and episode.session.bank.shadows > 0


def test_assess_failing_check_not_tested(episode):
    spec = CheckSpec("range", "c", "test $(wc -l < alcohol.txt) -eq 99" + V)
    [result] = episode.session.assess(run_checks([spec], episode.ws))
    assert (result.passed, result.discriminating, result.killed_by) == (False, None, ())


def test_assess_node_artifact_counts_as_named(episode):
    episode.run("cut -f3 alcohol.txt > col.txt")
    check = 'test "$(tail -1 "$(ls | grep ^col)")" = -999' + V
    [blind] = episode.assess(check)
    [seen] = episode.assess(check, artifact="col.txt")
    assert "names no file" in blind.detail and seen.discriminating is True


def test_assess_verdict_past_the_window_earns_nothing(sandbox, tmp_path):
    big = tmp_path / "big.txt"
    big.write_text("".join(f"{i}\n" for i in range(1, 300_001)))
    big.chmod(0o444)
    tmp_path.chmod(0o755)
    ep = Episode(sandbox, {"big.txt": big}, StrengthConfig(max_mb=1))
    try:
        [result] = ep.assess("test $(tail -1 big.txt) -eq 300000" + V)
    finally:
        ep.close()
    assert result.discriminating is False and "past the first" in result.detail


def test_assess_budget_cuts_slow_checks_with_a_detail(sandbox, sources):
    # A check that sleeps is charged its sleep: slow on any machine, so its fault.
    config = StrengthConfig(deadline_floor_s=1.0, deadline_factor=0.1,
                            deadline_max_s=1.0)
    ep = Episode(sandbox, sources, config)
    try:
        [result] = ep.assess("sleep 1.5; test $(wc -l < alcohol.txt) -eq 5" + V)
    finally:
        ep.close()
    assert result.discriminating is False and "strength budget (2 s" in result.detail  # 2 x max


def _late_variant_runs(ep: Episode, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Variant runs (an overlay) whose sandbox does not start in the time given;
    returns the timeouts they were given."""
    real, given = ep.ws.run_check, []

    def run_check(command, *, timeout_s=None, overlay=None):
        if overlay:
            given.append(timeout_s)
            raise SandboxStartTimeout("bwrap sandbox did not start within 0.2s", timeout_s)
        return real(command, timeout_s=timeout_s)
    monkeypatch.setattr(ep.ws, "run_check", run_check)
    return given


def test_assess_variant_start_cut_by_the_backstop_is_a_sandbox_fault(
        sandbox, sources, monkeypatch):
    # Only the wall-clock backstop (4 x a 1 s deadline) cuts a run's timeout, and only
    # while the budget is not spent: a sandbox that cannot start in that was starved,
    # which is no verdict on the check.
    config = StrengthConfig(deadline_floor_s=1.0, deadline_factor=0.1,
                            deadline_max_s=1.0)
    ep = Episode(sandbox, sources, config)
    try:
        given = _late_variant_runs(ep, monkeypatch)
        with pytest.raises(SandboxStartTimeout):
            ep.assess("test $(wc -l < alcohol.txt) -eq 5" + V)
    finally:
        ep.close()
    assert given and max(given) <= 4.0  # the runs were reached, with a cut timeout


def test_assess_variant_start_timeout_with_the_full_timeout_is_a_sandbox_fault(
        sandbox, sources, monkeypatch):
    config = StrengthConfig(deadline_floor_s=100.0, deadline_max_s=200.0)
    ep = Episode(sandbox, sources, config)
    try:
        given = _late_variant_runs(ep, monkeypatch)
        with pytest.raises(SandboxStartTimeout):
            ep.assess("test $(wc -l < alcohol.txt) -eq 5" + V)
    finally:
        ep.close()
    assert given and min(given) > 1.0  # the run had its own timeout, uncut


def test_assess_verdicts_reproducible_and_independent_of_workers(sandbox, sources):
    commands = ["test $(wc -l < alcohol.txt) -eq 5" + V, "echo True",
                'test "$(cat het.txt)" -eq 80' + V]
    seen = []
    for workers in (1, 4):
        ep = Episode(sandbox, sources, workers=workers)
        try:
            ep.run("zcat calls.vcf.gz | grep -c '0|1' > het.txt")
            seen.append([(r.discriminating, r.killed_by) for r in ep.assess(*commands)])
        finally:
            ep.close()
    assert seen[0] == seen[1] and [d for d, _ in seen[0]] == [True, False, True]


def test_assess_shadow_count_stays_within_its_bound(sandbox, sources):
    ep = Episode(sandbox, sources, StrengthConfig(max_shadows=6))
    try:
        ep.run("cat alcohol.txt > a.txt; zcat calls.vcf.gz > c.txt")
        results = ep.assess("cat a.txt c.txt > /dev/null; echo True",
                            'test -s a.txt && test -s c.txt' + V)
        assert ep.session.bank.shadows <= 6 + 4  # a group of six, twins aside
    finally:
        ep.close()
    assert _earns(results) == [False, False]


def test_assess_shadow_disk_budget_stops_the_replay(sandbox, sources):
    ep = Episode(sandbox, sources, StrengthConfig(max_shadow_mb=1))
    try:
        ep.run("head -c 3000000 /dev/zero > pad.bin; wc -l alcohol.txt > n.txt")
        [result] = ep.assess('test "$(cat n.txt)" = "5 alcohol.txt"' + V)
    finally:
        ep.close()
    assert result.discriminating is False and "strength.max_shadow_mb" in result.detail


def test_close_removes_every_shadow_and_variant(sandbox, sources):
    ep = Episode(sandbox, sources)
    ep.run("zcat calls.vcf.gz | grep -c '0|1' > het.txt")
    ep.assess('test "$(cat het.txt)" -eq 80' + V, "test $(wc -l < alcohol.txt) -eq 5" + V)
    shadows = [s.workspace.path for t in ep.session.bank._targets.values() if t.group
               for s in (*t.group.shadows.values(), *t.group.twins.values())]
    variants = [v.path for t in ep.session.bank._targets.values()
                for v in (*t.variants.controls, *t.variants.mutants)]
    assert shadows and variants
    ep.close()
    assert not any(p.exists() for p in (*shadows, *variants))


def test_assess_scratch_failure_is_a_sandbox_error(episode, monkeypatch):
    def broken(prefix="x"):
        raise SandboxError("disk full")
    monkeypatch.setattr(episode.ws, "scratch_dir", broken)
    with pytest.raises(SandboxError, match="disk full"):
        episode.assess("test $(wc -l < alcohol.txt) -eq 5" + V)


def test_assess_leaves_the_workspace_byte_identical(episode):
    episode.run("cut -f3 alcohol.txt > col.txt")
    before = {p: (episode.ws.path / p).read_bytes() for p in episode.ws.listing()}
    episode.assess(*VACUOUS, 'test "$(tail -1 col.txt)" = -999' + V)
    assert {p: (episode.ws.path / p).read_bytes() for p in episode.ws.listing()} == before


def test_assess_on_local_backend_uses_copies(sources):
    with pytest.warns(UserWarning):
        box = LocalSandbox(LIMITS)
    ep = Episode(box, sources)
    try:
        ep.run("wc -l < alcohol.txt > n.txt")
        results = ep.assess("test $(wc -l < alcohol.txt) -eq 5" + V,
                            "test -f alcohol.txt" + V, 'test "$(cat n.txt)" -eq 5' + V)
    finally:
        ep.close()
    assert _earns(results) == [True, False, True]
    assert os.path.exists(sources["alcohol.txt"])


def test_non_discriminating_check_earns_nothing_unless_strength_off():
    weak = CheckResult("c", "range", "echo True", True, discriminating=False)
    untested = CheckResult("c", "range", "echo True", True)
    assert not weak.earns and untested.earns
    assert RewardConfig().strength == StrengthConfig()


def test_env_episode_owns_its_session_and_reset_closes_it(sources):
    from vera_env import VeraEnv
    from vera_env.tasks import Task

    task = Task(id="t", question="q", answer="5.00", grader={"kind": "exact"},
                data_dir=sources["alcohol.txt"].parent).with_reference(Reference(_drinks))
    env = VeraEnv([task], max_steps=5, limits=LIMITS)
    env.reset(seed=0)
    env.step("<command>cut -f3 alcohol.txt | tail -n +2 > v.txt</command>")
    info = env.step('NODE kind=load summary="v"\nCHECK range "mean" :: '
                    "test \"$(awk '$1 != -999 { s += $1; n++ } END { print s / n }' v.txt)\" "
                    "= 5" + V)[-1]
    session = env._episode.strength
    paths = [s.workspace.path for t in session.bank._targets.values() if t.group
             for s in (*t.group.shadows.values(), *t.group.twins.values())]
    assert info["checks"][0]["discriminating"] is not None and paths  # tested: shadows made
    env.reset(seed=1)
    assert env._episode.strength is not session and not any(p.exists() for p in paths)
    env.close()
    assert env._episode is None


# ----- answer-preserving controls, classified by a reference -----

def _het_count(contents) -> str:
    lines = [line for line in contents["calls.vcf.gz"].decode().splitlines()
             if not line.startswith("#")]
    if not lines or len(lines[0].split("\t")) != 10:
        raise ValueError("not a one-sample VCF")
    return str(sum(1 for line in lines
                   if line.split("\t")[9].split(":")[0] in ("0|1", "1|0", "0/1")))


def _drinks(contents) -> str:
    rows = [line.split("\t") for line in contents["alcohol.txt"].decode().splitlines()[1:]]
    kept = [int(r[2]) for r in rows if r[2] != "-999"]
    if not kept:
        raise ValueError("no rows")
    return f"{sum(kept) / len(kept):.2f}"


REFERENCE = Reference(
    lambda c: f"{_het_count(c)}|{_drinks(c)}",
    preserving={"calls.vcf.gz": ("recompress", "shuffle_records", "add_comment",
                                 "drop_irrelevant"),
                "alcohol.txt": ("shuffle_records",)},
    irrelevant={"calls.vcf.gz": lambda record: record.rstrip(b"\n").endswith(b"0/0")})


@pytest.fixture
def classified(sandbox, sources):
    ep = Episode(sandbox, sources, reference=REFERENCE, same=lambda a, b: a == b,
                 task_key=f"strength-test-{os.getpid()}")
    yield ep
    ep.close()


def test_assess_fingerprints_of_the_data_die_on_answer_preserving_controls(classified):
    facts = {
        "md5": "md5sum calls.vcf.gz | cut -c1-32",
        "bytes": "wc -c < calls.vcf.gz",
        "lines": "zcat calls.vcf.gz | wc -l",
        "content md5": "zcat calls.vcf.gz | md5sum | cut -c1-32",
        "head": "zcat calls.vcf.gz | head -c 300 | md5sum | cut -c1-32",
    }
    pins = [f'test "$({cmd})" = "{classified.run(cmd).strip()}"{V}' for cmd in facts.values()]
    results = classified.assess(*pins)
    assert _earns(results) == [False] * len(pins), [r.detail for r in results]
    assert all("control" in r.detail for r in results)


def test_assess_copy_compared_with_the_original_dies_on_a_control(classified):
    classified.run("mkdir keep && cp calls.vcf.gz alcohol.txt keep/")
    results = classified.assess(f"cmp -s calls.vcf.gz keep/calls.vcf.gz{V}",
                                f"cmp -s alcohol.txt keep/alcohol.txt{V}")
    assert _earns(results) == [False, False]


def test_assess_recount_of_what_the_question_is_about_earns(classified):
    classified.run("zcat calls.vcf.gz | grep -v '^#' | cut -f10 | grep -c -E '0[|/]1|1[|]0' "
                   "> het.txt")
    n = classified.run("cat het.txt").strip()
    results = classified.assess(f'test "$(cat het.txt)" -eq {n}{V}',
                                "python3 -c \"import gzip; n = sum(1 for l in gzip.open("
                                "'calls.vcf.gz', 'rt') if not l.startswith('#') and "
                                f"l.split()[9].split(':')[0] in ('0|1', '1|0', '0/1')); print(n == {n})\"")
    assert _earns(results) == [True, True], [r.detail for r in results]
    assert all(r.evidence.startswith("calls.vcf.gz:") for r in results)


def _classified_vcf(sources):
    """calls.vcf.gz as strength classifies it (controls, mutants, reserves)."""
    [vcf] = [f for f in census(StrengthTask(sources, REFERENCE, lambda a, b: a == b),
                               Settings.of(StrengthConfig())) if f.name == "calls.vcf.gz"]
    return vcf


def _main_and_reserve_counts(sources) -> tuple[set[str], set[str]]:
    """The het counts of calls.vcf.gz's mutants a check is shown, and of the reserve
    draws its kills are confirmed on, as strength classifies them."""
    vcf = _classified_vcf(sources)
    def count(raw: bytes) -> str:  # as the checks count: grep over the 10th column
        rows = [line.split("\t") for line in raw.decode().splitlines()
                if not line.startswith("#")]
        return str(sum(1 for r in rows if re.search(r"0[|/]1|1[|]0", r[9 if len(r) > 9 else 0])))
    shown = {count(gzip.decompress(b.data)) for b in vcf.mutants}
    first = kind_of(vcf.mutants[0].label)  # the first kill's kind: confirmed on its reserves
    drawn = [vcf.reserve_for(first, k) for k in range(3)]
    return shown, {count(gzip.decompress(b.data)) for b in drawn if b is not None}


def test_a_check_that_rejects_only_the_mutants_it_was_shown_fails_its_confirmations(
        classified, sources):
    """A check can tell the mutants it is shown by a value (here: the het counts of
    exactly those draws) and reject only them -- the shape of a pin gated on a hash of
    what it reads. Re-running the same mutant to confirm a kill gives the same verdict;
    a confirmation on a reserve draw of the kind, which the check never saw, does not.
    The honest recount rejects the reserve draws as it rejects the others."""
    shown, reserves = _main_and_reserve_counts(sources)
    assert reserves and not reserves & shown  # else the test would prove nothing
    classified.run("zcat calls.vcf.gz | grep -v '^#' | cut -f10 | grep -c -E '0[|/]1|1[|]0' "
                   "> het.txt")
    n = classified.run("cat het.txt").strip()
    recount = "zcat calls.vcf.gz | grep -v '^#' | cut -f10 | grep -c -E '0[|/]1|1[|]0'"
    memorised = "|".join(sorted(shown))
    results = classified.assess(
        f'test "$({recount})" -eq {n}{V}',
        f'case "$({recount})" in {memorised}) echo False ;; *) echo True ;; esac',
        f'case "$(cat het.txt)" in {memorised}) echo False ;; *) echo True ;; esac')
    assert _earns(results) == [True, False, False], [r.detail for r in results]
    assert all("did not fail it again" in r.detail for r in results[1:]), [r.detail for r in results]


def _shown_and_reserve_controls(sources) -> tuple[set[str], set[str]]:
    """md5 of the decompressed content of calls.vcf.gz and of the controls a check is
    shown, and of the reserve controls its confirmations re-run, as strength classifies
    them."""
    vcf = _classified_vcf(sources)
    def md5(raw: bytes) -> str:
        return hashlib.md5(gzip.decompress(raw)).hexdigest()
    shown = {md5(sources["calls.vcf.gz"].read_bytes())} | {md5(b.data) for b in vcf.controls}
    drawn = [vcf.reserve_control(k) for k in range(3)]
    return shown, {md5(b.data) for b in drawn if b is not None}


@pytest.mark.parametrize("replay", [False, True])
def test_a_check_that_passes_only_the_controls_it_was_shown_fails_its_confirmations(
        classified, sources, replay):
    """A pin can pass exactly the controls it is shown (here: the content hashes of the
    real file and of those controls) and reject everything else, so it rejects every
    mutant and every reserve mutant: the shape of a pin gated on a hash, whose gate lets
    the shown controls through. Re-running a shown control to confirm gives its pass
    again; a reserve control -- a further draw of a kind it was shown -- does not. Through
    a model file (replayed) as through the task file (frozen). The honest recount passes
    the reserve controls as it passed the others."""
    shown, reserves = _shown_and_reserve_controls(sources)
    assert reserves and not reserves & shown  # else the test would prove nothing
    classified.run("zcat calls.vcf.gz | md5sum | cut -c1-32 > digest.txt")
    classified.run("zcat calls.vcf.gz | grep -v '^#' | cut -f10 | grep -c -E '0[|/]1|1[|]0' "
                   "> het.txt")
    n = classified.run("cat het.txt").strip()
    read = "cat digest.txt" if replay else "zcat calls.vcf.gz | md5sum | cut -c1-32"
    memorised = "|".join(sorted(shown))
    results = classified.assess(
        f'test "$(cat het.txt)" -eq {n}{V}',
        f'case "$({read})" in {memorised}) echo True ;; *) echo False ;; esac')
    assert _earns(results) == [True, False], [r.detail for r in results]
    assert "a control run after the kill" in results[1].detail, results[1].detail


def test_a_confirmation_past_the_reserves_runs_on_a_replayed_twin(sandbox, sources,
                                                                  monkeypatch):
    """Two confirmations a kill, a reserve draw for the first only: the first runs on
    the reserve's shadow, the second on the killed mutant's own twin, which must then be
    replayed (it was not at the first: an unreplayed twin read as a deadline, and the
    episode as starved)."""
    plan = strength_session._plan

    def one_reserve(*args: object, **kwargs: object) -> list[tuple[object, object]]:
        planned = plan(*args, **kwargs)  # type: ignore[arg-type]
        return [planned[0], *((None, c) for _, c in planned[1:])]
    monkeypatch.setattr(strength_session, "_plan", one_reserve)
    monkeypatch.setattr(strength_session, "needed", lambda *a, **k: 2)
    ran: list[str] = []
    twin = strength_session.StrengthSession._twin

    def spy(self, group, site, time_left, k, fresh):  # type: ignore[no-untyped-def]
        ran.append("reserve" if fresh is not None else "twin")
        return twin(self, group, site, time_left, k, fresh)
    monkeypatch.setattr(strength_session.StrengthSession, "_twin", spy)
    ep = Episode(sandbox, sources, reference=REFERENCE, same=lambda a, b: a == b,
                 task_key=f"one-reserve-{os.getpid()}")
    try:
        ep.run("zcat calls.vcf.gz | grep -v '^#' | cut -f10 | grep -c -E '0[|/]1|1[|]0' "
               "> het.txt")
        n = ep.run("cat het.txt").strip()
        results = ep.assess(f'test "$(cat het.txt)" -eq {n}{V}', f"grep -qx {n} het.txt{V}")
    finally:
        ep.close()
    assert all(r.discriminating is True for r in results), [r.detail for r in results]
    assert sorted(ran) == ["reserve", "reserve", "twin", "twin"], ran  # checks run at once


def test_assess_repeated_check_gives_one_piece_of_evidence(classified):
    n = classified.run("zcat calls.vcf.gz | grep -c '0|1'").strip()
    check = f"test \"$(zcat calls.vcf.gz | grep -c '0|1')\" -eq {n}{V}"
    results = classified.assess(check, check, check)
    assert all(r.discriminating for r in results)
    assert len({fact_of(r) for r in results}) == 1


@pytest.mark.parametrize("probe", ["stat -c %i calls.vcf.gz", "stat -c %h calls.vcf.gz",
                                   "stat -c %Z calls.vcf.gz", "stat -c %b calls.vcf.gz",
                                   "stat -c %Y calls.vcf.gz"])
def test_assess_metadata_detector_never_reads_the_data_and_earns_nothing(classified, probe):
    seen = classified.run(probe).strip()
    results = classified.assess(f'test "$({probe})" = "{seen}"{V}')
    assert _earns(results) == [False], results[0].detail


def _timed_sites(late: threading.Event, controls: int, mutants: int, *,
                 controls_follow_time: bool) -> tuple[list[_Site], list[_Site]]:
    """Controls that pass (until ``late`` is set, if ``controls_follow_time``) and
    mutants that fail: a check on when it runs, or an honest one."""
    def site(label: str, control: bool) -> _Site:
        def run(cmd: str, timeout_s: float) -> ExecResult:
            ok = control and not (controls_follow_time and late.is_set())
            return ExecResult(f"{ok}\n", "", 0, False, 0.01)
        return _Site(label, run)
    return ([site(f"c{i}", True) for i in range(controls)],
            [site(f"m{i}", False) for i in range(mutants)])


@pytest.mark.parametrize("follows_time", [True, False])
def test_confirmations_rerun_a_control_so_a_check_on_when_it_runs_earns_nothing(
        episode, follows_time):
    """A check on the clock or on a fresh file's change time passes every run before
    some moment and fails every run after. When the controls happened to run before it
    and a mutant after, it looked like a kill, and the confirmations, later still,
    failed as a kill's should (``stat -c %Z`` of the staged file earned that way in CI).
    A control re-run with each confirmation is later than the kill, so it fails too;
    an honest check is unaffected."""
    late = threading.Event()
    controls, mutants = _timed_sites(late, 4, 3, controls_follow_time=follows_time)

    def confirm_on(site: _Site, blob: object, k: int) -> _Site:
        late.set()  # confirmations run after every phase run
        return site
    [result] = run_checks([CheckSpec("range", "c", "echo True")], episode.ws, timeout_s=20)
    with ThreadPoolExecutor(2) as runs:
        sites = _Sites("calls.vcf.gz", False, controls, mutants, confirm_on,
                       lambda blob, k: controls[0])
        outcome = episode.session._phases(result, 1, sites, runs, _budget())
    if follows_time:
        assert outcome.kind == "weak" and "a control run after the kill" in outcome.why
    else:
        assert outcome.kind == "kill" and outcome.kills == ("m0", "m1", "m2")


def test_assess_kill_through_a_file_whose_controls_keep_its_content_is_refused(sandbox, sources):
    reference = Reference(_drinks, preserving={"alcohol.txt": ()},  # no content-changing control
                          rewriting={"alcohol.txt": ()})
    ep = Episode(sandbox, sources, reference=reference, same=lambda a, b: a == b,
                 task_key=f"no-varied-{os.getpid()}")
    try:
        pin = f'test "$(md5sum < alcohol.txt | cut -c1-32)" = "{ep.run("md5sum < alcohol.txt").split()[0]}"{V}'
        [result] = ep.assess(pin)
        assert result.discriminating is False and "fingerprint" in result.detail
    finally:
        ep.close()


def _budget() -> Budget:
    return Budget.for_deadline(60.0, max_deadline_s=60.0)


def _sites(verdicts: dict[str, ExecResult]) -> list[_Site]:
    return [_Site(label, lambda cmd, timeout_s, res=res: res) for label, res in verdicts.items()]


def _phase(episode, mutants: dict[str, ExecResult]):
    ok = ExecResult("True\n", "", 0, False, 0.01)
    controls = _sites({f"c{i}": ok for i in range(4)})
    [result] = run_checks([CheckSpec("range", "c", "echo True")], episode.ws, timeout_s=20)
    with ThreadPoolExecutor(2) as runs:
        sites = _Sites("calls.vcf.gz", False, controls, _sites(mutants),
                       lambda site, blob, k: site, lambda blob, k: controls[0])
        return episode.session._phases(result, 1, sites, runs, _budget())


def test_an_error_on_a_mutant_is_a_rejection_not_a_verdict_of_its_own(episode):
    """A check that exits 3 on some mismatches and says False on others once read as
    two "distinct" pieces of evidence (``F?`` beside ``FF``): one pin, gated, filled a
    node. An error fails a check on the real workspace, and rejects a mutant here."""
    no, err = ExecResult("False\n", "", 0, False, 0.01), ExecResult("", "", 3, False, 0.01)
    said_false = _phase(episode, {"f:k1#0": no, "f:k1#1": no, "f:k2#0": no, "f:k2#1": no})
    errored = _phase(episode, {"f:k1#0": no, "f:k1#1": no, "f:k2#0": err, "f:k2#1": err})
    assert said_false.kind == errored.kind == "kill"
    assert said_false.evidence == errored.evidence == "FF"


def test_a_check_that_splits_the_draws_of_one_kind_of_mutation_earns_nothing(episode):
    """A pin gated on a hash of the value it reads holds on some mismatches and rejects
    others: two draws of one kind (the same sort of change, elsewhere) split, where a
    fact of the data moves on both or on neither."""
    yes, no = ExecResult("True\n", "", 0, False, 0.01), ExecResult("False\n", "", 0, False, 0.01)
    gated = _phase(episode, {"f:k1#0": yes, "f:k1#1": no, "f:k2#0": no, "f:k2#1": no})
    partial = _phase(episode, {"f:k1#0": yes, "f:k1#1": yes, "f:k2#0": no, "f:k2#1": no})
    assert gated.kind == "weak" and "held on one k1 mutant" in gated.why
    assert partial.kind == "kill" and partial.evidence == "TF"
