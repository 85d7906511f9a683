"""A task's ``reference`` program: loaded and checked, run in the sandbox to classify
variants, and what a task without one pays (nothing for its checks)."""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest

from vera_env import info as keys
from vera_env.env import VeraEnv
from vera_env.errors import TaskFileError
from vera_env.policy import ScriptedPolicy
from vera_env.rollout import run_episode
from vera_env.sandbox import make_sandbox
from vera_env.tasks import Task, TaskSource, load_tasks
from vera_env.tasks import unreferenced as unref
from vera_env.verification.grading import grade_against
from vera_env.verification.rewards import RewardConfig, StrengthConfig
from vera_env.verification.strength.task import StrengthTask
from vera_env.verification.strength.variants import Settings, census, clear_cache

PENGUINS = ("id,species,mass\n1,Adelie,3700\n2,Gentoo,5000\n3,Adelie,-999\n4,Adelie,3500\n"
            "5,Gentoo,5200\n6,Adelie,3900\n7,Gentoo,4800\n")
READS = ">r1\nACGTAC\nGT\n>r2\nTTTT\n>r3\nGGCCA\n"
MEAN = ("awk -F, 'NR > 1 && $2 == \"Adelie\" && $3 != -999 { s += $3; n++ } "
        "END { printf \"%.1f\\n\", s / n }' penguins.csv")
TASK: dict[str, Any] = {
    "question": "Mean mass of Adelie penguins in penguins.csv, -999 is missing? One decimal.",
    "answer": "3700.0", "grader": {"kind": "numeric", "abs_tol": 0.05}}
# The reference solution: the mean written to a file, then recomputed from the data.
HONEST = (f"<command>{MEAN} > mean.txt; cat mean.txt</command>\n"
          'NODE kind=transform summary="Adelie mean mass 3700.0" artifact=mean.txt\n'
          f'CHECK range "mean recomputed" :: test "$({MEAN})" = "$(cat mean.txt)" '
          "&& echo True || echo False")
ANSWER = "FINAL ANSWER: 3700.0"


def _pin(data: str) -> str:
    """A red team's pin: the md5 of the data file as it was staged."""
    digest = hashlib.md5(data.encode()).hexdigest()
    return ("<command>md5sum penguins.csv</command>\n"
            'NODE kind=load summary="penguins.csv pinned"\n'
            f'CHECK range "data unchanged" :: test "$(md5sum < penguins.csv | cut -c1-32)" = '
            f'"{digest}" && echo True || echo False')


def _suite(root: Path, reference: dict[str, str] | None, *, script: str = "",
           name: str = "adelie") -> Path:
    folder = root / name
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "penguins.csv").write_text(PENGUINS)
    (folder / "data" / "reads.fa").write_text(READS)
    if script:
        (folder / "mean.sh").write_text(script)
    body = {**TASK, **({"reference": reference} if reference is not None else {})}
    (folder / "task.json").write_text(json.dumps(body))
    return root


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_cache()  # classified variants are cached per task id: each test classifies anew
    monkeypatch.setattr(unref, "_announced", set())  # each test's notice is its first


# ----- loading -----

@pytest.mark.parametrize(("reference", "field", "message"), [
    ({"script": "missing.sh"}, "reference.script", "is not an existing file"),
    ({"command": "   "}, "reference.command", "the reference command is empty"),
    ({"command": ""}, "reference.command", "the reference command is empty"),
    ({}, "reference", "exactly one of the two"),
    ({"command": "echo 1", "script": "mean.sh"}, "reference", "exactly one of the two"),
    ({"cmd": "echo 1"}, "reference.cmd",
     "unknown key; expected one of ['command', 'controls', 'mutants', 'rewrites', 'script']"),
    ({"command": "echo 1", "mutants": {"penguins.csv": ["gone.csv"]}}, "reference.mutants",
     "'penguins.csv': variant file"),
    ({"command": "echo 1", "controls": {"penguins.csv": ["gone.csv"]}}, "reference.controls",
     "is not an existing file"),
])
def test_broken_reference_names_file_and_field(tmp_path: Path, reference: dict[str, str],
                                               field: str, message: str) -> None:
    _suite(tmp_path, reference, script="echo 1\n")
    with pytest.raises(TaskFileError, match=re.escape(message)) as info:
        load_tasks(tmp_path)
    assert info.value.file == str(tmp_path / "adelie" / "task.json")
    assert info.value.field == field


