"""Perturbed variants: each kind corrupts the primary file as described, the truth is kept
or declared undetermined, the reference solution (bash, outside the sandbox) cleans up and
still gets the answer, and the careless answer stays wrong."""

from __future__ import annotations

import gzip
import subprocess
from pathlib import Path

import pytest
from solution_replay import replay

from vera_env.tasks import load_tasks
from vera_env.tasks.perturbed import (
    KINDS,
    base_census,
    kinds_for,
    make_perturbed_task,
    perturbed_source,
    split_variant_id,
)
from vera_env.tasks.real import make_real_task, real_id
from vera_env.tasks.source import UnknownTaskError
from vera_env.tasks.undetermined import CANNOT_DETERMINE
from vera_env.verification.grading import grade
from vera_env.verification.strength.encoding import decode

PENGUINS = real_id("csv.penguin_mass")


def _bytes(task, name: str) -> bytes:
    return task.data_files()[name].read_bytes()


def test_bom_crlf_and_dup_header_corrupt_only_the_primary_file() -> None:
    clean = _bytes(make_real_task(PENGUINS), "penguins.csv")
    bom = _bytes(make_perturbed_task(PENGUINS + "+bom"), "penguins.csv")
    crlf = _bytes(make_perturbed_task(PENGUINS + "+crlf"), "penguins.csv")
    dup = _bytes(make_perturbed_task(PENGUINS + "+dup_header"), "penguins.csv")
    assert bom == b"\xef\xbb\xbf" + clean
    assert crlf.replace(b"\r\n", b"\n") == clean and 50 < crlf.count(b"\r\n") < 300
    header = clean.split(b"\n", 1)[0] + b"\n"
    assert dup.count(header) == 2 and dup.replace(header, b"", 1).replace(header, b"") == \
        clean.replace(header, b"")
    assert not dup[len(header):].startswith(header)  # repeated inside, not at the top


def test_truncated_gzip_fails_integrity_and_answer_becomes_undetermined(tmp_path: Path) -> None:
    task = make_perturbed_task(real_id("vcf.het_sites") + "+truncated")
    data = _bytes(task, "chr22.vcf.gz")
    whole = _bytes(make_real_task(real_id("vcf.het_sites")), "chr22.vcf.gz")
    assert len(data) == int(len(whole) * 0.6)
    with pytest.raises(EOFError):
        gzip.decompress(data)
    readable = decode(data, max_bytes=1 << 30, budget_s=60, complete=False)  # what strength varies
    records = sum(1 for line in readable.content.split(b"\n")[:-1] if not line.startswith(b"#"))
    assert not readable.complete and records > 1000
    assert f'CHECK conservation "{records} complete records readable before the cut"' \
        in task.solution[0]
    assert task.answer == CANNOT_DETERMINE
    assert grade(task, "Cannot be determined.").correct is True
    assert grade(task, task.trap.wrong_answer).correct is False


def test_decoy_is_an_older_copy_and_bloat_pads_question_and_workspace() -> None:
    decoy = make_perturbed_task(PENGUINS + "+decoy")
    old, new = _bytes(decoy, "old/penguins.csv"), _bytes(decoy, "penguins.csv")
    assert new == _bytes(make_real_task(PENGUINS), "penguins.csv")
    assert 0.85 < old.count(b"\n") / new.count(b"\n") < 0.95
    base = make_real_task(PENGUINS)
    bloat = make_perturbed_task(PENGUINS + "+bloat")
    assert bloat.question.endswith(base.question) and len(bloat.question) > 2000
    assert bloat.data_files()["README.md"].stat().st_size > 30_000
    assert (decoy.answer, bloat.answer) == (base.answer, base.answer)


@pytest.mark.parametrize("primary, kinds", [
    ("penguins.csv", ("bom", "crlf", "dup_header", "decoy", "bloat")),
    ("chr22.vcf.gz", ("bom", "crlf", "truncated", "decoy", "bloat")),
    ("control.bam", ("truncated", "bloat")), ("pbmc68k_reduced.h5ad", ("truncated", "bloat"))])
def test_kinds_apply_by_format(primary: str, kinds: tuple[str, ...]) -> None:
    assert kinds_for(primary) == kinds


def test_inapplicable_or_unknown_kind_and_bad_ids_are_refused() -> None:
    with pytest.raises(UnknownTaskError, match="does not apply to 'control.bam'"):
        make_perturbed_task(real_id("bam.duplicates") + "+bom")
    with pytest.raises(UnknownTaskError, match="unknown perturbation 'smudge'"):
        make_perturbed_task(PENGUINS + "+smudge")
    with pytest.raises(UnknownTaskError, match="not a variant id"):
        split_variant_id(PENGUINS)


