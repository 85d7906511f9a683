"""How a served environment behaves as a service: limits, expiry, binding, auth.

Every number here answers a failure users of environment services report. Orphaned
sandboxes after a trainer crash (huggingface/trl#6427, huggingface/trl#6430) are why
sessions expire when idle and why the server reaps a dead predecessor's workspaces at
start. Silent zeros under load (NeMo Gym's "silent rollout zeroing at concurrency
300-1500") are why a full server answers "busy" instead of accepting work it cannot do,
and why sandbox creation is rate limited rather than allowed to stampede. The idle
timeout defaults to 30 minutes because trainers pause between generations (weight sync,
a long vLLM batch, evaluation) and a session must survive that pause; only a session
nobody touched for longer than any such pause is a leak.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

__all__ = ["DEFAULT_PORT", "Protocol", "ServeConfig"]

Protocol = Literal["openenv", "ors"]
DEFAULT_PORT = 8000


class ServeConfig(BaseModel):
    """The service settings of ``vera-env serve`` (the environment itself is an ``EnvSpec``).

    Example:
        >>> from vera_env.serve import ServeConfig
        >>> ServeConfig(protocol="ors", max_sessions=8).idle_timeout_s
        1800.0
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    protocol: Protocol = "openenv"
    """The wire protocol: OpenEnv (WebSocket sessions) or ORS (HTTP + server-sent events)."""
    host: str = "127.0.0.1"
    """Address to bind. Loopback by default: the sandbox is a security boundary, the
    server in front of it should not face a network by accident."""
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    """TCP port (0: any free port)."""
    max_sessions: int = Field(64, ge=1)
    """Sessions (each one environment and at most one sandbox) alive at once; one more
    is refused with a "busy" answer."""
    idle_timeout_s: float = Field(1800.0, gt=0)
    """A session untouched this long is closed and its sandbox killed."""
    sandbox_rate_per_s: float = Field(16.0, gt=0)
    """Workspaces staged per second at most (token bucket); resets beyond it wait."""
    sandbox_burst: int = Field(16, ge=1)
    """Workspaces that may be staged at once before the rate applies."""
    token: SecretStr | None = None
    """Bearer token every request must carry (``Authorization: Bearer`` or, for ORS
    clients, ``X-API-Key``); ``/health`` stays open. None: no authentication."""
    shutdown_grace_s: float = Field(10.0, ge=0)
    """On SIGTERM, how long in-flight steps may finish before every sandbox is killed."""
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    """Level of the server's JSON log lines (stderr)."""
