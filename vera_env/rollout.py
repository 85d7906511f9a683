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

Token usage. A policy that calls a model may report what the last call cost through an
optional ``last_usage() -> (prompt_tokens, completion_tokens)``; the rollout adds it up
per episode right after each ``act``. It is read in the same thread (sync) or task
(async) that made the call, so one policy can serve many concurrent episodes.

``arun_many`` is the asyncio form of ``run_many``: one event loop drives every episode,
the policy's ``aact`` (an async HTTP call) is awaited, and only the environment's steps
(sandbox subprocesses) run in worker threads — so a hundred episodes waiting on a model
server cost a hundred coroutines, not a hundred threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterator, Literal, Sequence, TypeVar, get_args

from vera_env import info as keys
from vera_env.errors import PolicyError, SandboxError

__all__ = ["Attempt", "Status", "arun_episode", "arun_many", "map_episodes", "run_episode",
           "run_many"]

J = TypeVar("J")
R = TypeVar("R")

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
    attempt_index: int = 0                # which of the K attempts at this task (0-based)
    prompt_tokens: int | None = None      # summed over the episode; None: not reported
    completion_tokens: int | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)

    def add_usage(self, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        """Add one model call's token counts (None: the server did not report them)."""
        if prompt_tokens is not None:
            self.prompt_tokens = (self.prompt_tokens or 0) + prompt_tokens
        if completion_tokens is not None:
            self.completion_tokens = (self.completion_tokens or 0) + completion_tokens

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
    with _attributing(attempt):
        obs, info = _begin(env, policy, attempt, env.reset(
            seed=seed, options={"task_id": task_id} if task_id else None))
        while True:
            action = policy.act(obs, info)
            _count_usage(policy, attempt)
            obs, info, done = _record(attempt, env.step(action), action)
            if done:
                break
        _conclude(attempt, info)
    _summarise(env, attempt)
    attempt.wall_s = time.perf_counter() - started
    return attempt


async def arun_episode(env: Any, policy: Any, *, seed: int | None = None,
                       task_id: str | None = None,
                       executor: ThreadPoolExecutor | None = None) -> Attempt:
    """Async form of ``run_episode``.

    ``policy.aact`` is awaited when the policy has one; otherwise ``act`` runs in a
    worker thread. Environment calls (sandbox subprocesses) always run in ``executor``
    (the default executor when None).
    """
    loop = asyncio.get_running_loop()
    started = time.perf_counter()
    attempt = Attempt(task_id=task_id or "", seed=seed)
    options = {"task_id": task_id} if task_id else None
    with _attributing(attempt):
        reset = await loop.run_in_executor(
            executor, lambda: env.reset(seed=seed, options=options))
        obs, info = _begin(env, policy, attempt, reset)
        while True:
            if hasattr(policy, "aact"):
                action = await policy.aact(obs, info)
                _count_usage(policy, attempt)
            else:
                action, usage = await loop.run_in_executor(
                    executor, _act_with_usage, policy, obs, info)
                attempt.add_usage(*usage)
            result = await loop.run_in_executor(executor, env.step, action)
            obs, info, done = _record(attempt, result, action)
            if done:
                break
        _conclude(attempt, info)
    _summarise(env, attempt)
    attempt.wall_s = time.perf_counter() - started
    return attempt


@contextlib.contextmanager
def _attributing(attempt: Attempt) -> Iterator[None]:
    """Record what ended the episode early, attributed to one boundary."""
    try:
        yield
    except PolicyError as exc:
        attempt.status, attempt.error = "provider", str(exc)
    except SandboxError as exc:
        attempt.status, attempt.error, attempt.unscorable = "sandbox", str(exc), True
    except Exception as exc:  # noqa: BLE001 - recorded as data with its type, not swallowed
        attempt.status, attempt.error = "error", f"{type(exc).__name__}: {exc}"


def _begin(env: Any, policy: Any, attempt: Attempt, reset: tuple[str, dict[str, Any]]
           ) -> tuple[str, dict[str, Any]]:
    obs, info = reset
    attempt.task_id = info[keys.TASK_ID]
    if hasattr(policy, "begin_episode"):
        policy.begin_episode(info)
    return obs, info


def _count_usage(policy: Any, attempt: Attempt) -> None:
    last_usage = getattr(policy, "last_usage", None)
    if callable(last_usage):
        attempt.add_usage(*last_usage())


def _act_with_usage(policy: Any, obs: str, info: dict[str, Any]
                    ) -> tuple[str, tuple[int | None, int | None]]:
    # Runs in a worker thread: the usage must be read in the thread that made the call.
    action = policy.act(obs, info)
    last_usage = getattr(policy, "last_usage", None)
    return action, (last_usage() if callable(last_usage) else (None, None))


def _record(attempt: Attempt, result: tuple[str, float, bool, bool, dict[str, Any]],
            action: str) -> tuple[str, dict[str, Any], bool]:
    obs, reward, terminated, truncated, info = result
    attempt.steps.append({"action": action, "reward": reward,
                          **{k: info[k] for k in _STEP_FIELDS}})
    return obs, info, bool(terminated or truncated)


def _conclude(attempt: Attempt, info: dict[str, Any]) -> None:
    total = sum(step["reward"] for step in attempt.steps)
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


def map_episodes(make_env: Callable[[], Any], jobs: Sequence[J],
                 play: Callable[[Any, J], R], *, concurrency: int = 4) -> list[R]:
    """Call ``play(env, job)`` for every job, at most ``concurrency`` at once.

    Each worker thread builds its own environment on first use and reuses it for its
    later jobs; every environment is closed at the end, also when a job raised.

    Returns:
        ``play``'s results, in the order of ``jobs``.

    Raises:
        ValueError: ``concurrency`` < 1.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    local = threading.local()
    envs: list[Any] = []
    lock = threading.Lock()

    def one(job: J) -> R:
        if not hasattr(local, "env"):
            local.env = make_env()
            with lock:
                envs.append(local.env)
        return play(local.env, job)

    try:
        with ThreadPoolExecutor(max_workers=concurrency) as pool:
            return list(pool.map(one, jobs))
    finally:
        for env in envs:
            env.close()


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
    def play(env: Any, job: tuple[str | None, int | None]) -> Attempt:
        attempt = run_episode(env, policy, task_id=job[0], seed=job[1])
        if on_done:
            on_done(attempt)
        return attempt

    return map_episodes(make_env, jobs, play, concurrency=concurrency)


async def arun_many(make_env: Callable[[], Any], policy: Any,
                    jobs: Sequence[tuple[str | None, int | None]], *, concurrency: int = 4,
                    on_done: Callable[[Attempt], None] | None = None) -> list[Attempt]:
    """Async form of ``run_many``: one event loop, ``concurrency`` episodes in flight.

    Environments are built on demand (at most ``concurrency``), reused by later jobs and
    closed at the end. ``on_done`` runs on the event loop's thread, one call at a time,
    so it may append to a file without a lock.

    Raises:
        ValueError: ``concurrency`` < 1.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    loop = asyncio.get_running_loop()
    idle: list[Any] = []
    built: list[Any] = []
    gate = asyncio.Semaphore(concurrency)
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="vera-episode")

    async def one(job: tuple[str | None, int | None]) -> Attempt:
        async with gate:
            if idle:
                env = idle.pop()
            else:
                env = await loop.run_in_executor(executor, make_env)
                built.append(env)
            try:
                attempt = await arun_episode(env, policy, task_id=job[0], seed=job[1],
                                             executor=executor)
            finally:
                idle.append(env)
            if on_done:
                on_done(attempt)
            return attempt

    try:
        return list(await asyncio.gather(*(one(job) for job in jobs)))
    finally:
        # Running steps finish (each is bounded by the sandbox timeout); queued ones are
        # dropped, so an interrupted run stops promptly without leaking workspaces.
        executor.shutdown(wait=True, cancel_futures=True)
        for env in built:
            env.close()
