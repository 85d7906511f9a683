"""Rollouts across processes and machines: rollout workers as Ray actors.

Why Ray. It is what verl, OpenRLHF and SkyRL already schedule their rollout and training
workers on, so a trainer built on them can run vera_env workers beside its own; and one
machine's cores run out long before a training step has its thousands of episodes.

What a worker is. A Ray actor that owns an ``EnvPool`` (at most ``envs_per_worker``
environments, built on the worker from the ``EnvSpec`` it was sent) and one policy,
built on the worker by ``policy_factory`` (an HTTP client for a model server is made
there, never pickled with its connection pool). It plays one episode per call through
the same lifecycle as ``run_many`` (``play_job``), so an Attempt collected here equals
the one ``run_many`` records locally for the same task and seed (timings aside).

What happens when a worker dies. Every episode it had in flight fails with a Ray actor
error; the worker is replaced by a fresh actor and each of those episodes is played once
more, from its start. An episode whose second try dies too is recorded as an ``error``
Attempt (``unscorable``) that says so — never dropped, never a score of 0. The dead
worker's workspaces are removed by the next environment made on that machine
(``vera_env.sandbox.reaper``); its sandboxed processes died with it.

Pointing it at a cluster::

    ray start --head                       # on the head node; prints the address
    ray start --address=HEAD:6379          # on every other node
    RAY_ADDRESS=HEAD:6379 python collect.py   # ray.init() inside collect() connects there

Every node needs vera_env (and bubblewrap) installed, or pass
``ray_init={"runtime_env": {"py_modules": [vera_env, policies]}}``. Without
``RAY_ADDRESS`` and with Ray not yet initialised, ``collect`` starts a local Ray.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from vera_env.policy import Policy
from vera_env.rollout.attempt import Attempt
from vera_env.rollout.pool import EnvPool, EnvSource, env_factory
from vera_env.rollout.runner import Job, play_job

__all__ = ["Collection", "RolloutPool", "RolloutWorker", "collect"]


@dataclass(frozen=True, slots=True)
class Collection:
    """What ``collect`` gathered.

    Attributes:
        attempts: One per episode, in the order of ``episodes``.
        records: ``to_record(attempt)`` for each attempt, same order; empty without it.
        retried: Indices of episodes played again because their worker died.
        workers_replaced: How many dead workers were replaced.
    """

    attempts: list[Attempt]
    records: list[Any] = field(default_factory=list)
    retried: tuple[int, ...] = ()
    workers_replaced: int = 0


class RolloutWorker:
    """Plays episodes; run as a Ray actor by ``collect`` (usable in-process too).

    Args:
        env: An ``EnvSpec`` (sent as data, built on the worker) or a picklable factory.
        policy_factory: Builds the policy in this process.
        to_record: Turns each Attempt into a training record, on the worker.
    """

    def __init__(self, env: EnvSource, policy_factory: Callable[[], Policy],
                 to_record: Callable[[Attempt], Any] | None = None) -> None:
        self._pool = EnvPool(env)
        self._policy = policy_factory()
        self._to_record = to_record

    def play(self, index: int, task_id: str | None, seed: int | None
             ) -> tuple[int, Attempt, Any]:
        """Play one episode; returns (index, attempt, record or None)."""
        attempt = play_job(self._pool, self._policy, (task_id, seed))
        record = self._to_record(attempt) if self._to_record else None
        return index, attempt, record

    def pid(self) -> int:
        """This worker's process id."""
        return os.getpid()

    def close(self) -> None:
        """Close every environment (kills commands, removes workspaces)."""
        self._pool.close()


def collect(env: EnvSource, policy_factory: Callable[[], Policy],
            episodes: int | Sequence[Job], num_workers: int = 2, *,
            envs_per_worker: int = 1,
            to_record: Callable[[Attempt], Any] | None = None,
            num_cpus_per_worker: float = 1.0,
            ray_init: Mapping[str, Any] | None = None) -> Collection:
    """Play ``episodes`` on ``num_workers`` new Ray actors, gather them, stop the actors.

    One call of ``RolloutPool(...).collect(episodes)``; a training loop that collects
    every step keeps a ``RolloutPool`` instead, so its workers start once.

    Args:
        env: An ``EnvSpec`` (validated data: every worker builds the same env from it)
            or a picklable factory (e.g. ``functools.partial(spec.build, tasks=tasks)``
            for tasks given as objects).
        policy_factory: Builds one policy per worker, on the worker (must pickle).
        episodes: ``(task_id, seed)`` pairs (``task_id`` None draws the task with the
            seed), or a count ``n`` meaning seeds ``0..n-1``.
        num_workers: Actors to start.
        envs_per_worker: Episodes each actor plays at once (one env each, in threads of
            the actor; its one policy then serves them concurrently, as scripted and
            HTTP policies can).
        to_record: Turns each Attempt into a training record, on the worker.
        num_cpus_per_worker: Ray CPU resource each actor holds.
        ray_init: Keyword arguments for ``ray.init`` when Ray is not yet initialised.

    Returns:
        The attempts in the order of ``episodes``, their records, and what was retried.

    Raises:
        ValueError: ``num_workers`` or ``envs_per_worker`` < 1.
        ImportError: Ray is not installed (the ``ray`` extra).
    """
    with RolloutPool(env, policy_factory, num_workers, envs_per_worker=envs_per_worker,
                     to_record=to_record, num_cpus_per_worker=num_cpus_per_worker,
                     ray_init=ray_init) as pool:
        return pool.collect(episodes)


