"""Exporting a source as a folder suite: it loads back the same, and real data keeps its
attribution (``SOURCES.md``)."""

from __future__ import annotations

import pytest

from vera_env.tasks import load_folder
from vera_env.tasks.builtin import make_task
from vera_env.tasks.canary import make_canary_task
from vera_env.tasks.export import task_json, write_suite
from vera_env.tasks.real import SOURCES, data_source, make_real_task


def test_export_round_trips_builtin_tasks_and_writes_no_sources_file(tmp_path):
    tasks = [make_task("seq.motif_count.easy.s0"), make_task("tab.sentinel_mean.easy.s0")]
    write_suite(tasks, tmp_path / "suite")
    back = load_folder(tmp_path / "suite")
    assert [task_json(back.get(t.id)) for t in tasks] == [task_json(t) for t in tasks]
    assert not (tmp_path / "suite" / "SOURCES.md").exists()


def test_export_of_real_and_canary_tasks_names_each_source_and_its_licence(tmp_path):
    real = make_real_task("real.csv.lung_median.s0")
    canary = make_canary_task("real.csv.lung_median.s0+absent")
    penguins = make_real_task("real.csv.penguin_mass.s0")
    write_suite([real, canary, penguins, make_task("seq.motif_count.easy.s0")], tmp_path / "s")
    text = (tmp_path / "s" / "SOURCES.md").read_text(encoding="utf-8")
    lifelines, palmer = SOURCES["lifelines"], SOURCES["palmerpenguins"]
    rows = [line for line in text.splitlines() if line.startswith("| pypi")]
    assert len(rows) == 2
    assert lifelines.licence in text and palmer.licence in text
    lung_row = next(r for r in rows if "lifelines" in r)
    assert real.id in lung_row and canary.id in lung_row and penguins.id not in lung_row
    assert "seq.motif_count" not in text  # generated data needs no attribution
    assert len(load_folder(tmp_path / "s").ids()) == 4  # the file does not disturb loading


@pytest.mark.parametrize("tid", ["seq.motif_count.easy.s0", "real.nope.x.s0", "realistic"])
def test_data_source_is_none_for_tasks_without_real_data(tid):
    assert data_source(tid) is None


def test_export_carries_a_familys_narrowed_rewrites_and_they_reach_strength(tmp_path):
    import json

    from vera_env.sandbox import make_sandbox

    real = make_real_task("real.csv.lung_median.s0")
    assert real.reference is not None and real.reference.rewriting
    write_suite([real], tmp_path / "s")
    body = json.loads((tmp_path / "s" / real.id / "task.json").read_text(encoding="utf-8"))
    declared = {k: list(v) for k, v in real.reference.rewriting.items()}
    assert body["reference"]["script"] == "reference.py"
    assert body["reference"]["rewrites"] == declared
    back = load_folder(tmp_path / "s").get(real.id)
    assert task_json(back) == task_json(real)
    with make_sandbox("auto") as box:
        reference = back.strength_reference(box)
        assert reference is not None
        assert {k: list(v) for k, v in reference.rewriting.items()} == declared


def test_a_reference_naming_an_unknown_rewrite_is_refused_naming_the_field(tmp_path):
    import json

    folder = tmp_path / "s" / "t1"
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "x.csv").write_text("a,b\n1,2\n", encoding="utf-8")
    (folder / "task.json").write_text(json.dumps({
        "id": "t1", "question": "q?", "answer": "1", "grader": {"kind": "exact"},
        "reference": {"command": "echo 1", "rewrites": {"x.csv": ["shuffle_columns"]}}}),
        encoding="utf-8")
    with pytest.raises(Exception, match=r"rewrites"):
        load_folder(tmp_path / "s")


def test_types_generic_mutations_miss_are_exported_with_their_familys_mutants(tmp_path):
    """A BAM (binary), a FASTQ (a line edit breaks a record) and a GFF (a tenth of its
    lines seldom touches the asked exons) get no generic mutant the script can grade:
    their family's declared mutants are what makes the exported task classifiable."""
    import json

    from vera_env.sandbox import make_sandbox
    from vera_env.verification.grading import grade_against
    from vera_env.verification.rewards import StrengthConfig
    from vera_env.verification.strength.task import StrengthTask
    from vera_env.verification.strength.variants import Settings, census, clear_cache

    ids = ["real.bam.duplicates.s0", "real.fastq.read_count.s0", "real.gff.exon_count.s0"]
    write_suite([make_real_task(t) for t in ids], tmp_path / "s")
    suite = load_folder(tmp_path / "s")
    settings = Settings.of(StrengthConfig())
    clear_cache()
    with make_sandbox("auto") as box:
        for tid in ids:
            body = json.loads((tmp_path / "s" / tid / "task.json").read_text(encoding="utf-8"))
            assert body["reference"]["script"] == "reference.py" and body["reference"]["mutants"]
            task = suite.get(tid)
            same = lambda a, b, t=task: grade_against(t.grader, a, b).correct is True  # noqa: E731
            files = census(StrengthTask(task.data_files(), task.strength_reference(box), same),
                           settings)
            assert all(f.classified for f in files), tid
            assert any(":aimed" in m.label for f in files for m in f.mutants), tid


def test_export_writes_a_familys_aimed_variants_and_strength_tries_them(tmp_path):
    """The family's mutators and controls are Python: export draws them as files beside
    task.json (never under data/), and the exported program classifies them first."""
    import gzip
    import json

    from vera_env.sandbox import make_sandbox
    from vera_env.verification.grading import grade_against
    from vera_env.verification.rewards import StrengthConfig
    from vera_env.verification.strength.task import StrengthTask
    from vera_env.verification.strength.variants import Settings, census, clear_cache

    task = make_task("tab.sentinel_mean.easy.s0")
    write_suite([task], tmp_path / "s")
    folder = tmp_path / "s" / task.id
    body = json.loads((folder / "task.json").read_text(encoding="utf-8"))
    kinds = body["reference"]["mutants"]["penguins.csv"]
    assert len(kinds) >= 2 and len(kinds[0]) == 2  # a single-outcome kind: one draw
    assert body["reference"]["controls"]["penguins.csv"]
    assert not (folder / "data" / "variants").exists()
    first = gzip.decompress((folder / kinds[0][0]).read_bytes())
    own = (folder / "data" / "penguins.csv").read_bytes()
    assert first != own and first.split(b"\n", 1)[0] == own.split(b"\n", 1)[0]
    back = load_folder(tmp_path / "s").get(task.id)
    assert task_json(back) == task_json(task)
    write_suite([back], tmp_path / "again")  # a loaded suite exports its files the same
    assert json.loads((tmp_path / "again" / task.id / "task.json").read_text()) == body
    assert (tmp_path / "again" / task.id / kinds[0][0]).read_bytes() == \
        (folder / kinds[0][0]).read_bytes()
    settings = Settings.of(StrengthConfig())
    clear_cache()
    with make_sandbox("auto") as box:
        files = census(StrengthTask(back.data_files(), back.strength_reference(box),
                                    lambda a, b: grade_against(back.grader, a, b).correct is True),
                       settings)
    penguins = next(f for f in files if f.name == "penguins.csv")
    assert any(":aimed0#" in m.label for m in penguins.mutants)
    assert any(":control0#" in c.label for c in penguins.controls)
