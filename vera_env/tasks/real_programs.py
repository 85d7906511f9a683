"""Reference programs of the real-data types: their solvers as script bodies.

Why a module of its own. `vera_env.tasks.programs` turns a solver into a script the
sandbox runs (its docstring says why); the builtin families' bodies fit beside that
machinery, the nine real types' do not (about 400 lines a module). This module holds
only text: each body is its solver's code ported line for line -- the same parser
(``csv.DictReader``, ``str.splitlines``, ``re.sub(r"\\s+")``, struct over the BAM
stream), the same order of reading, the same number formatting and the same
``cannot be determined`` -- because a script that reads a variant more leniently or
more strictly than the solver classifies it otherwise: a control the solver refuses, or
a mutant the script misses. Where the solver raises, the script ends with an uncaught
exception (exit 1), which a program reference reads as "neither control nor mutant".

A body runs after `programs`' prelude (``read``: a file with its compression undone,
multi-member gzip -- BGZF -- included; ``undetermined``; ``sys``) and the solver's
keyword arguments, upper-cased, as Python literals.

Not scripted: ``h5ad.detected_cells``. An h5ad file is HDF5, which the standard library
and numpy cannot read (its solver uses h5py), so an exported h5ad task has no reference
and says so when loaded (`vera_env.tasks.unreferenced`).
"""

from __future__ import annotations

from typing import Any

__all__ = ["REAL_SCRIPTS", "SCRIPTED_REAL_TYPES", "params"]

_PENGUIN_MASS = '''import csv
import io

rows = list(csv.DictReader(io.StringIO(read("penguins.csv").decode())))
mine = [r for r in rows if r["species"] == SPECIES]
masses = [float(r["body_mass_g"]) for r in mine if r["body_mass_g"] != "NA"]
if not masses:
    undetermined()
print(f"{sum(masses) / len(masses):.2f}")
'''

_CANCER_MEAN = '''import math

lines = read("breast_cancer.csv").decode().splitlines()
if not lines:
    sys.exit("breast_cancer.csv is empty")
code = {name: i for i, name in enumerate(lines[0].split(",")[2:])}
by = {}
for line in lines[1:]:
    if line.strip():
        row = [float(x) for x in line.split(",")]
        if len(row) <= FEATURE or not math.isfinite(row[-1]):
            sys.exit("breast_cancer.csv: a row that is not a tumour")
        by.setdefault(int(row[-1]), []).append(row[FEATURE])
if "malignant" not in code:
    sys.exit("breast_cancer.csv: the header names no class 'malignant'")
values = by.get(code["malignant"], [])
if not values:
    undetermined()
print(f"{sum(values) / len(values):.6g}")
'''

_LUNG_MEDIAN = '''import csv
import io

rows = list(csv.DictReader(io.StringIO(read("lung.csv").decode())))
group = [r for r in rows if r["ph.ecog"] == ECOG]
times, died = [int(float(r["time"])) for r in group], [r["status"] == "1" for r in group]
events = {}
for t, d in zip(times, died):
    events.setdefault(t, [0, 0])[0 if d else 1] += 1
at_risk, surv, median = len(times), 1.0, None
for t in sorted(events):
    deaths, censored = events[t]
    if deaths:
        surv *= 1 - deaths / at_risk
        if median is None and surv <= 0.5:
            median = t
    at_risk -= deaths + censored
if median is None:
    undetermined()
print(median)
'''

_HET_SITES = '''import re

lines = read("chr22.vcf.gz").decode().splitlines()
header = next((line for line in lines if line.startswith("#CHROM")), None)
if header is None:
    sys.exit("VCF without a #CHROM header line")
col = header.split("\\t").index(SAMPLE)  # ValueError if the sample is not there
calls = [line.split("\\t")[col].split(":")[0] for line in lines
         if line and not line.startswith("#")]


def het(alleles):
    a, b = alleles  # ValueError for a haploid or triploid call: not this question
    return a != b and "." not in (a, b)


print(sum(het(re.split(r"[|/]", gt)) for gt in calls))
'''

_EXONIC_BP = '''exons = []
for line in read("ensembl.gtf.gz").decode().splitlines():
    if line.startswith("#") or not line.strip():
        continue
    f = line.split("\\t")
    if len(f) < 9:
        sys.exit(f"GTF record with {len(f)} columns")
    if f[2] == "exon" and 'gene_name "' in f[8]:
        first, last = int(f[3]), int(f[4])  # every named exon's, as the solver reads them
        if f[8].split('gene_name "', 1)[1].split('"', 1)[0] == GENE:
            exons.append((first, last))
total, end = 0, -1
for s, e in sorted(exons):
    if s > end:
        total, end = total + e - s + 1, e
    elif e > end:
        total, end = total + e - end, e
print(total)
'''

