"""Environments for many episodes: built from one spec, reused, always closed.

Every runner (``run_many``, ``arun_many``, Ray workers, training, task validation)
leases from this one pool: a pool per runner, each with its own idle list, its own lock
and its own idea of when to close, leaks workspaces or kills the batch on a fault in
one of them. The pool's rules:

* built from an ``EnvSpec`` (validated data, the same everywhere) or any factory;
* an environment is built on first need and reused by later episodes, at most as many
  as were in use at once;
* an environment whose episode raised something other than a policy fault is closed
  and dropped, never handed to the next episode in an unknown state;
* ``close`` closes every environment the pool ever built, also after an interrupt.

``map_episodes`` runs a function over jobs in threads, one leased environment per job
(training's collection uses it; ``run_many`` leases from the pool itself).

Example:
    >>> from vera_env.spec import EnvSpec
    >>> from vera_env.rollout.pool import EnvPool
    >>> with EnvPool(EnvSpec(max_steps=10)) as pool:
    ...     with pool.lease() as env:
    ...         obs, info = env.reset(seed=0)
    ...     pool.built
    1
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import gymnasium as gym

from vera_env.errors import PolicyError
from vera_env.spec import EnvSpec

__all__ = ["EnvPool", "EnvSource", "env_factory", "map_episodes"]

J = TypeVar("J")
R = TypeVar("R")

EnvSource = EnvSpec | Callable[[], gym.Env]
"""What a pool builds environments from: an ``EnvSpec``, or a factory (for tasks given
as objects: ``functools.partial(spec.build, tasks=my_tasks)``)."""


def env_factory(source: EnvSource) -> Callable[[], gym.Env]:
    """A zero-argument builder for ``source``.

    Raises:
        TypeError: ``source`` is neither an ``EnvSpec`` nor callable.
    """
    if isinstance(source, EnvSpec):
        return source.build
    if not callable(source):
        raise TypeError(f"expected an EnvSpec or a factory returning an env, got "
                        f"{type(source).__name__}")
    return source


class EnvPool:
    """Environments leased to episodes, one episode per environment at a time.

    Thread-safe. Not a cap on concurrency: the caller bounds how many leases are out.

    Args:
        source: An ``EnvSpec`` or a factory.
    """

    def __init__(self, source: EnvSource) -> None:
        self._make = env_factory(source)
        self._idle: list[gym.Env] = []
        self._built: list[gym.Env] = []
        self._lock = threading.Lock()
        self._closed = False

    @property
    def built(self) -> int:
        """Environments built so far (dropped ones included)."""
        with self._lock:
            return len(self._built)

    def acquire(self) -> gym.Env:
        """An idle environment, or a new one.

        Raises:
            RuntimeError: The pool is closed.
            Exception: Whatever building an environment raises (a bad spec, no sandbox).
        """
        idle = self._take_idle()
        if idle is not None:
            return idle
        env = self._make()
        with self._lock:
            self._built.append(env)
            closed = self._closed
        if closed:  # closed while building: do not leak it
            env.close()
            raise RuntimeError("the env pool is closed")
        return env

    def _take_idle(self) -> gym.Env | None:
        with self._lock:
            if self._closed:
                raise RuntimeError("the env pool is closed")
            return self._idle.pop() if self._idle else None

    def release(self, env: gym.Env, *, broken: bool = False) -> None:
        """Give ``env`` back; a ``broken`` one is closed and not reused."""
        with self._lock:
            reuse = not broken and not self._closed
            if reuse:
                self._idle.append(env)
        if not reuse:
            env.close()

    @contextlib.contextmanager
    def lease(self, env: gym.Env | None = None) -> Iterator[gym.Env]:
        """An environment for one episode, given back at the end.

        If the body raises anything but a ``PolicyError`` (the policy's fault, not the
        env's), the environment is dropped.

        Args:
            env: One already ``acquire``d (e.g. built in a worker thread by an async
                runner); None acquires one now.
        """
        env = self.acquire() if env is None else env
        try:
            yield env
        except PolicyError:
            self.release(env)
            raise
        except BaseException:
            self.release(env, broken=True)
            raise
        self.release(env)

    def prime(self) -> None:
        """Build one environment now, so a broken setup raises before any episode."""
        self.release(self.acquire())

    def close(self) -> None:
        """Close every environment built. Idempotent."""
        with self._lock:
            self._closed = True
            envs, self._built, self._idle = self._built, [], []
        for env in envs:
            env.close()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def map_episodes(envs: EnvSource | EnvPool, jobs: Sequence[J],
                 play: Callable[[gym.Env, J], R], *, concurrency: int = 4) -> list[R]:
    """Call ``play(env, job)`` for every job, at most ``concurrency`` at once.

    Args:
        envs: A pool (owned by the caller, left open), or what to build one from
            (closed at the end, also when a job raised).
        jobs: The jobs.
        play: Plays one job in a leased environment.
        concurrency: Jobs in flight at once (so at most this many environments).

    Returns:
        ``play``'s results, in the order of ``jobs``.

    Raises:
        ValueError: ``concurrency`` < 1.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    pool = envs if isinstance(envs, EnvPool) else EnvPool(envs)

    def one(job: J) -> R:
        with pool.lease() as env:
            return play(env, job)

    try:
        with ThreadPoolExecutor(max_workers=concurrency) as executor:
            return list(executor.map(one, jobs))
    finally:
        if pool is not envs:
            pool.close()
