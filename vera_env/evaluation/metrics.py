"""Summary metrics of an evaluation run: accuracy, pass@k, consistency, exclusions.

Two rules shape every number here.

Exclusions are not wrong answers. An episode that ended because the provider failed
(``provider``), the sandbox failed (``sandbox``), the harness raised (``error``) or the
grader could not be reached (``unscorable``) says nothing about the model; counting it
as wrong makes an outage look like a regression. Such attempts are counted in the status
breakdown and left out of every rate. Nothing a model writes can cause one (a judge
reply without a verdict grades the answer wrong; ``tests/redteam/test_fuzz_turns.py``
plays hostile turns to hold this), so an exclusion is never an opt-out from a wrong
answer. An ``error`` is a bug, in the harness or a policy: it is excluded too (scoring
it wrong would blame the model for the harness), but never quietly -- the summary
lists the first ones under ``harness_errors`` and the table prints them in a row of
their own, and ``vera-env eval`` exits non-zero. An attempt that ran out of budget without an
answer (``max_steps``) or never produced a well-formed turn (``format``) is the model's
failure: it is scored wrong, and also reported as "no usable answer".

pass@k is the unbiased estimator of Chen et al. (2021), ``1 - C(n-c, k) / C(n, k)`` per
task with ``n`` scored attempts of which ``c`` are correct, averaged over the tasks
with at least ``k`` scored attempts — not "any of the first k was right", whose value
depends on the order the attempts happened to finish in.

The accuracy interval is Wilson's score interval (95%), not the normal approximation:
at 3 attempts with none right the normal interval is "0.0% ± 0.0" — certainty from three
samples — where Wilson's says 0–56%.

How answers came is counted by the phase that released them (``Attempt.answer_phase``):
free turns, under forcing (``ForcedAnswer``'s last steps), and the extra ask after the
budget. ``answer_forced`` alone counts only the extra ask, so a run whose every answer
came through the forced prompt reported "answers_forced: 0".

Consistency follows BioMysteryBench, which runs each problem five times and also reports
how often a model is right in at least four of five: a task counts as consistent when
at least ``ceil(0.8 K)`` of its ``K`` attempts are right, over the tasks whose ``K``
attempts were all scored.

The canary rate is reported apart from accuracy: of the scored attempts on canaries
(questions the data cannot answer, `vera_env.tasks.canary`), the share answered with a
value instead of "cannot be determined". Accuracy folds canaries in with everything
else; a policy that learns to guess can hold its accuracy while this rate climbs. Its
mirror, the share of answerable tasks answered "cannot be determined", shows a policy
that learned to abstain to collect the canaries. Beside it, the share of canary attempts
answered right ("cannot be determined"), shown as "—" when the run holds no canary, so
a table without canaries says so instead of dropping the row.

What a trainer watches besides accuracy (``turn_metrics``): the format-error rate, the
share of turns the environment rejected (``info["error"]`` set: no parseable block, an
unknown tag...) over every turn played, and the mean return, the mean over the scored
episodes of the summed environment reward (``Attempt.score``), the number an RL run
optimises. Turns are counted on every attempt that played them, exclusions included: a
rejected turn is the model's doing whatever ended the episode later.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from vera_env.evaluation.summary import (
    Accuracy,
    AnswerPhases,
    Canaries,
    Consistency,
    GraphMeans,
    HarnessError,
    PassAtK,
    Summary,
    TaskSummary,
    TurnMetrics,
)
from vera_env.rollout import STATUSES, Attempt
from vera_env.tasks.canary import abstention_rate, canary_rate, is_canary

__all__ = ["CONSISTENCY_SHARE", "EXCLUDED_STATUSES", "HARNESS_ERRORS_KEPT", "Summary",
           "abstention_rate", "canary_rate", "format_summary", "harness_errors", "is_excluded",
           "latest_attempts", "outcome", "pass_at_k", "per_task", "summarise", "summary_rows",
           "turn_metrics", "wilson_interval"]

EXCLUDED_STATUSES = frozenset({"provider", "sandbox", "error"})
CONSISTENCY_SHARE = 0.8   # right in at least 4 of 5
HARNESS_ERRORS_KEPT = 5   # harness errors listed in the summary (all are counted)
_NO_ANSWER_STATUSES = frozenset({"max_steps", "format"})


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task: the chance that k of the n attempts hold a right one.

    Raises:
        ValueError: ``k`` outside ``1..n`` or ``c`` outside ``0..n``.
    """
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..n={n}, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"c must be in 0..n={n}, got {c}")
    if n - c < k:
        return 1.0
    # 1 - C(n-c, k)/C(n, k) as a product, stable for large n.
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval of a proportion (95% at the default ``z``).

    Example:
        >>> tuple(round(x, 3) for x in wilson_interval(0, 3))
        (0.0, 0.562)

    Raises:
        ValueError: ``n`` < 1 or ``successes`` outside ``0..n``.
    """
    if n < 1 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n and n >= 1, got {successes} of {n}")
    p, z2 = successes / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def is_excluded(attempt: Attempt) -> bool:
    """An infrastructure fault or an undecidable grade: kept out of every rate."""
    return attempt.status in EXCLUDED_STATUSES or attempt.unscorable or (
        attempt.status == "ok" and attempt.correct is None)


def harness_errors(attempts: Iterable[Attempt]) -> list[HarnessError]:
    """The attempts a harness bug ended (status ``error``): task, attempt index, error."""
    return [HarnessError(a.task_id, a.attempt_index, a.error)
            for a in attempts if a.status == "error"]


def latest_attempts(attempts: Iterable[Attempt]) -> list[Attempt]:
    """One attempt per (task, attempt index): the last one recorded wins."""
    latest: dict[tuple[str, int], Attempt] = {}
    for attempt in attempts:
        latest[(attempt.task_id, attempt.attempt_index)] = attempt
    return list(latest.values())


def per_task(attempts: Sequence[Attempt]) -> dict[str, TaskSummary]:
    """Per task: attempts, scored, correct, pass@1, and each attempt's outcome."""
    grouped: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        grouped[attempt.task_id].append(attempt)
    out: dict[str, TaskSummary] = {}
    for task_id in sorted(grouped):
        group = sorted(grouped[task_id], key=lambda a: a.attempt_index)
        scored = [a for a in group if not is_excluded(a)]
        correct = sum(bool(a.correct) for a in scored)
        out[task_id] = TaskSummary(
            attempts=len(group), scored=len(scored), correct=correct,
            pass_at_1=correct / len(scored) if scored else None,
            outcomes=tuple(outcome(a) for a in group), answers=tuple(a.answer for a in group))
    return out


