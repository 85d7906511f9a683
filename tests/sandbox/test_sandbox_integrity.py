"""What strength testing and the disk limit need from the sandbox: overlays, constant
entropy in checks, and a workspace-size limit that stops a disk filler."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import FAST, data_files, requires_bwrap, snapshot

from vera_env.sandbox import (
    BwrapSandbox,
    BwrapWorkspace,
    ExecResult,
    LocalSandbox,
    SandboxLimits,
)
from vera_env.sandbox.disk import measure
from vera_env.sandbox.entropy import seccomp_program

SMALL_DISK = SandboxLimits(timeout_s=20, max_workspace_mb=8, max_file_mb=64, disk_poll_s=0.05)


@pytest.fixture
def ws(sandbox: BwrapSandbox, data_dir: Path) -> Iterator[BwrapWorkspace]:
    with sandbox.stage(data_files(data_dir)) as workspace:
        yield workspace


def _overlay_file(ws, text: str) -> Path:
    path = ws.scratch_dir("t-") / "layer"
    path.write_text(text)
    path.chmod(0o444)
    return path


@requires_bwrap
def test_bwrap_run_check_overlay_shows_file_in_place_and_changes_nothing(ws) -> None:
    before = snapshot(ws.path)
    layer = _overlay_file(ws, "gene\tcount\nZ\t9\n")
    result = ws.run_check("cat table.tsv; echo x > table.tsv || echo refused",
                          overlay={"table.tsv": layer})
    assert result.stdout == "gene\tcount\nZ\t9\nrefused\n"
    assert ws.run_check("cat table.tsv").stdout == "gene\tcount\nA\t3\nB\t5\n"
    assert snapshot(ws.path) == before


def test_local_run_check_overlay_replaces_the_copy_only(data_dir: Path) -> None:
    with pytest.warns(UserWarning):
        box = LocalSandbox(FAST)
    with box.stage(data_files(data_dir)) as ws:
        layer = _overlay_file(ws, "mutant\n")
        assert ws.run_check("cat notes.txt", overlay={"notes.txt": layer}).stdout == "mutant\n"
        assert (ws.path / "notes.txt").read_text() == "alpha\nbeta\n"


@requires_bwrap
def test_bwrap_commands_and_checks_see_the_same_constant_entropy(ws) -> None:
    probe = ("python3 -c 'import random, os; print(random.random(), os.urandom(4).hex())'; "
             "head -c 4 /dev/urandom | od -An -tx1; echo $RANDOM; "
             "cat /proc/sys/kernel/random/uuid")
    seen = {ws.run_check(probe).stdout for _ in range(2)} | {ws.run(probe).stdout
                                                             for _ in range(2)}
    assert len(seen) == 1 and " 00 00 00 00" in seen.pop()


@requires_bwrap
def test_bwrap_shuf_and_sort_random_shuffle_reproducibly_in_commands_and_checks(ws) -> None:
    if seccomp_program() is None:
        pytest.skip("no seccomp filter for this architecture")
    assert "Function not implemented" in ws.run("python3 -c 'import os; os.getrandom(1)'").stderr
    shuffle = "seq 1 50 | shuf | head -5 | tr '\\n' ' '; printf 'a\\nb\\nc\\nd\\n' | sort -R"
    outputs = {ws.run(shuffle).stdout, ws.run_check(shuffle).stdout}
    assert len(outputs) == 1
    [out] = outputs
    assert out.split()[:5] != ["1", "2", "3", "4", "5"] and sorted(out.split()[5:]) == list("abcd")


@requires_bwrap
def test_bwrap_a_failed_open_reports_its_own_reason_not_the_denied_getrandom(ws) -> None:
    """glibc 2.36's malloc clobbered errno with getrandom's ENOSYS at a process's first
    allocation: gzip printed "Function not implemented" for a missing file."""
    if seccomp_program() is None:
        pytest.skip("no seccomp filter for this architecture")
    for command in ("zcat missing.gz", "gunzip missing.gz"):
        for result in (ws.run(command), ws.run_check(command)):
            assert result.exit_code != 0
            assert "missing.gz: No such file or directory" in result.stderr, result.stderr
    key = ws.run("python3 -c 'import os; print(len(os.getrandom(8, os.GRND_NONBLOCK)))'")
    assert key.stdout == "0\n"  # malloc's request: no bytes, no error, nothing random
    other = ws.run_check("python3 -c 'import os; os.getrandom(8)'")
    assert "Function not implemented" in other.stderr


@requires_bwrap
def test_bwrap_disk_filler_stopped_with_disk_limit_then_rm_works(data_dir: Path) -> None:
    with BwrapSandbox(SMALL_DISK) as box, box.stage(data_files(data_dir)) as ws:
        filler = ws.run("for i in $(seq 100); do head -c 1048576 /dev/zero > f$i; done; "
                        "echo finished")
        assert filler.status == "disk_limit" and "finished" not in filler.stdout
        assert "[disk limit:" in filler.as_tool_output()
        assert measure(ws.path).bytes < 40 * 2**20
        cleanup = ws.run("rm -f f*; echo cleaned")
        assert (cleanup.status, cleanup.stdout) == ("ok", "cleaned\n")
        assert ws.run("head -c 1048576 /dev/zero > one; echo ok").stdout == "ok\n"


@requires_bwrap
def test_bwrap_fast_writer_over_limit_flagged_after_it_ends(data_dir: Path) -> None:
    limits = SMALL_DISK.model_copy(update={"disk_poll_s": 30})
    with BwrapSandbox(limits) as box, box.stage(data_files(data_dir)) as ws:
        result = ws.run("head -c 20000000 /dev/zero > big; echo done")
        assert result.status == "disk_limit" and result.stdout == "done\n"


@requires_bwrap
def test_bwrap_empty_files_count_against_the_limit(data_dir: Path) -> None:
    limits = SMALL_DISK.model_copy(update={"max_workspace_mb": 1})
    with BwrapSandbox(limits) as box, box.stage(data_files(data_dir)) as ws:
        assert ws.run("mkdir d && cd d && seq 1000 | xargs touch").status == "disk_limit"


def test_usage_excludes_staged_inodes_and_counts_links_once(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 100_000)
    os.link(tmp_path / "a", tmp_path / "b")
    st = os.stat(tmp_path / "a")
    one = measure(tmp_path).bytes
    assert 100_000 <= one < 120_000
    assert measure(tmp_path, frozenset({(st.st_dev, st.st_ino)})).bytes < 10_000


def test_exec_result_disk_limit_note_tells_the_fix() -> None:
    result = ExecResult("", "", 137, False, 1.0, status="disk_limit")
    assert "Delete files" in result.as_tool_output()
