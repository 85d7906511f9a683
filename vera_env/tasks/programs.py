"""Reference programs for exported tasks: a family's solver as a script the sandbox runs.

Why scripts and not the solver. ``vera-env tasks export`` writes a folder suite that
must classify its variants without this package: a builtin family's solver is a Python
closure over its generator's parameters, and the sandbox a ``reference`` program runs
in masks ``vera_env`` (`vera_env.sandbox.bwrap`: the agent must not import the
harness), so a script that imports it would fail on every variant. What the sandbox
does have is ``/usr/bin/python3`` with its standard library (and numpy), so a family is
exported with a reference when it has a standalone script here that reads the files as
its solver does -- by header and column name, records in any order, any FASTA width,
gzip undone -- and prints the same answer. The parameters are the solver's own
(``functools.partial`` keywords), written as Python literals at the top of the script.

The real-data types' bodies live in `vera_env.tasks.real_programs` (every type but
h5ad, which needs h5py). A family with no script is exported without a reference, and
the suite says so when it is loaded (`vera_env.tasks.unreferenced`).
``tests/tasks/test_programs.py`` runs every script on its family's files and variants
against the Python solver.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from vera_env.tasks import real_programs
from vera_env.tasks.model import Task

__all__ = ["SCRIPTED_FAMILIES", "SCRIPTED_REAL_TYPES", "reference_script"]

SCRIPTED_REAL_TYPES = real_programs.SCRIPTED_REAL_TYPES

_PRELUDE = '''#!/usr/bin/env python3
"""The reference program of {family}, written by `vera-env tasks export`: it prints the
task's answer, recomputed from the task's files in the working directory."""
import bz2
import gzip
import lzma
import sys

{params}


def read(name):
    """A file's content, its compression undone."""
    with open(name, "rb") as handle:
        raw = handle.read()
    if raw[:2] == b"\\x1f\\x8b":
        return gzip.decompress(raw)
    if raw[:3] == b"BZh":
        return bz2.decompress(raw)
    if raw[:6] == b"\\xfd7zXZ\\x00":
        return lzma.decompress(raw)
    return raw


def fasta_sequences(content):
    """Every record's sequence, line breaks removed (ValueError if not FASTA)."""
    chunks = (b"\\n" + content).split(b"\\n>")
    if chunks[0].strip() or len(chunks) < 2:
        raise ValueError("not FASTA")
    return [chunk.partition(b"\\n")[2].translate(None, b" \\t\\r\\n\\v\\f")
            for chunk in chunks[1:]]


def undetermined():
    print("cannot be determined")
    sys.exit(0)

'''

_SENTINEL_MEAN = '''import csv
import io
import math
import re

match = re.search(r"coded as (-?\\d+(?:\\.\\d+)?)", read("codebook.txt").decode("utf-8"))
if match is None:
    sys.exit("codebook.txt does not say how missing measurements are coded")
rows = [row for row in csv.reader(io.StringIO(read("penguins.csv").decode("utf-8"))) if row]
header, body = rows[0], rows[1:]
if "species" not in header or "id" not in header:
    sys.exit("penguins.csv: the first line is not the header")
if any(len(row) != len(header) for row in body):
    sys.exit("penguins.csv: a row has another number of fields than the header")
if TARGET not in header:
    undetermined()
s, t = header.index("species"), header.index(TARGET)
values = [float(row[t]) for row in body if row[s] == SPECIES and row[t] not in ("", "NA")]
values = [v for v in values if v != float(match.group(1))]
if not values:
    undetermined()
print(f"{math.fsum(values) / len(values):.2f}")
'''

_MOTIF_COUNT = '''import re

words = [re.escape(w.encode()) for w in (MOTIF, REVERSE)]
print(sum(len(re.findall(b"(?=" + w + b")", seq.upper()))
          for seq in fasta_sequences(read(NAME)) for w in words))
'''

_GC_CONTENT = '''letters = bytes(range(ord("A"), ord("Z") + 1)) + b"-*."
gc = called = 0
for seq in fasta_sequences(read(NAME)):
    upper = seq.upper()
    if upper.translate(None, letters):
        sys.exit("a FASTA sequence line holds a character that is no base letter")
    g = upper.count(b"G") + upper.count(b"C")
    gc, called = gc + g, called + g + upper.count(b"A") + upper.count(b"T")
if not called:
    undetermined()
print(f"{100 * gc / called:.2f}")
'''

_HET_COUNT = '''import re

header, rows = None, []
for line in read("calls.vcf.gz").decode("utf-8").splitlines():
    if line.startswith("#CHROM"):
        header = line.split("\\t")
    elif line.startswith("#") or not line.strip():
        continue
    elif header is None:
        sys.exit("not VCF: a site before the #CHROM header line")
    else:
        rows.append(line.split("\\t"))
if header is None or any(len(row) != len(header) for row in rows):
    sys.exit("not VCF: no #CHROM header, or a site with another number of fields")
if SAMPLE not in header[9:]:
    undetermined()
col = header.index(SAMPLE)


def het(field):
    alleles = re.split(r"[|/]", field.split(":", 1)[0])
    return len(alleles) == 2 and "." not in alleles and alleles[0] != alleles[1]


print(sum(het(row[col]) for row in rows))
'''


def _motif_params(keywords: dict[str, Any]) -> dict[str, Any]:
    from vera_env.tasks.builtin.sequences import revcomp  # noqa: PLC0415 (numpy, only here)

    return {"NAME": keywords["name"], "MOTIF": keywords["motif"],
            "REVERSE": revcomp(keywords["motif"])}


_Params = Callable[[dict[str, Any]], dict[str, Any]]
_SCRIPTS: dict[str, tuple[str, _Params]] = {
    "vera_env.tasks.builtin.tables._solve": (
        _SENTINEL_MEAN, lambda kw: {"SPECIES": kw["species"], "TARGET": kw["target"]}),
    "vera_env.tasks.builtin.sequences._count_motif": (_MOTIF_COUNT, _motif_params),
    "vera_env.tasks.builtin.sequences._solve_gc": (_GC_CONTENT, lambda kw: {"NAME": kw["name"]}),
    "vera_env.tasks.builtin.variants._solve": (
        _HET_COUNT, lambda kw: {"SAMPLE": kw["sample"]}),
    **{solver: (body, real_programs.params) for solver, body in real_programs.REAL_SCRIPTS.items()},
}
SCRIPTED_FAMILIES: tuple[str, ...] = ("tab.sentinel_mean", "seq.motif_count", "seq.gc_content",
                                      "vcf.het_count")
"""The builtin types exported with a reference program."""


def reference_script(task: Task) -> str | None:
    """A standalone Python script that prints ``task``'s answer from its files, or None
    when its family has none here (or the task has no family reference)."""
    reference = task.reference
    if reference is None or not isinstance(reference.solve, partial):
        return None
    func = reference.solve.func
    entry = _SCRIPTS.get(f"{func.__module__}.{func.__qualname__}")
    if entry is None:
        return None
    body, params = entry
    values = params(dict(reference.solve.keywords))
    lines = "\n".join(f"{name} = {value!r}" for name, value in values.items())
    family = ".".join(task.id.split(".")[:3 if task.id.startswith("real.") else 2])
    return _PRELUDE.format(family=family, params=lines) + body