def outcome(attempt: Attempt) -> str:
    """``right``, ``wrong``, ``no-answer`` or ``excluded:<why>``."""
    if is_excluded(attempt):
        return "excluded:" + (attempt.status if attempt.status != "ok" else "unscorable")
    if attempt.status in _NO_ANSWER_STATUSES:
        return "no-answer"
    return "right" if attempt.correct else "wrong"


def summarise(attempts: Sequence[Attempt], k: int) -> Summary:
    """The run's summary (what ``summary.json`` holds and the table prints).

    Args:
        attempts: One per (task, attempt index); see ``latest_attempts``.
        k: Attempts per task the run asked for (pass@k and consistency use it).

    Raises:
        ValueError: ``k`` < 1.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    tasks = per_task(attempts)
    scored = [a for a in attempts if not is_excluded(a)]
    statuses: Counter[str] = Counter(a.status for a in attempts)
    return Summary(
        attempts=len(attempts), tasks=len(tasks), k=k, excluded=len(attempts) - len(scored),
        accuracy=_accuracy(scored), pass_at=_pass_at(tasks, k),
        consistency=_consistency(tasks, k),
        no_answer_share=_share(a.status in _NO_ANSWER_STATUSES for a in scored),
        statuses={s: statuses.get(s, 0) for s in STATUSES},
        harness_errors=tuple(harness_errors(attempts)[:HARNESS_ERRORS_KEPT]),
        unscorable=sum(a.unscorable or (a.status == "ok" and a.correct is None)
                       for a in attempts),
        graph=_graph_means(scored), answers=_answers_by_phase(scored),
        canaries=_canaries(attempts, scored), turns=turn_metrics(attempts),
        tokens_in=_total(a.prompt_tokens for a in attempts),
        tokens_out=_total(a.completion_tokens for a in attempts),
        episode_wall_s=round(sum(a.wall_s for a in attempts), 3), per_task=tasks)


def _accuracy(scored: Sequence[Attempt]) -> Accuracy:
    n_scored, correct = len(scored), sum(bool(a.correct) for a in scored)
    if not n_scored:
        return Accuracy(0, 0, None, None, None)
    accuracy = correct / n_scored
    return Accuracy(n_scored, correct, accuracy,
                    math.sqrt(accuracy * (1 - accuracy) / n_scored),
                    wilson_interval(correct, n_scored))


def _pass_at(tasks: Mapping[str, TaskSummary], k: int) -> PassAtK:
    """pass@1 and pass@k over the tasks with enough scored attempts (None without)."""
    def mean_pass(j: int) -> float | None:
        eligible = [t for t in tasks.values() if t.scored >= j]
        return _mean(pass_at_k(t.scored, t.correct, j) for t in eligible)
    return PassAtK(k, mean_pass(1), mean_pass(k), sum(t.scored >= k for t in tasks.values()))


def _consistency(tasks: Mapping[str, TaskSummary], k: int) -> Consistency:
    threshold = math.ceil(CONSISTENCY_SHARE * k)
    complete = [t for t in tasks.values() if t.scored == k]
    rate = (_share(t.correct >= threshold for t in complete) if k >= 2 else None)
    return Consistency(rate, f"right in >= {threshold} of {k}", len(complete))


def _graph_means(scored: Sequence[Attempt]) -> GraphMeans:
    return GraphMeans(
        verification_reward=_mean(a.verification_reward for a in scored),
        discriminating_checks=_mean(a.n_discriminating for a in scored),
        checks=_mean(a.n_checks for a in scored), nodes=_mean(a.n_nodes for a in scored),
        steps=_mean(a.n_steps for a in scored))


def _canaries(attempts: Sequence[Attempt], scored: Sequence[Attempt]) -> Canaries:
    rate, n_canaries = canary_rate(scored)
    abstained, _ = abstention_rate(scored)
    right = [bool(a.correct) for a in attempts if is_canary(a.task_id) and not is_excluded(a)]
    return Canaries(rate, n_canaries, _share(right), abstained)


def turn_metrics(attempts: Sequence[Attempt]) -> TurnMetrics:
    """Format-error rate and mean return (see the module docstring).

    ``turns`` and ``rejected_turns`` count every attempt's steps; ``format_error_rate``
    is None without turns; ``mean_return`` is over the attempts with a score (None
    without).
    """
    turns = [step for a in attempts for step in a.steps]
    return TurnMetrics(
        turns=len(turns), rejected_turns=sum(bool(step.error) for step in turns),
        format_error_rate=_share(bool(step.error) for step in turns),
        mean_return=_mean(a.score for a in attempts if a.score is not None))


def _answers_by_phase(scored: Sequence[Attempt]) -> AnswerPhases:
    answered = [a for a in scored if a.answer]
    phase = [a.answer_phase or ("extra" if a.answer_forced else "") for a in answered]
    return AnswerPhases(free=phase.count("open"), under_forcing=phase.count("forced"),
                        extra_ask=phase.count("extra"), phase_unknown=phase.count(""))


def _share(flags: Iterable[bool]) -> float | None:
    """The share of true ``flags``; None when there are none."""
    return _mean(float(flag) for flag in flags)


def _total(values: Iterable[int | None]) -> int | None:
    """The sum of the reported values; None when none was reported."""
    reported = [v for v in values if v is not None]
    return sum(reported) if reported else None


def _mean(values: Iterable[float]) -> float | None:
    items = list(values)
    return sum(items) / len(items) if items else None


def _fmt(value: Any, kind: str = "rate", missing: str = "-") -> str:
    if value is None:
        return missing
    if kind == "rate":
        return f"{100 * value:.1f}%"
    if kind == "float":
        return f"{value:.3f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def summary_rows(summary: Summary) -> list[tuple[str, str]]:
    """The summary as (metric, value) rows, in the order the table prints them."""
    return [*_error_rows(summary), *_rate_rows(summary), *_answer_rows(summary),
            *_watch_rows(summary), *_graph_rows(summary)]


def _error_rows(summary: Summary) -> list[tuple[str, str]]:
    if not summary.harness_errors:
        return []
    first = summary.harness_errors[0]
    return [("HARNESS ERRORS", f"{summary.statuses['error']} attempt(s) raised in the harness "
             f"(a bug, excluded from every rate); first: {first.task_id} "
             f"#{first.attempt_index}: {first.error[:160]}")]


def _rate_rows(summary: Summary) -> list[tuple[str, str]]:
    k, acc = summary.k, summary.accuracy
    shown = _fmt(acc.rate)
    if acc.ci95:
        shown += f" [{100 * acc.ci95[0]:.1f}–{100 * acc.ci95[1]:.1f}]"
    rows = [("tasks x attempts", f"{summary.tasks} x {k} = {summary.attempts} "
                                 f"({summary.scored} scored, {summary.excluded} excluded)"),
            ("accuracy (95% CI)", shown), ("pass@1", _fmt(summary.pass_at.at_1))]
    if k > 1:
        consistency = summary.consistency
        rows.append((f"pass@{k}", f"{_fmt(summary.pass_at.at_k)} "
                                  f"(over {summary.pass_at.tasks_at_k} tasks)"))
        rows.append((f"consistency ({consistency.rule})",
                     f"{_fmt(consistency.rate)} (over {consistency.tasks} tasks)"))
    return rows


def _answer_rows(summary: Summary) -> list[tuple[str, str]]:
    answers, canaries = summary.answers, summary.canaries
    rows = [("no usable answer", _fmt(summary.no_answer_share)),
            ("answers free / forced / extra ask",
             f"{answers.free} / {answers.under_forcing} / {answers.extra_ask}")]
    if canaries.attempts:
        rows.append(("canary rate (answered with a value)",
                     f"{_fmt(canaries.rate)} of {canaries.attempts} canary attempts"))
    if canaries.attempts or canaries.abstention_rate:
        rows.append(("answerable tasks abstained on", _fmt(canaries.abstention_rate)))
    return rows


def _watch_rows(summary: Summary) -> list[tuple[str, str]]:
    """The rows a trainer watches (``turn_metrics`` and the canaries answered right)."""
    canaries, turns = summary.canaries, summary.turns
    return [
        ("canaries answered undetermined", _fmt(canaries.right_rate, missing="—")
         + (f" of {canaries.attempts} canary attempts" if canaries.attempts else "")),
        ("format errors (rejected turns)", f"{_fmt(turns.format_error_rate)} "
                                           f"({turns.rejected_turns} of {turns.turns} turns)"),
        ("mean return (episode reward)", _fmt(turns.mean_return, "float")),
    ]


def _graph_rows(summary: Summary) -> list[tuple[str, str]]:
    graph = summary.graph
    statuses = " ".join(f"{s}={n}" for s, n in summary.statuses.items() if n)
    return [
        ("status", statuses or "-"),
        ("mean verification reward", _fmt(graph.verification_reward, "float")),
        ("mean discriminating checks", _fmt(graph.discriminating_checks, "float")),
        ("mean steps / nodes", f"{_fmt(graph.steps, 'float')} / {_fmt(graph.nodes, 'float')}"),
        ("tokens in / out", f"{_fmt(summary.tokens_in, 'int')} / "
                            f"{_fmt(summary.tokens_out, 'int')}"),
    ]


def format_summary(summary: Summary) -> str:
    """The summary as a two-column plain-text table."""
    rows = summary_rows(summary)
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)
