"""Builtin families: deterministic ids, independently recomputed truths, traps that bite."""

from __future__ import annotations

import csv
import gzip
import io
import re
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from vera_env.grading import grade
from vera_env.tasks import UnknownTaskError, builtin_tasks, load_tasks
from vera_env.tasks.builtin import (
    DIFFICULTIES, TASK_TYPES, builtin_ids, builtin_source, generate, make_task, parse_task_id,
    task_id,
)
from vera_env.tasks.cache import CACHE_ENV_VAR
from vera_env.tasks.model import Task

CHECKED = [task_id(t, d, s) for t in TASK_TYPES for d in ("easy", "medium") for s in (0, 1, 2)]


# --- route B: ground truth recomputed from the written files, not from the generator ---

def _fasta(path: Path) -> list[bytes]:
    records: list[bytes] = []
    for line in gzip.decompress(path.read_bytes()).splitlines():
        if line.startswith(b">"):
            records.append(b"")
        else:
            records[-1] += line.strip()
    return records


def _windows(seq: bytes, word: str) -> int:
    arr = np.frombuffer(seq, dtype=np.uint8)
    view = np.lib.stride_tricks.sliding_window_view(arr, len(word))
    return int(np.all(view == np.frombuffer(word.encode(), dtype=np.uint8), axis=1).sum())


def _truth_motif_count(task: Task) -> Fraction:
    motif, rc = re.search(r"motif (\w+) occur.*reads (\w+) on", task.question).groups()
    records = _fasta(task.data_files()["seqs.fa.gz"])
    return Fraction(sum(_windows(r, motif) + _windows(r, rc) for r in records))


def _truth_gc_content(task: Task) -> Fraction:
    seq = np.frombuffer(b"".join(_fasta(task.data_files()["genome.fa.gz"])), dtype=np.uint8)
    upper = np.where(seq >= ord("a"), seq - 32, seq)
    return Fraction(100 * int(np.isin(upper, [ord("G"), ord("C")]).sum()), len(seq))


def _truth_qc_cells(task: Task) -> Fraction:
    min_counts, max_pct = map(int, re.search(r"at least (\d+) and less than (\d+)%",
                                             task.question).groups())
    files = task.data_files()
    genes = gzip.decompress(files["genes.tsv.gz"].read_bytes()).decode().splitlines()
    mito_rows = {i for i, g in enumerate(genes, 1) if g.split("\t")[1].startswith("mt-")}
    lines = gzip.decompress(files["matrix.mtx.gz"].read_bytes()).decode().splitlines()
    body = [ln for ln in lines if not ln.startswith("%")]
    n_genes, n_cells, nnz = map(int, body[0].split())
    entries = np.array([ln.split() for ln in body[1:]], dtype=np.int64)
    assert len(entries) == nnz and n_genes == len(genes)
    totals = np.bincount(entries[:, 1], weights=entries[:, 2], minlength=n_cells + 1)
    is_mito = np.isin(entries[:, 0], list(mito_rows))
    mito = np.bincount(entries[is_mito, 1], weights=entries[is_mito, 2], minlength=n_cells + 1)
    passed = (totals >= min_counts) & (100 * mito < max_pct * totals)
    return Fraction(int(passed[1:].sum()))


def _truth_het_count(task: Task) -> Fraction:
    sample = re.search(r"is sample (\S+) heterozygous", task.question).group(1)
    text = gzip.decompress(task.data_files()["calls.vcf.gz"].read_bytes()).decode()
    header = next(ln for ln in text.splitlines() if ln.startswith("#CHROM")).split("\t")
    col, count = header.index(sample), 0
    for line in text.splitlines():
        if not line.startswith("#"):
            alleles = re.split(r"[|/]", line.split("\t")[col].split(":")[0])
            count += "." not in alleles and len(set(alleles)) == 2
    return Fraction(count)


def _truth_sentinel_mean(task: Task) -> Fraction:
    column, species = re.search(r"mean (\w+) \(\w+\) of (\w+) penguins", task.question).groups()
    rows = csv.DictReader(io.StringIO(task.data_files()["penguins.csv"].read_text()))
    values = [int(r[column]) for r in rows if r["species"] == species and r[column] != "-999"]
    return Fraction(sum(values), len(values))


TRUTH = {"seq.motif_count": _truth_motif_count, "seq.gc_content": _truth_gc_content,
         "mtx.qc_cells": _truth_qc_cells, "vcf.het_count": _truth_het_count,
         "tab.sentinel_mean": _truth_sentinel_mean}


def test_every_type_has_an_independent_truth() -> None:
    assert set(TRUTH) == set(TASK_TYPES)


