"""Named task sources (train / validation / test) and the version that identifies them.

Both protocols address tasks by split and index (ORS sessions are created from
``(split, index)``; OpenEnv's task API resets with them), and a trainer that resumes
against a restarted server must be able to tell whether index 17 still means the same
task. So ``/metadata``'s version is a hash of what defines the tasks: for the builtin
generator, its source code and the numpy version (generation is deterministic for a
given numpy); for a suite, every task definition plus the name, size and content hash
of every data file (files above ``_HASH_LIMIT`` count by size and mtime, so a
terabyte suite does not delay the server's start).

A task spec sent over the wire is ``{"task_id", "split", "index"}`` only: the answer and
the reference solution never leave the server, and listing a split of generated tasks
does not generate their data.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vera_env.tasks import Task, TaskSource, load_tasks
from vera_env.tasks.source import UnknownTaskError
from vera_env.tasks.unreferenced import announce_unreferenced

__all__ = ["SPLIT_NAMES", "Splits", "source_version"]

SPLIT_NAMES: tuple[str, ...] = ("train", "validation", "test")
_HASH_LIMIT = 16 * 2**20
_BUILTIN_NAME = "builtin"


class Splits:
    """Task sources by split name; ``train`` is required and is what unseeded resets draw.

    Args:
        sources: Split name -> a task source (``"builtin"``, a path, or a ready
            ``TaskSource``). Names are ``train``, ``validation`` or ``test``.

    Raises:
        ValueError: No ``train`` split, or an unknown split name.
        TaskFileError: A source is broken (raised by the loader, naming file and field).
    """

    def __init__(self, sources: Mapping[str, str | Path | TaskSource]) -> None:
        unknown = set(sources) - set(SPLIT_NAMES)
        if unknown:
            raise ValueError(f"unknown split(s) {sorted(unknown)}; expected {list(SPLIT_NAMES)}")
        if "train" not in sources:
            raise ValueError("a 'train' split is required (the source unseeded resets draw from)")
        self._labels = {name: _label(src) for name, src in sources.items()}
        self._sources = {name: load_tasks(src) for name, src in sources.items()
                         if name in SPLIT_NAMES}
        for source in self._sources.values():  # sessions build their envs later
            announce_unreferenced(source)
        self.version = _version({name: (self._labels[name], src)
                                 for name, src in self._sources.items()})
        self.tasks = TaskSource(name="served splits", ids=self._sources["train"].ids(),
                                factory=self._find)

    def names(self) -> list[str]:
        """The split names, in train / validation / test order."""
        return [name for name in SPLIT_NAMES if name in self._sources]

    def num_tasks(self, split: str) -> int:
        """How many tasks ``split`` lists."""
        return len(self._source(split))

    def task_id(self, split: str, index: int) -> str:
        """The id of task ``index`` of ``split``.

        Raises:
            IndexError: ``index`` is out of range (the protocols answer 400).
            KeyError: Unknown split.
        """
        ids = self._source(split).ids()
        if not 0 <= index < len(ids):
            raise IndexError(f"task index {index} out of range for split {split!r} "
                             f"({len(ids)} tasks)")
        return ids[index]

    def task_spec(self, split: str, index: int) -> dict[str, Any]:
        """What a client may know of a task before playing it (never the answer)."""
        return {"task_id": self.task_id(split, index), "split": split, "index": index}

    def task_specs(self, split: str, start: int | None = None,
                   stop: int | None = None) -> list[dict[str, Any]]:
        """``task_spec`` for every index in ``range(start, stop)`` (slice semantics)."""
        indices = range(self.num_tasks(split))[slice(start, stop)]
        return [self.task_spec(split, i) for i in indices]

    def _source(self, split: str) -> TaskSource:
        if split not in self._sources:
            raise KeyError(f"unknown split {split!r}; this server has {self.names()}")
        return self._sources[split]

    def _find(self, task_id: str) -> Task:
        for source in self._sources.values():
            try:
                return source.get(task_id)
            except UnknownTaskError:
                continue
        raise UnknownTaskError(f"no task {task_id!r} in any split ({self.names()})")


def _label(source: str | Path | TaskSource) -> str:
    if isinstance(source, TaskSource):
        return source.name
    return str(source)


def source_version(label: str, source: TaskSource) -> str:
    """A short hash that changes when the tasks ``source`` defines change.

    Args:
        label: How the source was named (``"builtin"``, a path).
        source: The loaded source.
    """
    digest = hashlib.sha256()
    if label == _BUILTIN_NAME:
        _hash_builtin(digest)
    for task_id in source.ids() if label != _BUILTIN_NAME else ():
        _hash_task(digest, source.get(task_id))
    digest.update("\0".join(source.ids()).encode())
    return digest.hexdigest()[:16]


def _version(sources: Mapping[str, tuple[str, TaskSource]]) -> str:
    digest = hashlib.sha256()
    for name in sorted(sources):
        label, source = sources[name]
        digest.update(f"{name}={source_version(label, source)};".encode())
    return digest.hexdigest()[:16]


def _hash_builtin(digest: Any) -> None:
    import numpy  # noqa: PLC0415 - only its version matters here

    from vera_env.tasks import builtin  # noqa: PLC0415 - heavy, only for the builtin source

    digest.update(f"numpy={numpy.__version__};".encode())
    for file in sorted(Path(builtin.__file__).parent.glob("*.py")):
        digest.update(file.name.encode() + b"\0" + file.read_bytes())


def _hash_task(digest: Any, task: Task) -> None:
    digest.update(task.model_dump_json(exclude={"data_dir"}).encode())
    for rel, path in sorted(task.data_files().items()):
        stat = path.stat()
        digest.update(f"{rel}:{stat.st_size}:".encode())
        if stat.st_size <= _HASH_LIMIT:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        else:
            digest.update(str(stat.st_mtime_ns).encode())
