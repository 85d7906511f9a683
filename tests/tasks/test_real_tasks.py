"""Every real-data type's ground truth, recomputed by a second, independent route.

Route A is the type's own builder (``vera_env.tasks.real.*``). Route B is written here
with different tools: numpy instead of ``csv``, exact fractions instead of floats,
``samtools`` instead of the pure-Python BAM reader, the sandbox's own python3 and
Debian h5py with a dense matrix instead of CSR rows, a boolean coverage array instead
of interval merging. A few literal values, checked by hand against the packages'
documentation, pin both.
"""

from __future__ import annotations

import gzip
import io
import re
import subprocess
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest

from vera_env.errors import TaskFileError
from vera_env.tasks import load_tasks
from vera_env.tasks.real import REAL_TYPES, parse_real_id, real_id, real_instance, real_source
from vera_env.tasks.real.genome import SITES
from vera_env.tasks.source import UnknownTaskError
from vera_env.verification.grading import grade


def _files(tid: str) -> dict[str, bytes]:
    return real_instance(tid).instance.files


def _subject(pattern: str, question: str) -> str:
    match = re.search(pattern, question)
    assert match, question
    return match.group(1)


def _penguins(tid: str) -> str:
    q = real_instance(tid).instance.question
    species = _subject(r"of the (\w+) penguins", q)
    table = np.loadtxt(io.BytesIO(_files(tid)["penguins.csv"]), delimiter=",", dtype=str,
                       skiprows=1, usecols=(0, 5))
    mine = table[table[:, 0] == species, 1]
    mass = np.where(mine == "NA", "nan", mine).astype(float)
    return f"{np.nanmean(mass):.2f}"


def _cancer(tid: str) -> str:
    q = real_instance(tid).instance.question
    col = int(_subject(r"\(column (\d+)\)", q)) - 1
    data = np.loadtxt(io.BytesIO(_files(tid)["breast_cancer.csv"]), delimiter=",", skiprows=1)
    return f"{data[data[:, -1] == 0, col].mean():.6g}"


def _lung(tid: str) -> str:
    q = real_instance(tid).instance.question
    ecog = _subject(r"ph\.ecog = ([0-9.]+)", q)
    rows = [line.split(",") for line in _files(tid)["lung.csv"].decode().splitlines()[1:]]
    group = sorted((int(r[1]), r[2] == "1") for r in rows if r[5] == ecog)
    surv, at_risk = Fraction(1), len(group)
    for t in sorted({t for t, _ in group}):
        deaths = sum(1 for u, d in group if u == t and d)
        surv *= 1 - Fraction(deaths, at_risk)
        if deaths and surv <= Fraction(1, 2):
            return str(t)
        at_risk -= sum(1 for u, _ in group if u == t)
    raise AssertionError("no median")


def _fasta(tid: str) -> str:
    q = real_instance(tid).instance.question
    site = _subject(r"\(([ACGT]{6}),", q)
    text = gzip.decompress(_files(tid)["genome.fna.gz"]).decode()
    seq = re.sub(r">[^\n]*\n|\n", "", text)
    return str(sum(1 for _ in re.finditer(f"(?={site})", seq)))


def _gtf(tid: str) -> str:
    q = real_instance(tid).instance.question
    gene = _subject(r"of the gene (\S+) \(gene_name\)", q)
    spans = [tuple(map(int, line.split("\t")[3:5]))
             for line in gzip.decompress(_files(tid)["ensembl.gtf.gz"]).decode().splitlines()
             if "\texon\t" in line and f'gene_name "{gene}";' in line]
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    covered = np.zeros(hi - lo + 2, dtype=bool)
    for s, e in spans:
        covered[s - lo:e - lo + 1] = True
    return str(int(covered.sum()))


def _gff(tid: str) -> str:
    mrna = _subject(r"mRNA with ID (\S+) have", real_instance(tid).instance.question)
    text = _files(tid)["dmel.gff"].decode()
    pattern = re.compile(rf"Parent=(?:[^;\n]*,)?{mrna}(?:[,;]|$)")
    return str(sum(1 for line in text.splitlines()
                   if line.split("\t")[1:3] == ["FlyBase", "exon"] and pattern.search(line)))


