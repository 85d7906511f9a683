"""Environments for many episodes: built on demand per worker, reused, always closed.

``map_episodes`` is the one place that decides how many environments a batch of
episodes gets and when they are closed; ``run_many`` and training's collection use it.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Sequence, TypeVar

__all__ = ["map_episodes"]

J = TypeVar("J")
R = TypeVar("R")


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
