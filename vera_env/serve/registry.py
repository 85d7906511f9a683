"""The sessions of one server: the cap, the sandbox creation rate, idle expiry, shutdown.

Why each piece. A full server must say so ("busy") rather than accept work it cannot do:
NeMo Gym's "silent rollout zeroing at concurrency 300-1500" is a server that took the
sessions and failed them quietly. Staging is rate limited (a token bucket that makes
resets *wait*, not fail) because a trainer resets its whole batch at once, and hundreds
of simultaneous sandbox starts are a stampede on the kernel's namespace setup. Idle
sessions expire because a trainer that crashes without closing leaves its sessions open
(orphaned sandboxes: huggingface/trl#6427, huggingface/trl#6430). Shutdown kills every
sandbox, even mid-step, because a server that exits while a model-written ``sleep 1e9``
runs must not leave it behind.

Reservations: a protocol may accept a session (ORS's ``/create``) before the
environment exists; ``reserve`` holds its place under the cap until ``add`` claims it,
``unreserve`` gives it back, and reservations nobody claimed within
``_RESERVATION_TTL_S`` lapse (a session deleted while it was being set up).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from vera_env.errors import ServerBusy
from vera_env.serve.metrics import ServeMetrics
from vera_env.serve.session import Turn, VeraSession

__all__ = ["ServerBusy", "SessionRegistry", "TokenBucket"]

_RESERVATION_TTL_S = 120.0
log = logging.getLogger("vera_env.serve")


class TokenBucket:
    """``rate_per_s`` tokens a second, at most ``burst`` saved; ``take`` blocks for one.

    Thread-safe; waits happen outside the lock, so waiters queue by arrival time.
    """

    def __init__(self, rate_per_s: float, burst: int,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if rate_per_s <= 0 or burst < 1:
            raise ValueError(f"rate_per_s must be > 0 and burst >= 1, got {rate_per_s}, {burst}")
        self.rate_per_s, self.burst = rate_per_s, burst
        self._clock, self._sleep = clock, sleep
        self._lock = threading.Lock()
        self._tolerance_s = (burst - 1) / rate_per_s
        self._due = clock()  # when the next token is due at the steady rate (GCRA)

    def take(self) -> float:
        """Take one token, waiting until it is due.

        Returns:
            Seconds waited.
        """
        with self._lock:
            now = self._clock()
            due = max(self._due, now)
            wait = max(0.0, due - now - self._tolerance_s)
            self._due = due + 1 / self.rate_per_s
        if wait > 0:
            self._sleep(wait)
        return wait


class SessionRegistry:
    """Every live session of one app, under one cap.

    Args:
        make_env: Builds one environment (``EnvSpec.build`` over the served splits).
        max_sessions: Sessions alive (or reserved) at once.
        idle_timeout_s: Sessions idle this long are expired by ``expire_idle``.
        bucket: The sandbox creation rate.
        metrics: Where counts go.
    """

    def __init__(self, make_env: Callable[[], gym.Env], *, max_sessions: int,
                 idle_timeout_s: float, bucket: TokenBucket, metrics: ServeMetrics) -> None:
        self._make_env = make_env
        self.max_sessions = max_sessions
        self.idle_timeout_s = idle_timeout_s
        self._bucket = bucket
        self.metrics = metrics
        self._lock = threading.Lock()
        self._live: dict[str, VeraSession] = {}
        self._reserved: dict[str, float] = {}

    # ----- admission -----

    def reserve(self, key: str) -> None:
        """Hold a place for a session that ``add(key=...)`` will claim.

        Raises:
            ServerBusy: The cap is reached; nothing was reserved.
        """
        with self._lock:
            self._lapse_reservations()
            if len(self._live) + len(self._reserved) >= self.max_sessions:
                self.metrics.rejected.inc()
                raise ServerBusy(f"busy: {self.max_sessions} of {self.max_sessions} sessions "
                                 "in use; retry later or raise --max-sessions")
            self._reserved[key] = time.monotonic()

    def unreserve(self, key: str) -> None:
        """Give back a reservation that will not be claimed."""
        with self._lock:
            self._reserved.pop(key, None)

    def open(self, key: str | None = None) -> VeraSession:
        """A new session (claiming the reservation ``key`` if given).

        Raises:
            ServerBusy: No reservation and the cap is reached.
        """
        session = VeraSession(self._make_env, throttle=self._throttle, on_step=self._count)
        with self._lock:
            held = key is not None and self._reserved.pop(key, None) is not None
            if not held and len(self._live) + len(self._reserved) >= self.max_sessions:
                self.metrics.rejected.inc()
                raise ServerBusy(f"busy: {self.max_sessions} of {self.max_sessions} sessions "
                                 "in use; retry later or raise --max-sessions")
            self._live[session.id] = session
            self.metrics.sessions.set(len(self._live))
        self.metrics.opened.inc()
        log.info("session opened", extra={"session": session.id, "live": len(self._live)})
        return session

    def close(self, session: VeraSession, reason: str = "client") -> None:
        """Close ``session`` (after any running call) and forget it."""
        if session.close(f"closed ({reason})"):
            self._forget(session, reason)

    # ----- expiry and shutdown -----

    def expire_idle(self, now: float | None = None) -> list[str]:
        """Close every session idle longer than the timeout and not mid-call.

        Returns:
            The ids of the sessions closed.
        """
        now = time.monotonic() if now is None else now
        expired = []
        for session in self.sessions():
            if session.idle_s(now) > self.idle_timeout_s and session.expire(
                    f"expired after {self.idle_timeout_s:g} s idle; open a new session"):
                self._forget(session, "idle")
                expired.append(session.id)
        with self._lock:
            self._lapse_reservations(now)
        return expired

    def kill_all(self) -> int:
        """Close every session now, killing running commands (graceful shutdown's end).

        Returns:
            How many sessions were closed.
        """
        sessions = self.sessions()
        for session in sessions:
            session.kill("the server shut down")
            self._forget(session, "shutdown")
        return len(sessions)

    def sessions(self) -> list[VeraSession]:
        """The live sessions, a snapshot."""
        with self._lock:
            return list(self._live.values())

    def describe(self) -> dict[str, Any]:
        """Counts for ``/health``-style reporting."""
        with self._lock:
            return {"sessions": len(self._live), "reserved": len(self._reserved),
                    "max_sessions": self.max_sessions}

    # ----- internals -----

    def _forget(self, session: VeraSession, reason: str) -> None:
        with self._lock:
            removed = self._live.pop(session.id, None) is not None
            self.metrics.sessions.set(len(self._live))
        if removed:
            self.metrics.closed.labels(reason=reason).inc()
            log.info("session closed", extra={"session": session.id, "reason": reason,
                                              "steps": session.steps})

    def _lapse_reservations(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for key in [k for k, t in self._reserved.items() if now - t > _RESERVATION_TTL_S]:
            del self._reserved[key]

    def _throttle(self) -> None:
        waited = self._bucket.take()
        self.metrics.resets.inc()
        if waited:
            self.metrics.throttled_seconds.inc(waited)

    def _count(self, duration_s: float, turn: Turn) -> None:
        self.metrics.steps.inc()
        self.metrics.step_seconds.observe(duration_s)
        if turn.unscorable:
            self.metrics.unscorable.inc()
