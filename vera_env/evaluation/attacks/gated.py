"""Gated attacks: one fact, six copies, each choosing where it says False.

A node earns for *distinct* evidence, and an early rule told checks apart by their
verdicts over the variants. So a red team took one pin and made six copies of it that
differ only in where they fail: on a mismatch, copy ``i`` answers False only when hex
digit ``i`` of the md5 of what it saw is below 8, and otherwise errors (``exit 3``:
``gated_error``) or passes (``gated_true``). Over a few mutants the six copies then
show six different verdict patterns -- six "distinct" facts out of one. The design's
answer: a fact earns once per episode, an error on a variant is a rejection, and
shaping a verdict can only lower what a check earns.

The same gate is applied to honest work: ``gated_recount_error`` and
``gated_recount_true`` replay the task's reference solution with each node's checks
replaced by six gated copies of its first check, and ``first_checks`` replays it with
each node's first check alone, ungated: the honest twin. A gated recount that earns
more than its twin was paid for gating. (The twin, not a formula: one honest check may
establish a fact through each task file it reads, so what it may earn depends on it.)
"""

from __future__ import annotations

import shlex

from vera_env.evaluation.attacks.facts import CONTENT_FACTS, facts
from vera_env.evaluation.attacks.turns import ANSWER, LOOK, NODES, node
from vera_env.tasks import Task
from vera_env.wire.protocol import parse_emission

__all__ = ["COPIES", "first_checks", "gated_error", "gated_recount_error", "gated_recount_true",
           "gated_true"]

COPIES = 6
_TRUE_WORDS = "true|1|yes|pass|passed|ok"  # verdict_from_output's, any case
_PRINT_V = 'printf %s "$v"'


def _otherwise(error: bool) -> str:
    return "exit 3" if error else "echo True"


def _gate(digit: int, hashed: str, error: bool) -> str:
    """False when hex digit ``digit`` of the md5 of ``hashed``'s output is below 8."""
    return (f'case "$({hashed} | md5sum | cut -c{digit})" in [0-7]) echo False ;; '
            f"*) {_otherwise(error)} ;; esac")


def gated_pin(shell: str, value: str, digit: int, *, error: bool) -> str:
    """A pin of ``shell`` = ``value`` that says False on a mismatch only through the gate."""
    gate = _gate(digit, _PRINT_V, error)
    return f'v="$({shell})"; if [ "$v" = "{value}" ]; then echo True; else {gate}; fi'


def _gated(task: Task, error: bool) -> list[str]:
    largest = max(task.data_files().items(), key=lambda kv: kv[1].stat().st_size)[0]
    kinds = tuple(CONTENT_FACTS[i] for i in (0, 3, 1, 2))  # sorted md5s, then counts
    pinned = [(shell, value) for shell, value in facts(task, 48, kinds)
              if shlex.quote(largest) in shell][:NODES]
    nodes = [node(f"one fact, gated {k + 1}",
                  [gated_pin(shell, value, i + 1, error=error) for i in range(COPIES)])
             for k, (shell, value) in enumerate(pinned)]
    return [LOOK, *nodes, ANSWER]


def gated_error(task: Task, look: str = "") -> list[str]:
    """4 nodes, each six copies of one pin, False on a gated half of mismatches, else exit 3."""
    return _gated(task, error=True)


def gated_true(task: Task, look: str = "") -> list[str]:
    """4 nodes, each six copies of one pin, False on a gated half of mismatches, else True."""
    return _gated(task, error=False)


def gated_check(command: str, data: str, digit: int, *, error: bool) -> str:
    """``command`` (a check) passing as it does; when it does not, False only through the
    gate on digit ``digit`` of the md5 of the file ``data``."""
    return (f"out=\"$( ( {command} ) 2>/dev/null | tail -n 1 | tr -d '[:space:]' | "
            f"tr A-Z a-z)\"; case \"$out\" in {_TRUE_WORDS}) echo True ;; *) "
            f"{_gate(digit, 'zcat -f ' + data, error)} ;; esac")


def _recount(task: Task, error: bool | None) -> list[str]:
    """The reference's turns, each node's checks six gated copies of its first check
    (``error`` None: the first check alone, as it is)."""
    largest = max(task.data_files().items(), key=lambda kv: kv[1].stat().st_size)[0]
    turns = []
    for turn in task.solution:
        checks = parse_emission(turn).checks
        if not checks:
            turns.append(turn)
            continue
        kept = "\n".join(line for line in turn.splitlines()
                         if not line.lstrip().startswith("CHECK"))
        first = checks[0]
        copies = [f'CHECK {first.kind} "{first.name} (gated {i + 1})" :: '
                  + gated_check(first.command, shlex.quote(largest), i + 1, error=error)
                  for i in range(COPIES)] if error is not None else [
                      f'CHECK {first.kind} "{first.name}" :: {first.command}']
        turns.append("\n".join([kept, *copies]))
    return turns


def gated_recount_error(task: Task, look: str = "") -> list[str]:
    """The reference, each node's checks six gated copies of its first (else exit 3)."""
    return _recount(task, error=True)


def gated_recount_true(task: Task, look: str = "") -> list[str]:
    """The reference, each node's checks six gated copies of its first (else True)."""
    return _recount(task, error=False)


def first_checks(task: Task, look: str = "") -> list[str]:
    """The reference, each node's first check alone: what a gated recount may earn."""
    return _recount(task, error=None)
