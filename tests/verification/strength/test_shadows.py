"""Shadow groups: every variant staged in one pass, the derivation replayed incrementally."""

from __future__ import annotations

import os
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from vera_env.errors import SandboxError, SandboxStartTimeout
from vera_env.sandbox import CappedArea, ExecResult, SandboxLimits
from vera_env.sandbox.disk import MAX_DEPTH
from vera_env.verification.strength.command_log import CommandLog
from vera_env.verification.strength.outcome import StrengthDeadline
from vera_env.verification.strength.shadows import (
    CUT,
    OUT_OF_SPACE,
    UNWALKABLE,
    Shadow,
    ShadowBudgetSpent,
    ShadowGroup,
    walk_inodes,
)
from vera_env.verification.strength.task import StrengthTask
from vera_env.verification.strength.variants import Settings, build_variants

LIMITS = SandboxLimits(timeout_s=20, check_timeout_s=20)
TABLE = "".join(f"{i}\t{i * 3}\n" for i in range(40))


@pytest.fixture
def group(sandbox, tmp_path):
    tmp_path.chmod(0o755)
    source = tmp_path / "t.tsv"
    source.write_text(TABLE)
    source.chmod(0o444)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    scratch.chmod(0o711)
    variants = build_variants("t.tsv", StrengthTask({"t.tsv": source}), Settings(3, 2, 0, 1 << 20),
                              scratch, budget_s=10, stamp=(os.stat(source).st_mtime_ns, 0o444))
    made = ShadowGroup(variants, sandbox, {"t.tsv": source}, scratch)
    yield made
    made.close()


def _log(tmp_path: Path, *commands: str, status: str = "ok") -> CommandLog:
    root = tmp_path / "real"
    root.mkdir(exist_ok=True)
    log = CommandLog(root, ["t.tsv"])
    for i, command in enumerate(commands):
        (root / f"f{i}").write_text(command)  # each logged command changed something
        log.record(command, ExecResult("", "", 0, False, 0.01, status=status))
    return log


def test_group_stages_every_variant_alike(group):
    seen = {(st.st_nlink, st.st_mtime_ns, st.st_mode) for st in
            (os.stat(s.workspace.path / "t.tsv") for s in group.shadows.values())}
    assert len(group.shadows) == 5 and len(seen) == 1


def test_extend_replays_only_what_each_shadow_lacks(group, tmp_path):
    log = _log(tmp_path, "wc -l < t.tsv > n.txt")
    with ThreadPoolExecutor(2) as pool:
        group.extend(log, LIMITS, pool, lambda: 60.0, lambda: False)
        log.entries.append(_log(tmp_path, "cat n.txt n.txt > nn.txt").entries[0])
        group.extend(log, LIMITS, pool, lambda: 60.0, lambda: False)
    counts = {s.variant.control: (s.workspace.path / "nn.txt").read_text()
              for s in group.shadows.values()}
    assert group.state(2) == "" and counts[True] == "40\n40\n"
    assert all(s.replayed == 2 and s.bytes > 0 for s in group.shadows.values())


def test_extend_settles_every_shadow_on_the_real_workspace_times(group, tmp_path):
    # A replayed file's age must not tell a shadow replayed late (a mutant) from one
    # replayed early (a control): every shadow takes the real workspace's times.
    log = _log(tmp_path, "mkdir d; wc -l < t.tsv > d/n.txt; cut -f1 t.tsv > only_here.txt")
    real = log.root
    (real / "d").mkdir()
    (real / "d" / "n.txt").write_text("40\n")
    os.utime(real / "d" / "n.txt", ns=(1_000_000_000, 1_000_000_000))
    os.utime(real / "d", ns=(2_000_000_000, 2_000_000_000))
    os.utime(real, ns=(3_000_000_000, 3_000_000_000))
    staged_mtime = os.stat(tmp_path / "t.tsv").st_mtime_ns
    with ThreadPoolExecutor(2) as pool:
        group.extend(log, LIMITS, pool, lambda: 60.0, lambda: False)
    for shadow in group.shadows.values():
        ws = shadow.workspace.path
        assert os.lstat(ws / "d" / "n.txt").st_mtime_ns == 1_000_000_000
        assert os.lstat(ws / "d").st_mtime_ns == 2_000_000_000
        assert os.lstat(ws / "only_here.txt").st_mtime_ns == 3_000_000_000  # no namesake
        assert os.lstat(ws).st_mtime_ns == 3_000_000_000
        assert os.lstat(ws / "t.tsv").st_mtime_ns == staged_mtime  # staged: left alone


