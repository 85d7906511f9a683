"""The data cache: where it lives, atomic read-only writes, safe under concurrency."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from vera_env.tasks import cache_dir
from vera_env.tasks.cache import CACHE_ENV_VAR, _publish, materialise

FILES = {"a.txt": b"alpha\n", "sub/b.gz": b"\x1f\x8bbeta"}


def test_cache_dir_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / "explicit"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv(CACHE_ENV_VAR)
    assert cache_dir() == tmp_path / "xdg" / "vera_env"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "vera_env"


def test_materialise_writes_read_only_files_and_no_leftovers(tmp_path: Path) -> None:
    folder = materialise("k", FILES, root=tmp_path)
    assert folder.parent == tmp_path and folder.name.startswith("k-")
    assert {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in folder.rglob("*") if p.is_file()} == FILES
    assert all(p.stat().st_mode & 0o777 == 0o444 for p in folder.rglob("*") if p.is_file())
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]


def test_materialise_reuses_same_contents_and_separates_different(tmp_path: Path) -> None:
    first = materialise("k", FILES, root=tmp_path)
    mtime = (first / "a.txt").stat().st_mtime_ns
    assert materialise("k", FILES, root=tmp_path) == first
    assert (first / "a.txt").stat().st_mtime_ns == mtime
    assert materialise("k", {**FILES, "a.txt": b"changed"}, root=tmp_path) != first


def test_materialise_repairs_a_damaged_folder(tmp_path: Path) -> None:
    folder = materialise("k", FILES, root=tmp_path)
    (folder / "a.txt").unlink()
    assert materialise("k", FILES, root=tmp_path) == folder
    assert (folder / "a.txt").read_bytes() == FILES["a.txt"]
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]


def test_a_folder_published_by_another_writer_meanwhile_is_never_moved_aside(
        tmp_path: Path) -> None:
    """The first look misses a folder that another writer renames into place just
    after; the second look must take it as it is, not repair it away."""
    folder = materialise("k", FILES, root=tmp_path)
    inode = folder.stat().st_ino
    looks: list[Path] = []

    def complete(path: Path) -> bool:
        looks.append(path)
        return len(looks) > 1  # not there yet at the first look, published at the next

    def fill(path: Path) -> None:
        raise AssertionError("a published folder was written again")

    assert _publish(tmp_path, folder.name, fill, complete) == folder
    assert folder.stat().st_ino == inode  # the same folder, not a replacement
    assert [p.name for p in tmp_path.iterdir()] == [folder.name]


def _generate(cache: str) -> str:
    import os

    os.environ[CACHE_ENV_VAR] = cache
    from vera_env.tasks.builtin import make_task

    return str(make_task("mtx.qc_cells.easy.s3").data_dir)


def test_concurrent_generation_of_one_id_yields_one_complete_folder(tmp_path: Path) -> None:
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        folders = pool.map(_generate, [str(tmp_path)] * 4, chunksize=1)
    assert len(set(folders)) == 1
    root = tmp_path / "builtin"
    assert [p.name for p in root.iterdir()] == [Path(folders[0]).name]  # no temp dirs left
    assert sorted(p.name for p in Path(folders[0]).iterdir()) == [
        "barcodes.tsv.gz", "genes.tsv.gz", "matrix.mtx.gz"]