class RolloutPool:
    """Rollout workers that stay up between collections (arguments as in ``collect``).

    Example (needs Ray, so not a doctest)::

        spec = EnvSpec(max_steps=30)
        with RolloutPool(spec, make_policy, num_workers=8) as pool:
            for step in range(steps):
                batch = pool.collect([(None, seed) for seed in seeds_for(step)])
    """

    def __init__(self, env: EnvSource, policy_factory: Callable[[], Policy],
                 num_workers: int = 2, *, envs_per_worker: int = 1,
                 to_record: Callable[[Attempt], Any] | None = None,
                 num_cpus_per_worker: float = 1.0,
                 ray_init: Mapping[str, Any] | None = None) -> None:
        if num_workers < 1 or envs_per_worker < 1:
            raise ValueError(f"num_workers and envs_per_worker must be >= 1, got "
                             f"{num_workers} and {envs_per_worker}")
        import ray  # noqa: PLC0415 (Ray is an optional extra)

        if not ray.is_initialized():
            ray.init(**dict(ray_init or {}))
        self._ray = ray
        self._actor = ray.remote(RolloutWorker).options(num_cpus=num_cpus_per_worker,
                                                        max_concurrency=envs_per_worker)
        env_factory(env)  # a wrong type fails here, not on every worker
        self._args = (env, policy_factory, to_record)
        self._slots = envs_per_worker
        self._workers = [self._spawn() for _ in range(num_workers)]
        self._busy = [0] * num_workers
        self._inflight: dict[Any, tuple[int, Any, int]] = {}  # ref -> (slot, actor, job)
        self._replaced = 0

    def _spawn(self) -> Any:
        return self._actor.remote(*self._args)

    def collect(self, episodes: int | Sequence[Job]) -> Collection:
        """Play ``episodes`` (as in ``collect``) on this pool's workers."""
        from ray.exceptions import RayActorError  # noqa: PLC0415 (Ray is an optional extra)

        jobs: list[Job] = ([(None, seed) for seed in range(episodes)]
                           if isinstance(episodes, int) else list(episodes))
        replaced_before = self._replaced
        pending = deque(range(len(jobs)))
        tries = [0] * len(jobs)
        attempts: list[Attempt | None] = [None] * len(jobs)
        records: list[Any] = [None] * len(jobs)
        retried: list[int] = []
        while pending or self._inflight:
            self._submit(pending, jobs, tries)
            (ref,), _ = self._ray.wait(list(self._inflight), num_returns=1)
            slot, worker, job = self._inflight.pop(ref)
            self._busy[slot] -= 1
            try:
                _, attempts[job], records[job] = self._ray.get(ref)
            except RayActorError as exc:
                self._replace(slot, worker)
                if tries[job] < 2:
                    retried.append(job)
                    pending.appendleft(job)
                else:
                    attempts[job] = _lost(jobs[job], exc)
        has_records = any(r is not None for r in records)
        return Collection(attempts=[a for a in attempts if a is not None],
                          records=records if has_records else [],
                          retried=tuple(retried),
                          workers_replaced=self._replaced - replaced_before)

    def _submit(self, pending: deque[int], jobs: list[Job], tries: list[int]) -> None:
        for slot, worker in enumerate(self._workers):
            while pending and self._busy[slot] < self._slots:
                job = pending.popleft()
                tries[job] += 1
                task_id, seed = jobs[job]
                ref = worker.play.remote(job, task_id, seed)
                self._inflight[ref] = (slot, worker, job)
                self._busy[slot] += 1

    def _replace(self, slot: int, worker: Any) -> None:
        if self._workers[slot] is worker:  # the first of its failed episodes replaces it
            self._ray.kill(worker, no_restart=True)
            self._workers[slot] = self._spawn()
            self._replaced += 1

    def close(self) -> None:
        """Close every worker's envs, then stop the workers. Idempotent."""
        from ray.exceptions import GetTimeoutError, RayActorError  # noqa: PLC0415 (Ray is an optional extra)

        workers, self._workers = self._workers, []
        for worker in workers:
            try:
                self._ray.get(worker.close.remote(), timeout=60)
            except (RayActorError, GetTimeoutError):
                pass  # a dead or stuck worker: killing it kills its sandboxes too
            self._ray.kill(worker, no_restart=True)

    def __enter__(self) -> RolloutPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _lost(job: Job, exc: BaseException) -> Attempt:
    task_id, seed = job
    return Attempt(task_id=task_id or "", seed=seed, status="error", unscorable=True,
                   error=f"rollout worker died twice while playing this episode: "
                         f"{type(exc).__name__}: {str(exc)[:500]}")
