"""Executing the checks a model declared: the harness decides, never the model.

A verification score is a reward only if the model cannot set it. The model declares
*what should be true* (a one-line command whose last output line is a verdict); the
harness runs that command and reads the verdict. Four rules follow, each from a
measured failure of self-report:

* A check that errors, times out, or prints no boolean **fails**. It is never skipped:
  if an unrunnable check could not hurt, the cheapest way to a high score would be
  checks that cannot run.
* Checks run against a **read-only** workspace (``Workspace.run_check``), so a check
  cannot change what the next check reads: the workspace is byte-identical before and
  after a node's checks.
* A check that printed a measurement instead of a verdict is marked ``malformed``: the
  environment asks once for a rewrite (a protocol slip is not evidence about the
  analysis) and counts it failed the second time.
* A node runs at most ``MAX_CHECKS_PER_NODE`` checks; the rest fail unrun. Only
  ``checks_per_node`` can earn anyway, and a turn of two thousand ``sleep 29`` checks
  would otherwise hold a rollout for hours.

Whether a passing check *discriminates* (would fail on different data) is decided by
``vera_env.verification.strength`` (on by default: ``RewardConfig.strength``); ``discriminating`` is
None where it was not tested (the check failed, or strength is off).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

from vera_env.records import CheckRecord
from vera_env.wire.protocol import CheckSpec, verdict_from_output

if TYPE_CHECKING:
    from vera_env.sandbox import ExecResult, Workspace

__all__ = ["MAX_CHECKS_PER_NODE", "CheckResult", "evidence_share", "evidence_units", "fact_of",
           "result_from_exec", "run_checks"]

_DETAIL_CHARS = 200
MAX_CHECKS_PER_NODE = 16


CheckResult = CheckRecord
"""The harness's verdict on one declared check: the record a step carries
(``vera_env.records.CheckRecord``), made here and nowhere else."""


def evidence_share(result: CheckResult) -> float:
    """How much of the answer one earning check tracks: the share of its file's mutants
    (variants whose answer differs) it rejected; 1.0 where strength recorded no verdicts.

    A check that holds on a mutant says the data is as expected where the answer is
    not, so passing mutants on purpose (gating a pin so it answers False on only some
    of them) can only lower what it earns.

    Example:
        >>> evidence_share(CheckResult("a", "range", "x", True, discriminating=True,
        ...                            evidence="x.tsv:FFTT"))
        0.5
    """
    verdicts = result.evidence.rpartition(":")[2]
    return verdicts.count("F") / len(verdicts) if verdicts else 1.0


def fact_of(result: CheckResult) -> str:
    """What one earning check establishes, as the harness can tell it: the file it was
    varied through and its verdicts over that file's mutants (its command, whitespace
    aside, where strength recorded none). Two checks with one fact are one piece of
    evidence, however worded."""
    return result.evidence or " ".join(result.command.split())


def evidence_units(results: Iterable[CheckResult], seen: Collection[str] = ()) -> float:
    """The evidence a node's earning checks add to an episode, in checks' worth.

    Each fact (``fact_of``) counts once per episode — a check repeated, reworded, or
    declared again in a later node adds nothing — and is weighed by the share of the
    answer it tracks (``evidence_share``).

    Args:
        results: The node's checks.
        seen: Facts already counted by earlier nodes of the episode.

    Example:
        >>> a = CheckResult("a", "range", "test 1 -eq 1", True, discriminating=True,
        ...                 evidence="x.tsv:FFFF")
        >>> b = CheckResult("b", "range", "other", True, discriminating=True,
        ...                 evidence="x.tsv:FFTT")
        >>> evidence_units([a, a, b])
        1.5
        >>> evidence_units([a, b], seen={"x.tsv:FFFF"})
        0.5
    """
    facts = {fact_of(r): evidence_share(r) for r in results if r.earns}
    return sum(share for fact, share in facts.items() if fact not in seen)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""


def result_from_exec(spec: CheckSpec, res: ExecResult) -> CheckResult:
    """Read one check's verdict from its execution result.

    Args:
        spec: The declared check.
        res: What running ``spec.command`` read-only produced.

    Returns:
        A passed result only when the command exited 0, did not time out, and its last
        non-empty stdout line is a true literal.
    """
    def failed(detail: str, malformed: bool = False) -> CheckResult:
        return CheckResult(spec.name, spec.kind, spec.command, False,
                           detail[:_DETAIL_CHARS], malformed=malformed,
                           duration_s=res.duration_s, cpu_s=res.cpu_s,
                           cpu_wait_s=res.cpu_wait_s)

    if res.timed_out:
        return failed(f"check timed out after {res.duration_s:.1f}s")
    if res.status not in ("ok",):
        return failed(f"check stopped: {res.status}")
    if res.exit_code != 0:
        return failed(f"check exited {res.exit_code}: {_last_line(res.stderr)}")
    verdict = verdict_from_output(res.stdout)
    if verdict is None:
        shown = _last_line(res.stdout)[-120:]
        return failed(f"check printed no True/False verdict (last line: {shown!r})",
                      malformed=True)
    if not verdict:
        return failed("check evaluated False")
    return CheckResult(spec.name, spec.kind, spec.command, True, duration_s=res.duration_s,
                       cpu_s=res.cpu_s, cpu_wait_s=res.cpu_wait_s)


def run_checks(specs: Sequence[CheckSpec], workspace: Workspace, *,
               timeout_s: float | None = None,
               max_checks: int = MAX_CHECKS_PER_NODE) -> tuple[CheckResult, ...]:
    """Run declared checks read-only in ``workspace`` and return their verdicts.

    Args:
        specs: The checks a node declared.
        workspace: The episode's workspace; checks go through ``run_check``, which
            mounts it read-only.
        timeout_s: Per-check wall clock; None uses the sandbox's default.
        max_checks: Checks run; those after it fail without running.

    Returns:
        One ``CheckResult`` per spec, in order.

    Raises:
        SandboxError: The sandbox itself failed (an infrastructure fault: the caller
            marks the episode unscorable rather than failing the check).
    """
    ran = tuple(result_from_exec(spec, workspace.run_check(spec.command, timeout_s=timeout_s))
                for spec in specs[:max_checks])
    unrun = tuple(CheckResult(spec.name, spec.kind, spec.command, False,
                              f"not run: a node runs at most {max_checks} checks")
                  for spec in specs[max_checks:])
    return ran + unrun
