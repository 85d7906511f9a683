"""SessionRegistry and TokenBucket: the cap, reservations, idle expiry, shutdown, the rate."""

from __future__ import annotations

import threading
import time

import pytest

from vera_env.serve.metrics import ServeMetrics
from vera_env.serve.registry import ServerBusy, SessionRegistry, TokenBucket
from vera_env.spec import EnvSpec


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


def registry(alcohol_task, max_sessions: int = 2, idle_timeout_s: float = 60.0):
    make = lambda: EnvSpec(max_steps=4, wrappers=()).build(tasks=[alcohol_task])  # noqa: E731
    return SessionRegistry(make, max_sessions=max_sessions, idle_timeout_s=idle_timeout_s,
                           bucket=TokenBucket(1000.0, 10), metrics=ServeMetrics())


def test_token_bucket_allows_a_burst_then_spaces_takes_at_the_rate():
    clock = FakeClock()
    bucket = TokenBucket(4.0, 3, clock=clock, sleep=clock.sleep)
    waits = [bucket.take() for _ in range(6)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert waits[3:] == pytest.approx([0.25, 0.25, 0.25])
    clock.now += 10.0  # idle time refills the burst, no more
    assert [bucket.take() for _ in range(4)] == pytest.approx([0.0, 0.0, 0.0, 0.25])


def test_token_bucket_rejects_a_rate_that_is_not_positive():
    with pytest.raises(ValueError, match="rate_per_s must be > 0"):
        TokenBucket(0.0, 1)


def test_registry_cap_counts_reservations_and_answers_busy(alcohol_task):
    reg = registry(alcohol_task, max_sessions=2)
    first = reg.open()
    reg.reserve("sid-1")
    with pytest.raises(ServerBusy, match="busy: 2 of 2 sessions in use"):
        reg.open()
    with pytest.raises(ServerBusy):
        reg.reserve("sid-2")
    second = reg.open("sid-1")  # claims its reservation: no new place needed
    assert {s.id for s in reg.sessions()} == {first.id, second.id}
    reg.close(first)
    assert reg.describe() == {"sessions": 1, "reserved": 0, "max_sessions": 2}
    assert "vera_serve_sessions_rejected_total 2.0" in reg.metrics.render().decode()


def test_registry_unclaimed_reservations_lapse(alcohol_task):
    reg = registry(alcohol_task, max_sessions=1)
    reg.reserve("sid-lost")
    with pytest.raises(ServerBusy):
        reg.open()
    later = time.monotonic() + 121.0
    reg.expire_idle(now=later)
    assert reg.describe()["reserved"] == 0


def test_registry_expires_idle_sessions_but_never_one_mid_call(alcohol_task):
    reg = registry(alcohol_task, idle_timeout_s=5.0)
    idle, working = reg.open(), reg.open()
    idle.reset(task_id="alcohol-mean")
    working.reset(task_id="alcohol-mean")
    started, release = threading.Event(), threading.Event()

    def slow_step() -> None:
        with working._lock:
            started.set()
            release.wait(10)

    thread = threading.Thread(target=slow_step)
    thread.start()
    started.wait(10)
    now = max(idle.last_active, working.last_active) + 60.0
    assert reg.expire_idle(now=now) == [idle.id]
    release.set()
    thread.join()
    assert idle.closed and not working.closed
    with pytest.raises(Exception, match="expired after 5 s idle"):
        idle.step("<command>ls</command>")
    reg.kill_all()
    assert working.closed and reg.sessions() == []
    text = reg.metrics.render().decode()
    assert 'vera_serve_sessions_closed_total{reason="idle"} 1.0' in text
    assert 'vera_serve_sessions_closed_total{reason="shutdown"} 1.0' in text
