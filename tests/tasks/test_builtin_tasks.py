"""Builtin families: deterministic ids, independently recomputed truths, traps that bite."""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import math
import os
import re
import subprocess
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from vera_env.tasks import UnknownTaskError, builtin_tasks, load_tasks
from vera_env.tasks.builtin import (
    TASK_TYPES,
    builtin_ids,
    builtin_source,
    generate,
    make_task,
    parse_task_id,
    task_id,
)
from vera_env.tasks.cache import CACHE_ENV_VAR
from vera_env.tasks.model import Task
from vera_env.verification.grading import grade

CHECKED = [task_id(t, d, s) for t in TASK_TYPES for d, s in
           (("easy", 0), ("easy", 1), ("easy", 2), ("medium", 0))]


# --- route B: ground truth recomputed from the written files, not from the generator ---

def _text(task: Task, name: str) -> str:
    raw = task.data_files()[name].read_bytes()
    return (gzip.decompress(raw) if name.endswith(".gz") else raw).decode()


def fasta_text(task: Task, name: str) -> list[bytes]:
    records: list[bytes] = []
    for line in _text(task, name).encode().splitlines():
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
    records = fasta_text(task, "seqs.fa.gz")
    return Fraction(sum(_windows(r, motif) + _windows(r, rc) for r in records))


def _truth_gc_content(task: Task) -> Fraction:
    seq = np.frombuffer(b"".join(fasta_text(task, "genome.fa.gz")), dtype=np.uint8)
    upper = np.where(seq >= ord("a"), seq - 32, seq)
    called = np.isin(upper, list(b"ACGT"))
    assert int(called.sum()) + int((upper == ord("N")).sum()) == len(seq)
    return Fraction(100 * int(np.isin(upper, list(b"GC")).sum()), int(called.sum()))


def _truth_longest_orf(task: Task) -> Fraction:
    name = next(iter(task.data_files()))
    table = str.maketrans("ACGT", "TGCA")
    best = 0
    for record in fasta_text(task, name):
        seq = record.decode()
        for strand in (seq, seq.translate(table)[::-1]):
            for frame in range(3):
                codons = [strand[i:i + 3] for i in range(frame, len(strand) - 2, 3)]
                protein = "".join("*" if c in ("TAA", "TAG", "TGA") else "M" if c == "ATG"
                                  else "x" for c in codons)
                best = max([best, *(len(m) - 1 for m in re.findall(r"M[^*]*\*", protein))])
    return Fraction(best)


def _mtx(task: Task) -> tuple[tuple[int, int], np.ndarray]:
    lines = [ln for ln in _text(task, "matrix.mtx.gz").splitlines() if not ln.startswith("%")]
    n_rows, n_cols, nnz = map(int, lines[0].split())
    entries = np.array([ln.split() for ln in lines[1:]], dtype=np.int64)
    assert len(entries) == nnz
    return (n_rows, n_cols), entries


def _truth_qc_cells(task: Task) -> Fraction:
    min_counts, max_pct = map(int, re.search(r"at least (\d+) and less than (\d+)%",
                                             task.question).groups())
    genes = _text(task, "genes.tsv.gz").splitlines()
    mito_rows = {i for i, g in enumerate(genes, 1) if g.split("\t")[1].startswith("mt-")}
    (n_genes, n_cells), entries = _mtx(task)
    assert n_genes == len(genes)
    totals = np.bincount(entries[:, 1], weights=entries[:, 2], minlength=n_cells + 1)
    is_mito = np.isin(entries[:, 0], list(mito_rows))
    mito = np.bincount(entries[is_mito, 1], weights=entries[is_mito, 2], minlength=n_cells + 1)
    passed = (totals >= min_counts) & (100 * mito < max_pct * totals)
    return Fraction(int(passed[1:].sum()))


def _truth_knockout_gene(task: Task) -> str:
    symbols = [line.split("\t")[1] for line in _text(task, "genes.tsv.gz").splitlines()]
    barcodes = _text(task, "barcodes.tsv.gz").split()
    group = dict(line.split("\t") for line in _text(task, "cells.tsv").splitlines()[1:])
    treated = np.array([False] + [group[b] == "treated" for b in barcodes])  # 1-based
    (n_genes, n_cells), entries = _mtx(task)
    assert (n_genes, n_cells) == (len(symbols), len(barcodes))
    in_treated = treated[entries[:, 1]]
    detected = Counter(entries[~in_treated, 0].tolist())
    lost = set(entries[in_treated, 0].tolist())
    n_ctrl = int((~treated[1:]).sum())
    hits = [row for row, n in detected.items() if 2 * n >= n_ctrl and row not in lost]
    assert len(hits) == 1
    return symbols[hits[0] - 1]


