"""What a real-data type builds, and what its variants need to know about it.

A real type is a function of the pinned source files and an rng (which picks the
subject: a species, a gene, a sample): ``build(files, rng) -> RealInstance``. Besides
the task itself (`Instance`: files to stage, question, answer, reference and careless
solutions) it says which staged file the question is about (``primary``: what a
perturbation corrupts) and, in a `Probe`, how to show that a *different* subject is
absent from the data (what a canary asks about) and which table column the question
needs, if any (what a canary removes).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, final, node, turn, verdict
from vera_env.tasks.model import Trap

__all__ = ["Build", "Probe", "RealInstance", "RealType", "careless_trap"]


@dataclass(frozen=True, slots=True)
class Probe:
    """How to ask about a subject that is not in the data, and prove it is not.

    Attributes:
        absent: A plausible subject the data do not hold (a species, a gene, a sample).
        absent_question: The task's question about ``absent`` instead of its subject.
        subjects_cmd: A shell command printing every subject in the data, one a line.
        census_cmd: A shell command printing the number of records of the primary file.
        census: What ``census_cmd`` prints.
    """

    absent: str
    absent_question: str
    subjects_cmd: str
    census_cmd: str
    census: int


@dataclass(frozen=True, slots=True)
class RealInstance:
    """One built real-data task and what its variants need.

    Attributes:
        instance: The task (files to stage, question, answer, solutions, trap).
        primary: The staged file the question is about.
        probe: How to build the "subject absent" canary.
        column: The header name of the table column the answer needs (CSV types), else None.
    """

    instance: Instance
    primary: str
    probe: Probe
    column: str | None = None


Build = Callable[[Mapping[str, bytes], np.random.Generator], RealInstance]


@dataclass(frozen=True, slots=True)
class RealType:
    """A registered real-data type.

    Attributes:
        name: ``<format>.<question>``, e.g. ``csv.penguin_mass``.
        source: Key of `vera_env.tasks.real.sources.SOURCES` its files come from.
        members: The source's member names it reads.
        build: Builds an instance from those members' bytes.
        trap: One line: what the careless analysis gets wrong.
    """

    name: str
    source: str
    members: tuple[str, ...]
    build: Build
    trap: str


def careless_trap(description: str, command: str, summary: str, check_name: str, test: str,
                  wrong: object) -> Trap:
    """The trap of a real type: one careless command, a ``test`` node with one range check
    (a shell ``test`` expression), and the wrong answer the command prints."""
    solution = (turn(command, node("test", summary), [check("range", check_name, verdict(test))]),
                final(str(wrong)))
    return Trap(description=description, careless_solution=solution, wrong_answer=str(wrong))
