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
from collections.abc import Iterable, Sequence
from typing import Any

from vera_env.rollout import STATUSES, Attempt
from vera_env.tasks.canary import abstention_rate, canary_rate, is_canary

__all__ = ["CONSISTENCY_SHARE", "EXCLUDED_STATUSES", "HARNESS_ERRORS_KEPT", "abstention_rate",
           "canary_rate", "format_summary", "harness_errors", "is_excluded", "latest_attempts",
           "outcome", "pass_at_k", "per_task", "summarise", "summary_rows", "turn_metrics",
           "wilson_interval"]

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


def harness_errors(attempts: Iterable[Attempt]) -> list[dict[str, Any]]:
    """The attempts a harness bug ended (status ``error``): task, attempt index, error."""
    return [{"task_id": a.task_id, "attempt_index": a.attempt_index, "error": a.error}
            for a in attempts if a.status == "error"]


def latest_attempts(attempts: Iterable[Attempt]) -> list[Attempt]:
    """One attempt per (task, attempt index): the last one recorded wins."""
    latest: dict[tuple[str, int], Attempt] = {}
    for attempt in attempts:
        latest[(attempt.task_id, attempt.attempt_index)] = attempt
    return list(latest.values())


def per_task(attempts: Sequence[Attempt]) -> dict[str, dict[str, Any]]:
    """Per task: attempts, scored, correct, pass@1, and each attempt's outcome."""
    grouped: dict[str, list[Attempt]] = defaultdict(list)
    for attempt in attempts:
        grouped[attempt.task_id].append(attempt)
    out: dict[str, dict[str, Any]] = {}
    for task_id in sorted(grouped):
        group = sorted(grouped[task_id], key=lambda a: a.attempt_index)
        scored = [a for a in group if not is_excluded(a)]
        correct = sum(bool(a.correct) for a in scored)
        out[task_id] = {
            "attempts": len(group), "scored": len(scored), "correct": correct,
            "pass@1": correct / len(scored) if scored else None,
            "outcomes": [outcome(a) for a in group],
            "answers": [a.answer for a in group],
        }
    return out


def outcome(attempt: Attempt) -> str:
    """``right``, ``wrong``, ``no-answer`` or ``excluded:<why>``."""
    if is_excluded(attempt):
        return "excluded:" + (attempt.status if attempt.status != "ok" else "unscorable")
    if attempt.status in _NO_ANSWER_STATUSES:
        return "no-answer"
    return "right" if attempt.correct else "wrong"


def summarise(attempts: Sequence[Attempt], k: int) -> dict[str, Any]:
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
    n_scored = len(scored)
    correct = sum(bool(a.correct) for a in scored)
    accuracy = correct / n_scored if n_scored else None
    statuses: Counter[str] = Counter(a.status for a in attempts)
    pass_k: dict[str, float | None] = {}
    for j in sorted({1, k}):
        eligible = [t for t in tasks.values() if t["scored"] >= j]
        pass_k[f"pass@{j}"] = (sum(pass_at_k(t["scored"], t["correct"], j) for t in eligible)
                               / len(eligible)) if eligible else None
    threshold = math.ceil(CONSISTENCY_SHARE * k)
    complete = [t for t in tasks.values() if t["scored"] == k]
    consistency = (sum(t["correct"] >= threshold for t in complete) / len(complete)
                   if k >= 2 and complete else None)
    tokens_in = [a.prompt_tokens for a in attempts if a.prompt_tokens is not None]
    tokens_out = [a.completion_tokens for a in attempts if a.completion_tokens is not None]
    canaries, n_canaries = canary_rate(scored)
    abstained, _ = abstention_rate(scored)
    return {
        "attempts": len(attempts), "tasks": len(tasks), "k": k,
        "scored": n_scored, "excluded": len(attempts) - n_scored, "correct": correct,
        "accuracy": accuracy,
        "accuracy_stderr": (math.sqrt(accuracy * (1 - accuracy) / n_scored)
                            if accuracy is not None else None),
        "accuracy_ci95": list(wilson_interval(correct, n_scored)) if n_scored else None,
        **pass_k,
        "pass@k_tasks": sum(t["scored"] >= k for t in tasks.values()),
        "consistency": consistency,
        "consistency_rule": f"right in >= {threshold} of {k}",
        "consistency_tasks": len(complete),
        "no_answer_share": (sum(a.status in _NO_ANSWER_STATUSES for a in scored) / n_scored
                            if n_scored else None),
        "statuses": {s: statuses.get(s, 0) for s in STATUSES},
        "harness_errors": harness_errors(attempts)[:HARNESS_ERRORS_KEPT],
        "unscorable": sum(a.unscorable or (a.status == "ok" and a.correct is None)
                          for a in attempts),
        "mean_verification_reward": _mean(a.verification_reward for a in scored),
        "mean_discriminating_checks": _mean(a.n_discriminating for a in scored),
        "mean_checks": _mean(a.n_checks for a in scored),
        "mean_nodes": _mean(a.n_nodes for a in scored),
        "mean_steps": _mean(a.n_steps for a in scored),
        **_answers_by_phase(scored),
        "canary_rate": canaries,
        "canary_attempts": n_canaries,
        **turn_metrics(attempts),
        "abstention_rate": abstained,
        "tokens_in": sum(tokens_in) if tokens_in else None,
        "tokens_out": sum(tokens_out) if tokens_out else None,
        "episode_wall_s": round(sum(a.wall_s for a in attempts), 3),
        "per_task": tasks,
    }