def _truth_doublets(task: Task) -> Fraction:
    symbols = [line.split("\t")[1] for line in _text(task, "features.tsv.gz").splitlines()]
    (n_rows, n_cols), entries = _mtx(task)
    assert (n_rows, n_cols) == (len(_text(task, "barcodes.tsv.gz").split()), len(symbols))
    high = entries[:, 2] >= 3
    cells = [set(entries[high & (entries[:, 1] == symbols.index(m) + 1), 0].tolist())
             for m in ("Cd3e", "Cd19")]
    return Fraction(len(cells[0] & cells[1]))


def _vcf(task: Task, name: str) -> tuple[list[str], list[list[str]]]:
    lines = [ln for ln in _text(task, name).splitlines() if not ln.startswith("##")]
    return lines[0].split("\t"), [ln.split("\t") for ln in lines[1:]]


def _truth_het_count(task: Task) -> Fraction:
    sample = re.search(r"is sample (\S+) heterozygous", task.question).group(1)
    header, rows = _vcf(task, "calls.vcf.gz")
    count = 0
    for row in rows:
        alleles = re.split(r"[|/]", row[header.index(sample)].split(":")[0])
        count += "." not in alleles and len(set(alleles)) == 2
    return Fraction(count)


def _truth_titv(task: Task) -> Fraction:
    _, rows = _vcf(task, "variants.vcf.gz")
    pairs = [r[3] + r[4] for r in rows if len(r[3]) == 1 and len(r[4]) == 1]
    ti = sum(p in ("AG", "GA", "CT", "TC") for p in pairs)
    return Fraction(ti, len(pairs) - ti)


def _truth_trio_parentage(task: Task) -> str:
    mother, child, *men = re.findall(r"[A-Z]{2}\d{5}", task.question)
    header, rows = _vcf(task, "calls.vcf.gz")

    def gts(name: str) -> list[set[str] | None]:
        col = header.index(name)
        return [None if "." in r[col] else r[col].split(":")[0].split("/") for r in rows]

    m, c = gts(mother), gts(child)
    errors = {}
    for man in men:
        f = gts(man)
        errors[man] = sum(1 for a, b, d in zip(m, c, f, strict=True) if a and b and d and not (
            (b[0] in a and b[1] in d) or (b[1] in a and b[0] in d)))
    ranked = sorted(men, key=errors.__getitem__)
    assert errors[ranked[1]] > 4 * errors[ranked[0]]
    return ranked[0]


def _truth_sentinel_mean(task: Task) -> Fraction:
    column, species = re.search(r"mean (\w+) \(\w+\) of (\w+) penguins", task.question).groups()
    rows = csv.DictReader(io.StringIO(_text(task, "penguins.csv")))
    values = [int(r[column]) for r in rows if r["species"] == species and r[column] != "-999"]
    return Fraction(sum(values), len(values))


def _truth_label_coding(task: Task) -> Fraction:
    feature = re.search(r"mean (\w+) of the malignant", task.question).group(1)
    code = re.search(r"(\d) = malignant", _text(task, "codebook.txt")).group(1)
    rows = csv.DictReader(io.StringIO(_text(task, "tumours.csv")))
    values = [Fraction(r[feature]) for r in rows if r["target"] == code]
    return sum(values, Fraction(0)) / len(values)


def _truth_fold_change(task: Task) -> Fraction:
    gene = re.search(r"fold change of (\S+) between", task.question).group(1)
    cond = dict(line.split("\t") for line in _text(task, "samples.tsv").splitlines()[1:])
    rows = list(csv.reader(io.StringIO(_text(task, "expression.tsv")), delimiter="\t"))
    values = next(r for r in rows if r[0] == gene)
    tpm = {k: [2 ** float(x) - 1 for s, x in zip(rows[0][1:], values[1:], strict=True)
               if cond[s] == k] for k in ("treated", "control")}
    ratio = math.fsum(tpm["treated"]) / len(tpm["treated"]) / (
        math.fsum(tpm["control"]) / len(tpm["control"]))
    return Fraction(ratio)


def _truth_survival_median(task: Task) -> Fraction:
    rows = [r for r in csv.DictReader(io.StringIO(_text(task, "survival.csv")))
            if r["arm"] == "B"]
    times = sorted({int(r["time_days"]) for r in rows})
    surv, at_risk = Fraction(1), len(rows)
    for t in times:
        deaths = sum(1 for r in rows if int(r["time_days"]) == t and r["status"] == "1")
        surv *= Fraction(at_risk - deaths, at_risk)
        if surv <= Fraction(1, 2):
            return Fraction(t)
        at_risk -= sum(1 for r in rows if int(r["time_days"]) == t)
    raise AssertionError("the curve never reaches 0.5")


