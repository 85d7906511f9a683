"""The attack battery speaks the wire protocol, and every pin it plays measures something.

A pin that fails on the real workspace earns nothing for the wrong reason and makes a
task look safer than it is; a pin that also passes once the data changed measures
nothing. So each attack's turns are parsed, run with bash on a copy of the task's files
(every check must print True), and run again on a copy whose records were changed
(some check must not). No sandbox and no strength: these are fast.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
from pathlib import Path

import pytest

from vera_env.evaluation.attacks import ANSWER, BASELINE, BLIND, POLICIES, SHAPED, describe
from vera_env.evaluation.attacks.gated import COPIES
from vera_env.tasks import Task
from vera_env.tasks.builtin import make_task
from vera_env.verification.checks import MAX_CHECKS_PER_NODE
from vera_env.wire.protocol import parse_emission

TASK_IDS = ("tab.sentinel_mean.easy.s0", "mtx.knockout_gene.easy.s0")
NEW = ("targeted_hashes", "slices", "unread_fields", "gated_error", "gated_true",
       "snapshot_macro", "column_stats")
MEASURING = ("targeted_hashes", "slices", "unread_fields", "gated_error", "snapshot_macro",
             "column_stats")
"""Attacks that must say something other than True once the records change
(``gated_true`` says True on the gated-off half of mismatches by design)."""


@pytest.fixture(scope="module", params=TASK_IDS)
def task(request: pytest.FixtureRequest) -> Task:
    return make_task(request.param)


def _copy(task: Task, into: Path) -> None:
    for name, path in task.data_files().items():
        (into / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, into / name)


def _change_records(task: Task, where: Path) -> None:
    """Add a record to each file: its last line after a ``~``, so it sorts last and its
    other fields repeat (a gzip file gains a member: ``zcat`` reads both)."""
    for name in task.data_files():
        path = where / name
        raw = path.read_bytes()
        text = gzip.decompress(raw) if raw.startswith(b"\x1f\x8b") else raw
        last = b"~" + text.rstrip(b"\n").rsplit(b"\n", 1)[-1] + b"\n"
        with path.open("ab") as out:
            out.write(gzip.compress(last) if raw.startswith(b"\x1f\x8b") else last)


def _verdicts(turns: list[str], where: Path, change_after: int | None = None,
              task: Task | None = None) -> list[str]:
    """The last line each check printed, running the turns' commands in order;
    the records change before the first check past turn ``change_after``."""
    out = []
    for i, turn in enumerate(turns):
        emission = parse_emission(turn)
        if emission.command:
            subprocess.run(["bash", "-c", emission.command], cwd=where, check=False,
                           capture_output=True, timeout=60)
        if change_after is not None and i >= change_after and task is not None:
            _change_records(task, where)
            change_after = None
        for check in emission.checks:
            done = subprocess.run(["bash", "-c", check.command], cwd=where, check=False,
                                  capture_output=True, text=True, timeout=60)
            lines = done.stdout.strip().splitlines()
            out.append(lines[-1] if lines else f"exit {done.returncode}")
    return out


def test_battery_every_policy_has_a_one_line_description() -> None:
    assert set(NEW) <= set(BLIND) and set(SHAPED) == {"gated_recount_error",
                                                      "gated_recount_true"}
    for name in POLICIES:
        assert describe(name) and "\n" not in describe(name)


@pytest.mark.parametrize("name", NEW)
def test_new_attack_turns_parse_into_at_most_four_nodes_then_the_answer(name: str,
                                                                       task: Task) -> None:
    turns = POLICIES[name](task, "")
    emissions = [parse_emission(t) for t in turns]
    assert [e.error for e in emissions] == [""] * len(turns)
    assert emissions[0].command and not emissions[0].declares_node  # the look
    assert turns[-1] == ANSWER
    nodes = [e for e in emissions if e.declares_node]
    assert 1 <= len(nodes) <= 4
    assert all(1 <= len(e.checks) <= MAX_CHECKS_PER_NODE for e in nodes)
    assert len({e.summary for e in nodes}) == len(nodes)
    commands = [c.command for e in nodes for c in e.checks]
    assert len(set(commands)) == len(commands)  # no check repeats another


@pytest.mark.parametrize("name", [*NEW, *SHAPED, BASELINE])
def test_attack_checks_all_pass_on_a_copy_of_the_files(name: str, task: Task,
                                                       tmp_path: Path) -> None:
    _copy(task, tmp_path)
    verdicts = _verdicts(POLICIES[name](task, ""), tmp_path)
    assert verdicts and verdicts == ["True"] * len(verdicts)


@pytest.mark.parametrize("name", MEASURING)
def test_attack_checks_notice_changed_records(name: str, task: Task, tmp_path: Path) -> None:
    _copy(task, tmp_path)
    # snapshot_macro snapshots in its second turn: change the records after it, as the
    # other attacks' pins were computed before the episode.
    after = 2 if name == "snapshot_macro" else 0
    verdicts = _verdicts(POLICIES[name](task, ""), tmp_path, change_after=after, task=task)
    assert any(v != "True" for v in verdicts)


def test_gated_error_copies_differ_only_in_the_digit_they_gate_on() -> None:
    task = make_task(TASK_IDS[0])
    node = parse_emission(POLICIES["gated_error"](task)[1])
    assert len(node.checks) == COPIES
    assert all("exit 3" in c.command and "echo True; else" in c.command for c in node.checks)
    digits = {c.command.split("cut -c")[-1].split(")")[0] for c in node.checks}
    assert digits == {str(i + 1) for i in range(COPIES)}
    true_node = parse_emission(POLICIES["gated_true"](task)[1])
    assert not any("exit 3" in c.command for c in true_node.checks)


def test_gated_recount_replays_the_reference_with_six_gated_copies_per_node() -> None:
    task = make_task(TASK_IDS[0])
    turns = POLICIES["gated_recount_error"](task)
    reference = [parse_emission(t) for t in task.solution]
    gated = [parse_emission(t) for t in turns]
    assert [e.command for e in gated] == [e.command for e in reference]
    for ref, mine in zip(reference, gated, strict=True):
        if ref.checks:
            assert len(mine.checks) == COPIES
            assert all(ref.checks[0].command in c.command for c in mine.checks)


def test_first_checks_is_the_reference_with_each_nodes_first_check_alone() -> None:
    task = make_task(TASK_IDS[0])
    reference = [parse_emission(t) for t in task.solution]
    twin = [parse_emission(t) for t in POLICIES[BASELINE](task)]
    assert [e.command for e in twin] == [e.command for e in reference]
    assert [e.summary for e in twin] == [e.summary for e in reference]
    assert [[c.command for c in e.checks] for e in twin] == [
        [c.command for c in e.checks[:1]] for e in reference]