def turn_metrics(attempts: Sequence[Attempt]) -> dict[str, Any]:
    """Format-error rate, mean return and the canaries answered right.

    Returns:
        ``turns`` and ``rejected_turns`` over every attempt; ``format_error_rate``
        (None without turns); ``mean_return`` over the attempts with a score (None
        without); ``canary_right_rate`` over the scored canary attempts (None without).
    """
    turns = [step for a in attempts for step in a.steps]
    rejected = sum(bool(step.get("error")) for step in turns)
    canaries = [a for a in attempts if is_canary(a.task_id) and not is_excluded(a)]
    return {
        "turns": len(turns), "rejected_turns": rejected,
        "format_error_rate": rejected / len(turns) if turns else None,
        "mean_return": _mean(a.score for a in attempts if a.score is not None),
        "canary_right_rate": (sum(bool(a.correct) for a in canaries) / len(canaries)
                              if canaries else None),
    }


def _answers_by_phase(scored: Sequence[Attempt]) -> dict[str, int]:
    answered = [a for a in scored if a.answer]
    phase = [a.answer_phase or ("extra" if a.answer_forced else "") for a in answered]
    return {"answers_free": phase.count("open"), "answers_under_forcing": phase.count("forced"),
            "answers_extra_ask": phase.count("extra"),
            "answers_phase_unknown": phase.count("")}


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


def summary_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The summary as (metric, value) rows, in the order the table prints them."""
    k = summary["k"]
    acc = _fmt(summary["accuracy"])
    if summary.get("accuracy_ci95"):
        low, high = summary["accuracy_ci95"]
        acc += f" [{100 * low:.1f}–{100 * high:.1f}]"
    statuses = " ".join(f"{s}={n}" for s, n in summary["statuses"].items() if n)
    rows = []
    errors = summary.get("harness_errors") or []
    if errors:
        first = errors[0]
        rows.append(("HARNESS ERRORS", f"{summary['statuses']['error']} attempt(s) raised in "
                     f"the harness (a bug, excluded from every rate); first: "
                     f"{first['task_id']} #{first['attempt_index']}: {first['error'][:160]}"))
    rows += [
        ("tasks x attempts", f"{summary['tasks']} x {k} = {summary['attempts']} "
                             f"({summary['scored']} scored, {summary['excluded']} excluded)"),
        ("accuracy (95% CI)", acc),
        ("pass@1", _fmt(summary["pass@1"])),
    ]
    if k > 1:
        rows.append((f"pass@{k}", f"{_fmt(summary[f'pass@{k}'])} "
                                  f"(over {summary['pass@k_tasks']} tasks)"))
        rows.append((f"consistency ({summary['consistency_rule']})",
                     f"{_fmt(summary['consistency'])} "
                     f"(over {summary['consistency_tasks']} tasks)"))
    rows += [
        ("no usable answer", _fmt(summary["no_answer_share"])),
        ("answers free / forced / extra ask",
         " / ".join(str(summary.get(k, "-")) for k in
                    ("answers_free", "answers_under_forcing", "answers_extra_ask"))),
        *([("canary rate (answered with a value)", f"{_fmt(summary['canary_rate'])} of "
                                                   f"{summary['canary_attempts']} canary attempts")]
          if summary.get("canary_attempts") else []),
        *([("answerable tasks abstained on", _fmt(summary["abstention_rate"]))]
          if summary.get("canary_attempts") or summary.get("abstention_rate") else []),
        *_watch_rows(summary),
        ("status", statuses or "-"),
        ("mean verification reward", _fmt(summary["mean_verification_reward"], "float")),
        ("mean discriminating checks", _fmt(summary["mean_discriminating_checks"], "float")),
        ("mean steps / nodes", f"{_fmt(summary['mean_steps'], 'float')} / "
                               f"{_fmt(summary['mean_nodes'], 'float')}"),
        ("tokens in / out", f"{_fmt(summary['tokens_in'], 'int')} / "
                            f"{_fmt(summary['tokens_out'], 'int')}"),
    ]
    return rows


def _watch_rows(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """The rows a trainer watches (`turn_metrics`); a summary written before them shows
    "-" (the keys are read with ``get``)."""
    canaries = summary.get("canary_attempts")
    return [
        ("canaries answered undetermined",
         _fmt(summary.get("canary_right_rate"), missing="—")
         + (f" of {canaries} canary attempts" if canaries else "")),
        ("format errors (rejected turns)",
         f"{_fmt(summary.get('format_error_rate'))} ({summary.get('rejected_turns', '-')} of "
         f"{summary.get('turns', '-')} turns)"),
        ("mean return (episode reward)", _fmt(summary.get("mean_return"), "float")),
    ]


def format_summary(summary: dict[str, Any]) -> str:
    """The summary as a two-column plain-text table."""
    rows = summary_rows(summary)
    width = max(len(r[0]) for r in rows)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)
