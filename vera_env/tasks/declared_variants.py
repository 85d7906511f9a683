"""A task's declared variants as files: what `vera-env tasks export` writes beside a
reference program, so an exported task keeps its family's aimed mutants and controls.

Why. A builtin or real family's reference carries mutators and controls of its own
(Python callables: a case row dropped, a patient renamed) that strength tries before
the generic ones. An exported task's reference is a program, and without them the
program classified the generic mutations only: few of those move an answer about a few
records, and on exported ``tab.sentinel_mean`` and ``vcf.het_count`` the reference
analysis earned 0.042 against 0.146-0.156 on the same builtin tasks. So export draws
them once, on the task's own content with strength's default seed, and writes each draw
as a gzipped file (``variants/<file>/mutant<k>-<draw>.gz``, ``control<k>.gz``) that the
task's ``reference.mutants`` / ``reference.controls`` names
(`vera_env.tasks.model.ReferenceProgram`). The draws are what an episode of the builtin
task would try first: the first round of aimed kinds, ``DRAWS`` draws each, and the
first two draws of each family control. The files sit beside ``task.json``, never under
``data/``: the agent's workspace does not hold them.
"""

from __future__ import annotations

import gzip
import random
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from vera_env.tasks.model import Task
from vera_env.verification.rewards import StrengthConfig
from vera_env.verification.strength.mutants import mutant_kinds
from vera_env.verification.strength.variants import decoded_contents

__all__ = ["FOLDER", "Drawn", "copy_declared", "declared_names", "draw_family_variants",
           "write_drawn"]

FOLDER = "variants"
_CONTROL_DRAWS = 2
_DECODE_BUDGET_S = 120.0


@dataclass(frozen=True, slots=True)
class Drawn:
    """A task's declared variants, by data file name.

    Attributes:
        mutants: Kinds of mutation, each its draws' contents in order.
        controls: Controls' contents.
    """

    mutants: dict[str, tuple[tuple[bytes, ...], ...]]
    controls: dict[str, tuple[bytes, ...]]

    def __bool__(self) -> bool:
        return bool(self.mutants or self.controls)


def draw_family_variants(task: Task, config: StrengthConfig | None = None) -> Drawn:
    """The family's aimed mutants and controls drawn on ``task``'s content, as strength
    draws them (``mutant_kinds``, ``variants._control_candidates``) with ``config``'s
    seed and window; empty for a task without a family reference."""
    reference = task.reference
    if reference is None or not (reference.mutators or reference.controls):
        return Drawn({}, {})
    config = config or StrengthConfig()
    sources = task.data_files()
    named = set(reference.mutators) | set(reference.controls)
    contents = decoded_contents({n: p for n, p in sources.items() if n in named},
                                config.max_mb * 2**20, _DECODE_BUDGET_S)
    mutants: dict[str, tuple[tuple[bytes, ...], ...]] = {}
    controls: dict[str, tuple[bytes, ...]] = {}
    seed = config.seed
    for name, content in contents.items():
        aimed = tuple(reference.mutators.get(name, ()))
        kinds = [tuple(m.content for m in kind)
                 for kind in mutant_kinds(name, content, seed=seed, aimed=aimed)
                 if "aimed" in kind[0].label and "+" not in kind[0].label] if aimed else []
        if kinds:
            mutants[name] = tuple(kinds)
        drawn: list[bytes] = []
        for i, edit in enumerate(reference.controls.get(name, ())):
            for attempt in range(_CONTROL_DRAWS):
                changed = edit(content, random.Random(f"{seed}|{name}|control{i}|{attempt}"))
                if changed is not None and changed != content and changed not in drawn:
                    drawn.append(changed)
        if drawn:
            controls[name] = tuple(drawn)
    return Drawn(mutants, controls)


def declared_names(mutants: Mapping[str, tuple[tuple[object, ...], ...]],
                   controls: Mapping[str, tuple[object, ...]]
                   ) -> tuple[dict[str, list[list[str]]], dict[str, list[str]]]:
    """The file names (relative to the task's folder) ``task.json`` declares for these
    variants: one naming for a family's draws and for a suite's own files alike, so an
    exported suite exported again is the same."""
    return ({name: [[f"{FOLDER}/{name}/mutant{k}-{d}.gz" for d in range(len(kind))]
                    for k, kind in enumerate(kinds)] for name, kinds in mutants.items()},
            {name: [f"{FOLDER}/{name}/control{k}.gz" for k in range(len(files))]
             for name, files in controls.items()})


def write_drawn(drawn: Drawn, target: Path) -> None:
    """Each draw gzipped under ``target`` at its ``declared_names`` name."""
    mutant_names, control_names = declared_names(drawn.mutants, drawn.controls)
    for name, kinds in drawn.mutants.items():
        for kind, names in zip(kinds, mutant_names[name], strict=True):
            for content, rel in zip(kind, names, strict=True):
                _write_gz(target / rel, content)
    for name, files in drawn.controls.items():
        for content, rel in zip(files, control_names[name], strict=True):
            _write_gz(target / rel, content)


def copy_declared(mutants: dict[str, tuple[tuple[Path, ...], ...]],
                  controls: dict[str, tuple[Path, ...]], target: Path) -> None:
    """A suite's own declared files copied under ``target`` at their ``declared_names``
    names (gzipped where they were not)."""
    mutant_names, control_names = declared_names(mutants, controls)
    pairs = [(p, rel) for name, kinds in mutants.items()
             for kind, names in zip(kinds, mutant_names[name], strict=True)
             for p, rel in zip(kind, names, strict=True)]
    pairs += [(p, rel) for name, files in controls.items()
              for p, rel in zip(files, control_names[name], strict=True)]
    for source, rel in pairs:
        if source.suffix == ".gz":
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target / rel)
        else:
            _write_gz(target / rel, source.read_bytes())


def _write_gz(path: Path, content: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(content, compresslevel=6, mtime=0))
