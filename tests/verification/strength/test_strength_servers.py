"""Strength's shadow servers stay warm across an episode's nodes and die with it.

A shadow's command and check servers die with the thread that started them (bwrap's
``--die-with-parent``), so these tests drive a real episode on the default backend
and look at the servers' host processes: the same pids serve a second node, and none
of them (nor any strength thread) is left after ``close()``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from vera_env import VeraEnv
from vera_env.sandbox import SandboxLimits, server
from vera_env.sandbox.server import ServerWorkspace
from vera_env.tasks import Task
from vera_env.verification.rewards import RewardConfig
from vera_env.verification.strength.reference import Reference
from vera_env.verification.strength.run_pool import RunPool

TABLE = "id\tgroup\tdrinks\n1\ta\t3\n2\tb\t5\n3\ta\t7\n4\tb\t-999\n"
LIMITS = SandboxLimits(timeout_s=20, check_timeout_s=20)
V = " && echo True || echo False"


def alcohol_mean(contents) -> str:
    """The table's mean of drinks, the sentinel dropped (the task's reference)."""
    rows = [line.split("\t") for line in contents["alcohol.txt"].decode().splitlines()[1:]]
    values = [float(r[2]) for r in rows if len(r) > 2 and r[2] != "-999"]
    return f"{sum(values) / len(values):.1f}"


@pytest.fixture
def env(tmp_path: Path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "alcohol.txt").write_text(TABLE)
    (data / "alcohol.txt").chmod(0o444)
    task = Task(id="t", question="q", answer="5.0", grader={"kind": "exact"},
                data_dir=data).with_reference(Reference(solve=alcohol_mean))
    # Every shadow must start its servers here; a served verdict (the verdict store)
    # starts none, so these tests of the servers run every check. A loose luck bound:
    # these tests are about servers, and a four-row table has too few controls to tell
    # an honest mean from a pin gated on its digit count at the default bound.
    env = VeraEnv([task], max_steps=8, limits=LIMITS,
                  reward=RewardConfig(strength={"share_verdicts": False, "luck_bound": 0.5}))
    yield env
    env.close()


@pytest.fixture
def starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every server start in this test (as ``benchmarks/step_profile.py`` counts them)."""
    seen: list[int] = []
    start = server._Server.start

    def counted(self: server.PersistentServer) -> None:
        seen.append(1)
        start(self)
    monkeypatch.setattr(server._Server, "start", counted)
    return seen


def _node(env: VeraEnv, command: str, check: str) -> dict:
    env.step(f"<command>{command}</command>")
    return env.step(f'NODE kind=load summary="{command}"\nCHECK range "c" :: {check}{V}')[-1]


def _shadow_workspaces(env: VeraEnv) -> list[ServerWorkspace]:
    session = env._episode.strength
    found = [s.workspace for t in session.bank._targets.values() if t.group
             for s in (*t.group.shadows.values(), *t.group.twins.values())]
    assert all(isinstance(ws, ServerWorkspace) for ws in found)
    return found


def _server_pids(workspaces: list[ServerWorkspace]) -> set[int]:
    pids = {ws.server_pid for ws in workspaces} | {ws.check_server_pid for ws in workspaces}
    return {p for p in pids if p is not None}


def _running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _bwrap_children() -> set[int]:
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            name, rest = stat.read_text().split(" (", 1)[1].rsplit(")", 1)
        except (OSError, IndexError, ValueError):
            continue
        if name == "bwrap" and int(rest.split()[1]) == os.getpid() and _running(int(stat.parent.name)):
            found.add(int(stat.parent.name))
    return found


def test_shadow_servers_serve_the_next_node_without_restarting(env: VeraEnv, starts: list[int]):
    env.reset(seed=0)
    first = _node(env, "cut -f3 alcohol.txt | tail -n +2 > v.txt",
                  "test \"$(awk '$1 != -999 { s += $1; n++ } END { print s / n }' v.txt)\" = 5")
    shadows = _shadow_workspaces(env)
    before = {id(ws): (ws.server_pid, ws.check_server_pid) for ws in shadows}
    started_first = len(starts)
    second = _node(env, "cut -f3 alcohol.txt | tail -n +2 | grep -vx -- -999 > w.txt",
                   "test \"$(awk '{ s += $1 } END { print s }' w.txt)\" = 15")
    after = {id(ws): (ws.server_pid, ws.check_server_pid) for ws in shadows}
    assert first["checks"][0]["discriminating"] is True, first["checks"][0]["detail"]
    assert second["checks"][0]["discriminating"] is True, second["checks"][0]["detail"]
    assert shadows and all(None not in pids for pids in before.values())
    assert after == before  # the same host processes replayed and checked node 2
    assert len(starts) - started_first < started_first / 2


def test_close_leaves_no_server_process_or_strength_thread(env: VeraEnv):
    already = _bwrap_children()
    env.reset(seed=0)
    _node(env, "cut -f3 alcohol.txt | tail -n +2 > v.txt", 'test "$(tail -1 v.txt)" = -999')
    real = env._episode.workspace
    assert isinstance(real, ServerWorkspace)
    pids = _server_pids([*_shadow_workspaces(env), real])
    assert len(pids) >= 4 and all(_running(p) for p in pids)
    assert any(t.name.startswith("strength-run") for t in threading.enumerate())
    env.close()
    assert not any(_running(p) for p in pids)
    assert _bwrap_children() <= already
    assert not any(t.name.startswith("strength-run") for t in threading.enumerate())


def test_reset_closes_the_last_episodes_servers(env: VeraEnv):
    env.reset(seed=0)
    _node(env, "cut -f3 alcohol.txt | tail -n +2 > v.txt", 'test "$(tail -1 v.txt)" = -999')
    pids = _server_pids(_shadow_workspaces(env))
    assert pids
    env.reset(seed=1)
    assert not any(_running(p) for p in pids)


def test_run_pool_closed_keeps_no_thread_and_lends_a_pool_for_one_use():
    pool = RunPool(2, name="test-runpool")
    with pool.lease() as runs:
        assert runs.submit(threading.current_thread).result().name.startswith("test-runpool")
    with pool.lease() as again:
        assert again is runs  # the same threads node after node
    pool.close()
    with pool.lease() as late:
        assert late is not runs and late.submit(lambda: 7).result() == 7
    assert pool.closed
    assert not any(t.name.startswith("test-runpool") for t in threading.enumerate())