_EXON_COUNT = '''count = 0
for line in read("dmel.gff").decode().splitlines():
    if line.startswith("#") or not line.strip():
        continue
    f = line.split("\\t")
    if len(f) != 9 or f[1] != "FlyBase" or f[2] not in ("mRNA", "exon"):
        continue
    attrs = dict(kv.split("=", 1) for kv in f[8].strip().split(";") if "=" in kv)
    key = "ID" if f[2] == "mRNA" else "Parent"
    if key not in attrs:
        sys.exit(f"FlyBase {f[2]} without {key}")
    if f[2] == "exon":
        count += attrs["Parent"].split(",").count(MRNA)
print(count)
'''

_SITE_COUNT = '''import re

text = read("genome.fna.gz").decode("ascii")
if not text.startswith(">"):
    sys.exit("not FASTA: the content does not start with a '>' line")
total = 0
for record in text[1:].split("\\n>"):
    total += re.sub(r"\\s+", "", record.partition("\\n")[2]).count(SITE)
print(total)
'''

_READ_COUNT = '''lines = read(NAME).decode().splitlines()
if len(lines) % 4:
    sys.exit(f"{len(lines)} lines is not a whole number of records")
for i in range(0, len(lines), 4):
    head, seq, plus, qual = lines[i:i + 4]
    if not head.startswith("@") or not plus.startswith("+") or len(seq) != len(qual):
        sys.exit(f"malformed record at line {i + 1}")
print(len(lines) // 4)
'''

_DUPLICATES = '''import struct

REF_CONSUMING = {0, 2, 3, 7, 8}  # M, D, N, =, X
raw = read("control.bam")
if raw[:4] != b"BAM\\x01":
    sys.exit("not a BAM file")
(l_text,) = struct.unpack_from("<i", raw, 4)
pos = 8 + l_text
(n_ref,) = struct.unpack_from("<i", raw, pos)
pos += 4
refs = []
for _ in range(n_ref):
    (l_name,) = struct.unpack_from("<i", raw, pos)
    refs.append(raw[pos + 4:pos + 4 + l_name - 1].decode())
    pos += 4 + l_name + 4
reads, keys = 0, set()
while pos < len(raw):
    (size, ref_id, start, l_name, _mapq, _bin, n_cigar, flag, _l_seq) = struct.unpack_from(
        "<iiiBBHHHi", raw, pos)
    if size < 32 or pos + 4 + size > len(raw):
        sys.exit(f"BAM record at byte {pos}: {size} bytes does not fit")
    body = pos + 4 + 32
    raw[body:body + l_name - 1].decode()  # the solver decodes every read name
    cigar = struct.unpack_from(f"<{n_cigar}I", raw, body + l_name)
    length = sum(op >> 4 for op in cigar if op & 0xF in REF_CONSUMING)
    chrom = refs[ref_id] if ref_id >= 0 else "*"
    if chrom == CHROM:
        reads += 1
        if not flag & 4:
            keys.add((bool(flag & 16), start + length if flag & 16 else start + 1))
    pos += 4 + size
print(reads - len(keys))
'''


REAL_SCRIPTS: dict[str, str] = {
    "vera_env.tasks.real.tables._penguin_solve": _PENGUIN_MASS,
    "vera_env.tasks.real.tables._cancer_solve": _CANCER_MEAN,
    "vera_env.tasks.real.survival._solve": _LUNG_MEDIAN,
    "vera_env.tasks.real.calls._solve": _HET_SITES,
    "vera_env.tasks.real.annotation._gtf_solve": _EXONIC_BP,
    "vera_env.tasks.real.flybase._gff_solve": _EXON_COUNT,
    "vera_env.tasks.real.genome._solve": _SITE_COUNT,
    "vera_env.tasks.real.reads._solve": _READ_COUNT,
    "vera_env.tasks.real.alignments._solve": _DUPLICATES,
}
"""Script bodies by solver (``module.qualname``); their constants are the solver's
keyword arguments upper-cased (`params`)."""

SCRIPTED_REAL_TYPES: tuple[str, ...] = (
    "csv.penguin_mass", "csv.cancer_mean", "csv.lung_median", "vcf.het_sites",
    "gtf.exonic_bp", "gff.exon_count", "fasta.site_count", "fastq.read_count",
    "bam.duplicates")
"""The real types with a reference program (every one but ``h5ad.detected_cells``)."""


def params(keywords: dict[str, Any]) -> dict[str, Any]:
    """A real script's constants: its solver's keyword arguments, upper-cased
    (``species`` -> ``SPECIES``)."""
    return {name.upper(): value for name, value in keywords.items()}