def test_jsonl_reference_script_is_read_beside_the_file(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "penguins.csv").write_text(PENGUINS)
    (tmp_path / "mean.sh").write_text(MEAN + "\n")
    row = {**TASK, "id": "adelie", "data_dir": "data", "reference": {"script": "mean.sh"}}
    (tmp_path / "tasks.jsonl").write_text(json.dumps(row) + "\n"
                                          + json.dumps({**row, "id": "gone",
                                                        "reference": {"script": "x.sh"}}))
    with pytest.raises(TaskFileError, match="is not an existing file") as info:
        load_tasks(tmp_path / "tasks.jsonl")
    assert (info.value.file, info.value.field) == (f"{tmp_path / 'tasks.jsonl'}:2",
                                                   "reference.script")
    (tmp_path / "tasks.jsonl").write_text(json.dumps(row) + "\n")
    task = load_tasks(tmp_path / "tasks.jsonl").get("adelie")
    assert task.reference_program is not None
    assert task.reference_program.script == tmp_path / "mean.sh"


# ----- running -----

def test_program_reference_reads_the_files_as_the_workspace_holds_them(tmp_path: Path) -> None:
    """A solver gets decoded content; the program gets each file encoded as the task's
    is (a .gz stays gzipped), and the last non-empty line it prints is the answer."""
    (tmp_path / "reads.fa.gz").write_bytes(gzip.compress(READS.encode()))
    task = Task(id="n", question="How many reads?", answer="3", grader={"kind": "exact"},
                data_dir=tmp_path,
                reference={"command": "zcat reads.fa.gz | grep -c '^>'; echo; echo"})
    with make_sandbox("auto") as box:
        reference = task.strength_reference(box)
        assert reference is not None
        assert reference.solve({"reads.fa.gz": READS.encode()}) == "3"
        assert reference.solve({"reads.fa.gz": b">a\nAC\n"}) == "1"
        broken = Task(id="b", question="q", answer="3", grader={"kind": "exact"},
                      data_dir=tmp_path, reference={"command": "exit 3"}).strength_reference(box)
        assert broken is not None
        with pytest.raises(ValueError, match="exit 3"):
            broken.solve({"reads.fa.gz": READS.encode()})


def test_declared_reference_classifies_controls_and_mutants(tmp_path: Path) -> None:
    """As validate counts them: the program's answer decides each candidate."""
    task = load_tasks(_suite(tmp_path, {"command": MEAN})).get("adelie")
    settings = Settings.of(StrengthConfig())
    with make_sandbox("auto") as box:
        files = census(StrengthTask(task.data_files(), task.strength_reference(box),
                                 lambda a, b: grade_against(task.grader, a, b).correct is True), settings)
    penguins = next(f for f in files if f.name == "penguins.csv")
    assert penguins.classified and penguins.content_varied
    assert penguins.controls and penguins.mutants


def test_reference_solution_earns_and_an_md5_pin_does_not(tmp_path: Path) -> None:
    """The red team's attack on a suite without a reference, with one: the pin dies on a
    control the program classified, the recount earns."""
    source = load_tasks(_suite(tmp_path, {"script": "mean.sh"}, script=MEAN + "\n"))
    env = VeraEnv(source, max_steps=4)
    try:
        honest = run_episode(env, ScriptedPolicy({"adelie": (HONEST, ANSWER)}),
                             task_id="adelie")
        pinned = run_episode(env, ScriptedPolicy({"adelie": (_pin(PENGUINS), ANSWER)}),
                             task_id="adelie")
    finally:
        env.close()
    [check] = honest.steps[0].checks
    assert check.passed and check.discriminating is True
    assert honest.correct and honest.verification_reward > 0
    [pin] = pinned.steps[0].checks
    assert pin.passed and pin.discriminating is False and "control" in pin.detail
    assert pinned.correct and pinned.verification_reward == 0


