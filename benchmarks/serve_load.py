"""Loopback load on ``vera-env serve``: what a remote environment costs over in-process.

One server process (``vera-env serve`` on 127.0.0.1, as a user runs it), driven by the
protocol's own client: OpenEnv's ``GenericEnvClient`` (one WebSocket per session, all
on one event loop, as a trainer would) or the ``ors-sdk`` ``AsyncORS`` client. The
same episodes (the builtin tasks' reference solutions) are then played in-process: one
``EnvSpec.build()`` env per worker thread, as many threads as sessions. Reported:

* protocol overhead: turns the env rejects without running anything (a malformed
  turn: parsed, rendered, no sandbox), remote vs in-process, p50/p99, serial and at
  ``--sessions`` concurrent sessions. Their difference is what the server adds to a
  step, free of the sandbox's variance;
* real episodes (the reference solutions: commands, checks, strength tests, grading):
  step latency p50/p99 remote and in-process at ``--sessions`` sessions, episodes per
  minute, and the paired mean overhead (client-observed step time minus the server's
  own ``vera_serve_step_seconds`` for the same steps);
* sessions per second: ``--sessions`` clients connecting and resetting at once (the
  server runs with the sandbox creation rate raised, so this is its capacity, not the
  default limit of 16/s);
* memory per session: the server's resident memory with every session open and
  reset, minus before, over the number of sessions (sandbox processes are per
  command, so an open session holds a workspace and an env, no process).

Usage: python benchmarks/serve_load.py [--protocol openenv|ors] [--sessions 64]
                                       [--episodes 2] [--out results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "serve"))

from serve_helpers import ServerProcess  # noqa: E402

from vera_env.spec import EnvSpec  # noqa: E402
from vera_env.tasks import load_tasks  # noqa: E402

MAX_STEPS = 64
NOOP = "I will look at the files first."  # no command, no node, no answer: rejected at once
NOOP_STEPS = 16
TASKS = load_tasks("builtin")


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def plan(sessions: int, episodes: int) -> list[list[str]]:
    """Task ids per session: every builtin task in turn."""
    ids = TASKS.ids()
    return [[ids[(s * episodes + e) % len(ids)] for e in range(episodes)]
            for s in range(sessions)]


# ----- remote -----

async def openenv_session(url: str, task_ids: list[str], steps: list[float],
                          opened: asyncio.Event, ready: list[float]) -> None:
    from openenv.core.generic_client import GenericEnvClient

    async with GenericEnvClient(base_url=url, message_timeout_s=600) as client:
        for n, task_id in enumerate(task_ids):
            await client.reset(task_id=task_id, seed=0)
            if n == 0:
                ready.append(time.perf_counter())
                await opened.wait()
            for turn in TASKS.get(task_id).solution:
                start = time.perf_counter()
                result = await client.step({"text": turn})
                steps.append(time.perf_counter() - start)
            assert result.observation["correct"] is True, task_id


async def ors_session(env: Any, task_ids: list[str], steps: list[float],
                      opened: asyncio.Event, ready: list[float]) -> None:
    index = {task_id: i for i, task_id in enumerate(TASKS.ids())}
    for n, task_id in enumerate(task_ids):
        async with env.session(split="train", index=index[task_id]) as session:
            await session.get_prompt()
            if n == 0:
                ready.append(time.perf_counter())
                await opened.wait()
            for turn in TASKS.get(task_id).solution:
                start = time.perf_counter()
                out = await session.call_tool("turn", {"text": turn})
                steps.append(time.perf_counter() - start)
            assert out.metadata["correct"] is True, task_id


async def remote_run(protocol: str, url: str, work: list[list[str]],
                     on_open: Any = None) -> dict[str, Any]:
    steps: list[float] = []
    ready: list[float] = []
    opened = asyncio.Event()
    client = None
    if protocol == "ors":
        from ors.client import AsyncORS

        client = AsyncORS(base_url=url)
        env = client.environment("vera")
        runs = [ors_session(env, ids, steps, opened, ready) for ids in work]
    else:
        runs = [openenv_session(url, ids, steps, opened, ready) for ids in work]
    start = time.perf_counter()
    tasks = [asyncio.ensure_future(run) for run in runs]
    while len(ready) < len(work):
        if any(t.done() and t.exception() for t in tasks):
            await asyncio.gather(*tasks)
        await asyncio.sleep(0.01)
    open_s = max(ready) - start
    snapshot = on_open() if on_open else None
    opened.set()
    await asyncio.gather(*tasks)
    if client is not None:
        await client.environments._clients[url].close()
    return {"steps": steps, "open_s": open_s, "wall_s": time.perf_counter() - start,
            "at_open": snapshot}


async def noop_remote(protocol: str, url: str, sessions: int) -> list[float]:
    """Malformed turns: the protocol's and the server's cost per step."""
    steps: list[float] = []
    ids = TASKS.ids()

    async def timed(call: Any) -> dict[str, Any]:
        start = time.perf_counter()
        fields = await call()
        steps.append(time.perf_counter() - start)
        assert fields["error"], "the no-op turn was accepted"
        return fields

    async def openenv_one(i: int) -> None:
        from openenv.core.generic_client import GenericEnvClient

        async with GenericEnvClient(base_url=url, message_timeout_s=600) as client:
            await client.reset(task_id=ids[i % len(ids)], seed=0)
            for _ in range(NOOP_STEPS):
                await timed(lambda: _observation(client.step({"text": NOOP})))

    async def ors_one(env: Any, i: int) -> None:
        async with env.session(split="train", index=i % len(ids)) as session:
            await session.get_prompt()
            for _ in range(NOOP_STEPS):
                await timed(lambda: _metadata(session.call_tool("turn", {"text": NOOP})))

    if protocol == "openenv":
        await asyncio.gather(*(openenv_one(i) for i in range(sessions)))
        return steps
    from ors.client import AsyncORS

    client = AsyncORS(base_url=url)
    await asyncio.gather(*(ors_one(client.environment("vera"), i) for i in range(sessions)))
    await client.environments._clients[url].close()
    return steps


async def _observation(result: Any) -> dict[str, Any]:
    return (await result).observation


async def _metadata(result: Any) -> dict[str, Any]:
    return (await result).metadata


def noop_local(sessions: int) -> list[float]:
    steps: list[float] = []
    lock = threading.Lock()
    ids = TASKS.ids()

    def one(i: int) -> None:
        env = EnvSpec(max_steps=MAX_STEPS).build(tasks=TASKS)
        env.reset(seed=0, options={"task_id": ids[i % len(ids)]})
        for _ in range(NOOP_STEPS):
            start = time.perf_counter()
            env.step(NOOP)
            with lock:
                steps.append(time.perf_counter() - start)
        env.close()

    with ThreadPoolExecutor(max_workers=sessions) as pool:
        list(pool.map(one, range(sessions)))
    return steps


def server_step_seconds(url: str) -> tuple[float, float]:
    """(sum, count) of the server's own step-time histogram."""
    import urllib.request

    text = urllib.request.urlopen(f"{url}/metrics", timeout=30).read().decode()
    values = dict(line.rsplit(" ", 1) for line in text.splitlines()
                  if line.startswith("vera_serve_step_seconds_"))
    return float(values["vera_serve_step_seconds_sum"]), float(values["vera_serve_step_seconds_count"])


