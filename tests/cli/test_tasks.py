"""``vera-env tasks``: list, show, validate (through the real env) and export."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from vera_env.cli import main
from vera_env.tasks import load_tasks
from vera_env.tasks.builtin import TASK_TYPES, make_task
from vera_env.tasks.cache import CACHE_ENV_VAR

sys.path.insert(0, str(Path(__file__).parent.parent / "tasks"))
from judge_server import JudgeServer

_SUM = "<command>awk '{ s += $1 } END { print s }' values.txt > sum.txt; cat sum.txt</command>"
_NODE = 'NODE kind=test summary="the values sum to 6" artifact=sum.txt'
_GOOD_CHECK = ('CHECK range "sum recomputed" :: test "$(cat sum.txt)" -eq '
               '"$(paste -sd+ values.txt | bc)" && echo True || echo False')


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path_factory.getbasetemp() / "cli-tasks-cache"))


def _suite(root: Path, tasks: dict[str, dict]) -> Path:
    for name, body in tasks.items():
        (root / name / "data").mkdir(parents=True)
        (root / name / "data" / "values.txt").write_text("1\n2\n3\n")
        (root / name / "task.json").write_text(json.dumps(body))
    return root


def _task(answer: str = "6", check: str = _GOOD_CHECK, **extra: object) -> dict:
    return {"question": "What do the values sum to?", "answer": "6",
            "grader": {"kind": "numeric", "abs_tol": 0},
            "reference": {"command": "paste -sd+ values.txt | bc"},
            "solution": [f"{_SUM}\n{_NODE}\n{check}", f"FINAL ANSWER: {answer}"], **extra}


def test_list_builtin_prints_every_type_with_its_trap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "list", "builtin"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split() == ["family", "type", "trap"]
    for name in TASK_TYPES:
        assert name in out
    assert "mt-" in out and "1-based" in out and "censored" in out


def test_list_and_show_a_folder_suite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = _suite(tmp_path / "suite", {"sum6": _task()})
    assert main(["tasks", "list", str(suite)]) == 0
    assert "sum6" in capsys.readouterr().out
    assert main(["tasks", "show", "sum6", "--source", str(suite), "--solution"]) == 0
    out = capsys.readouterr().out
    assert "What do the values sum to?" in out and "values.txt (6 bytes)" in out
    assert "--- solution turn 2 ---\nFINAL ANSWER: 6" in out


def test_show_builtin_task_with_trap(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "show", "mtx.knockout_gene.easy.s0"]) == 0
    out = capsys.readouterr().out
    task = make_task("mtx.knockout_gene.easy.s0")
    assert f"answer:   {task.answer}" in out and task.trap.wrong_answer in out
    assert "matrix.mtx.gz" in out and "cells.tsv" in out


def test_show_unknown_id_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "show", "seq.nope.easy.s0"]) == 2
    assert "unknown type 'seq.nope'" in capsys.readouterr().err


def test_validate_builtin_sample_passes_with_strength(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["tasks", "validate", "builtin", "--types", "seq.motif_count,tab.sentinel_mean",
                 "--seeds", "1", "--difficulties", "easy", "--strength", "all", "--jobs", "2"])
    out, err = capsys.readouterr()
    assert code == 0, out
    progress = err.splitlines()  # a log: a line at the first task, then the last
    assert "1/2" in progress[0] and " ok " in progress[0] and "2/2" in progress[-1]
    assert "2 ok, 0 failed, 0 skipped, of 2 tasks" in out
    rows = {line.split()[0]: line.split() for line in out.splitlines()
            if line.startswith(("seq.motif_count.", "tab.sentinel_mean."))}
    status, passed = rows["seq.motif_count.easy.s0"][1:3]
    assert status == "ok" and passed.split("/")[0] == passed.split("/")[1]
    assert "seqs.fa.gz" in rows["seq.motif_count.easy.s0"][4]  # its variants, by file
    assert "(wrong)" in " ".join(rows["tab.sentinel_mean.easy.s0"])
    families = out.split("\n\n")[1].splitlines()  # controls and mutants per family
    assert families[0].split()[:4] == ["family", "tasks", "controls", "mutants"]
    motif = next(line.split() for line in families if line.startswith("seq.motif_count"))
    assert int(motif[2]) >= 2 and int(motif[3]) >= 2 and motif[-2] == "1/1"
    types = out.split("\n\n")[2].splitlines()  # the types-with-traps table
    assert types[0].split() == ["family", "type", "passed", "trap"] and len(types) == 4
    assert "1/1" in types[3] and "averaged in as values" in types[3]


def test_validate_fails_on_wrong_answer_weak_check_and_toothless_trap(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toothless = {"description": "none", "wrong_answer": "5",
                 "careless_solution": ["FINAL ANSWER: 6"]}
    suite = _suite(tmp_path / "suite", {
        "good": _task(), "wrong": _task(answer="7"),
        "weak": _task(check='CHECK range "always true" :: echo True'),
        "toothless": _task(trap=toothless)})
    assert main(["tasks", "validate", str(suite), "--strength", "all", "--jobs", "2"]) == 1
    out: dict[str, str] = {}
    for line in capsys.readouterr().out.splitlines():  # the task table comes first
        if line.split() and line.split()[0] in ("good", "wrong", "weak", "toothless"):
            out.setdefault(line.split()[0], line)
    assert out["good"].split()[1] == "ok"
    assert "FAIL" in out["wrong"] and "oracle answer '7' graded wrong" in out["wrong"]
    assert "FAIL" in out["weak"] and "earns nothing" in out["weak"]
    assert "FAIL" in out["toothless"] and "the trap does not bite" in out["toothless"]


def test_validate_llm_task_needs_a_judge(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    llm = _task(grader={"kind": "llm", "rubric": "Score 1.0 if the answer is 6."})
    suite = _suite(tmp_path / "suite", {"judged": llm})
    assert main(["tasks", "validate", str(suite), "--strength", "off"]) == 0
    assert "pass --judge-url" in capsys.readouterr().out
    with JudgeServer(lambda messages: "It says 6.\nSCORE: 1") as server:
        assert main(["tasks", "validate", str(suite), "--strength", "off", "--judge-url",
                     server.base_url, "--judge-model", "judge"]) == 0
    assert "1 ok, 0 failed, 0 skipped" in capsys.readouterr().out
    with JudgeServer(lambda messages: "garbage") as server:  # a broken judge fails the task
        assert main(["tasks", "validate", str(suite), "--strength", "off", "--judge-url",
                     server.base_url, "--judge-model", "judge"]) == 1
    assert "unscorable: the grader could not decide" in capsys.readouterr().out


def test_export_builtin_round_trips_through_a_folder_suite(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "exported"
    assert main(["tasks", "export", "builtin", str(out_dir), "--types",
                 "vcf.trio_parentage,seq.longest_orf", "--difficulties", "easy,medium"]) == 0
    assert "wrote 4 tasks" in capsys.readouterr().out
    loaded = load_tasks(out_dir)
    assert len(loaded) == 4
    for task in loaded:
        original = make_task(task.id)
        # The reference (the family's solver) is code, not data: a folder suite has none.
        assert task.model_dump() == original.model_copy(
            update={"data_dir": task.data_dir}).model_dump()
        assert {n: p.read_bytes() for n, p in task.data_files().items()} == {
            n: p.read_bytes() for n, p in original.data_files().items()}
    assert main(["tasks", "export", "builtin", str(out_dir), "--types", "seq.longest_orf",
                 "--difficulties", "easy"]) == 1
    assert "exists" in capsys.readouterr().err


def test_list_shows_families_by_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "list"]) == 0
    out = capsys.readouterr().out
    heads = [line.split(":")[0] for line in out.splitlines() if line.startswith("== ")]
    assert heads == ["== builtin", "== real", "== perturbed", "== canary", "== curriculum"]
    for name in ("real.bam.duplicates", "real.h5ad.detected_cells", "real.fastq.read_count",
                 "real.gtf.exonic_bp", "real.gff.exon_count", "truncated", "dropped_column"):
        assert name in out


def test_validate_and_export_take_the_real_perturbed_and_canary_sources(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tasks", "validate", "real", "--types", "csv.penguin_mass", "--seeds", "1",
                 "--jobs", "1"]) == 0
    assert "1 ok, 0 failed" in capsys.readouterr().out
    assert main(["tasks", "validate", "canary", "--types", "csv.penguin_mass", "--seeds", "1",
                 "--jobs", "2", "--strength", "off"]) == 0
    assert "4 ok, 0 failed" in capsys.readouterr().out
    assert main(["tasks", "export", "perturbed", str(tmp_path / "out"), "--types",
                 "fastq.read_count"]) == 0
    exported = load_tasks(tmp_path / "out")
    assert len(exported) == 5 and exported.get("real.fastq.read_count.s0+truncated").answer == \
        "cannot be determined"
    assert main(["tasks", "show", "real.vcf.het_sites.s0+absent", "--source", "canary"]) == 0
    assert "NA12878" in capsys.readouterr().out


def test_strength_sample_is_the_first_seed_of_each_type_and_variant_kind() -> None:
    from types import SimpleNamespace

    from vera_env.evaluation.validation import strength_sample

    ids = ["vcf.titv.easy.s0", "vcf.titv.easy.s1", "vcf.titv.hard.s0", "real.csv.lung_median.s1",
           "real.csv.lung_median.s0", "real.csv.lung_median.s0+bom",
           "real.csv.lung_median.s1+bom", "real.csv.lung_median.s0+absent", "suite-q.s1",
           "suite-q.s2"]
    chosen = strength_sample([SimpleNamespace(id=i) for i in ids], "first-seed")
    assert chosen == {"vcf.titv.easy.s0", "vcf.titv.hard.s0", "real.csv.lung_median.s1",
                      "real.csv.lung_median.s0+bom", "real.csv.lung_median.s0+absent",
                      "suite-q.s1", "suite-q.s2"}