TRUTH = {"seq.motif_count": _truth_motif_count, "seq.gc_content": _truth_gc_content,
         "seq.longest_orf": _truth_longest_orf, "mtx.qc_cells": _truth_qc_cells,
         "mtx.knockout_gene": _truth_knockout_gene, "mtx.doublets": _truth_doublets,
         "vcf.het_count": _truth_het_count, "vcf.titv": _truth_titv,
         "vcf.trio_parentage": _truth_trio_parentage, "tab.sentinel_mean": _truth_sentinel_mean,
         "tab.label_coding": _truth_label_coding, "tab.fold_change": _truth_fold_change,
         "tab.survival_median": _truth_survival_median}


def test_every_type_has_an_independent_truth() -> None:
    assert set(TRUTH) == set(TASK_TYPES) and len(TASK_TYPES) >= 12
    assert {t.split(".")[0] for t in TASK_TYPES} == {"seq", "mtx", "vcf", "tab"}


@pytest.mark.parametrize("tid", CHECKED)
def test_ground_truth_matches_independent_recount(tid: str, built) -> None:
    task = built(tid)
    truth = TRUTH[parse_task_id(tid)[0]](task)
    if isinstance(truth, str):
        assert task.answer == truth
        return
    decimals = len(task.answer.partition(".")[2])
    assert abs(Fraction(task.answer) - truth) <= Fraction(1, 2 * 10**decimals), \
        (task.answer, float(truth))
    assert grade(task, str(float(truth))).correct is True


@pytest.mark.parametrize("tid", CHECKED)
def test_trap_answer_is_wrong_and_differs_from_truth(tid: str, built) -> None:
    task = built(tid)
    assert task.trap is not None and task.trap.careless_solution
    assert task.trap.wrong_answer != task.answer
    assert grade(task, task.trap.wrong_answer).correct is False
    assert grade(task, task.solution[-1].removeprefix("FINAL ANSWER:")).correct is True


def test_mouse_trap_premise_no_human_mito_genes(built) -> None:
    genes = _text(built("mtx.qc_cells.easy.s0"), "genes.tsv.gz")
    assert "MT-" not in genes and genes.count("\tmt-") == 13 and "\tMt1\n" in genes


def test_orientation_trap_premise_matrix_is_cells_by_genes(built) -> None:
    task = built("mtx.doublets.easy.s0")
    head = [ln for ln in _text(task, "matrix.mtx.gz").splitlines()[:3]]
    assert "rows = cells" in head[1]
    assert head[2].split()[:2] == ["200", "300"]  # 200 barcodes x 300 features


def test_gc_trap_premise_soft_masked_with_gaps(built) -> None:
    text = "".join(_text(built("seq.gc_content.easy.s0"), "genome.fa.gz").split("\n")[1:])
    assert re.search("[acgt]{20}", text) and re.search("N{10}", text)


# --- determinism and the cache ---

_HARD_PER_FAMILY = ("seq.longest_orf", "mtx.qc_cells", "vcf.trio_parentage",
                    "tab.survival_median")


@pytest.mark.parametrize("tid", [task_id(t, d, 3) for t in TASK_TYPES for d in ("easy", "medium")]
                         + [task_id(t, "hard", 1) for t in _HARD_PER_FAMILY])
def test_generate_same_id_gives_identical_bytes(tid: str) -> None:
    first, second = generate(tid), generate(tid)
    assert first.files == second.files
    assert (first.answer, first.solution, first.trap) == (second.answer, second.solution,
                                                          second.trap)


def _fingerprint(tid: str) -> str:
    instance = generate(tid)
    digest = hashlib.sha256(json.dumps([instance.answer, instance.solution]).encode())
    for name in sorted(instance.files):
        digest.update(name.encode() + instance.files[name])
    return digest.hexdigest()


def test_generation_is_the_same_in_another_process_with_another_hash_seed() -> None:
    ids = builtin_ids(("easy",), (5,))
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); from test_builtin_tasks import "
            "_fingerprint; print(json.dumps([_fingerprint(t) for t in json.loads(sys.argv[2])]))")
    done = subprocess.run([sys.executable, "-c", code, str(Path(__file__).parent),
                           json.dumps(ids)], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONHASHSEED": "12345"}, timeout=120)
    assert json.loads(done.stdout) == [_fingerprint(t) for t in ids]


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