# ----- in-process -----

def local_run(work: list[list[str]]) -> dict[str, Any]:
    steps: list[float] = []
    lock = threading.Lock()
    spec = EnvSpec(max_steps=MAX_STEPS)

    def one(task_ids: list[str]) -> None:
        env = spec.build(tasks=TASKS)
        try:
            for task_id in task_ids:
                env.reset(seed=0, options={"task_id": task_id})
                for turn in TASKS.get(task_id).solution:
                    start = time.perf_counter()
                    info = env.step(turn)[4]
                    with lock:
                        steps.append(time.perf_counter() - start)
                assert info["correct"] is True, task_id
        finally:
            env.close()

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(work)) as pool:
        list(pool.map(one, work))
    return {"steps": steps, "wall_s": time.perf_counter() - start}


def summary(remote: dict[str, Any], local: dict[str, Any]) -> dict[str, float]:
    r, loc = remote["steps"], local["steps"]
    return {"steps": len(r), "remote_p50_ms": 1e3 * pct(r, 0.5),
            "remote_p99_ms": 1e3 * pct(r, 0.99), "local_p50_ms": 1e3 * pct(loc, 0.5),
            "local_p99_ms": 1e3 * pct(loc, 0.99),
            "overhead_p50_ms": 1e3 * (pct(r, 0.5) - pct(loc, 0.5)),
            "overhead_p99_ms": 1e3 * (pct(r, 0.99) - pct(loc, 0.99)),
            "remote_mean_ms": 1e3 * statistics.fmean(r), "local_mean_ms": 1e3 * statistics.fmean(loc)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", choices=["openenv", "ors"], default="openenv")
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--episodes", type=int, default=2, help="episodes per session")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()

    server = ServerProcess("--protocol", args.protocol, "--max-sessions", str(args.sessions),
                           "--max-steps", str(MAX_STEPS), "--sandbox-rate", "1000",
                           "--sandbox-burst", str(args.sessions))
    try:
        pid = server.proc.pid
        load = os.getloadavg()[0]
        # one session first: it loads what the first environment imports, so the memory
        # measured next is what sessions add, not one-time imports
        noop = {"serial": summary({"steps": asyncio.run(noop_remote(args.protocol, server.url, 1))},
                                  {"steps": noop_local(1)})}
        rss_before = rss_mb(pid)
        work = plan(args.sessions, args.episodes)
        before = server_step_seconds(server.url) if args.protocol == "openenv" else (0, 0)
        remote = asyncio.run(remote_run(args.protocol, server.url, work,
                                        on_open=lambda: rss_mb(pid)))
        after = server_step_seconds(server.url) if args.protocol == "openenv" else (0, 0)
        local = local_run(work)
        noop["concurrent"] = summary(
            {"steps": asyncio.run(noop_remote(args.protocol, server.url, args.sessions))},
            {"steps": noop_local(args.sessions)})
    finally:
        server.signal(signal.SIGTERM)
        server.stop()
    episodes = summary(remote, local)
    if after[1] > before[1]:
        server_mean = (after[0] - before[0]) / (after[1] - before[1])
        episodes["server_env_mean_ms"] = 1e3 * server_mean
        episodes["paired_overhead_mean_ms"] = episodes["remote_mean_ms"] - 1e3 * server_mean
    result = {
        "protocol": args.protocol, "sessions": args.sessions, "episodes": args.episodes,
        "load_average_at_start": load, "load_average_at_end": os.getloadavg()[0],
        "cpus": os.cpu_count(), "noop": noop, "concurrent": episodes,
        "sessions_per_s": args.sessions / remote["open_s"],
        "open_s": remote["open_s"],
        "episodes_per_min": {"remote": 60 * args.sessions * args.episodes / remote["wall_s"],
                             "local": 60 * args.sessions * args.episodes / local["wall_s"]},
        "rss_mb": {"before": rss_before, "open": remote["at_open"]},
        "mb_per_session": (remote["at_open"] - rss_before) / args.sessions,
    }
    print_table(result)
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))