def test_replay_that_ends_otherwise_breaks_a_control(group, tmp_path):
    log = _log(tmp_path, "sleep 30", status="ok")
    short = SandboxLimits(timeout_s=0.5, check_timeout_s=1)
    with ThreadPoolExecutor(2) as pool:
        group.extend(log, short, pool, lambda: 60.0, lambda: False)
    assert "ended 'timeout'" in group.state(1)


def test_extend_stops_between_commands_at_the_deadline(group, tmp_path):
    log = _log(tmp_path, "true")
    with ThreadPoolExecutor(2) as pool:
        group.extend(log, LIMITS, pool, lambda: 0.0, lambda: False)
    with pytest.raises(StrengthDeadline):
        group.state(1)
    assert all(s.replayed == 0 and not s.broken for s in group.shadows.values())


def test_twin_is_its_own_inode_and_shadow(group):
    label = next(s.variant.label for s in group.shadows.values() if not s.variant.control)
    twin = group.twin(label)
    original = group.shadows[label]
    a, b = (os.stat(s.workspace.path / "t.tsv") for s in (original, twin))
    assert a.st_ino != b.st_ino and a.st_nlink == b.st_nlink and group.twin(label) is twin


def test_close_removes_shadows_and_twin_copies(group):
    label = next(s.variant.label for s in group.shadows.values() if not s.variant.control)
    group.twin(label)
    paths = [s.workspace.path for s in (*group.shadows.values(), *group.twins.values())]
    group.close()
    assert not any(p.exists() for p in paths) and group.count == 0


# ----- issue 19: the disk budget kept while replays write -----

BUDGET = 8 << 20


@pytest.fixture
def area(sandbox, tmp_path):
    if sandbox.name == "local" or os.geteuid() != 0:
        pytest.skip("a capped area needs the bwrap backend and a root harness")
    source = tmp_path / "t.tsv"
    if not source.exists():
        source.write_text(TABLE)
        source.chmod(0o444)
    with CappedArea(sandbox, BUDGET, {"t.tsv": source}) as made:
        assert made.enforced
        yield made


def test_replay_writing_past_the_budget_breaks_every_shadow_host_disk_untouched(
        group, area, tmp_path):
    on_area = ShadowGroup(group.variants, area, {"t.tsv": tmp_path / "t.tsv"},
                          tmp_path / "scratch")
    try:
        host_dev = os.stat(tmp_path).st_dev
        log = _log(tmp_path, "head -c 64M /dev/zero > big; wc -l < t.tsv > n.txt")
        with ThreadPoolExecutor(2) as pool:
            on_area.extend(log, LIMITS, pool, lambda: 60.0, lambda: False)
        assert all(s.broken == OUT_OF_SPACE for s in on_area.shadows.values())
        assert OUT_OF_SPACE in on_area.state(1)  # a control broke: nothing earns here
        assert area.used_bytes() <= BUDGET
        assert all(os.stat(s.workspace.path).st_dev != host_dev
                   for s in on_area.shadows.values())
    finally:
        on_area.close()


def test_replay_within_the_budget_is_not_broken(group, area, tmp_path):
    on_area = ShadowGroup(group.variants, area, {"t.tsv": tmp_path / "t.tsv"},
                          tmp_path / "scratch")
    try:
        log = _log(tmp_path, "head -c 100K /dev/zero > small; wc -l < t.tsv > n.txt")
        with ThreadPoolExecutor(2) as pool:
            on_area.extend(log, LIMITS, pool, lambda: 60.0, lambda: False)
        assert on_area.state(1) == "" and not any(s.broken for s in on_area.shadows.values())
    finally:
        on_area.close()


