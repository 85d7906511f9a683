"""Playing a policy through episodes: one episode, many in threads, many on one event loop.

Every runner builds its record with the same ``Attempt`` lifecycle
(``vera_env.rollout.attempt``), so an episode played here, in a vector env, on a Ray
worker or in training is the same record.

Token usage. A policy that calls a model may report what the last call cost through an
optional ``last_usage() -> (prompt_tokens, completion_tokens)``; the runner adds it up
per episode right after each ``act``. It is read in the same thread (sync) or task
(async) that made the call, so one policy can serve many concurrent episodes.

``arun_many`` is the asyncio form of ``run_many``: one event loop drives every episode,
the policy's ``aact`` (an async HTTP call) is awaited, and only the environment's steps
(sandbox subprocesses) run in worker threads — so a hundred episodes waiting on a model
server cost a hundred coroutines, not a hundred threads.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence

from vera_env.rollout.attempt import Attempt
from vera_env.rollout.pool import map_episodes

__all__ = ["arun_episode", "arun_many", "run_episode", "run_many"]


def run_episode(env: Any, policy: Any, *, seed: int | None = None,
                task_id: str | None = None) -> Attempt:
    """Play one episode of ``policy`` in ``env`` (any wrapped ``VeraEnv``).

    Args:
        env: The environment; reset here.
        policy: Anything with ``act(observation, info) -> str``.
        seed: Seed for ``reset``.
        task_id: Task to play; None draws one with ``seed``.

    Returns:
        The finished ``Attempt``; never raises for a policy, sandbox or grader fault.
    """
    attempt = Attempt.start(task_id, seed=seed)
    with attempt.capturing():
        obs, info = env.reset(seed=seed, options=_options(task_id))
        _begin(policy, attempt, info)
        ended = False
        while not ended:
            action = policy.act(obs, info)
            _count_usage(policy, attempt)
            obs, reward, terminated, truncated, info = env.step(action)
            ended = attempt.add_step(action, obs, reward, terminated, truncated, info)
    return attempt.finish()


async def arun_episode(env: Any, policy: Any, *, seed: int | None = None,
                       task_id: str | None = None,
                       executor: ThreadPoolExecutor | None = None) -> Attempt:
    """Async form of ``run_episode``.

    ``policy.aact`` is awaited when the policy has one; otherwise ``act`` runs in a
    worker thread. Environment calls (sandbox subprocesses) always run in ``executor``
    (the default executor when None).
    """
    loop = asyncio.get_running_loop()
    attempt = Attempt.start(task_id, seed=seed)
    with attempt.capturing():
        obs, info = await loop.run_in_executor(
            executor, lambda: env.reset(seed=seed, options=_options(task_id)))
        _begin(policy, attempt, info)
        ended = False
        while not ended:
            if hasattr(policy, "aact"):
                action = await policy.aact(obs, info)
                _count_usage(policy, attempt)
            else:
                action, usage = await loop.run_in_executor(
                    executor, _act_with_usage, policy, obs, info)
                attempt.add_usage(*usage)
            obs, reward, terminated, truncated, info = await loop.run_in_executor(
                executor, env.step, action)
            ended = attempt.add_step(action, obs, reward, terminated, truncated, info)
    return attempt.finish()


def _options(task_id: str | None) -> dict[str, Any] | None:
    return {"task_id": task_id} if task_id else None


def _begin(policy: Any, attempt: Attempt, info: dict[str, Any]) -> None:
    attempt.begin(info)
    if hasattr(policy, "begin_episode"):
        policy.begin_episode(info)


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
