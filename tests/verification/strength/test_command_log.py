"""The command log: which commands changed the workspace, and where their files came from."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from vera_env.sandbox import ExecResult
from vera_env.sandbox.disk import MAX_DEPTH
from vera_env.verification.strength.command_log import CommandLog, walk_tree
from vera_env.verification.strength.outcome import StrengthDeadline

OK = ExecResult("", "", 0, False, 0.5)


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "work"
    root.mkdir()
    (root / "data.tsv").write_text("a\t1\n")
    (root / "calls.vcf.gz").write_text("x")
    return root


def test_record_logs_only_commands_that_changed_files(tmp_path: Path):
    root = _workspace(tmp_path)
    log = CommandLog(root, ["data.tsv", "calls.vcf.gz"])
    assert log.record("cat data.tsv", OK) is None
    (root / "tmp.txt").write_text("1")
    (root / "tmp.txt").unlink()  # a temp file made and removed is no change
    assert log.record("sort data.tsv > tmp.txt; rm tmp.txt", OK) is None
    (root / "n.txt").write_text("3\n")
    entry = log.record("awk 'END { print NR }' data.tsv > n.txt", OK)
    assert entry is not None and entry.changed == {"n.txt"} and not entry.changed_unknown
    assert entry.mentions == ("data.tsv", "n.txt") and entry.duration_s == 0.5
    assert (len(log), log.unchanged, log.derivation_s) == (1, 2, 0.5)


def test_record_sees_a_rewrite_of_the_same_size_and_a_chmod(tmp_path: Path):
    root = _workspace(tmp_path)
    log = CommandLog(root)
    (root / "data.tsv").write_text("b\t2\n")
    assert log.record("sed -i s/a/b/ data.tsv", OK).changed == {"data.tsv"}
    os.chmod(root / "data.tsv", 0o600)
    assert log.record("chmod 600 data.tsv", OK) is not None


def test_record_a_removed_task_file_is_still_mentioned(tmp_path: Path):
    root = _workspace(tmp_path)
    log = CommandLog(root, ["calls.vcf.gz"])
    (root / "calls.vcf.gz").unlink()
    (root / "calls.vcf").write_text("y")
    entry = log.record("gunzip calls.vcf.gz", OK)
    assert entry.changed == {"calls.vcf.gz", "calls.vcf"} and "calls.vcf.gz" in entry.mentions
    assert log.sources_behind(["calls.vcf"], ["calls.vcf.gz"]) == ["calls.vcf.gz"]


def test_sources_behind_follows_chains_and_ignores_unrelated_commands(tmp_path: Path):
    root = _workspace(tmp_path)
    log = CommandLog(root, ["data.tsv", "calls.vcf.gz"])
    steps = [("gt.txt", "zcat calls.vcf.gz | cut -f10 > gt.txt"),
             ("het.txt", "grep -c 0/1 gt.txt > het.txt"),
             ("a.txt", "echo 42 > a.txt")]
    for name, command in steps:
        (root / name).write_text(command)
        log.record(command, OK)
    assert log.sources_behind(["het.txt"], ["data.tsv", "calls.vcf.gz"]) == ["calls.vcf.gz"]
    assert log.sources_behind(["a.txt"], ["data.tsv", "calls.vcf.gz"]) == []
    assert log.sources_behind(["data.tsv"], ["data.tsv"]) == ["data.tsv"]


def test_sources_behind_through_a_glob_and_a_script(tmp_path: Path):
    root = _workspace(tmp_path)
    log = CommandLog(root, ["data.tsv"])
    (root / "s.py").write_text("print(open('data.tsv').read())\n")
    (root / "out.txt").write_text("x")
    log.record("python3 s.py > out.txt", OK)
    (root / "all.txt").write_text("x")
    log.record("cat *.tsv > all.txt", OK)
    assert log.sources_behind(["out.txt"], ["data.tsv"]) == ["data.tsv"]
    assert log.sources_behind(["all.txt"], ["data.tsv"]) == ["data.tsv"]


def test_walk_tree_too_deep_a_tree_makes_every_command_a_change(tmp_path: Path):
    root = _workspace(tmp_path)
    os.makedirs(root / "/".join(["d"] * 300))
    log = CommandLog(root)
    assert not walk_tree(root).complete
    entry = log.record("true", OK)
    assert entry is not None and entry.changed_unknown


def test_walk_tree_counts_each_inode_once_and_skips_staged_ones(tmp_path: Path):
    root = _workspace(tmp_path)
    (root / "big").write_bytes(b"x" * 100_000)
    os.link(root / "big", root / "big2")
    staged = os.stat(root / "data.tsv")
    tree = walk_tree(root, frozenset({(staged.st_dev, staged.st_ino)}))
    assert 100_000 <= tree.bytes < 100_000 + 4 * 8192


# ----- issue 19: the scan has a budget, provenance is looked up -----

def test_record_scan_out_of_budget_mentions_every_task_file(tmp_path: Path):
    root = _workspace(tmp_path)
    log = CommandLog(root, ["data.tsv", "calls.vcf.gz"], scan_budget_s=1e-9)
    (root / "s.py").write_text("print(open('data.tsv').read())\n")
    (root / "out.txt").write_text("x")
    entry = log.record("python3 s.py > out.txt", OK)
    assert entry is not None and not entry.scanned
    assert entry.mentions == ("calls.vcf.gz", "data.tsv")
    assert log.sources_behind(["out.txt"], ["data.tsv", "calls.vcf.gz"]) == [
        "calls.vcf.gz", "data.tsv"]


def test_record_scan_budget_must_be_positive(tmp_path: Path):
    with pytest.raises(ValueError, match="scan_budget_s must be > 0"):
        CommandLog(_workspace(tmp_path), scan_budget_s=0)


def test_record_odd_names_in_the_workspace_and_a_script_scanned_in_budget(tmp_path: Path):
    root = _workspace(tmp_path)
    for i in range(2000):
        (root / f"sample {i} 'x'.txt").write_text("")
    log = CommandLog(root, ["data.tsv"])
    (root / "s.py").write_text("# " + "word " * 200_000 + "\nopen(\"sample 7 'x'.txt\")\n")
    (root / "out.txt").write_text("x")
    entry = log.record("python3 s.py > out.txt", OK)
    assert entry.scanned and entry.mentions == ("s.py", "out.txt", "sample 7 'x'.txt")


def test_sources_behind_deadline_passed_raises_strength_deadline(tmp_path: Path):
    root = _workspace(tmp_path)
    log = CommandLog(root, ["data.tsv"])
    (root / "n.txt").write_text("1")
    log.record("wc -l data.tsv > n.txt", OK)
    with pytest.raises(StrengthDeadline):
        log.sources_behind(["n.txt"], ["data.tsv"], time_left=lambda: 0.0)


def test_sources_behind_a_command_that_may_have_written_anything_nearest_order(tmp_path):
    root = _workspace(tmp_path)
    log = CommandLog(root, ["data.tsv", "calls.vcf.gz"])
    (root / "a.txt").write_text("1")
    log.record("cut -f1 data.tsv > a.txt", OK)
    os.makedirs(root / "/".join(["d"] * 300))  # the walk cannot see everything now
    log.record("zcat calls.vcf.gz > /dev/null; mkdir -p d", OK)
    assert log.entries[-1].changed_unknown
    assert log.sources_behind(["a.txt"], ["data.tsv", "calls.vcf.gz"]) == [
        "calls.vcf.gz", "data.tsv"]


def test_walk_tree_uses_the_sandbox_walkers_depth_bound(tmp_path: Path):
    inside, past = tmp_path / "inside", tmp_path / "past"
    inside.joinpath(*["d"] * (MAX_DEPTH - 1)).mkdir(parents=True)
    past.joinpath(*["d"] * MAX_DEPTH).mkdir(parents=True)
    assert walk_tree(inside).complete
    assert not walk_tree(past).complete