def test_group_on_a_full_area_raises_budget_spent(group, area, tmp_path):
    filler = area.path / "filler"
    with pytest.raises(OSError, match="No space left"), open(filler, "wb") as out:
        while True:
            out.write(b"\0" * (1 << 20))
    assert area.spent()
    with pytest.raises(ShadowBudgetSpent, match="no room left"):
        ShadowGroup(group.variants, area, {"t.tsv": tmp_path / "t.tsv"}, tmp_path / "scratch")
    assert issubclass(ShadowBudgetSpent, StrengthDeadline)  # caught as one: fails closed


def _deep_shadow(tmp_path: Path, levels: int) -> Shadow:
    root = tmp_path / "shadow"
    root.joinpath(*["d"] * levels).mkdir(parents=True)
    (root / "out.txt").write_text("1")
    workspace = types.SimpleNamespace(path=root)
    return Shadow(variant=None, workspace=workspace, staged=frozenset())  # type: ignore[arg-type]


def test_walk_inodes_of_a_staged_tree_past_the_depth_bound_raises(tmp_path: Path):
    tmp_path.joinpath(*["d"] * MAX_DEPTH).mkdir(parents=True)
    with pytest.raises(SandboxError, match="levels deep"):
        walk_inodes(tmp_path)


def test_walk_inodes_inside_the_depth_bound_lists_every_entry(tmp_path: Path):
    tmp_path.joinpath(*["d"] * (MAX_DEPTH - 1)).mkdir(parents=True)
    assert len(walk_inodes(tmp_path)) == MAX_DEPTH - 1


def test_settle_of_a_replay_tree_past_the_depth_bound_breaks_the_shadow(tmp_path: Path):
    shadow = _deep_shadow(tmp_path, MAX_DEPTH)
    real = tmp_path / "real"
    real.mkdir()
    (real / "out.txt").write_text("1")
    os.utime(real / "out.txt", ns=(10**18, 10**18))
    shadow.settle(real)
    assert shadow.broken == UNWALKABLE
    assert os.stat(shadow.workspace.path / "out.txt").st_mtime_ns == 10**18


def test_settle_inside_the_depth_bound_keeps_the_shadow(tmp_path: Path):
    shadow = _deep_shadow(tmp_path, MAX_DEPTH - 1)
    shadow.settle(tmp_path)
    assert shadow.broken == ""


def test_measure_of_a_replay_tree_past_the_depth_bound_breaks_the_shadow(tmp_path: Path):
    shadow = _deep_shadow(tmp_path, MAX_DEPTH)
    shadow.measure()
    assert shadow.broken == UNWALKABLE and shadow.bytes > 0


# --- a replay whose sandbox could not start in the time the deadline left it ---


def _start_times_out(shadow_group: ShadowGroup, monkeypatch: pytest.MonkeyPatch) -> None:
    def late(command: str, *, timeout_s: float | None = None) -> ExecResult:
        raise SandboxStartTimeout("bwrap sandbox did not start within 0.3s", timeout_s or 0.0)
    for shadow in shadow_group.shadows.values():
        monkeypatch.setattr(shadow.workspace, "run", late)


def test_replay_start_cut_by_the_deadline_breaks_the_shadow_as_deadline(
        group, tmp_path, monkeypatch):
    # Under load, a node's deadline can leave less than bwrap needs to start: that is
    # the deadline passing (the check earns nothing), not a sandbox fault.
    _start_times_out(group, monkeypatch)
    log = _log(tmp_path, "true")
    with ThreadPoolExecutor(2) as pool:
        group.extend(log, LIMITS, pool, lambda: 0.3, lambda: False)
    with pytest.raises(StrengthDeadline):
        group.state(1)
    assert {(s.broken, s.cut) for s in group.shadows.values()} == {(CUT, True)}


def test_replay_start_timeout_with_the_full_timeout_is_a_sandbox_fault(
        group, tmp_path, monkeypatch):
    _start_times_out(group, monkeypatch)
    log = _log(tmp_path, "true")
    with ThreadPoolExecutor(2) as pool, pytest.raises(SandboxStartTimeout):
        group.extend(log, LIMITS, pool, lambda: 60.0, lambda: False)
