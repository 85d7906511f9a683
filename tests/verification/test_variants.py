"""One builder, one pass: controls and mutants of a task file differ only in content."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from vera_env.verification.variants import build_variants, copy_variant

TABLE = "".join(f"{i}\tg{i % 3}\t{i * 7 % 13}\n" for i in range(300)).encode()
MTIME_NS = 1_600_000_000_123_456_789


def _build(tmp_path: Path, name: str, raw: bytes, **kw):
    source = tmp_path / "source"
    source.write_bytes(raw)
    out = tmp_path / "variants"
    out.mkdir(exist_ok=True)
    return build_variants(name, source, out, mutants=kw.pop("mutants", 4),
                          controls=kw.pop("controls", 2), seed=0,
                          max_bytes=kw.pop("max_bytes", 1 << 20), budget_s=10,
                          mtime_ns=MTIME_NS, mode=0o444)


def test_build_variants_share_mode_and_mtime_and_are_fresh_inodes(tmp_path):
    built = _build(tmp_path, "t.tsv", TABLE)
    everything = [*built.controls, *built.mutants]
    stats = [os.stat(v.path) for v in everything]
    assert len(everything) == 6 and len({s.st_ino for s in stats}) == 6
    assert {(s.st_mtime_ns, s.st_mode & 0o777, s.st_uid, s.st_nlink) for s in stats} == {
        (MTIME_NS, 0o444, os.getuid(), 1)}
    assert [v.label for v in built.controls] == ["t.tsv:control#0", "t.tsv:control#1"]
    assert all(v.path.read_bytes() == TABLE for v in built.controls)
    assert all(v.path.read_bytes() != TABLE for v in built.mutants)


def test_build_variants_controls_of_a_gz_are_reencoded_like_mutants(tmp_path):
    original = gzip.compress(TABLE, compresslevel=9, mtime=12345)
    built = _build(tmp_path, "t.tsv.gz", original)
    control = built.controls[0].path.read_bytes()
    assert control != original and gzip.decompress(control) == TABLE
    # The issue-11 detector: recompress and compare. It now says the same on every variant.
    same = [gzip.compress(gzip.decompress(b), 1, mtime=0) == b
            for b in (v.path.read_bytes() for v in (*built.controls, *built.mutants))]
    assert same == [True] * 6
    headers = {v.path.read_bytes()[:10] for v in (*built.controls, *built.mutants)}
    assert len(headers) == 1


def test_build_variants_file_over_the_window_is_windowed_for_every_variant(tmp_path):
    built = _build(tmp_path, "t.tsv", TABLE, max_bytes=500)
    assert built.windowed
    assert all(len(v.path.read_bytes()) <= 600 for v in (*built.controls, *built.mutants))


def test_build_variants_empty_file_has_controls_but_no_mutants(tmp_path):
    built = _build(tmp_path, "e.txt", b"")
    assert built.mutants == () and len(built.controls) == 2


def test_copy_variant_same_bytes_mode_mtime_new_inode(tmp_path):
    built = _build(tmp_path, "t.tsv", TABLE)
    mutant = built.mutants[0]
    copy = copy_variant(mutant, tmp_path / "variants")
    a, b = os.stat(mutant.path), os.stat(copy)
    assert copy.read_bytes() == mutant.path.read_bytes() and a.st_ino != b.st_ino
    assert (a.st_mtime_ns, a.st_mode) == (b.st_mtime_ns, b.st_mode)