def _bam(tid: str, tmp_path) -> str:
    chrom = _subject(r"How many reads on (\S+) are", real_instance(tid).instance.question)
    path = tmp_path / "control.bam"
    path.write_bytes(_files(tid)["control.bam"])
    sam = subprocess.run(["samtools", "view", str(path)], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    ends = Counter()
    for line in sam:
        f = line.split("\t")
        if f[2] != chrom:
            continue
        length = sum(int(n) for n, op in re.findall(r"(\d+)([MIDNSHP=X])", f[5]) if op in "MDN=X")
        reverse = int(f[1]) & 16
        ends[(reverse, int(f[3]) + length - 1 if reverse else int(f[3]))] += 1
    return str(sum(n - 1 for n in ends.values()))


def _fastq(tid: str) -> str:
    name = _subject(r"does (\S+) hold", real_instance(tid).instance.question)
    lines = gzip.decompress(_files(tid)[name]).count(b"\n")
    assert lines % 4 == 0
    return str(lines // 4)


_DENSE = """
import io, sys, h5py, numpy as np
f = h5py.File(io.BytesIO(sys.stdin.buffer.read()), 'r')
g = f['raw.X']; p, ix, d = g['indptr'][:], g['indices'][:], g['data'][:]
m = np.zeros((len(p) - 1, len(f['raw.var'])))
m[np.repeat(np.arange(len(p) - 1), np.diff(p)), ix] = d
genes = [v.decode() for v in f['raw.var']['index']]
cats = [c.decode() for c in f['uns/bulk_labels_categories'][:]]
types = np.array([cats[c] for c in f['obs']['bulk_labels']])
print(int((m[types == sys.argv[2], genes.index(sys.argv[1])] != 0).sum()))
"""


def _h5ad(tid: str) -> str:
    q = real_instance(tid).instance.question
    cell_type, gene = _subject(r"of type '([^']+)'", q), _subject(r"is the gene (\S+) detected", q)
    out = subprocess.run(["/usr/bin/python3", "-c", _DENSE, gene, cell_type],
                         input=_files(tid)["pbmc68k_reduced.h5ad"], capture_output=True,
                         check=True)
    return out.stdout.decode().strip()


def _vcf(tid: str) -> str:
    sample = _subject(r"is sample (\S+) heterozygous", real_instance(tid).instance.question)
    lines = [line for line in gzip.decompress(_files(tid)["chr22.vcf.gz"]).decode().splitlines()
             if not line.startswith("##")]
    col = lines[0].split("\t").index(sample)
    gts = [line.split("\t")[col].split(":")[0] for line in lines[1:]]
    return str(sum(1 for g in gts if "." not in g and len(set(re.split(r"[|/]", g))) == 2))


ROUTE_B = {"csv.penguin_mass": _penguins, "csv.cancer_mean": _cancer, "csv.lung_median": _lung,
           "fasta.site_count": _fasta, "gtf.exonic_bp": _gtf, "gff.exon_count": _gff,
           "bam.duplicates": _bam, "fastq.read_count": _fastq, "h5ad.detected_cells": _h5ad,
           "vcf.het_sites": _vcf}


def test_every_real_type_has_a_second_route_and_ten_types_span_eight_formats() -> None:
    assert set(ROUTE_B) == set(REAL_TYPES)
    assert len(REAL_TYPES) >= 10
    formats = {name.split(".")[0] for name in REAL_TYPES}
    assert formats >= {"bam", "gtf", "gff", "h5ad", "fastq"} and len(formats) >= 6


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("task_type", sorted(REAL_TYPES))
def test_ground_truth_agrees_with_an_independent_route(task_type: str, seed: int,
                                                       tmp_path) -> None:
    tid = real_id(task_type, seed)
    built = real_instance(tid).instance
    route = ROUTE_B[task_type]
    truth = route(tid, tmp_path) if task_type == "bam.duplicates" else route(tid)
    assert truth == built.answer
    assert built.trap.wrong_answer != built.answer
    assert grade_answer(tid, built.trap.wrong_answer) is False


def grade_answer(tid: str, answer: str) -> bool | None:
    from vera_env.tasks.real import make_real_task

    return grade(make_real_task(tid), answer).correct


@pytest.mark.parametrize("question, answer", [
    ("Gentoo", "5076.02"), ("Adelie", "3700.66")])
def test_penguin_masses_match_the_published_values(question: str, answer: str) -> None:
    found = {real_instance(real_id("csv.penguin_mass", s)).instance.answer for s in range(6)}
    assert answer in found


def test_lung_ecog1_median_is_306_days_and_careless_median_243() -> None:
    for seed in range(10):
        built = real_instance(real_id("csv.lung_median", seed)).instance
        if "ph.ecog = 1.0" in built.question:
            assert (built.answer, built.trap.wrong_answer) == ("306", "243")
            return
    raise AssertionError("no seed drew ECOG 1")


def test_site_counts_are_palindromes_without_self_overlap() -> None:
    seq = re.sub(r">[^\n]*\n|\n", "", gzip.decompress(
        _files(real_id("fasta.site_count"))["genome.fna.gz"]).decode())
    for site in SITES.values():
        assert site == site[::-1].translate(str.maketrans("ACGT", "TGCA"))
        assert seq.count(site) == len(re.findall(f"(?={site})", seq))


def test_every_question_states_the_cannot_be_determined_convention() -> None:
    for task in real_source(seeds=(0, 1)):
        assert task.question.endswith("answer exactly: cannot be determined.")
        assert grade(task, "cannot be determined").correct is False


@pytest.mark.parametrize("bad, match", [
    ("real.csv.penguin_mass", "not a real task id"), ("real.csv.penguin_mass.s01", "not a real"),
    ("real.csv.nothing.s0", "unknown real type")])
def test_malformed_real_ids_are_refused_with_the_form(bad: str, match: str) -> None:
    with pytest.raises(UnknownTaskError, match=match):
        parse_real_id(bad)


def test_load_tasks_real_is_seed_zero_of_every_type_and_unknown_names_fail() -> None:
    source = load_tasks("real")
    assert source.ids() == tuple(real_id(t) for t in REAL_TYPES)
    assert real_source(seeds=range(3), types=["vcf.het_sites"]).ids()[-1] == \
        "real.vcf.het_sites.s2"
    with pytest.raises(TaskFileError, match="named source"):
        load_tasks("reall")


def test_real_task_files_are_read_only_and_hold_no_answer(tmp_path) -> None:
    from vera_env.tasks.real import make_real_task

    task = make_real_task(real_id("csv.penguin_mass"))
    for path in task.data_files().values():
        assert path.stat().st_mode & 0o222 == 0
    assert set(task.data_files()) == {"penguins.csv"}
    assert "real" in task.tags and "trap" in task.tags
