"""Running a policy through episodes and keeping what happened as one record per episode.

The ``Attempt`` record and its status taxonomy come from the reference harness, so a run
here and a baseline run stay comparable. Statuses attribute every ending to one
boundary — "a bad rollout is data, not a crash":

* ``ok``: an answer was released (right or wrong);
* ``max_steps``: the budget ended with no usable answer;
* ``format``: the budget ended and not one turn was well-formed (the model never
  produced a parseable block);
* ``provider``: the policy's transport failed (``PolicyError``) — an exclusion, never a
  wrong answer;
* ``sandbox``: the sandbox failed (staging or execution) — an exclusion;
* ``error``: anything else raised; the message is kept.

``score`` is ``None`` for exclusions and unscorable grades: an infrastructure fault must
not become a reward of 0.
"""

from __future__ import annotations

import asyncio
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Literal, Sequence, get_args

from vera_env import info as keys
from vera_env.errors import PolicyError, SandboxError

__all__ = ["Attempt", "Status", "run_episode", "run_many"]

Status = Literal["ok", "max_steps", "format", "provider", "sandbox", "error"]
STATUSES: tuple[str, ...] = get_args(Status)


@dataclass(slots=True)
class Attempt:
    """One finished episode."""

    task_id: str
    status: Status = "ok"
    answer: str = ""
    correct: bool | None = None
    score: float | None = None
    verification_reward: float = 0.0
    n_steps: int = 0
    n_nodes: int = 0
    n_checks: int = 0
    n_discriminating: int = 0
    mean_rho: float = 0.0
    answer_forced: bool = False
    gated: int = 0
    unscorable: bool = False
    wall_s: float = 0.0
    error: str = ""
    seed: int | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)

    def to_json(self) -> str:
        """One JSON line."""
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str) -> "Attempt":
        """Parse a line written by ``to_json``.

        Raises:
            ValueError: The line is not an Attempt (unknown fields or status).
        """
        data = json.loads(line)
        if data.get("status") not in STATUSES:
            raise ValueError(f"unknown attempt status {data.get('status')!r}")
        try:
            return cls(**data)
        except TypeError as exc:
            raise ValueError(f"not an Attempt record: {exc}") from exc


def run_episode(env: Any, policy: Any, *, seed: int | None = None,
                task_id: str | None = None) -> Attempt:
    """Play one episode of ``policy`` in ``env`` (any wrapped ``VeraEnv``).

    Args:
        env: The environment; reset here.
        policy: Anything with ``act(observation, info) -> str``.
        seed: Seed for ``reset``.
        task_id: Task to play; None draws one with ``seed``.

    Returns:
        The ``Attempt``; never raises for a policy, sandbox or grader fault.
    """
    started = time.perf_counter()
    attempt = Attempt(task_id=task_id or "", seed=seed)
    try:
        obs, info = env.reset(seed=seed, options={"task_id": task_id} if task_id else None)
        attempt.task_id = info[keys.TASK_ID]
        if hasattr(policy, "begin_episode"):
            policy.begin_episode(info)
        _play(env, policy, obs, info, attempt)
    except PolicyError as exc:
        attempt.status, attempt.error = "provider", str(exc)
    except SandboxError as exc:
        attempt.status, attempt.error, attempt.unscorable = "sandbox", str(exc), True
    except Exception as exc:  # noqa: BLE001 - recorded as data with its type, not swallowed
        attempt.status, attempt.error = "error", f"{type(exc).__name__}: {exc}"
    _summarise(env, attempt)
    attempt.wall_s = time.perf_counter() - started
    return attempt


def _play(env: Any, policy: Any, obs: str, info: dict[str, Any], attempt: Attempt) -> None:
    total = 0.0
    while True:
        action = policy.act(obs, info)
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        attempt.steps.append({"action": action, "reward": reward,
                              **{k: info[k] for k in _STEP_FIELDS}})
        if terminated or truncated:
            break
    attempt.answer = info[keys.ANSWER]
    attempt.correct = info[keys.CORRECT]
    attempt.unscorable = info[keys.UNSCORABLE]
    attempt.answer_forced = info[keys.ANSWER_FORCED]
    attempt.gated = info[keys.GATED]
    attempt.verification_reward = info[keys.VERIFICATION_TOTAL]
    attempt.score = None if attempt.unscorable else total
    if attempt.unscorable and not attempt.answer:
        attempt.status, attempt.error = "sandbox", info[keys.ERROR]
    elif attempt.answer:
        attempt.status = "ok"
    elif all(step[keys.ERROR] for step in attempt.steps):
        attempt.status, attempt.error = "format", f"no well-formed turn: {info[keys.ERROR]}"
    else:
        attempt.status, attempt.error = "max_steps", "no usable answer within the budget"


_STEP_FIELDS = (keys.STEP, keys.ERROR, keys.NUDGE, keys.COMMAND_OUTPUT, keys.NODE,
                keys.CHECKS, keys.REWARD_PARTS, keys.FORCING, keys.ANSWER)


def _summarise(env: Any, attempt: Attempt) -> None:
    try:
        nodes = env.unwrapped.state.nodes
    except Exception:  # noqa: BLE001 - no episode (reset failed): nothing to summarise
        return
    attempt.n_steps = max((s[keys.STEP] for s in attempt.steps), default=0)
    attempt.n_nodes = len(nodes)
    attempt.n_checks = sum(len(n.checks) for n in nodes)
    attempt.n_discriminating = sum(c.earns for n in nodes for c in n.checks)
    attempt.mean_rho = round(sum(n.rho for n in nodes) / len(nodes), 4) if nodes else 0.0


def run_many(make_env: Callable[[], Any], policy: Any,
             jobs: Sequence[tuple[str | None, int | None]], *, concurrency: int = 4,
             on_done: Callable[[Attempt], None] | None = None) -> list[Attempt]:
    """Play many episodes, at most ``concurrency`` at once, each in its own env.

    Args:
        make_env: Builds a fresh environment (one per worker thread; closed after).
        policy: Shared by all episodes (scripted and HTTP policies are thread-safe).
        jobs: (task_id, seed) pairs, one per episode.
        concurrency: Episodes in flight at once.
        on_done: Called with each Attempt as it finishes (e.g. to append to a file).

    Returns:
        The Attempts, in the order of ``jobs``.

    Raises:
        ValueError: ``concurrency`` < 1.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    import threading  # noqa: PLC0415

    local = threading.local()
    envs: list[Any] = []
    lock = threading.Lock()

    def one(job: tuple[str | None, int | None]) -> Attempt:
        if not hasattr(local, "env"):
            local.env = make_env()
            with lock:
                envs.append(local.env)
        attempt = run_episode(local.env, policy, task_id=job[0], seed=job[1])
        if on_done:
            on_done(attempt)
        return attempt

    try:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return list(pool.map(one, jobs))
    finally:
        for env in envs:
            env.close()


async def arun_episode(env: Any, policy: Any, **kwargs: Any) -> Attempt:
    """Run ``run_episode`` in a worker thread (for asyncio callers)."""
    return await asyncio.to_thread(run_episode, env, policy, **kwargs)
