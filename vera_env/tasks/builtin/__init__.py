"""Procedurally generated tasks: unlimited, seeded, each with a trap.

Why generated tasks. A fixed suite is memorised; a generator gives a fresh instance per
seed, and a task id that *encodes* the generator -- ``<family>.<type>.<difficulty>.s<seed>``,
e.g. ``seq.motif_count.easy.s0`` -- lets any process regenerate exactly the same task
from the id alone (a rollout worker, a replay, a bug report). Every type is built around
a trap: a plausible careless analysis with a wrong answer (``Task.trap``), so that the
verification reward has something to catch.

Families and types (the module docstring of each says why its trap is a trap):

* sequences, FASTA: ``seq.motif_count`` (`sequences`: both strands, overlaps, line
  wraps), ``seq.gc_content`` (`sequences`: soft-masking, N gaps), ``seq.longest_orf``
  (`orfs`: six frames)
* sparse count matrices, 10x layout: ``mtx.qc_cells`` (`matrices`: mouse ``mt-``),
  ``mtx.knockout_gene`` (`screens`: 1-based indices), ``mtx.doublets`` (`doublets`:
  cells x genes orientation)
* variant tables, VCF: ``vcf.het_count`` (`variants`: phased genotypes), ``vcf.titv``
  (`substitutions`: indels and multi-allelic sites), ``vcf.trio_parentage``
  (`pedigrees`: identity is not parentage)
* tables, CSV/TSV: ``tab.sentinel_mean`` (`tables`: -999 codes), ``tab.label_coding``
  (`cohorts`: which class is 1), ``tab.fold_change`` (`expression`: log-scaled
  values), ``tab.survival_median`` (`survival`: censoring)

Difficulty scales the data: ``warmup`` is the same question and answer format with a few
dozen records and, where the trap lies in the data, without it (no soft-masking, no
phased calls, no -999, no censoring, ...), so that one or two correct commands answer
it and a small model's base rate is above 0 -- the first rung of
`vera_env.tasks.curriculum`. Those tasks carry no ``Task.trap``: the careless analysis
is right there. Three traps are the format or the question itself and stay, on small
data: ``mtx.knockout_gene`` (1-based indices), ``mtx.doublets`` (a cells x genes
export) and ``tab.fold_change`` (log-scaled values). ``easy``, ``medium`` and ``hard``
are the sizes validated and trained on (hard: 5,000 genes x 2,000-2,500 cells,
20,000-40,000 VCF sites, up to 900 kb of sequence); ``xl`` is the realistic size (a
matrix of about 100 MB uncompressed, a 400,000-site VCF), generated in seconds to a
minute. Data is written once per id into
`vera_env.tasks.cache_dir` (see `vera_env.tasks.cache`); the answer never is.

Determinism holds for a given numpy version: the bit generator (PCG64) is stable, but
numpy reserves the right to change ``Generator`` distribution methods between releases.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Sequence
from typing import cast

import numpy as np

from vera_env.tasks.builtin import (
    cohorts,
    doublets,
    expression,
    matrices,
    orfs,
    pedigrees,
    screens,
    sequences,
    substitutions,
    survival,
    tables,
    variants,
)
from vera_env.tasks.builtin.instance import Difficulty, Instance
from vera_env.tasks.cache import materialise
from vera_env.tasks.model import Task
from vera_env.tasks.source import TaskSource, UnknownTaskError

__all__ = [
    "ALL_DIFFICULTIES", "DIFFICULTIES", "FAMILIES", "TASK_TYPES", "builtin_ids",
    "builtin_source", "builtin_tasks", "generate", "make_task", "parse_task_id", "task_id",
]

Generator = Callable[[np.random.Generator, Difficulty], Instance]

TASK_TYPES: dict[str, Generator] = {
    "seq.motif_count": sequences.motif_count,
    "seq.gc_content": sequences.gc_content,
    "seq.longest_orf": orfs.longest_orf,
    "mtx.qc_cells": matrices.qc_cells,
    "mtx.knockout_gene": screens.knockout_gene,
    "mtx.doublets": doublets.doublets,
    "vcf.het_count": variants.het_count,
    "vcf.titv": substitutions.titv,
    "vcf.trio_parentage": pedigrees.trio_parentage,
    "tab.sentinel_mean": tables.sentinel_mean,
    "tab.label_coding": cohorts.label_coding,
    "tab.fold_change": expression.fold_change,
    "tab.survival_median": survival.survival_median,
}
DIFFICULTIES: tuple[Difficulty, ...] = ("easy", "medium", "hard")
"""The standard sample: what ``vera-env tasks validate builtin`` and the tests cover (the
trapped sizes; ``warmup`` has its own tests, where the careless answer may be right)."""
ALL_DIFFICULTIES: tuple[Difficulty, ...] = ("warmup", *DIFFICULTIES, "xl")
"""Every difficulty an id may name; ``warmup`` is the trap-free first rung of a
curriculum, ``xl`` the realistic, large size."""
FAMILIES = {"seq": "sequences (FASTA)", "mtx": "sparse count matrices (10x)",
            "vcf": "variant tables (VCF)", "tab": "tables (CSV/TSV)"}

# Canonical ids only: "s01" would name the same data as "s1" under a second id.
_ID = re.compile(r"(?P<type>[a-z]+\.[a-z_]+)\.(?P<difficulty>[a-z]+)"
                 r"\.s(?P<seed>0|[1-9][0-9]{0,17})")


def task_id(task_type: str, difficulty: Difficulty = "easy", seed: int = 0) -> str:
    """Compose a builtin task id, e.g. ``task_id("vcf.het_count", "hard", 3)``."""
    return f"{task_type}.{difficulty}.s{seed}"


def parse_task_id(tid: str) -> tuple[str, Difficulty, int]:
    """Split a builtin id into (type, difficulty, seed).

    Raises:
        UnknownTaskError: Not of the form ``<family>.<type>.<difficulty>.s<seed>`` with a
            known type and difficulty.
    """
    match = _ID.fullmatch(tid)
    if match is None:
        raise UnknownTaskError(f"{tid!r} is not a builtin task id: expected <family>.<type>"
                               ".<difficulty>.s<seed>, e.g. seq.motif_count.easy.s0.")
    if match["type"] not in TASK_TYPES:
        raise UnknownTaskError(f"{tid!r}: unknown type {match['type']!r}; builtin types are "
                               f"{sorted(TASK_TYPES)}.")
    if match["difficulty"] not in ALL_DIFFICULTIES:
        raise UnknownTaskError(f"{tid!r}: unknown difficulty {match['difficulty']!r}; expected "
                               f"one of {list(ALL_DIFFICULTIES)}.")
    return match["type"], cast(Difficulty, match["difficulty"]), int(match["seed"])


def generate(tid: str) -> Instance:
    """Generate a builtin task's data and answer in memory (nothing is written).

    The rng is seeded from the seed *and* the type and difficulty, so ``s0`` of two types
    are unrelated draws.
    """
    task_type, difficulty, seed = parse_task_id(tid)
    salt = zlib.crc32(f"{task_type}.{difficulty}".encode())
    return TASK_TYPES[task_type](np.random.default_rng([seed, salt]), difficulty)


def make_task(tid: str) -> Task:
    """Generate a builtin task and make sure its data is on disk (read-only, cached)."""
    instance = generate(tid)
    family, type_name, difficulty, _ = tid.split(".")
    # At warmup most types remove their trap: the careless answer is then the answer, and
    # a `Trap` whose wrong answer is right would be a lie (`Task` refuses one).
    trapped = instance.trap.wrong_answer != instance.answer
    return Task(
        id=tid, question=instance.question, answer=instance.answer, grader=instance.grader,
        tags=(family, type_name, difficulty, *(("trap",) if trapped else ()), *instance.tags),
        solution=instance.solution, data_dir=materialise(tid, instance.files),
        trap=instance.trap if trapped else None,
    ).with_reference(instance.reference)


def builtin_ids(difficulties: Sequence[Difficulty] = ("easy",), seeds: Sequence[int] = (0,),
                types: Sequence[str] | None = None) -> tuple[str, ...]:
    """Ids of every type (or of ``types``) at the given difficulties and seeds.

    Raises:
        UnknownTaskError: An unknown type or difficulty.
    """
    chosen = list(TASK_TYPES) if types is None else list(types)
    for name in chosen:
        parse_task_id(task_id(name, "easy"))
    for difficulty in difficulties:
        parse_task_id(task_id(chosen[0] if chosen else "seq.motif_count", difficulty))
    return tuple(task_id(t, d, s) for t in chosen for d in difficulties for s in seeds)


def builtin_tasks() -> list[Task]:
    """The default builtin set: every type, easy, seed 0 (data generated if missing)."""
    return [make_task(tid) for tid in builtin_ids()]


def builtin_source(difficulties: Sequence[Difficulty] = ("easy",), seeds: Sequence[int] = (0,),
                   types: Sequence[str] | None = None) -> TaskSource:
    """The source behind ``load_tasks("builtin")`` (with the defaults).

    Lists every type at ``difficulties`` x ``seeds`` -- what ``pick`` draws from; pass
    ``seeds=range(10_000)`` for a training stream -- while ``get`` accepts any valid id.
    Nothing is generated until a task is asked for.
    """
    return TaskSource(name="builtin", ids=builtin_ids(difficulties, seeds, types),
                      factory=make_task)
