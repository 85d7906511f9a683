"""Real, perturbed and canary tasks through the real environment and bubblewrap sandbox.

Exactly what ``vera-env tasks validate real|perturbed|canary`` decides: the oracle gets
full credit (answer correct, every check passed and, with strength testing, shown to
discriminate; a canary or truncated file, which has no reference, shown to earn
nothing), and the careless solution is graded wrong. Every real type runs with
strength testing; perturbed and canary tasks run on a sample that covers every kind
(the CLI validates them all).
"""

from __future__ import annotations

from vera_env.evaluation.validation import validate_tasks
from vera_env.tasks import TaskSource
from vera_env.tasks.canary import make_canary_task
from vera_env.tasks.perturbed import make_perturbed_task
from vera_env.tasks.real import REAL_TYPES, make_real_task, real_id
from vera_env.tasks.unreferenced import classifiable

# Not serial any more: beside a second test process a node of the slowest checks (h5ad,
# BAM: 0.3-1 s each) once ran out of strength's wall-clock deadline; its budget is now
# its runs' own time, which that process slows but does not spend (strength.budget).


def _assert_all_ok(tasks: list, *, strength: bool) -> None:
    source = TaskSource(tasks, name="sample")
    verdicts = validate_tasks(tasks, source, jobs=2,
                              strength_ids={t.id for t in tasks} if strength else set())
    failed = [(v.task_id, v.note) for v in verdicts if v.status != "ok"]
    assert not failed, failed
    for task, v in zip(tasks, verdicts, strict=True):
        assert v.careless.endswith("(wrong)"), v
        passed, total = v.checks.split("/")
        assert passed == total and int(total) > 0, v
        if strength and not classifiable(task):
            assert v.discriminating == f"0/{total}", v
        elif strength:  # a reference pin of a partial fact may split a kind of mutation
            # (gtf.exonic_bp: a moved coordinate; bam.duplicates: the reverse-strand count
            # under the aimed read edit), or be a count the controls barely move, which
            # cannot be told from a pin of it gated on its hash (``fingerprints``):
            # every node earns (the status), and most checks
            shown, tested = map(int, v.discriminating.split("/"))
            assert tested == int(total) and 2 * shown >= tested, v


def test_every_real_type_gets_full_credit_and_careless_is_wrong() -> None:
    _assert_all_ok([make_real_task(real_id(t)) for t in REAL_TYPES], strength=True)


def test_every_perturbation_and_canary_kind_validates_in_the_sandbox() -> None:
    tasks = [make_perturbed_task(f"real.csv.penguin_mass.s0+{k}")
             for k in ("bom", "crlf", "dup_header", "decoy", "bloat")]
    tasks += [make_perturbed_task(f"real.{t}.s0+truncated")
              for t in ("bam.duplicates", "h5ad.detected_cells", "fastq.read_count")]
    tasks += [make_perturbed_task("tab.sentinel_mean.easy.s0+crlf")]
    tasks += [make_canary_task(f"real.csv.lung_median.s0+{k}")
              for k in ("absent", "dropped_column", "na_column", "conflict")]
    tasks += [make_canary_task("real.h5ad.detected_cells.s0+absent"),
              make_canary_task("real.bam.duplicates.s0+absent")]
    _assert_all_ok(tasks, strength=True)