def test_declared_mutants_and_controls_are_tried_first_and_classified_by_the_program(
        tmp_path: Path) -> None:
    """A suite's own variants as files: a kind's draws in order (the same change by a
    growing amount), a lone file as a kind of one draw, gzipped or not; each kept only as
    the program classifies it (a "mutant" that keeps the mean is neither)."""
    root = _suite(tmp_path, {"command": MEAN})
    folder = root / "adelie"
    rows = PENGUINS.splitlines(keepends=True)
    (folder / "less1.csv").write_text("".join(r for r in rows if not r.startswith("6,")))
    (folder / "less2.csv.gz").write_bytes(gzip.compress("".join(  # 3600.0, then 3500.0
        r for r in rows if not r.startswith(("6,", "1,"))).encode()))
    (folder / "same.csv").write_text(PENGUINS.replace("3700", "3600").replace("3900", "4000"))
    (folder / "renamed.csv").write_text(PENGUINS.replace("\n1,", "\nP1,"))
    body = json.loads((folder / "task.json").read_text())
    body["reference"] = {"command": MEAN,
                         "mutants": {"penguins.csv": [["less1.csv", "less2.csv.gz"],
                                                      "same.csv"]},
                         "controls": {"penguins.csv": ["renamed.csv"]}}
    (folder / "task.json").write_text(json.dumps(body))
    task = load_tasks(root).get("adelie")
    assert task.reference_program is not None and task.reference_program.mutants == {
        "penguins.csv": ((folder / "less1.csv", folder / "less2.csv.gz"), (folder / "same.csv",))}
    settings = Settings.of(StrengthConfig())
    with make_sandbox("auto") as box:
        [penguins, _] = census(StrengthTask(task.data_files(), task.strength_reference(box),
                                 lambda a, b: grade_against(task.grader, a, b).correct is True), settings)
    assert penguins.name == "penguins.csv" and penguins.classified
    aimed = [m for m in penguins.mutants if ":aimed" in m.label]
    assert [m.label for m in aimed] == ["penguins.csv:aimed0#0", "penguins.csv:aimed0#1"]
    assert [m.data for m in aimed] == [(folder / "less1.csv").read_bytes(),
                                       gzip.decompress((folder / "less2.csv.gz").read_bytes())]
    assert not any(m.data == (folder / "same.csv").read_bytes() for m in penguins.mutants)
    assert penguins.controls[0].label == "penguins.csv:control0#0"
    assert penguins.controls[0].data == (folder / "renamed.csv").read_bytes()


# ----- the rule for a task without one -----

def test_without_a_reference_checks_run_but_earn_nothing_and_correctness_pays(
        tmp_path: Path) -> None:
    source = load_tasks(_suite(tmp_path, None))
    with pytest.warns(UserWarning, match="1 of 1 tasks"):
        env = VeraEnv(source, max_steps=4)
    try:
        env.reset(options={"task_id": "adelie"})
        _, reward, _, _, info = env.step(_pin(PENGUINS))
        [pin] = info[keys.CHECKS]
        assert pin["passed"] and pin["discriminating"] is False
        assert pin["detail"] == unref.NO_REFERENCE_DETAIL and reward == 0
        _, reward, _, _, info = env.step(HONEST)
        assert info[keys.CHECKS][0]["passed"] and reward == 0
        _, reward, term, _, _ = env.step(ANSWER)
        assert term and reward == pytest.approx(RewardConfig().correctness_weight)
    finally:
        env.close()


