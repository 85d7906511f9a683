"""The hand-written example suite (docs/examples/suite) loads, and is what its script makes.

docs/evaluating.md audits it beside an exported builtin + real suite; if a task lost its
reference program or its solution, the audit would call it ``no reference`` or ``ranks
nothing`` and the comparison would say nothing. Nothing is played here (the sandbox and
strength are the audit's job); this only guards what the suite declares.
"""

from __future__ import annotations

import filecmp
import shutil
import subprocess
import sys
from pathlib import Path

from vera_env.tasks import load_tasks
from vera_env.wire.protocol import parse_emission

SUITE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "suite"
TASK_IDS = ("csv.statin_ldl", "fasta.foki_sites", "table.myc_reads", "vcf.p02_hets")


def test_example_suite_loads_four_tasks_over_four_formats():
    source = load_tasks(SUITE)
    assert sorted(source.ids()) == sorted(TASK_IDS)
    suffixes = {p.suffix for tid in TASK_IDS for p in source.get(tid).data_files().values()}
    assert {".csv", ".fa", ".vcf", ".tsv"} <= suffixes


def test_example_suite_every_task_declares_a_reference_and_a_solution():
    source = load_tasks(SUITE)
    for tid in TASK_IDS:
        task = source.get(tid)
        assert task.reference_program is not None, tid
        turns = [parse_emission(turn) for turn in task.solution]
        assert [t.error for t in turns] == [""] * len(turns), tid
        nodes = [t for t in turns if t.declares_node]
        assert 2 <= len(nodes) <= 3, tid
        assert all(node.checks for node in nodes), tid
        assert turns[-1].answer == task.answer, tid
        assert task.trap is not None and task.trap.careless_solution, tid


def test_example_suite_script_rewrites_the_same_bytes(tmp_path: Path):
    copy = tmp_path / "suite"
    copy.mkdir()
    shutil.copy(SUITE / "make_suite.py", copy / "make_suite.py")
    subprocess.run([sys.executable, str(copy / "make_suite.py")], check=True, timeout=30)
    for tid in TASK_IDS:
        made = sorted(p.relative_to(copy / tid) for p in (copy / tid).rglob("*") if p.is_file())
        kept = sorted(p.relative_to(SUITE / tid) for p in (SUITE / tid).rglob("*") if p.is_file())
        assert made == kept, tid
        _, mismatch, errors = filecmp.cmpfiles(copy / tid, SUITE / tid, [str(p) for p in made],
                                               shallow=False)
        assert mismatch == [] and errors == [], (tid, mismatch, errors)
