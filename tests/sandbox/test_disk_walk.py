"""The one filesystem walker: one depth bound, and what it cannot see is marked."""

from __future__ import annotations

import os
from contextlib import closing
from pathlib import Path

from vera_env.sandbox.disk import MAX_DEPTH, walk


def _nest(root: Path, levels: int) -> Path:
    deep = root.joinpath(*["d"] * levels)
    deep.mkdir(parents=True)
    return deep


def test_walk_nested_one_level_inside_the_bound_sees_everything(tmp_path: Path):
    _nest(tmp_path, MAX_DEPTH - 1)
    found = list(walk(tmp_path))
    assert all(st is not None for _, st in found)
    assert len(found) == MAX_DEPTH - 1


def test_walk_nested_to_the_bound_marks_the_directory_it_cannot_enter(tmp_path: Path):
    (_nest(tmp_path, MAX_DEPTH) / "hidden").write_text("x")
    found = list(walk(tmp_path))
    blind = [path for path, st in found if st is None]
    assert blind == ["/".join(["d"] * MAX_DEPTH)]
    assert not any(path.endswith("hidden") for path, _ in found)


def test_walk_sorted_yields_relative_paths_in_name_order(tmp_path: Path):
    for name in ("b", "a", "c"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "f").write_text(name)
    paths = [path for path, _ in walk(tmp_path, sort=True)]
    assert paths == ["a", "a/f", "b", "b/f", "c", "c/f"]


def test_walk_missing_root_yields_nothing(tmp_path: Path):
    assert list(walk(tmp_path / "gone")) == []


def test_walk_root_that_cannot_be_opened_is_marked_blind(tmp_path: Path):
    assert list(walk(tmp_path / ("x" * 300))) == [("", None)]  # ENAMETOOLONG


def test_walk_never_follows_a_link(tmp_path: Path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("x")
    root = tmp_path / "root"
    root.mkdir()
    (root / "link").symlink_to(outside)
    assert [path for path, _ in walk(root)] == ["link"]


def test_walk_stopped_early_closes_every_descriptor(tmp_path: Path):
    _nest(tmp_path, 20)
    before = len(os.listdir("/proc/self/fd"))
    with closing(walk(tmp_path)) as found:
        for i, _ in enumerate(found):
            if i == 10:
                assert len(os.listdir("/proc/self/fd")) > before
                break
    assert len(os.listdir("/proc/self/fd")) == before
