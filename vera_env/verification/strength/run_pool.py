"""The threads that run an episode's strength sandboxes, kept for the whole episode.

A shadow workspace's command and check servers (``vera_env.sandbox.server``) are
long-lived sandboxes, but each dies with the *thread* that started it: bwrap's
``--die-with-parent`` is the kernel's parent-death signal, which follows the spawning
thread, not the process. With a pool of sandbox-run threads made per node, every
thread exited at the end of its node and took its servers with it, so each node
started every shadow's servers again (measured: servers started per run doubled, 93 ->
186, when checks got their own server). So the episode keeps one pool from its first
node to ``close()``: its threads, and the servers they started, stay up between nodes
(an idle server is ~12 MB), and ``close()`` stops the threads after the shadows'
servers are closed, so nothing of the episode outlives it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Executor, ThreadPoolExecutor
from contextlib import contextmanager

__all__ = ["RunPool"]


class RunPool:
    """One episode's sandbox-run threads, made on first use and stopped by ``close``.

    Args:
        workers: Threads at most (sandbox runs in flight at once).
        name: The threads' name prefix.
    """

    def __init__(self, workers: int, name: str = "strength-run") -> None:
        self._workers, self._name = workers, name
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        """``close()`` was called: the threads are stopped or stopping."""
        return self._closed

    @contextmanager
    def lease(self) -> Iterator[Executor]:
        """The episode's pool, or, once it is closed, a pool for this use only.

        A closed episode has nothing to keep warm, and a pool made after ``close``
        must not outlive its user (it would hold threads no one stops).
        """
        with self._lock:
            if self._pool is None and not self._closed:
                self._pool = ThreadPoolExecutor(self._workers, self._name)
            pool = self._pool if not self._closed else None
        if pool is not None:
            yield pool
            return
        with ThreadPoolExecutor(self._workers, self._name) as own:
            yield own

    def close(self) -> None:
        """Stop the threads (queued runs are cancelled; running ones are waited for).

        Call it after closing the workspaces whose servers these threads started: their
        runs then end at once, and the servers are closed in order rather than killed
        by their threads' exit. Idempotent.
        """
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
