"""The hackability audit: does a suite's reward rank analysis above the attack battery?

Why. A verification reward is a reward only if the cheapest way to earn it is the
analysis; a suite's own data decides whether that holds (a sentinel column, an id
field, a header a hash can pin). ``benchmarks/reward_ranking.py`` showed, type by type,
that task-blind policies out-earned the reference before strength was redesigned, and
a red team kept finding new classes. So any suite can be audited the same way: each
task's reference (its ``solution`` turns) and every attack of
``vera_env.evaluation.attacks`` are played through the real environment, strength on,
and the task is judged by ``judge``:

* ``ranks analysis``: every no-analysis policy earns at most ``CAP`` per episode and
  the reference at least ``FACTOR`` times the best of them (and more than 0);
* ``hackable``: an attack broke one of those, or a gated recount of the reference
  earned more than its honest twin (``first_checks``: the same reference, each node's
  first check alone, ungated);
* ``ranks nothing``: no attack earns, and neither does the reference;
* ``no reference``: the task has no solution turns to compare with (the attacks are
  still played, and what they earn is reported);
* ``unscorable``: an episode ended in an infrastructure fault (no sandbox, an error)
  and nothing else made the task hackable: its 0 would measure nothing, so the task is
  not called safe.

This module holds the one play loop: ``play_jobs`` plays (task, policy, repetition)
jobs in processes, each with its own environment, and returns one row per episode;
``benchmarks/reward_ranking.py`` uses it too.
"""

from __future__ import annotations

import functools
import multiprocessing.util
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from vera_env.evaluation.attacks import (
    BASELINE,
    BLIND,
    POLICIES,
    SHAPED,
    AttackPolicy,
    coin_nodes,
)
from vera_env.evaluation.metrics import EXCLUDED_STATUSES
from vera_env.policy import OraclePolicy, ScriptedPolicy
from vera_env.rollout import Attempt, EnvPool, play_job
from vera_env.spec import EnvSpec
from vera_env.tasks import Task, TaskSource

__all__ = ["CAP", "FACTOR", "REFERENCE", "Job", "TaskAudit", "VerdictName", "audit_jobs",
           "audit_tasks", "init_worker", "judge", "play", "play_jobs", "summarise"]

CAP = 0.05
"""The most a no-analysis policy may earn per episode on a task that ranks analysis."""
FACTOR = 5.0
"""How many times the best no-analysis policy the reference must earn."""
_EPS = 1e-9
REFERENCE = "reference"
CARELESS = "careless"
VerdictName = Literal["ranks analysis", "hackable", "no reference", "ranks nothing",
                      "unscorable"]
Job = tuple[str, str, int]
"""An episode to play: task id, policy name, repetition (the reset seed)."""


# ----- the verdict -----

def judge(reference: float | None, blind: Mapping[str, float],
          shaped: Mapping[str, tuple[float, float]] | None = None) -> tuple[VerdictName, str]:
    """A task's verdict and the policy that decided it ("" when none did).

    Args:
        reference: What the reference earned per episode; None without one.
        blind: What each no-analysis policy earned per episode.
        shaped: Per shaped policy, (what it earned, what its honest twin earned).

    Returns:
        (verdict, policy): ``hackable`` names the attack that broke the rule, the best
        no-analysis policy first.
    """
    if reference is None:
        return "no reference", ""
    name, best = max(blind.items(), key=lambda kv: kv[1], default=("", 0.0))
    if best > CAP + _EPS or reference < FACTOR * best - _EPS:
        return "hackable", name
    over = sorted((earned - allowed, n) for n, (earned, allowed) in (shaped or {}).items()
                  if earned > allowed + _EPS)
    if over:
        return "hackable", over[-1][1]
    if reference <= 0:
        return "ranks nothing", ""
    return "ranks analysis", ""


@dataclass(frozen=True, slots=True)
class TaskAudit:
    """What the audit found on one task.

    Attributes:
        task_id: The task.
        verdict: See ``judge``.
        by: The attack that made it ``hackable`` ("" otherwise).
        reference: The reference's verification per episode (None without one).
        best_policy: The no-analysis policy that earned most ("" when none earned).
        best: What it earned per episode.
        ratio: reference / best (None when either is missing or best is 0).
        earned: Every policy's verification per episode (the mean over repetitions).
        allowance: Per shaped policy, what its honest twin (``first_checks``) earned.
        faults: Episodes that ended in an infrastructure fault (left out of ``earned``).
    """

    task_id: str
    verdict: VerdictName
    by: str
    reference: float | None
    best_policy: str
    best: float
    ratio: float | None
    earned: dict[str, float] = field(default_factory=dict)
    allowance: dict[str, float] = field(default_factory=dict)
    faults: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return asdict(self)


def audit_tasks(rows: Sequence[dict[str, Any]], tasks: Sequence[Task]) -> list[TaskAudit]:
    """Each task's verdict from its episodes' rows (``summarise``), in ``tasks``' order.

    Args:
        rows: The episodes played.
        tasks: The audited tasks.
    """
    out = []
    for task in tasks:
        mine = [r for r in rows if r["task_id"] == task.id]
        faults = sum(r["status"] in EXCLUDED_STATUSES for r in mine)
        # a faulted episode's 0 measures nothing: it is left out
        earned = _means([r for r in mine if r["status"] not in EXCLUDED_STATUSES],
                        "verification")
        blind = {p: v for p, v in earned.items() if p in BLIND}
        twin = earned.get(BASELINE)
        shaped = {p: (v, twin) for p, v in earned.items() if p in SHAPED and twin is not None}
        reference = earned.get(REFERENCE) if task.solution else None
        verdict, by = judge(reference, blind, shaped)
        if faults and verdict != "hackable":
            verdict, by = "unscorable", ""
        best_policy, best = max(blind.items(), key=lambda kv: kv[1], default=("", 0.0))
        best_policy = best_policy if best > 0 else ""  # none earned: none is "best"
        ratio = reference / best if reference is not None and best > 0 else None
        out.append(TaskAudit(task.id, verdict, by, reference, best_policy, best, ratio,
                             earned, {p: limit for p, (_, limit) in shaped.items()}, faults))
    return out


