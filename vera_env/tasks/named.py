"""The named task sources: ``builtin``, ``real``, ``perturbed``, ``canary`` and ``curriculum``.

One entry point so that every caller that accepts a source name -- ``load_tasks``,
``gym.make(..., tasks=...)``, ``vera-env tasks list|validate|export``, ``vera-env eval``
-- accepts the same names with the same sampling options (seeds, types, and where they
apply difficulties and kinds), and a training stream can draw from any of them
(``seeds=range(10_000)``; nothing is built until a task is asked for).
"""

from __future__ import annotations

from collections.abc import Sequence

from vera_env.tasks.source import TaskSource

__all__ = ["SOURCE_NAMES", "named_source", "source_table"]

SOURCE_NAMES: dict[str, str] = {
    "builtin": "procedurally generated synthetic families (FASTA, 10x, VCF, CSV)",
    "real": "questions about real files shipped in registry packages, one per type and seed",
    "perturbed": "real tasks with messy data: BOM, CRLF, repeated header, truncation, decoy, bloat",
    "canary": "real-looking questions the data cannot answer ('cannot be determined')",
    "curriculum": "builtin tasks served from warmup up, where pass rates are informative",
}


def named_source(name: str, *, seeds: Sequence[int] | None = None,
                 types: Sequence[str] | None = None,
                 difficulties: Sequence[str] = ("easy",), kinds: Sequence[str] | None = None,
                 base: str = "real", start: str | None = None) -> TaskSource:
    """The source a name stands for, sampled like the builtin source.

    Args:
        name: One of `SOURCE_NAMES`.
        seeds: Seeds of every type (real: which subject; builtin: which draw). Default:
            seed 0, except ``curriculum``: seeds 0-999, a stream to learn on.
        types: Types to include (default all of the source's base).
        difficulties: Builtin difficulties (and of builtin tasks perturbed); the rungs
            ``curriculum`` climbs after ``warmup``.
        kinds: Perturbation or canary kinds (default all that apply).
        base: What ``perturbed`` perturbs: ``real`` or ``builtin``.
        start: The rung ``curriculum`` begins every type on (a warm start; default
            ``warmup``); other sources refuse it.

    Raises:
        ValueError: An unknown name, or ``start`` for a source other than the curriculum.
    """
    if name == "curriculum":
        from vera_env.tasks.curriculum import curriculum_source  # noqa: PLC0415

        return curriculum_source(range(1000) if seeds is None else seeds, types, difficulties,
                                 start=start)
    if start is not None:
        raise ValueError(f"only the curriculum has a start rung; {name!r} is not one")
    seeds = (0,) if seeds is None else seeds
    if name == "builtin":
        from vera_env.tasks.builtin import builtin_source  # noqa: PLC0415

        return builtin_source(difficulties, seeds, types)  # type: ignore[arg-type]
    if name == "real":
        from vera_env.tasks.real import real_source  # noqa: PLC0415

        return real_source(seeds, types)
    if name == "perturbed":
        from vera_env.tasks.perturbed import perturbed_source  # noqa: PLC0415

        return perturbed_source(base, seeds=seeds, types=types, kinds=kinds,
                                difficulties=difficulties)
    if name == "canary":
        from vera_env.tasks.canary import canary_source  # noqa: PLC0415

        return canary_source(seeds, types, kinds)
    raise ValueError(f"unknown task source {name!r}; named sources are {list(SOURCE_NAMES)}")


def source_table(name: str) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """(header, rows) describing a named source other than builtin, for ``tasks list``.

    Raises:
        ValueError: ``builtin`` (its table needs generated tasks) or an unknown name.
    """
    if name == "real":
        from vera_env.tasks.real import FORMATS, REAL_TYPES, SOURCES  # noqa: PLC0415

        return (("format", "type", "data (registry package)", "trap"),
                [(FORMATS[t.name.split(".")[0]], f"real.{t.name}",
                  f"{SOURCES[t.source].registry}: {SOURCES[t.source].package}", t.trap)
                 for t in REAL_TYPES.values()])
    if name == "perturbed":
        from vera_env.tasks.perturbed import KINDS  # noqa: PLC0415

        return ("perturbation", "what it does (id suffix +<kind>)"), list(KINDS.items())
    if name == "canary":
        from vera_env.tasks.canary import CANARY_KINDS  # noqa: PLC0415

        return ("canary", "why the answer is 'cannot be determined' (id suffix +<kind>)"), list(
            CANARY_KINDS.items())
    if name == "curriculum":
        return (("rung", "what a type is served there"), [
            ("warmup", "the question without its trap, a few dozen records (where every type starts)"),
            ("easy, medium, hard", "the trapped builtin tasks, climbed as --difficulties name them"),
            ("rule", "a rung at >= 90% over 8+ episodes is mastered (up); at <= 10% collapsed "
                     "(down)")])
    raise ValueError(f"no table for task source {name!r}")
