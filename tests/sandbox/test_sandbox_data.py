"""Staged data and checks under bwrap: shared inodes are never written, checks change nothing."""

from __future__ import annotations

import bz2
import gzip
import hashlib
import lzma
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import data_files, requires_bwrap, requires_root, snapshot

from vera_env.sandbox import BwrapSandbox, BwrapWorkspace

pytestmark = requires_bwrap


def digest(data: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in data.iterdir()}


@pytest.fixture
def ws(sandbox: BwrapSandbox, data_dir: Path) -> Iterator[BwrapWorkspace]:
    with sandbox.stage(data_files(data_dir)) as workspace:
        yield workspace


@requires_root
def test_bwrap_staged_file_chmod_and_append_refused(ws: BwrapWorkspace, data_dir: Path) -> None:
    before = digest(data_dir)
    chmod = ws.run("chmod u+w table.tsv")
    append = ws.run("echo C 9 >> table.tsv")
    assert chmod.exit_code != 0 and "Operation not permitted" in chmod.stderr
    assert append.exit_code != 0 and "Permission denied" in append.stderr
    assert digest(data_dir) == before


def test_bwrap_staged_file_sed_gunzip_rm_work_and_source_unchanged(
        ws: BwrapWorkspace, data_dir: Path) -> None:
    before = digest(data_dir)
    assert ws.run("sed -i s/A/Z/ table.tsv && cat table.tsv").stdout == (
        "gene\tcount\nZ\t3\nB\t5\n")
    assert ws.run("gunzip counts.txt.gz && cat counts.txt").stdout == "1\n2\n3\n"
    assert ws.run("rm notes.txt").exit_code == 0
    assert ws.listing() == ["counts.txt", "table.tsv"]
    assert digest(data_dir) == before
    assert (data_dir / "notes.txt").read_text() == "alpha\nbeta\n"


@requires_root
def test_bwrap_staged_compressed_files_decompress_in_place_via_shims(
        sandbox: BwrapSandbox, tmp_path: Path) -> None:
    data = tmp_path / "packed"
    data.mkdir()
    for name, module in (("a.gz", gzip), ("b.bz2", bz2), ("c.xz", lzma)):
        (data / name).write_bytes(module.compress(b"42\n"))
    (data / "plain.txt").write_text("plain\n")
    for path in data.iterdir():
        path.chmod(0o444)
    before = digest(data)
    with sandbox.stage(data_files(data)) as ws:
        assert ws.staged_by_link == 4
        inode = (ws.path / "a.gz").stat().st_ino
        assert ws.run("zcat a.gz; gzip -t a.gz && echo intact").stdout == "42\nintact\n"
        assert (ws.path / "a.gz").stat().st_ino == inode  # streaming made no copy
        result = ws.run("gunzip a.gz && bunzip2 b.bz2 && unxz c.xz && gzip plain.txt")
        assert result.exit_code == 0, result.as_tool_output()
        assert ws.listing() == ["a", "b", "c", "plain.txt.gz"]
        assert ws.run("cat a b c; zcat plain.txt.gz").stdout == "42\n42\n42\nplain\n"
    assert digest(data) == before


def test_bwrap_run_check_cannot_modify_delete_or_create(ws: BwrapWorkspace) -> None:
    ws.run("echo mine > own.txt && mkdir sub && echo x > sub/f")
    before = snapshot(ws.path)
    attempts = [
        "echo x >> own.txt", "rm table.tsv", "rm own.txt", "touch new.txt", "mkdir d2",
        "sed -i s/m/M/ own.txt", "mv own.txt moved.txt", "chmod 000 sub", "rm -rf sub",
        "gunzip counts.txt.gz",
    ]
    for command in attempts:
        result = ws.run_check(command)
        assert result.exit_code != 0, command
        # gunzip stops at the link check once its shim cannot make a private copy
        assert "Read-only file system" in result.stderr or "other link" in result.stderr, (
            command, result.stderr)
    assert snapshot(ws.path) == before


def test_bwrap_run_check_write_failure_reported_as_false_verdict(ws: BwrapWorkspace) -> None:
    result = ws.run_check("touch new.txt 2>/dev/null && echo True || echo False")
    assert result.stdout == "False\n"
    assert not (ws.path / "new.txt").exists()


def test_bwrap_run_check_can_use_private_tmp_and_read_data(ws: BwrapWorkspace) -> None:
    command = "zcat counts.txt.gz > /tmp/c && test $(wc -l < /tmp/c) -eq 3 && echo True"
    result = ws.run_check(command)
    assert (result.status, result.stdout) == ("ok", "True\n")


def test_bwrap_run_check_timeout_uses_check_limit(ws: BwrapWorkspace) -> None:
    result = ws.run_check("sleep 1007.5", timeout_s=0.3)
    assert result.status == "timeout" and result.duration_s < 2


def test_bwrap_run_workspace_writes_persist_between_commands(ws: BwrapWorkspace) -> None:
    ws.run("awk 'NR > 1 {s += $2} END {print s}' table.tsv > total.txt")
    assert ws.run("cat total.txt").stdout == "8\n"
    assert (ws.path / "total.txt").read_text() == "8\n"
    assert "total.txt" in ws.listing()
