"""One builder, one pass: controls and mutants of a task file differ only in content."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

from vera_env.verification.strength.mutants import DRAWS, RESERVE, draw_of, kind_of, mutant_kinds
from vera_env.verification.strength.reference import Reference
from vera_env.verification.strength.task import StrengthTask
from vera_env.verification.strength.variants import (
    Blob,
    Settings,
    _control_reserves,
    build_variants,
    classify,
    clear_cache,
    copy_variant,
    write_variants,
)

TABLE = "".join(f"{i}\tg{i % 3}\t{i * 7 % 13}\n" for i in range(300)).encode()
MTIME_NS = 1_600_000_000_123_456_789


def _build(tmp_path: Path, name: str, raw: bytes, **kw):
    source = tmp_path / "source"
    source.write_bytes(raw)
    out = tmp_path / "variants"
    out.mkdir(exist_ok=True)
    settings = Settings(kw.pop("mutants", 4), kw.pop("controls", 4), 0,
                        kw.pop("max_bytes", 1 << 20))
    return build_variants(name, StrengthTask({name: source}), settings, out, budget_s=10,
                          stamp=(MTIME_NS, 0o444))


def test_build_variants_share_mode_and_mtime_and_are_fresh_inodes(tmp_path):
    built = _build(tmp_path, "t.tsv", TABLE)
    everything = [*built.controls, *built.mutants]
    stats = [os.stat(v.path) for v in everything]
    assert len(everything) == 8 and len({s.st_ino for s in stats}) == 8
    assert {(s.st_mtime_ns, s.st_mode & 0o777, s.st_uid, s.st_nlink) for s in stats} == {
        (MTIME_NS, 0o444, os.getuid(), 1)}
    # No reference and no format-level transform for plain text: identity copies.
    assert [v.label for v in built.controls] == [f"t.tsv:copy#{i}" for i in range(4)]
    assert not built.classified
    assert all(v.path.read_bytes() == TABLE for v in built.controls)
    assert all(v.path.read_bytes() != TABLE for v in built.mutants)


def test_build_variants_recompress_control_of_a_gz_has_other_bytes_same_content(tmp_path):
    original = gzip.compress(TABLE, compresslevel=9, mtime=12345)
    built = _build(tmp_path, "t.tsv.gz", original)
    recompressed = [v for v in built.controls if ":recompress#" in v.label]
    plain = [v for v in (*built.controls, *built.mutants) if v not in recompressed]
    assert len(recompressed) == 1 and plain
    data = recompressed[0].path.read_bytes()
    assert gzip.decompress(data) == TABLE and data != original
    assert all(v.path.read_bytes() != data for v in plain)
    # The issue-11 detector (recompress at level 1 and compare) now fails a control.
    same = {gzip.compress(gzip.decompress(v.path.read_bytes()), 1, mtime=0)
            == v.path.read_bytes() for v in built.controls}
    assert same == {True, False}


def _mean_of_kept(contents):
    rows = [line.split(b"\t") for line in contents["m.tsv"].splitlines()[1:]]
    values = [int(r[1]) for r in rows if r[1] != b"-999"]
    if not values:
        raise ValueError("no values")
    return f"{sum(values) / len(values):.3f}"


MEAN_TABLE = b"id\tv\n" + b"".join(
    b"%d\t%d\n" % (i, -999 if i % 5 == 0 else i * 3) for i in range(60))


def _classified(tmp_path, reference, **kw):
    source = tmp_path / "m.tsv"
    if not source.exists():  # rewriting it would change its mtime, so its cache key
        source.write_bytes(MEAN_TABLE)
    task = StrengthTask({"m.tsv": source}, reference, lambda a, b: a == b,
                        kw.pop("cache_key", ""))
    settings = Settings(kw.pop("mutants", 4), kw.pop("controls", 4), 0, 1 << 20)
    return classify("m.tsv", task, settings, budget_s=10,
                    contents=lambda: {"m.tsv": MEAN_TABLE}, **kw)


def test_classify_controls_keep_the_reference_answer_and_mutants_change_it(tmp_path):
    reference = Reference(_mean_of_kept, preserving={"m.tsv": ("shuffle_records",
                                                               "drop_irrelevant")},
                          irrelevant={"m.tsv": lambda r: r.split(b"\t")[1] == b"-999\n"})
    built = _classified(tmp_path, reference)
    base = _mean_of_kept({"m.tsv": MEAN_TABLE})
    assert built.classified and len(built.controls) == 4
    assert len(built.mutants) == 4 * DRAWS and len({kind_of(b.label) for b in built.mutants}) == 4
    kinds = {b.label.split(":")[1].split("#")[0] for b in built.controls}
    assert kinds == {"shuffle_records", "drop_irrelevant", "rewrites"}  # rewrites probed
    assert all(_mean_of_kept({"m.tsv": b.data}) == base for b in built.controls)
    assert all(b.data != MEAN_TABLE for b in built.controls)
    for blob in built.mutants:
        try:
            assert _mean_of_kept({"m.tsv": blob.data}) != base
        except ValueError:
            raise AssertionError(f"{blob.label} cannot be solved yet was kept") from None


def test_classify_a_declared_transform_that_changes_the_answer_is_refuted(tmp_path):
    def first_rows_mean(contents):  # order matters: shuffling changes the answer
        return _mean_of_kept({"m.tsv": b"\n".join(contents["m.tsv"].splitlines()[:12])})
    reference = Reference(first_rows_mean, preserving={"m.tsv": ("shuffle_records",)})
    built = _classified(tmp_path, reference)
    assert built.refuted and all("shuffle_records" in label for label in built.refuted)
    assert not any(":shuffle_records#" in b.label for b in built.controls)


def test_classify_solver_failing_on_the_unvaried_files_falls_back_unclassified(tmp_path):
    def broken(contents):
        raise ValueError("cannot read")
    built = _classified(tmp_path, Reference(broken))
    assert not built.classified and "could not solve" in built.note and built.mutants


def test_classify_caches_per_task_and_solves_once(tmp_path):
    calls = []

    def counting(contents):
        calls.append(1)
        return _mean_of_kept(contents)
    reference = Reference(counting, preserving={"m.tsv": ("shuffle_records",)})
    clear_cache()
    first = _classified(tmp_path, reference, cache_key="task-a")
    n = len(calls)
    assert _classified(tmp_path, reference, cache_key="task-a") is first and len(calls) == n
    assert _classified(tmp_path, reference, cache_key="task-b") is not first
    clear_cache()


def test_write_variants_order_is_secret_not_fixed_by_the_seed(tmp_path):
    built = _classified(tmp_path, Reference(_mean_of_kept,
                                            preserving={"m.tsv": ("shuffle_records",)}))
    orders = set()
    for i in range(12):
        out = tmp_path / f"w{i}"
        out.mkdir()
        written = write_variants(built, out, mtime_ns=MTIME_NS)
        variants = [*written.controls, *written.mutants]
        orders.add(tuple(v.label for v in sorted(variants, key=lambda v: os.stat(v.path).st_ino)))
    assert len(orders) > 1


def test_build_variants_file_over_the_window_is_windowed_for_every_variant(tmp_path):
    built = _build(tmp_path, "t.tsv", TABLE, max_bytes=500)
    assert built.windowed
    assert all(len(v.path.read_bytes()) <= 600 for v in (*built.controls, *built.mutants))


def test_build_variants_empty_file_has_controls_but_no_mutants(tmp_path):
    built = _build(tmp_path, "e.txt", b"")
    assert built.mutants == () and len(built.controls) == 4


def test_copy_variant_same_bytes_mode_mtime_new_inode(tmp_path):
    built = _build(tmp_path, "t.tsv", TABLE)
    mutant = built.mutants[0]
    copy = copy_variant(mutant, tmp_path / "variants")
    a, b = os.stat(mutant.path), os.stat(copy)
    assert copy.read_bytes() == mutant.path.read_bytes() and a.st_ino != b.st_ino
    assert (a.st_mtime_ns, a.st_mode) == (b.st_mtime_ns, b.st_mode)


def test_classify_family_controls_are_tried_first_and_classified(tmp_path):
    def renamed_ids(content, rng):  # ids are never asked about: the mean is kept
        lines = content.split(b"\n")
        return b"\n".join([lines[0]] + [b"x" + line for line in lines[1:] if line]) + b"\n"

    def breaks_values(content, rng):  # claims to keep the answer but does not
        return content.replace(b"\t3\n", b"\t4\n")
    reference = Reference(_mean_of_kept,
                          controls={"m.tsv": (renamed_ids, breaks_values)})
    built = _classified(tmp_path, reference, controls=2)
    assert built.controls[0].label == "m.tsv:control0#0"
    assert any("control1" in label for label in built.refuted)


def _raise_first(content, rng):
    """An aimed edit with one possible outcome: the first value raised to 9000."""
    lines = content.splitlines(keepends=True)
    fields = lines[1].split(b"\t")
    return b"".join([lines[0], fields[0] + b"\t9000\n", *lines[2:]])


def test_classify_a_single_outcome_aimed_kind_gets_a_disguised_second_draw(tmp_path):
    # One aimed outcome drawn once tested nothing about a check's consistency: a pin
    # gated on a hash of what it reads chose its verdict there by a coin. The second
    # draw is the mutant with the file's answer-preserving edits on top: the mean (what
    # a fact reads) is the mutant's again, the bytes (what a hash reads) are not.
    reference = Reference(_mean_of_kept, preserving={"m.tsv": ("shuffle_records",)},
                          mutators={"m.tsv": (_raise_first,)})
    built = _classified(tmp_path, reference, cache_key="")
    aimed = [b for b in built.mutants if kind_of(b.label) == "aimed0"]
    assert [b.label for b in aimed] == ["m.tsv:aimed0#0", "m.tsv:aimed0#1"]
    first, disguised = (b.data for b in aimed)
    assert first == _raise_first(MEAN_TABLE, None) and disguised != first
    assert (_mean_of_kept({"m.tsv": disguised}) == _mean_of_kept({"m.tsv": first})
            != _mean_of_kept({"m.tsv": MEAN_TABLE}))


def test_classify_a_single_outcome_kind_no_edit_keeps_stays_one_draw(tmp_path):
    def order_matters(contents):  # every re-ordering or rewrite moves this answer
        return contents["m.tsv"].decode()
    reference = Reference(order_matters, preserving={"m.tsv": ()}, rewriting={"m.tsv": ()},
                          mutators={"m.tsv": (_raise_first,)})
    built = _classified(tmp_path, reference, cache_key="")
    assert [b.label for b in built.mutants if kind_of(b.label) == "aimed0"] == ["m.tsv:aimed0#0"]


def test_classify_keeps_reserve_draws_of_each_kind_for_confirmations(tmp_path):
    """Each kind keeps further draws, after and apart from the ones a check is shown:
    mutants (the answer is not the file's), those whose answer is also none shown for
    the kind first, none of them among the shown mutants."""
    reference = Reference(_mean_of_kept, preserving={"m.tsv": ("shuffle_records",)},
                          mutators={"m.tsv": (_raise_first,)})
    built = _classified(tmp_path, reference, cache_key="")
    base = _mean_of_kept({"m.tsv": MEAN_TABLE})
    shown = {b.label for b in built.mutants}
    assert built.reserves and not shown & {b.label for b in built.reserves}
    kinds = {kind_of(b.label) for b in built.mutants}
    numeric: list[bool] = []
    for kind in kinds - {"aimed0"}:  # a single-outcome edit has no further draw
        drawn = [built.reserve_for(kind, k) for k in range(RESERVE)]
        kept = [b for b in drawn if b is not None]
        assert kept, kind
        assert [int(b.label.rpartition("#")[2]) >= DRAWS for b in kept] == [True] * len(kept)
        answers = [_mean_of_kept({"m.tsv": b.data}) for b in kept]
        seen = {_mean_of_kept({"m.tsv": b.data}) for b in built.mutants if kind_of(b.label) == kind}
        assert base not in answers
        new = [a not in seen and a not in answers[:i] for i, a in enumerate(answers)]
        assert new == sorted(new, reverse=True), (kind, answers)  # unseen values first
        assert drawn[len(kept):] == [None] * (RESERVE - len(kept))  # then none
        numeric.append(new[0])
    assert all(numeric)  # a mean moves to a new value on a further draw of every kind
    # A single-outcome edit has no further draw of its own; its reserves are further
    # disguises (the edit under other answer-preserving edits): the mutant's answer,
    # contents new.
    [mutant, disguise] = [b for b in built.mutants if kind_of(b.label) == "aimed0"]
    again = [b for k in range(RESERVE) if (b := built.reserve_for("aimed0", k)) is not None]
    assert again
    moved = _mean_of_kept({"m.tsv": mutant.data})
    assert {_mean_of_kept({"m.tsv": b.data}) for b in again} == {moved}
    contents = [b.data for b in again]
    assert len(set(contents)) == len(contents) and not {mutant.data, disguise.data} & set(contents)
    assert built.reserve_for("no_such_kind", 0) is None


def test_classify_keeps_reserve_controls_of_the_shown_kinds(tmp_path):
    """Confirmations re-run a control a check was not shown: further draws of the
    content-changing kinds it was shown, each keeping the answer, none of them shown."""
    reference = Reference(_mean_of_kept, preserving={"m.tsv": ("shuffle_records",)},
                          mutators={"m.tsv": (_raise_first,)})
    built = _classified(tmp_path, reference, cache_key="")
    base = _mean_of_kept({"m.tsv": MEAN_TABLE})
    drawn = [built.reserve_control(k) for k in range(2 * RESERVE + 1)]
    kept = [b for b in drawn if b is not None]
    assert kept and drawn[-1] is None
    shown = {b.label for b in built.controls}
    kinds = {b.label.rpartition("#")[0] for b in built.controls if b.data != MEAN_TABLE}
    assert "m.tsv:rewrites" in kinds  # a rewrite is shown: its further draws are reserves
    for blob in kept:
        assert blob.control and blob.label not in shown
        assert blob.label.rpartition("#")[0] in kinds
        assert blob.data != MEAN_TABLE and blob.data not in {b.data for b in built.controls}
        assert _mean_of_kept({"m.tsv": blob.data}) == base


def test_reserve_controls_are_chosen_for_the_fingerprints_they_move_to_new_values():
    """Each reserve control is the candidate that moves the most fingerprints to a value
    no control has had yet; one that moves none (a re-ordering, under every catalogued
    fingerprint of an order-free file, or a draw repeating a count) is never chosen: a
    gate on that fingerprint would pass it for free."""
    def blob(label: str) -> Blob:
        return Blob(f"t.tsv:{label}", True, label.encode())
    own = ("a", "1", "x")
    shown = [("b", "1", "x"), ("a", "1", "y")]
    pool = [blob("shuffle_records#3"), blob("drop_irrelevant#4"), blob("rewrites#1"),
            blob("drop_irrelevant#7"), blob("rewrites#2")]
    known = {"t.tsv:shuffle_records#3": ("a", "1", "x"),  # the file's own values
             "t.tsv:drop_irrelevant#4": ("c", "1", "x"),  # one new value
             "t.tsv:rewrites#1": ("d", "2", "z"),  # three
             "t.tsv:drop_irrelevant#7": ("e", "2", "x"),  # one: "2" is no longer new
             "t.tsv:rewrites#2": ("d", "2", "y")}  # none once rewrites#1 is chosen
    got = [b.label for b in _control_reserves(own, shown, pool, known)]
    assert got == ["t.tsv:rewrites#1", "t.tsv:drop_irrelevant#4", "t.tsv:drop_irrelevant#7"]


def test_mutant_kinds_reserve_draws_leave_the_shown_draws_as_they_were():
    plain = list(mutant_kinds("m.tsv", MEAN_TABLE, seed=0))
    reserved = list(mutant_kinds("m.tsv", MEAN_TABLE, seed=0, reserve=RESERVE))
    assert [[m for m in kind if draw_of(m.label) < DRAWS] for kind in reserved] == plain
    extra = [m for kind in reserved for m in kind if draw_of(m.label) >= DRAWS]
    assert extra and all(m.content not in {x.content for k in plain for x in k} for m in extra)
    for kind in reserved:  # each further draw compounds the one before
        labels = [m.label for m in kind]
        assert labels == [f"{labels[0].rpartition('#')[0]}#{i}" for i in range(len(kind))]