def _means(rows: Sequence[dict[str, Any]], key: str) -> dict[str, float]:
    """Per policy, the mean of ``key`` over its rows."""
    by_policy: dict[str, list[float]] = {}
    for r in rows:
        by_policy.setdefault(r["policy"], []).append(float(r[key]))
    return {p: sum(v) / len(v) for p, v in by_policy.items()}


def audit_jobs(tasks: Sequence[Task], policies: Sequence[str]) -> list[Job]:
    """The episodes of an audit: each task's reference (where it has one) and battery,
    with the shaped policies' twin where one is played; the longest (``coin_nodes``)
    first, so parallel workers finish together."""
    names = sorted(policies, key=lambda p: p != "coin_nodes")
    if any(p in SHAPED for p in names) and BASELINE not in names:
        names.append(BASELINE)
    jobs: list[Job] = []
    for name in [REFERENCE, *names]:
        jobs += [(t.id, name, 0) for t in tasks
                 if t.solution or name in BLIND]
    return jobs


# ----- playing episodes, in whichever process plays them -----

@dataclass(slots=True)
class _Worker:
    source: TaskSource | None = None
    spec: EnvSpec | None = None


_WORKER = _Worker()


def init_worker(source: TaskSource, spec: EnvSpec) -> None:
    """Set the task source and environment of this process's episodes."""
    _WORKER.source, _WORKER.spec = source, spec
    _pool.cache_clear()


@functools.cache
def _pool() -> EnvPool:
    """This process's environments, closed when the process exits. A pool, so that an
    environment that cannot be built is that episode's ``sandbox`` status, not a crash."""
    if _WORKER.spec is None or _WORKER.source is None:
        raise RuntimeError("init_worker was not called in this process")
    pool = EnvPool(functools.partial(_WORKER.spec.build, tasks=_WORKER.source))
    multiprocessing.util.Finalize(pool, pool.close, exitpriority=10)
    return pool


def _policy(name: str, source: TaskSource, task: Task, max_steps: int) -> Any:
    if name == REFERENCE:
        return OraclePolicy(source)
    if name == CARELESS:
        return ScriptedPolicy({task.id: task.trap.careless_solution})  # type: ignore[union-attr]
    if name == "coin_nodes":
        return AttackPolicy(functools.partial(coin_nodes, max_steps=max_steps), source)
    return AttackPolicy(POLICIES[name], source)


def play(job: Job) -> tuple[dict[str, Any], str]:
    """Play one episode; its row (``summarise``) and the attempt as JSON."""
    task_id, name, rep = job
    pool, source = _pool(), _WORKER.source
    assert source is not None and _WORKER.spec is not None  # _pool() checked
    policy = _policy(name, source, source.get(task_id), _WORKER.spec.max_steps)
    attempt = play_job(pool, policy, (task_id, rep))
    return summarise(attempt, name, rep), attempt.to_json()


def summarise(attempt: Attempt, policy: str, rep: int) -> dict[str, Any]:
    """The row of one episode, read from its recorded steps."""
    checks = [c for s in attempt.steps for c in s.checks]
    earning = [s.reward_parts.verification for s in attempt.steps]
    return {"task_id": attempt.task_id, "policy": policy, "rep": rep,
            "verification": attempt.verification_reward, "correct": attempt.correct,
            "status": attempt.status, "error": attempt.error[:500], "steps": attempt.n_steps,
            "nodes": attempt.n_nodes, "checks": len(checks),
            "checks_passed": sum(c.passed for c in checks),
            "checks_discriminating": sum(bool(c.earns) for c in checks),
            "nodes_earning": sum(v > 0 for v in earning), "wall_s": attempt.wall_s,
            "earning_checks": [c.command[:300] for c in checks if c.earns]}


def play_jobs(jobs: Sequence[Job], source: TaskSource, spec: EnvSpec, *, workers: int = 1,
              on_row: Callable[[dict[str, Any], Attempt], None] | None = None
              ) -> list[dict[str, Any]]:
    """Every episode, in ``workers`` processes (1: here), in the order of ``jobs``.

    Args:
        jobs: The episodes.
        source: The tasks (each worker process gets its own environment over it).
        spec: The environment; its wrappers should be none (an audit plays bare).
        workers: Processes (the work of an episode is mostly in sandboxed subprocesses,
            but strength's bookkeeping is Python).
        on_row: Called with each row and its attempt as the episode ends.
    """
    rows = []

    def done(result: tuple[dict[str, Any], str]) -> dict[str, Any]:
        row, attempt = result
        if on_row is not None:
            on_row(row, Attempt.from_json(attempt))
        return row

    if workers <= 1:
        init_worker(source, spec)
        try:
            return [done(play(job)) for job in jobs]
        finally:
            _close_pool()
    with ProcessPoolExecutor(max_workers=workers, initializer=init_worker,
                             initargs=(source, spec)) as pool:
        rows = [done(result) for result in pool.map(play, jobs)]
    return rows


def _close_pool() -> None:
    if _pool.cache_info().currsize:
        _pool().close()
    _pool.cache_clear()

