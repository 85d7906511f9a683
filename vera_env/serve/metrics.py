"""The server's Prometheus metrics, one registry per app.

What an operator needs to see a sick environment service before the trainer's curves
do: sessions alive and refused (a full server is "busy", not slow), step latency, and
unscorable steps — an infrastructure fault is reported as such, never folded into the
reward, so it must be visible somewhere else. Each app owns its ``CollectorRegistry``,
so two apps in one process (tests, a host mounting both protocols) never share counts.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["CONTENT_TYPE", "ServeMetrics"]

CONTENT_TYPE = CONTENT_TYPE_LATEST
_STEP_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
                   60.0, 120.0, 300.0, 600.0)


class ServeMetrics:
    """Counters, gauges and the step-latency histogram of one served app."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.sessions = Gauge("vera_serve_sessions", "Sessions alive now", registry=r)
        self.opened = Counter("vera_serve_sessions_opened", "Sessions opened", registry=r)
        self.closed = Counter("vera_serve_sessions_closed", "Sessions closed, by reason",
                              ["reason"], registry=r)
        self.rejected = Counter("vera_serve_sessions_rejected",
                                "Session requests refused because the server was full",
                                registry=r)
        self.resets = Counter("vera_serve_resets", "Episodes started", registry=r)
        self.steps = Counter("vera_serve_steps", "Steps played", registry=r)
        self.unscorable = Counter("vera_serve_unscorable_steps",
                                  "Steps an infrastructure fault made unscorable", registry=r)
        self.step_seconds = Histogram("vera_serve_step_seconds",
                                      "Environment time per step (server side)",
                                      buckets=_STEP_BUCKETS_S, registry=r)
        self.throttled_seconds = Counter("vera_serve_sandbox_wait_seconds",
                                         "Time resets waited for the sandbox creation rate",
                                         registry=r)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)
