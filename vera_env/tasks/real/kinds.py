"""What a real-data type builds, and what its variants need to know about it.

A real type is a function of the pinned source files and an rng (which picks the
subject: a species, a gene, a sample): ``build(files, rng) -> RealInstance``. Besides
the task itself (`Instance`: files to stage, question, answer, reference and careless
solutions) it says which staged file the question is about (``primary``: what a
perturbation corrupts) and, in a `Probe`, how to show that a *different* subject is
absent from the data (what a canary asks about) and which table column the question
needs, if any (what a canary removes).

Each built instance also carries the type's `Reference` (``instance.reference``): its
solver recomputes the answer from the *decoded* staged files with the subject the rng
fixed, by the same code the builder computed the answer with, so strength testing can
tell a control (answer kept) from a mutant (answer moved) on real data. The helpers
here are what the types share to write one: reading a file out of the decoded contents,
and editing one record of a text file in place (a mutator aimed at what the question
reads, leaving every other byte -- line ends included -- as it was).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from vera_env.tasks.builtin.instance import Instance, check, fill, final, node, turn, verdict
from vera_env.tasks.builtin.solvers import content_of
from vera_env.tasks.model import Trap
from vera_env.verification.strength.reference import Mutator

__all__ = ["Build", "Census", "Probe", "RealInstance", "RealType", "careless_trap", "content_of",
           "edit_fields", "edit_line", "field_mutator", "python_check", "recounted"]


@dataclass(frozen=True, slots=True)
class Probe:
    """How to ask about a subject that is not in the data, and prove it is not.

    Attributes:
        absent: A plausible subject the data do not hold (a species, a gene, a sample).
        absent_question: The task's question about ``absent`` instead of its subject.
        subjects_cmd: A shell command printing every subject in the data, one a line.
        census_cmd: A shell command printing the number of records of the primary file
            (a canary's check: a recount of the data that the generic mutants move).
        census: What ``census_cmd`` prints.
        unit: What ``census_cmd`` counts (``records``; a one-record FASTA counts bases).
    """

    absent: str
    absent_question: str
    subjects_cmd: str
    census_cmd: str
    census: int
    unit: str = "records"


@dataclass(frozen=True, slots=True)
class Census:
    """The records of the primary file the question reads, counted by a shell command.

    A perturbed variant (`vera_env.tasks.perturbed`) cleans the primary file in a first
    turn; its check recounts these records in the cleaned file. A count of *every*
    record would fail strength's controls (records the question never reads dropped),
    a count of what the question reads holds on them and moves with the answer.

    Attributes:
        command: Shell, run in the workspace, printing one number.
        value: What it prints on the task's (clean) file.
        what: What is counted, for the check's name (``weighed Adelie rows``).
    """

    command: str
    value: int
    what: str


@dataclass(frozen=True, slots=True)
class RealInstance:
    """One built real-data task and what its variants need.

    Attributes:
        instance: The task (files to stage, question, answer, solutions, trap, and the
            `Reference` strength classifies its variants by).
        primary: The staged file the question is about.
        probe: How to build the "subject absent" canary.
        column: The header name of the table column the answer needs (CSV types), else None.
        reads: The records of the primary file the question reads (text formats; what a
            perturbed variant's cleaning check recounts), else None.
    """

    instance: Instance
    primary: str
    probe: Probe
    column: str | None = None
    reads: Census | None = None


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


def python_check(prelude: str, values: Mapping[str, object]) -> Callable[[str], str]:
    """Checks in python3: ``prelude`` (``python3 -c "`` and the statements that read the
    task's data by a second route) then ``print(test)``, its ``@TOKEN@`` s filled from
    ``values``; the result maps ``test`` to the check's command."""
    def command(test: str) -> str:
        return fill(prelude + f"print({test})\"", **values)

    return command


def recounted(shell: str, recount: str, value: object, also: str = "") -> str:
    """A check that a count the model's files give (``shell``) and a recount from the
    task's data by another route (``recount``, a command printing one number) are both
    ``value`` (and that the shell test ``also`` holds): True or False, never silent."""
    extra = f" && {also}" if also else ""
    return verdict(f'test "$({shell})" -eq {value} && test "$({recount})" -eq {value}{extra}')


def edit_line(content: bytes, rng: random.Random, pick: Callable[[bytes], bool],
              edit: Callable[[bytes], bytes | None]) -> bytes | None:
    """``content`` with one line that ``pick`` marks (drawn by ``rng``) replaced by
    ``edit(line)`` -- removed when that is ``b""`` -- or None when no line is marked or
    the edit declines (returns None or the line unchanged).

    Lines keep their ends (``\\r\\n`` included), so a mutant differs from the file it was
    made from in the edited record only, not in how the file is written.
    """
    lines = content.splitlines(keepends=True)
    marked = [i for i, line in enumerate(lines) if pick(line)]
    if not marked:
        return None
    i = marked[rng.randrange(len(marked))]
    new = edit(lines[i])
    if new is None or new == lines[i]:
        return None
    lines[i] = new
    return b"".join(lines)


def edit_fields(line: bytes, sep: bytes, edit: Callable[[list[bytes]], bool]) -> bytes | None:
    """``line`` with its fields (split on ``sep``, the line end set aside) changed in place
    by ``edit``, which returns False to decline (None then)."""
    body = line.rstrip(b"\r\n")
    fields = body.split(sep)
    if not edit(fields):
        return None
    return sep.join(fields) + line[len(body):]


def field_mutator(pick: Callable[[bytes], bool], sep: bytes,
                  edit: Callable[[list[bytes]], bool]) -> Mutator:
    """A mutator that edits the fields of one line ``pick`` marks (see `edit_line`)."""
    def mutate(content: bytes, rng: random.Random) -> bytes | None:
        return edit_line(content, rng, pick, lambda line: edit_fields(line, sep, edit))

    return mutate
