"""What a generator produces, and the small writers every family shares.

Why generators return bytes, not files. A builtin task is regenerated from its id on
every ``get``; keeping generation pure (id -> bytes + answer) makes it testable without a
disk, makes "same id, same bytes" a plain equality, and leaves the one place that touches
the disk (`vera_env.tasks.cache.materialise`) in charge of atomic, read-only writes.

Why gzip is written by hand here. ``gzip`` stamps the current time (and, through
``GzipFile``, the file name) into its header, so the same data compressed twice differs
byte for byte. ``mtime=0`` with no name keeps a task's files a function of its id alone.
"""

from __future__ import annotations

import gzip
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from vera_env.tasks.model import Trap
from vera_env.verification.strength.reference import Reference
from vera_env.wire.protocol import CHECK_KINDS, NODE_KINDS

__all__ = ["Difficulty", "Instance", "check", "fill", "final", "gz", "node", "turn", "verdict"]

Difficulty = Literal["warmup", "easy", "medium", "hard", "xl"]


@dataclass(frozen=True, slots=True)
class Instance:
    """One generated task before it is written to disk.

    Attributes:
        files: Data files, relative POSIX name -> bytes (never the answer).
        question: What the agent is asked.
        answer: Ground truth, computed from the generated values (route A; tests
            recompute it from the written files by a second route).
        grader: Grader spec as a mapping (validated by `Task`).
        solution: Reference turns ending in ``FINAL ANSWER:``.
        trap: The careless analysis and the wrong answer it gives.
        tags: Labels beyond family/type/difficulty.
        reference: How the answer follows from ``files`` (strength classifies the
            variants of the data by it); None only for a family that has none yet.
    """

    files: dict[str, bytes]
    question: str
    answer: str
    grader: dict[str, Any]
    solution: tuple[str, ...]
    trap: Trap
    tags: tuple[str, ...] = field(default=())
    reference: Reference | None = None


_FAST_GZ_BYTES = 2**20


def gz(text: str | bytes) -> bytes:
    """Gzip ``text`` reproducibly (no timestamp, no file name in the header).

    Inputs over 1 MiB are compressed at level 1: compression is most of the time it takes
    to generate a large matrix, and level 6 would triple it to save a fifth of the disk.
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    return gzip.compress(data, compresslevel=1 if len(data) > _FAST_GZ_BYTES else 6, mtime=0)


def node(kind: str, summary: str, artifact: str = "", parents: str = "") -> str:
    """Render a NODE line's attributes.

    Kinds are checked here so that a typo in a generated solution fails at generation,
    not as a rejected turn in an oracle replay.

    Raises:
        ValueError: Unknown kind or a summary containing a double quote.
    """
    if kind not in NODE_KINDS or '"' in summary:
        raise ValueError(f"bad node: kind={kind!r} summary={summary!r}")
    parts = [f"kind={kind}", f'summary="{summary}"']
    parts += [f"artifact={artifact}"] if artifact else []
    parts += [f"parents={parents}"] if parents else []
    return " ".join(parts)


def check(kind: str, name: str, command: str) -> str:
    """Render one CHECK line.

    Raises:
        ValueError: Unknown kind, a quote in the name, or a multi-line command (checks are
            one line: everything after ``::`` is the command).
    """
    if kind not in CHECK_KINDS or '"' in name or "\n" in command or not command.strip():
        raise ValueError(f"bad check: {kind!r} {name!r} :: {command!r}")
    return f'CHECK {kind} "{name}" :: {command}'


def turn(command: str, node_line: str = "", checks: Sequence[str] = ()) -> str:
    """Render one turn: a ``<command>``, an optional NODE line and its CHECK lines.

    Raises:
        ValueError: The command contains a line the protocol parser would read as a NODE
            or CHECK line, or a closing ``</command>`` tag.
    """
    for line in command.splitlines():
        if line.lstrip().startswith(("NODE", "CHECK", "FINAL ANSWER")) or "</command>" in line:
            raise ValueError(f"command line would be misparsed: {line!r}")
    lines = [f"<command>{command}</command>"]
    lines += [f"NODE {node_line}"] if node_line else []
    return "\n".join([*lines, *checks])


def final(answer: str) -> str:
    """The answering turn."""
    return f"FINAL ANSWER: {answer}"


def verdict(test: str) -> str:
    """Wrap a shell ``test`` expression so that it prints True or False."""
    return f"{test} && echo True || echo False"


def fill(template: str, **values: object) -> str:
    """Replace ``@NAME@`` tokens in a shell template.

    Shell is full of ``$`` and braces, so neither ``str.format`` nor ``string.Template``
    can fill it without escaping every awk block; ``@`` never occurs in these commands.

    Raises:
        ValueError: A token is left unfilled.
    """
    for name, value in values.items():
        template = template.replace(f"@{name}@", str(value))
    if "@" in template:
        raise ValueError(f"unfilled token in {template!r}")
    return template
