"""Playing a policy through episodes: one episode, many in threads, many on one event loop.

Every runner builds its record with the same ``Attempt`` lifecycle
(``vera_env.rollout.attempt``) and leases its environments from the same ``EnvPool``
(``vera_env.rollout.pool``), so an episode played here, in a vector env, on a Ray
worker, in training, in task validation or in a golden replay is the same record, and
a fault is caught at the same boundary: the policy's (``provider``), the sandbox's
(``sandbox``) or anything else (``error``) ends that attempt, never the batch.

Token usage. A policy that calls a model may report what the last call cost
(``vera_env.policy.ReportsUsage``: ``last_usage() -> (prompt_tokens,
completion_tokens)``); the runner adds it up per episode right after each ``act``. It
is read in the same thread (sync) or task (async) that made the call, so one policy can
serve many concurrent episodes.

``arun_many`` is the asyncio form of ``run_many``: one event loop drives every episode,
the policy's ``aact`` (an async HTTP call) is awaited, and only the environment's steps
(sandbox subprocesses) run in worker threads — so a hundred episodes waiting on a model
server cost a hundred coroutines, not a hundred threads.

Progress. ``on_step(attempt)`` is called after every step and ``on_done(attempt)`` after
every episode; on a CPU model a turn takes minutes, so a bar that moves only when an
episode ends looks dead for an hour. The async runners also call ``on_turn(attempt)``
before each turn is asked of the policy: ``vera-env eval`` of a local checkpoint sat for
three minutes (model load and first generation on CPU) with no sign a turn had begun.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym

from vera_env.policy import AsyncPolicy, Policy, ReportsUsage
from vera_env.rollout.attempt import Attempt
from vera_env.rollout.pool import EnvPool, EnvSource

__all__ = ["Job", "arun_episode", "arun_many", "play_job", "run_episode", "run_many"]

Job = tuple[str | None, int | None]
"""One episode to play: (task id or None to draw it with the seed, reset seed)."""
Hook = Callable[[Attempt], None]


def run_episode(env: gym.Env, policy: Policy, *, seed: int | None = None,
                task_id: str | None = None, max_turns: int | None = None,
                on_step: Hook | None = None) -> Attempt:
    """Play one episode of ``policy`` in ``env`` (any wrapped ``VeraEnv``).

    Args:
        env: The environment; reset here.
        policy: Anything with ``act(observation, info) -> str``.
        seed: Seed for ``reset``.
        task_id: Task to play; None draws one with ``seed``.
        max_turns: Stop after this many turns even if the episode goes on (a replay of
            a fixed script); None plays to the end.
        on_step: Called with the attempt after each step.

    Returns:
        The finished ``Attempt``; never raises for a policy, sandbox or grader fault.
    """
    attempt = Attempt.start(task_id, seed=seed)
    with attempt.capturing():
        _play(env, policy, attempt, max_turns=max_turns, on_step=on_step)
    return attempt.finish()


def play_job(pool: EnvPool, policy: Policy, job: Job, *,
             on_step: Hook | None = None) -> Attempt:
    """Play one job in an environment leased from ``pool``.

    Building the environment is inside the attempt's boundary: a sandbox that cannot be
    made now is this attempt's ``sandbox`` status, and the pool drops an environment
    whose episode raised.
    """
    attempt = Attempt.start(job[0], seed=job[1])
    with attempt.capturing(), pool.lease() as env:
        _play(env, policy, attempt, on_step=on_step)
    return attempt.finish()


def _play(env: gym.Env, policy: Policy, attempt: Attempt, *, max_turns: int | None = None,
          on_step: Hook | None = None) -> None:
    obs, info = env.reset(seed=attempt.seed, options=_options(attempt.task_id))
    attempt.begin(info, policy)
    ended, turns = False, 0
    while not ended and (max_turns is None or turns < max_turns):
        action = policy.act(obs, info)
        attempt.count_usage(policy)
        obs, reward, terminated, truncated, info = env.step(action)
        ended = attempt.add_step(action, obs, reward, terminated, truncated, info)
        turns += 1
        if on_step:
            on_step(attempt)


async def arun_episode(env: gym.Env, policy: Policy, *, seed: int | None = None,
                       task_id: str | None = None,
                       executor: ThreadPoolExecutor | None = None,
                       on_step: Hook | None = None, on_turn: Hook | None = None) -> Attempt:
    """Async form of ``run_episode``.

    ``policy.aact`` is awaited when the policy has one (``AsyncPolicy``); otherwise
    ``act`` runs in a worker thread. Environment calls (sandbox subprocesses) always run
    in ``executor`` (the default executor when None). ``on_turn`` is called with the
    attempt before each turn is asked of the policy.
    """
    attempt = Attempt.start(task_id, seed=seed)
    with attempt.capturing():
        await _aplay(env, policy, attempt, executor, on_step, on_turn)
    return attempt.finish()


async def _aplay(env: gym.Env, policy: Policy, attempt: Attempt,
                 executor: ThreadPoolExecutor | None, on_step: Hook | None,
                 on_turn: Hook | None = None) -> None:
    loop = asyncio.get_running_loop()
    options = _options(attempt.task_id)
    obs, info = await loop.run_in_executor(
        executor, lambda: env.reset(seed=attempt.seed, options=options))
    attempt.begin(info, policy)
    ended = False
    while not ended:
        if on_turn:
            on_turn(attempt)
        if isinstance(policy, AsyncPolicy):
            action = await policy.aact(obs, info)
            attempt.count_usage(policy)
        else:
            action, usage = await loop.run_in_executor(
                executor, _act_with_usage, policy, obs, info)
            attempt.add_usage(*usage)
        obs, reward, terminated, truncated, info = await loop.run_in_executor(
            executor, env.step, action)
        ended = attempt.add_step(action, obs, reward, terminated, truncated, info)
        if on_step:
            on_step(attempt)


def _options(task_id: str | None) -> dict[str, Any] | None:
    return {"task_id": task_id} if task_id else None


def _act_with_usage(policy: Policy, obs: str, info: dict[str, Any]
                    ) -> tuple[str, tuple[int | None, int | None]]:
    # Runs in a worker thread: the usage must be read in the thread that made the call.
    action = policy.act(obs, info)
    return action, (policy.last_usage() if isinstance(policy, ReportsUsage) else (None, None))


def _pool_for(envs: EnvSource | EnvPool) -> tuple[EnvPool, bool]:
    """The pool to lease from, and whether this call owns (primes and closes) it."""
    if isinstance(envs, EnvPool):
        return envs, False
    return EnvPool(envs), True


def run_many(envs: EnvSource | EnvPool, policy: Policy, jobs: Sequence[Job], *,
             concurrency: int = 4, on_done: Hook | None = None,
             on_step: Hook | None = None) -> list[Attempt]:
    """Play many episodes, at most ``concurrency`` at once, in threads.

    Args:
        envs: An ``EnvPool`` (the caller's: reused, left open), or an ``EnvSpec`` or
            factory to build a pool from for this call (one environment is built
            before any episode, so a broken setup raises here; all are closed after).
        policy: Shared by all episodes (scripted and HTTP policies are thread-safe).
        jobs: (task_id, seed) pairs, one per episode.
        concurrency: Episodes in flight at once.
        on_done: Called with each Attempt as it finishes (e.g. to append to a file).
        on_step: Called with an Attempt after each of its steps.

    Returns:
        The Attempts, in the order of ``jobs``; a fault is an attempt's status.

    Raises:
        ValueError: ``concurrency`` < 1.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    pool, owned = _pool_for(envs)

    def one(job: Job) -> Attempt:
        attempt = play_job(pool, policy, job, on_step=on_step)
        if on_done:
            on_done(attempt)
        return attempt

    try:
        if owned and jobs:
            pool.prime()
        with ThreadPoolExecutor(max_workers=concurrency) as executor:
            return list(executor.map(one, jobs))
    finally:
        if owned:
            pool.close()


async def arun_many(envs: EnvSource | EnvPool, policy: Policy, jobs: Sequence[Job], *,
                    concurrency: int = 4, on_done: Hook | None = None,
                    on_step: Hook | None = None, on_turn: Hook | None = None) -> list[Attempt]:
    """Async form of ``run_many``: one event loop, ``concurrency`` episodes in flight.

    ``on_done``, ``on_step`` and ``on_turn`` (before each turn is asked of the policy)
    run on the event loop's thread, one call at a time, so they may append to a file
    without a lock.

    Raises:
        ValueError: ``concurrency`` < 1.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    loop = asyncio.get_running_loop()
    pool, owned = _pool_for(envs)
    gate = asyncio.Semaphore(concurrency)
    executor = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="vera-episode")

    async def one(job: Job) -> Attempt:
        async with gate:
            attempt = Attempt.start(job[0], seed=job[1])
            with attempt.capturing():
                env = await loop.run_in_executor(executor, pool.acquire)
                with pool.lease(env):
                    await _aplay(env, policy, attempt, executor, on_step, on_turn)
            attempt.finish()
            if on_done:
                on_done(attempt)
            return attempt

    try:
        if owned and jobs:
            await loop.run_in_executor(executor, pool.prime)
        return list(await asyncio.gather(*(one(job) for job in jobs)))
    finally:
        # Running steps finish (each is bounded by the sandbox timeout); queued ones are
        # dropped, so an interrupted run stops promptly without leaking workspaces.
        executor.shutdown(wait=True, cancel_futures=True)
        if owned:
            pool.close()
