"""Can the tasks of a run be built? Asked once, before the first episode.

Observed on a fresh ``pip install -e .``: the real-data sources had not been fetched,
``vera-env eval --tasks real`` started, and every attempt ended as a harness error after
the whole run's time was spent, one ``MissingSourceError`` per task. Whether a real task
(or a perturbed or canary variant of one, ``<real id>+<kind>``) can be built depends
only on its registry package being readable with its pinned digest, which is cheap to
ask, so the run asks it for every source its tasks need and refuses to start, naming the
command that fetches them. Other tasks (builtin, suite folders, BioMysteryBench) are
checked when their source is loaded.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from vera_env.tasks.real import source_name
from vera_env.tasks.real.sources import SOURCES, source_available, sources_dir

__all__ = ["FETCH_COMMAND", "MissingSources", "missing_sources"]

FETCH_COMMAND = "python -m vera_env.tasks.real.fetch"


@dataclass(frozen=True, slots=True)
class MissingSources:
    """Real-data sources a run needs and cannot read.

    Attributes:
        tasks_by_source: Source name -> the run's task ids built from it.
        store: Where fetched sources are looked for (``$VERA_ENV_SOURCES``...).
    """

    tasks_by_source: dict[str, tuple[str, ...]]
    store: str

    def __bool__(self) -> bool:
        return bool(self.tasks_by_source)

    def message(self) -> str:
        """What is missing, for how many tasks, and the command that fixes it."""
        names = sorted(self.tasks_by_source)
        n_tasks = sum(len(ids) for ids in self.tasks_by_source.values())
        packages = ", ".join(f"{n} ({SOURCES[n].registry} {SOURCES[n].package} "
                             f"{SOURCES[n].version})" for n in names)
        first = self.tasks_by_source[names[0]][0]
        return (f"{n_tasks} task(s) cannot be built (e.g. {first}): the real-data "
                f"source(s) {packages} are not in {self.store}. Fix: "
                f"`{FETCH_COMMAND} {' '.join(names)}` (or `scripts/install.sh`), then "
                "rerun; or choose other --tasks / --task-ids")


def missing_sources(task_ids: Iterable[str]) -> MissingSources:
    """The real-data sources that ``task_ids`` need and that are not readable now."""
    needed: dict[str, list[str]] = {}
    for task_id in task_ids:
        name = source_name(task_id)
        if name is not None:
            needed.setdefault(name, []).append(task_id)
    missing = {name: tuple(ids) for name, ids in needed.items() if not source_available(name)}
    return MissingSources(missing, str(sources_dir()))