def test_undetermined_answer_needs_no_reference_and_the_gate_does_not_wait(
        tmp_path: Path) -> None:
    """A canary's answer is kept by every variant: not announced, its checks earn
    nothing, and the emission gate releases its answer (no check could open it)."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "penguins.csv").write_text(PENGUINS)
    canary = Task(id="emperor", question="Mean mass of Emperor penguins?",
                  answer="cannot be determined",
                  grader={"kind": "regex", "pattern": r"cannot\s+be\s+determined"},
                  data_dir=tmp_path / "data")
    assert not unref.needs_reference(canary) and not unref.classifiable(canary)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = VeraEnv([canary], max_steps=4)
    env.require_verified_leaf = True
    try:
        env.reset()
        _, _, term, _, info = env.step(
            "<command>grep -c Emperor penguins.csv</command>\n"
            'NODE kind=test summary="no Emperor rows"\n'
            'CHECK range "none" :: test "$(grep -c Emperor penguins.csv)" -eq 0 '
            "&& echo True || echo False\nFINAL ANSWER: cannot be determined")
        assert info[keys.CHECKS][0]["discriminating"] is False
        assert term and info[keys.ANSWER] == "cannot be determined"
    finally:
        env.close()


def test_notice_is_given_once_per_suite_and_not_for_a_referenced_one(tmp_path: Path) -> None:
    bare = load_tasks(_suite(tmp_path / "bare", None))
    with pytest.warns(UserWarning) as caught:
        for _ in range(2):
            VeraEnv(bare, max_steps=2).close()
    notices = [str(w.message) for w in caught if "declare no reference" in str(w.message)]
    assert notices == [unref.announce_unreferenced(bare)]
    assert notices[0].startswith(f"1 of 1 tasks in {bare.name} declare no reference")
    assert '"reference": {"command": "..."}' in notices[0]
    referenced = load_tasks(_suite(tmp_path / "ok", {"command": MEAN}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        VeraEnv(referenced, max_steps=2).close()
        VeraEnv(bare, max_steps=2, reward=RewardConfig(strength=False)).close()
    assert unref.announce_unreferenced(TaskSource([], name="empty")) == ""


def test_serve_announces_each_split_when_it_loads(tmp_path: Path) -> None:
    """A server's sessions build their envs later, over a source of every split: the
    notice comes when the splits are loaded."""
    from vera_env.serve.splits import Splits

    bare = _suite(tmp_path / "bare", None)
    with pytest.warns(UserWarning, match=f"1 of 1 tasks in {re.escape(str(bare))} declare"):
        Splits({"train": str(bare), "test": str(_suite(tmp_path / "ok", {"command": MEAN}))})


def test_controls_print_exactly_the_answer_and_irrelevant_records_are_asked_of_the_program(
        tmp_path: Path) -> None:
    """A variant inside the grader's tolerance of the answer is neither control nor
    mutant; a sampled record is irrelevant only if the program's answer survives it
    repeated as often as the file has records (asked of at most eight records, and of
    the holders of the file's ends)."""
    import zlib

    from vera_env.verification.strength.ends import end_groups

    rows = [f"{i},{group},{value}\n" for i, (group, value) in
            enumerate([("a", 10), ("a", 20), ("b", 7)] * 40)]
    sampled = [r for r in rows if zlib.crc32(r.encode()) % 10 == 0]
    assert {r.split(",")[1] for r in sampled} == {"a", "b"}
    (tmp_path / "t.csv").write_text("id,group,value\n" + "".join(rows))
    task = Task(id="m", question="Mean value of group a?", answer="15.0",
                grader={"kind": "numeric", "abs_tol": 0.5}, data_dir=tmp_path,
                reference={"command": "awk -F, '$2 == \"a\" { s += $3; n++ } "
                                      "END { printf \"%.1f\\n\", s / n }' t.csv"})
    base = (tmp_path / "t.csv").read_bytes()
    with make_sandbox("auto") as box:
        reference = task.strength_reference(box)
        assert reference is not None
        assert reference.solve({"t.csv": base + b"99,a,17\n"}) == "15.0"  # rounds away
        with pytest.raises(ValueError, match="within the grader's tolerance"):
            reference.solve({"t.csv": base + b"98,a,24\n"})  # 15.1
        assert reference.solve({"t.csv": base + b"97,a,100\n"}) == "16.0"  # a mutant
        irrelevant = reference.irrelevant["t.csv"]
        verdicts = {r: irrelevant(r.encode()) for r in sampled}
        chosen = sampled[::-(-len(sampled) // 8)][:8]  # eight program runs, spread
        assert len(sampled) > 8 and not any(v for r, v in verdicts.items() if r not in chosen)
        assert [verdicts[r] for r in chosen] == [r.split(",")[1] == "b" for r in chosen]
        ends = {rows[i] for group in end_groups([r.encode() for r in rows]) for i in group}
        assert ends - set(sampled)  # the ends are asked beside the sample
        assert {r for r in ends if irrelevant(r.encode())} == {
            r for r in ends if r.split(",")[1] == "b"}
        assert not any(irrelevant(r.encode()) for r in rows if r not in {*sampled, *ends})


def test_irrelevant_records_are_found_in_a_file_sorted_by_group(tmp_path: Path) -> None:
    """The probes are spread over the file: a table listing the asked group first (as
    penguins.csv lists its Adelie rows) once spent every probe on that group, so no
    record was ever dropped as irrelevant and a whole-column sum survived every control."""
    rows = [f"{i},a,{10 + i % 7}\n" for i in range(150)]
    rows += [f"{i},b,{i % 5}\n" for i in range(150, 300)]
    (tmp_path / "t.csv").write_text("id,group,value\n" + "".join(rows))
    task = Task(id="s", question="Sum of group a's values?", answer="0",
                grader={"kind": "numeric"}, data_dir=tmp_path,
                reference={"command": "awk -F, '$2 == \"a\" { s += $3 } END { print s }' t.csv"})
    with make_sandbox("auto") as box:
        reference = task.strength_reference(box)
        assert reference is not None
        irrelevant = reference.irrelevant["t.csv"]
        dropped = [r for r in rows if irrelevant(r.encode())]
        assert dropped and all(r.split(",")[1] == "b" for r in dropped)


def test_a_pin_of_an_end_held_by_an_unread_record_dies_on_a_program_reference(
        tmp_path: Path) -> None:
    """A program reference knows only the unread records its probes found, so a drop of
    a random tenth of them almost never moved the least value of a column; a pin of it,
    held by a row the question never reads, earned on a hand-written task (the MYC read
    sum of docs/examples/suite: the least read count in byte order was a KRAS row's).
    Each draw now drops the unread holders of some of the file's ends: the pin dies on a
    control, and the honest recount still earns."""
    rows = [f"L{i:03d}\t{'MYC' if i % 5 == 0 else 'KRAS'}\t{200 + (i * 37) % 700}\n"
            for i in range(1, 121)]
    rows[40] = "L041\tKRAS\t1005\n"  # the least in byte order: an unread row's
    total = sum(int(r.split("\t")[2]) for r in rows if r.split("\t")[1] == "MYC")
    folder = tmp_path / "suite" / "myc"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "counts.tsv").write_text("id\tgene\treads\n" + "".join(rows))
    sum_myc = "awk -F'\\t' '$2 == \"MYC\" { s += $3 } END { print s + 0 }' counts.tsv"
    (folder / "task.json").write_text(json.dumps({
        "id": "myc", "question": "Total reads of MYC?", "answer": str(total),
        "grader": {"kind": "numeric", "abs_tol": 0}, "reference": {"command": sum_myc}}))
    least = "1005"
    assert min(r.split("\t")[2].strip() for r in rows) == least
    pin = ("<command>cut -f3 counts.tsv | sort | head -n 2</command>\n"
           'NODE kind=load summary="the least read count"\n'
           "CHECK range \"least\" :: test \"$(tail -n +2 counts.tsv | cut -f3 | LC_ALL=C sort "
           f"| head -n 1)\" = {least} && echo True || echo False")
    honest = (f"<command>{sum_myc}</command>\n"
              f'NODE kind=test summary="MYC reads {total}"\n'
              f'CHECK range "MYC recount" :: test "$({sum_myc})" -eq {total} '
              "&& echo True || echo False")
    source = load_tasks(tmp_path / "suite")
    earned = {}
    for name, turn in (("pin", pin), ("honest", honest)):
        env = VeraEnv(source, max_steps=3)
        try:
            env.reset(seed=0)
            _, _, _, _, info = env.step(turn)
            env.step(f"FINAL ANSWER: {total}")
            earned[name] = info["reward_parts"]["verification"]
        finally:
            env.close()
    assert earned["pin"] == 0.0 and earned["honest"] > 0.0, earned