def test_perturbed_source_lists_every_applicable_kind_and_builtin_bases() -> None:
    ids = load_tasks("perturbed").ids()
    assert {i.rpartition("+")[2] for i in ids} == set(KINDS)
    assert real_id("bam.duplicates") + "+truncated" in ids
    assert real_id("bam.duplicates") + "+bom" not in ids
    builtin = perturbed_source("builtin", types=["tab.sentinel_mean"], kinds=["crlf", "bom"])
    assert builtin.ids() == ("tab.sentinel_mean.easy.s0+crlf", "tab.sentinel_mean.easy.s0+bom")
    with pytest.raises(ValueError, match="base must be"):
        perturbed_source("nowhere")


REPLAYED = [PENGUINS + f"+{k}" for k in ("bom", "crlf", "dup_header", "decoy", "bloat")] + [
    real_id("fastq.read_count") + "+crlf", real_id("gtf.exonic_bp") + "+bom",
    real_id("bam.duplicates") + "+truncated", real_id("h5ad.detected_cells") + "+truncated",
    real_id("vcf.het_sites") + "+crlf",
    "tab.sentinel_mean.easy.s0+dup_header", "vcf.het_count.easy.s0+truncated"]


@pytest.mark.parametrize("tid", REPLAYED)
def test_reference_cleans_up_and_answers_careless_stays_wrong(tid: str, tmp_path: Path) -> None:
    task = make_perturbed_task(tid)
    (tmp_path / "ws").mkdir()
    result = replay(task.solution, task.data_files(), tmp_path / "ws", "mawk")
    assert [v for v in result.verdicts if v[1] != "True"] == []
    assert grade(task, result.answer).correct is True
    assert grade(task, task.trap.wrong_answer).correct is False


def test_cleaning_turn_shifts_parent_links_of_the_original_analysis() -> None:
    base, task = make_real_task(PENGUINS), make_perturbed_task(PENGUINS + "+bom")
    assert len(task.solution) == len(base.solution) + 1
    assert "parents=n1" in base.solution[1] and "parents=n2" in task.solution[2]


def test_base_reference_without_cleaning_breaks_on_a_repeated_header(tmp_path: Path) -> None:
    """The perturbation matters: the untouched analysis is no longer right."""
    task = make_perturbed_task(PENGUINS + "+dup_header")
    (tmp_path / "ws").mkdir()
    for name, path in task.data_files().items():
        (tmp_path / "ws" / name).write_bytes(path.read_bytes())
    rows = subprocess.run(["bash", "-c", "awk -F, '$1 == \"species\"' penguins.csv | wc -l"],
                          cwd=tmp_path / "ws", capture_output=True, text=True,
                          check=True).stdout.strip()
    assert rows == "2"


@pytest.mark.parametrize("tid", [PENGUINS + "+crlf", real_id("vcf.het_sites") + "+bom",
                                 real_id("csv.lung_median") + "+dup_header"])
def test_cleaning_check_recounts_what_the_question_reads_not_every_line(tid: str) -> None:
    """A line count of the whole file fails strength's controls (irrelevant records
    dropped); the check recounts the records the base question reads."""
    census = base_census(tid.rpartition("+")[0])
    assert census is not None
    qc = make_perturbed_task(tid).solution[0]
    assert "kind=qc" in qc and census.command in qc and f"-eq {census.value}" in qc
    assert "wc -l)\" -eq" not in qc.split(census.command)[0]


def test_cleaning_turn_of_a_base_without_census_declares_no_check() -> None:
    assert base_census("tab.sentinel_mean.easy.s0") is None
    qc = make_perturbed_task("tab.sentinel_mean.easy.s0+crlf").solution[0]
    assert "kind=qc" in qc and "CHECK" not in qc


def test_reference_composition_lives_in_its_own_module() -> None:
    from vera_env.tasks import perturbed, perturbed_reference

    assert perturbed.perturbed_reference is perturbed_reference.perturbed_reference


@pytest.mark.parametrize("tid", [real_id("vcf.het_sites") + "+truncated",
                                 real_id("gtf.exonic_bp") + "+truncated"])
def test_truncation_check_holds_when_a_comment_line_is_added(tid: str, tmp_path: Path) -> None:
    """Strength's controls of a cut VCF or GTF add a comment line to its header; a count of
    every readable line failed them (validate: "node n1 earns nothing"), a count of the
    records holds."""
    task = make_perturbed_task(tid)
    name = next(iter(task.data_files()))
    content = decode(_bytes(task, name), max_bytes=1 << 30, budget_s=60, complete=False).content
    commented = content.replace(b"\n", b"\n# a note\n", 1)
    (tmp_path / name).write_bytes(gzip.compress(commented))
    check = task.solution[0].split(" :: ", 1)[1]
    out = subprocess.run(["bash", "-c", check], cwd=tmp_path, capture_output=True, text=True,
                         timeout=60, check=True).stdout.strip()
    assert out == "True"
