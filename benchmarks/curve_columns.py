"""Columns of ``learning_curve.py`` that read records, never a model: unit-testable.

Why these. The learning demonstration (``notes/LEARNING_PLAN.md``, section 3) trains on
verification alone, so the curve must show *how* verification rose, and keep what the
run folder held once the folder is gone:

* ``two_earning_node_share``: held-out nodes whose earning checks establish at least two
  facts -- the extra, distinct checks the demonstration's teacher shows a minority of
  the time. Two checks of one fact (``vera_env.verification.checks.fact_of``) count once,
  as the reward counts them;
* ``repeated_evidence_node_share``: nodes whose earning evidence repeats a fact an
  earlier node of the same episode established -- the honest recount re-declared in a
  reworded node. The reward pays such a fact once (``RewardLedger.facts``); a rising
  share is a policy searching for what it still might pay, and the plan's integrity
  stop rule reads it;
* ``training_groups``: per GRPO chunk, the groups it played, with ``verification_mixed``
  (members' verification differs: the signal a verification-only reward trains on) and
  ``zero_std`` (members' weighted rewards all equal: no advantage);
* ``step_log``: the GRPO run's per-step log (``curve.jsonl``) for the chunk's steps --
  zero-std share, verification spread, training accuracy -- copied into the results so
  it survives the loss of the run folder (attempts 8, 9, 12 and 14 lost theirs).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["STEP_KEYS", "evidence_nodes", "step_log", "training_groups"]

STEP_KEYS = ("reward", "reward_default", "reward_std", "frac_reward_zero_std",
             "rewards/verification_reward/mean", "rewards/verification_reward/std",
             "env/correct", "loss", "stepwise/redrawn_groups")
"""Keys of a GRPO step's log copied into each ``grpo_N`` record (those present)."""
_EPS = 1e-9


def evidence_nodes(attempt: Any) -> tuple[int, int, int]:
    """``(nodes with >= 2 earning facts, nodes repeating an earlier node's evidence,
    nodes)`` of one attempt (an ``Attempt`` or its JSON dict).

    A node repeats evidence when any fact its earning checks establish was established
    by an earlier node of the episode, as ``RewardLedger`` records facts.

    Example:
        >>> check = {"name": "c", "kind": "range", "command": "test 1 = 1", "passed": True}
        >>> node = {"id": "n1", "kind": "qc", "summary": "s", "checks": [check]}
        >>> evidence_nodes({"steps": [{"node": node}, {"node": node | {"id": "n2"}}]})
        (0, 1, 2)
    """
    from vera_env.records import StepRecord, recorded_nodes
    from vera_env.verification.checks import fact_of

    raw = attempt.get("steps") if isinstance(attempt, dict) else attempt.steps
    steps = [s if isinstance(s, StepRecord) else StepRecord.from_dict(s) for s in raw or ()]
    seen: set[str] = set()
    two = repeated = 0
    nodes = recorded_nodes(steps)
    for node in nodes:
        facts = {fact_of(c) for c in node.checks if c.earns}
        two += len(facts) >= 2
        repeated += bool(facts & seen)
        seen |= facts
    return two, repeated, len(nodes)


def _episodes(dump: Path, after: int, upto: int) -> dict[tuple[int, int], dict[str, Any]]:
    """Each episode the dump holds for steps ``after``..``upto``-1: its group, task,
    verdict and summed reward parts (None: unscorable, not trained and not redrawn)."""
    episodes: dict[tuple[int, int], dict[str, Any]] = {}
    for line in dump.read_text(encoding="utf-8").splitlines() if dump.is_file() else []:
        row = json.loads(line)
        if not after <= row["step"] < upto:
            continue
        key = (row["step"], row["episode"])
        episode = episodes.setdefault(key, {
            "group": row["group"], "task_id": row["task_id"], "right": row["correct"] is True,
            "redrawn": bool(row.get("redrawn")), "parts": [0.0, None, 0.0],
            "scorable": bool(row.get("trained", True)) or bool(row.get("redrawn"))})
        parts = row.get("reward_parts") or {}
        episode["parts"][0] += float(parts.get("verification") or 0.0)
        if parts.get("correctness") is not None:
            episode["parts"][1] = float(parts["correctness"])
        episode["parts"][2] -= float(parts.get("penalty") or 0.0)
    return episodes


def _spread(values: Sequence[float]) -> float:
    return max(values) - min(values) if len(values) > 1 else 0.0


def training_groups(dump: Path, after: int, upto: int,
                    weights: Sequence[float] = (1.0, 1.0, 1.0)) -> dict[str, Any]:
    """What GRPO steps ``after``+1..``upto`` played (the dump numbers generations from 0).

    Returns:
        Episodes and those right; groups, ``mixed`` (right and wrong members: the only
        ones with a correctness advantage), ``all_right``, ``all_wrong``;
        ``verification_mixed`` (scorable members' verification differs) and
        ``zero_std`` (their rewards under ``weights`` -- verification, correctness,
        format, as ``--reward-weights`` -- are all equal: no advantage); ``redrawn``:
        groups ``--redraw-uninformative`` replaced; right/played per task type.
    """
    from vera_env.tasks.builtin import parse_task_id

    episodes = _episodes(dump, after, upto)
    groups: dict[tuple[int, int], list[dict[str, Any]]] = {}
    per_type: dict[str, list[int]] = {}
    for (step, _), episode in sorted(episodes.items()):
        groups.setdefault((step, episode["group"]), []).append(episode)
        tally = per_type.setdefault(parse_task_id(episode["task_id"])[0], [0, 0])
        tally[0] += episode["right"]
        tally[1] += 1
    rights = [[e["right"] for e in g] for g in groups.values()]
    scorable = [[e["parts"] for e in g if e["scorable"]] for g in groups.values()]
    w_ver, w_cor, w_fmt = weights
    weighted = [[w_ver * v + w_cor * (c or 0.0) + w_fmt * f for v, c, f in g] for g in scorable]
    return {"episodes": len(episodes), "right": sum(e["right"] for e in episodes.values()),
            "groups": len(groups), "mixed": sum(0 < sum(r) < len(r) for r in rights),
            "all_right": sum(all(r) for r in rights),
            "all_wrong": sum(not any(r) for r in rights),
            "verification_mixed": sum(_spread([p[0] for p in g]) > _EPS for g in scorable),
            "zero_std": sum(_spread(g) <= _EPS for g in weighted),
            "redrawn": len({(s, g) for (s, g), members in groups.items()
                            if any(e["redrawn"] for e in members)}),
            "per_type": {t: f"{r}/{n}" for t, (r, n) in sorted(per_type.items())}}


def step_log(curve: Path, after: int, upto: int) -> list[dict[str, Any]]:
    """The logged steps ``after``+1..``upto`` of a GRPO run's ``curve.jsonl``, keeping
    ``STEP_KEYS`` (a log's ``step`` is the update it follows)."""
    out = []
    for line in curve.read_text(encoding="utf-8").splitlines() if curve.is_file() else []:
        row = json.loads(line)
        if after < row.get("step", 0) <= upto and "reward" in row:
            out.append({"step": row["step"]} | {k: row[k] for k in STEP_KEYS if k in row})
    return out
