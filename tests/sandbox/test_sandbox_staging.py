"""Staging: names that escape are refused; link where read-only-safe, copy otherwise."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sandbox_helpers import data_files, requires_bwrap, requires_root

from vera_env.errors import SandboxError
from vera_env.sandbox import BwrapSandbox
from vera_env.sandbox.staging import StagingPolicy, check_rel_name, stage_files


@pytest.mark.parametrize("name", ["../x", "/etc/passwd", "a/../../x", "", ".", "a\0b"])
def test_check_rel_name_escaping_or_empty_rejected(name: str) -> None:
    with pytest.raises(SandboxError, match=r"escapes the workspace|invalid file name"):
        check_rel_name(name)


def test_check_rel_name_nested_relative_accepted() -> None:
    assert check_rel_name("sub/dir/f.txt").parts == ("sub", "dir", "f.txt")


def test_stage_files_missing_source_raises_naming_it(tmp_path: Path) -> None:
    policy = StagingPolicy(sandbox_uid=61000, sandbox_gid=61000)
    with pytest.raises(SandboxError, match=r"'x\.txt'.*unreadable"):
        stage_files({"x.txt": tmp_path / "missing"}, tmp_path, policy)


def test_stage_files_directory_source_rejected(tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    policy = StagingPolicy(sandbox_uid=61000, sandbox_gid=61000)
    with pytest.raises(SandboxError, match="not a regular file"):
        stage_files({"d": tmp_path}, dest, policy)


def test_stage_files_name_clash_rejected(data_dir: Path, tmp_path: Path) -> None:
    dest = tmp_path / "ws"
    dest.mkdir()
    policy = StagingPolicy(sandbox_uid=61000, sandbox_gid=61000, link=False)
    files = {"a": data_dir / "notes.txt", "a/b": data_dir / "notes.txt"}
    with pytest.raises(SandboxError, match="staging 'a/b'"):
        stage_files(files, dest, policy)


def test_stage_files_other_writable_source_copied_not_linked(tmp_path: Path) -> None:
    source = tmp_path / "open.txt"
    source.write_text("x")
    source.chmod(0o666)
    dest = tmp_path / "ws"
    dest.mkdir()
    report = stage_files({"open.txt": source}, dest, StagingPolicy(61000, 61000))
    assert (report.staged_by_link, report.staged_by_copy) == (0, 1)
    assert os.stat(dest / "open.txt").st_ino != os.stat(source).st_ino


def test_stage_files_source_owned_by_sandbox_uid_copied(tmp_path: Path) -> None:
    source = tmp_path / "mine.txt"
    source.write_text("x")
    source.chmod(0o444)
    dest = tmp_path / "ws"
    dest.mkdir()
    policy = StagingPolicy(sandbox_uid=os.stat(source).st_uid, sandbox_gid=os.getgid())
    report = stage_files({"mine.txt": source}, dest, policy)
    assert report.staged_by_copy == 1
    assert (dest / "mine.txt").read_text() == "x"


@requires_bwrap
@requires_root
def test_bwrap_stage_readonly_source_hard_linked(data_dir: Path, sandbox: BwrapSandbox) -> None:
    with sandbox.stage(data_files(data_dir)) as ws:
        assert (ws.staged_by_link, ws.staged_by_copy) == (3, 0)
        assert os.stat(ws.path / "table.tsv").st_ino == os.stat(data_dir / "table.tsv").st_ino
        assert ws.listing() == ["counts.txt.gz", "notes.txt", "table.tsv"]


@requires_bwrap
@requires_root
def test_bwrap_stage_private_source_copied_once_into_cache(tmp_path: Path,
                                                           sandbox: BwrapSandbox) -> None:
    source = tmp_path / "secret.tsv"
    source.write_text("a\t1\n")
    source.chmod(0o600)  # not other-readable: a link would be unreadable inside
    first = sandbox.stage({"secret.tsv": source})
    second = sandbox.stage({"copy/secret.tsv": source})
    with first, second:
        assert first.staged_by_copy == 1 and first.staged_by_link == 0
        one, two = os.stat(first.path / "secret.tsv"), os.stat(second.path / "copy/secret.tsv")
        assert one.st_ino == two.st_ino != os.stat(source).st_ino  # one cached copy
        assert (one.st_uid, one.st_mode & 0o777) == (0, 0o444)
        assert first.run("cat secret.tsv").stdout == "a\t1\n"


@requires_bwrap
@pytest.mark.parametrize("name", ["../escape.txt", "/abs.txt"])
def test_bwrap_stage_escaping_name_raises_and_leaves_no_dir(
        name: str, data_dir: Path, sandbox: BwrapSandbox) -> None:
    before = set(sandbox.root.iterdir())
    with pytest.raises(SandboxError, match="escapes the workspace"):
        sandbox.stage({"ok.txt": data_dir / "notes.txt", name: data_dir / "notes.txt"})
    assert set(sandbox.root.iterdir()) == before