def print_table(r: dict[str, Any]) -> None:
    print(f"vera-env serve --protocol {r['protocol']}: {r['sessions']} sessions x "
          f"{r['episodes']} episodes, {r['cpus']} CPUs, load {r['load_average_at_start']:.1f}"
          f" -> {r['load_average_at_end']:.1f}")
    print(f"{'step latency (ms)':<26}{'remote p50':>11}{'local p50':>10}{'over p50':>10}"
          f"{'remote p99':>11}{'local p99':>10}{'over p99':>10}{'steps':>7}")
    rows = [(f"no-op, {name}", r["noop"][name]) for name in ("serial", "concurrent")
            if name in r["noop"]] + [(f"episodes, {r['sessions']} sessions", r["concurrent"])]
    for name, s in rows:
        print(f"{name:<26}{s['remote_p50_ms']:>11.1f}{s['local_p50_ms']:>10.1f}"
              f"{s['overhead_p50_ms']:>10.1f}{s['remote_p99_ms']:>11.1f}"
              f"{s['local_p99_ms']:>10.1f}{s['overhead_p99_ms']:>10.1f}{s['steps']:>7}")
    c = r["concurrent"]
    if "paired_overhead_mean_ms" in c:
        print(f"episodes: client mean {c['remote_mean_ms']:.1f} ms, server env mean "
              f"{c['server_env_mean_ms']:.1f} ms: overhead {c['paired_overhead_mean_ms']:.1f} ms"
              " per step (same steps)")
    print(f"sessions opened+reset per second: {r['sessions_per_s']:.1f} "
          f"({r['sessions']} in {r['open_s']:.2f} s)")
    print(f"episodes/min: remote {r['episodes_per_min']['remote']:.0f}, "
          f"in-process {r['episodes_per_min']['local']:.0f}")
    print(f"server RSS: {r['rss_mb']['before']:.0f} MB idle, {r['rss_mb']['open']:.0f} MB with "
          f"{r['sessions']} sessions open: {r['mb_per_session']:.2f} MB per session")


if __name__ == "__main__":
    main()