@pytest.mark.parametrize("tid", CHECKED)
def test_ground_truth_matches_independent_recount(tid: str) -> None:
    task = make_task(tid)
    exact = TRUTH[parse_task_id(tid)[0]](task)
    assert abs(Fraction(task.answer) - exact) <= Fraction(1, 200), (task.answer, float(exact))
    assert grade(task, str(float(exact))).correct is True


@pytest.mark.parametrize("tid", CHECKED)
def test_trap_answer_is_wrong_and_differs_from_truth(tid: str) -> None:
    task = make_task(tid)
    assert task.trap is not None and task.trap.careless_solution
    assert task.trap.wrong_answer != task.answer
    assert grade(task, task.trap.wrong_answer).correct is False
    assert grade(task, task.solution[-1].removeprefix("FINAL ANSWER:")).correct is True


def test_mouse_trap_premise_no_human_mito_genes() -> None:
    genes = gzip.decompress(make_task("mtx.qc_cells.easy.s0").data_files()["genes.tsv.gz"]
                            .read_bytes()).decode()
    assert "MT-" not in genes and genes.count("\tmt-") == 13 and "\tMt1\n" in genes


# --- determinism and the cache ---

@pytest.mark.parametrize("tid", [task_id(t, d) for t in TASK_TYPES for d in DIFFICULTIES])
def test_generate_same_id_gives_identical_bytes(tid: str) -> None:
    first, second = generate(tid), generate(tid)
    assert first.files == second.files
    assert (first.answer, first.solution, first.trap) == (second.answer, second.solution,
                                                          second.trap)


def test_different_seeds_and_difficulties_give_different_data() -> None:
    files = [generate(task_id("vcf.het_count", d, s)).files["calls.vcf.gz"]
             for d in ("easy", "medium") for s in (0, 1)]
    assert len(set(files)) == 4


@pytest.mark.parametrize("tid", builtin_ids())
def test_fresh_cache_dirs_hold_byte_identical_read_only_data(
        tid: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    contents = []
    for name in ("a", "b"):
        monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path / name))
        task = make_task(tid)
        assert task.data_dir is not None and task.data_dir.is_relative_to(tmp_path / name)
        files = task.data_files()
        assert set(files) == set(generate(tid).files), "only data files, never the answer"
        assert all(p.stat().st_mode & 0o777 == 0o444 for p in files.values())
        contents.append({n: p.read_bytes() for n, p in files.items()})
    assert contents[0] == contents[1]


def test_builtin_tasks_default_set_is_one_easy_task_per_type() -> None:
    tasks = builtin_tasks()
    assert [t.id for t in tasks] == [f"{t}.easy.s0" for t in TASK_TYPES]
    assert all(t.trap is not None and t.solution and "trap" in t.tags for t in tasks)


# --- ids and the builtin source ---

def test_parse_task_id_round_trips() -> None:
    assert parse_task_id("seq.motif_count.hard.s17") == ("seq.motif_count", "hard", 17)
    assert task_id("seq.motif_count", "hard", 17) == "seq.motif_count.hard.s17"


@pytest.mark.parametrize(("tid", "why"), [
    ("seq.motif_count.easy", "expected <family>"),
    ("seq.nope.easy.s0", "unknown type 'seq.nope'"),
    ("seq.motif_count.extreme.s0", "unknown difficulty 'extreme'"),
    ("seq.motif_count.easy.s01", "expected <family>"),  # non-canonical seed
])
def test_parse_task_id_rejects_bad_ids_with_reason(tid: str, why: str) -> None:
    with pytest.raises(UnknownTaskError, match=re.escape(why)):
        parse_task_id(tid)


def test_builtin_source_regenerates_any_valid_id_and_rejects_others() -> None:
    source = load_tasks("builtin")
    assert len(source) == len(TASK_TYPES) and source.ids() == builtin_ids()
    task = source.get("tab.sentinel_mean.medium.s42")
    assert task.id == "tab.sentinel_mean.medium.s42" and task.answer == generate(task.id).answer
    with pytest.raises(UnknownTaskError, match="Known ids include: 'seq.motif_count.easy.s0'"):
        source.get("tab.sentinel_mean.medium")


def test_builtin_source_pick_is_reproducible_for_a_seeded_rng() -> None:
    source = load_tasks("builtin")
    picks = [[source.pick(rng).id for _ in range(8)]
             for rng in (np.random.default_rng(7), np.random.default_rng(7))]
    assert picks[0] == picks[1] and set(picks[0]) <= set(source.ids())
    assert [t.id for t in source] == list(source.ids())


def test_builtin_source_can_list_a_large_lazy_stream() -> None:
    source = builtin_source(difficulties=("easy", "hard"), seeds=range(1000))
    assert len(source) == 2 * 1000 * len(TASK_TYPES)
    task = source.pick(np.random.default_rng(3))
    assert task.id in source.ids() and task.trap is not None
