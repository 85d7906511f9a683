"""Where a strength-on step's time goes: parse, command, replay, variants, staging, checks.

The oracle policy (each task's reference solution) plays one episode per task on the
default backend (``EnvSpec().sandbox``: ``auto``), with strength testing on (the default
``RewardConfig``) and off (``RewardConfig(strength=False)``). Nothing in ``vera_env`` is
edited: the functions that do each kind of work are wrapped with timers in this process
(``Attribution``), each thread keeping a stack, so a call's time is *exclusive* (what a
nested wrapped call took is charged to the nested call's category, not to its caller).

A step's wall time is the main thread's time, split exactly into: ``parse``
(``parse_emission``), ``command`` (``turns.run_command``: the agent's command),
``check runs`` (``run_check`` of the node's own checks), ``strength`` (the main thread
inside ``StrengthSession.assess``, mostly waiting for its worker threads) and
``bookkeeping`` (the rest). Strength's wall is then apportioned over what its worker
threads were busy with (waiting for futures and locks excluded): ``replay``
(``Shadow.extend``: the episode's file-writing commands re-run in each shadow, and
``CommandLog.record``), ``variants`` (``build_variants`` and decoding the task files:
generating and classifying controls and mutants), ``staging`` (``write_variants``,
``copy_variant``, ``fresh_file``, staging shadows and twins, ``Shadow.settle``, the capped
area), ``check runs`` (``run_check`` on variants and shadows) and its own bookkeeping.
Worker-busy shares include time a thread waited for the GIL: they apportion the wall,
they do not add to it. Counts: check runs, variants built, sandboxes started (a fresh
``bwrap`` per check or fallback run, plus a persistent server started per workspace).

CPU per step is counted twice: ``getrusage`` (this process and its reaped children) and,
where the machine lets the script join a fresh cgroup-v1 ``cpuacct`` group of its own,
that group's usage (every process started in it, reaped or not). They differ when a
sandbox server dies with the thread that started it (bwrap's ``--die-with-parent``): bwrap
is killed before it reaps its zygote, so the zygote's and its commands' CPU never reach
``getrusage`` (measured: a 0.6 s check in such a server counted 0.002 s). Quote the
cgroup's figure (``tree_cpu_s_per_step``) when comparing code where that happens.

Last, the per-call cost in one process, median of ``--n``: a bare
``subprocess.run(["bash", "-c", "true"])`` vs ``Workspace.run("true")`` (the agent's
path) vs ``Workspace.run_check("true")`` (every check).

Usage::

    python benchmarks/step_profile.py [--tasks ID,ID,...] [--n 30] [--strength on,off]

Prints markdown tables and writes ``benchmarks/results/step_profile.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import tempfile
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sandbox_latency import machine

from vera_env import turns as turns_module
from vera_env.env import VeraEnv
from vera_env.policy import ScriptedPolicy
from vera_env.sandbox import bwrap as bwrap_module
from vera_env.sandbox import capped as capped_module
from vera_env.sandbox import make_sandbox
from vera_env.sandbox import server as server_module
from vera_env.sandbox.workspace import BaseWorkspace
from vera_env.spec import EnvSpec
from vera_env.tasks import Task, load_tasks
from vera_env.verification.rewards import RewardConfig
from vera_env.verification.strength import command_log, session, shadows, targets, variants

RESULTS = Path(__file__).resolve().parent / "results" / "step_profile.json"
TASKS = ("seq.motif_count.easy.s0", "mtx.qc_cells.easy.s0", "vcf.het_count.easy.s0",
         "tab.sentinel_mean.easy.s0", "real.csv.penguin_mass.s0")
ROWS = ("parse", "command", "replay", "variants", "staging", "check runs", "bookkeeping")
WAIT = "wait"  # a thread blocked on futures or a lock: not work

# (module or class, attribute, category). Main-thread categories split a step's wall;
# worker-thread ones apportion strength's wall (module docstring).
HOOKS: list[tuple[Any, str, str]] = [
    (VeraEnv, "step", "bookkeeping"),
    (turns_module, "parse_emission", "parse"),
    (turns_module, "run_checks", "bookkeeping"),
    (turns_module, "run_command", "command"),
    (session.StrengthSession, "assess", "strength"),
    (session.StrengthSession, "_probe", "strength bookkeeping"),
    (session._PhaseRunner, "__call__", WAIT),
    (session._PhaseRunner, "_verdict", "strength bookkeeping"),
    (targets.TargetBank, "acquire", WAIT),
    (targets.TargetBank, "shadow_group", WAIT),
    (shadows.ShadowGroup, "extend", WAIT),
    (command_log.CommandLog, "record", "replay"),
    (shadows.Shadow, "extend", "replay"),
    (targets, "build_variants", "variants"),
    (targets.TargetBank, "_decoded", "variants"),
    (variants, "write_variants", "staging"),
    (session, "copy_variant", "staging"),
    (shadows, "copy_variant", "staging"),
    (variants, "fresh_file", "staging"),
    (shadows.ShadowGroup, "_stage", "staging"),
    (shadows.Shadow, "settle", "staging"),
    (capped_module.CappedArea, "__init__", "staging"),
    (BaseWorkspace, "run_check", "check runs"),
]
COUNTED = [(bwrap_module.BwrapWorkspace, "_launch", "fresh sandbox"),
           (server_module._Server, "start", "server started")]


class Attribution:
    """Exclusive wall time per (category, main|worker) while installed.

    Each thread keeps a stack of open categories; entering a nested one charges the
    time so far to its caller's category, so no second is counted twice in a thread.
    """

    def __init__(self) -> None:
        self.seconds: dict[tuple[str, bool], float] = defaultdict(float)
        self.calls: Counter[str] = Counter()
        self.variants_built = 0
        self._local = threading.local()
        self._lock = threading.Lock()
        self._undo: list[tuple[Any, str, Any]] = []

    def _stack(self) -> list[list[Any]]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack  # type: ignore[no-any-return]

    def _charge(self, category: str, seconds: float) -> None:
        main = threading.current_thread() is threading.main_thread()
        with self._lock:
            self.seconds[(category, main)] += seconds

    @contextmanager
    def entered(self, category: str) -> Iterator[None]:
        stack, now = self._stack(), time.perf_counter()
        if stack:
            self._charge(stack[-1][0], now - stack[-1][1])
        stack.append([category, now])
        try:
            yield
        finally:
            now = time.perf_counter()
            self._charge(category, now - stack.pop()[1])
            if stack:
                stack[-1][1] = now

    def install(self) -> None:
        for owner, name, category in HOOKS:
            self._patch(owner, name, category, timed=True)
        for owner, name, label in COUNTED:
            self._patch(owner, name, label, timed=False)

    def _patch(self, owner: Any, name: str, category: str, *, timed: bool) -> None:
        original = getattr(owner, name)
        profiler = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with profiler._lock:
                profiler.calls[f"{name}:{category}" if timed else category] += 1
            if not timed:
                return original(*args, **kwargs)
            with profiler.entered(category):
                out = original(*args, **kwargs)
            if name == "build_variants":
                with profiler._lock:
                    profiler.variants_built += len(out.controls) + len(out.mutants)
            return out
        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        setattr(owner, name, wrapper)
        self._undo.append((owner, name, original))

    def uninstall(self) -> None:
        for owner, name, original in reversed(self._undo):
            setattr(owner, name, original)
        self._undo.clear()

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return {"seconds": dict(self.seconds), "calls": Counter(self.calls),
                    "variants": self.variants_built}


def step_rows(before: dict[str, Any], after: dict[str, Any], wall_s: float) -> dict[str, Any]:
    """One step's seconds per row of ``ROWS`` (summing to ``wall_s``) and its counts.

    Main-thread categories are exact; strength's main-thread wall is apportioned by
    what its workers were busy with; ``bookkeeping`` is what is left (the env's own
    code, the wrappers, strength's bookkeeping)."""
    sec: dict[tuple[str, bool], float] = defaultdict(float)
    for key, value in after["seconds"].items():
        sec[key] = value - before["seconds"].get(key, 0.0)
    calls = after["calls"] - before["calls"]
    out = {row: 0.0 for row in ROWS}
    for (category, main), seconds in sec.items():
        if main and category in out:
            out[category] += seconds
    strength_wall = sec[("strength", True)]
    busy = {cat: s for (cat, main), s in sec.items() if not main and cat != WAIT and s > 0}
    total_busy = sum(busy.values())
    for category, seconds in busy.items():
        if category in out and category != "bookkeeping":
            out[category] += strength_wall * seconds / total_busy
    out["bookkeeping"] = max(0.0, wall_s - sum(v for k, v in out.items() if k != "bookkeeping"))
    return {"rows": out, "wall_s": wall_s, "strength_wall_s": strength_wall,
            "worker_busy_s": total_busy, "worker_busy": busy,
            "check_runs": sum(v for k, v in calls.items() if k.endswith(":check runs")),
            "fresh_sandboxes": calls["fresh sandbox"], "servers": calls["server started"],
            "variants_built": after["variants"] - before["variants"]}


def play_episode(task: Task, strength: bool, prof: Attribution,
                 tree_cpu: Callable[[], float | None]) -> dict[str, Any]:
    """The oracle's episode on ``task``, every step attributed (``step_rows``)."""
    env = EnvSpec(reward=RewardConfig(strength=strength)).build(tasks=[task])
    policy = ScriptedPolicy({task.id: tuple(task.solution or ())})
    steps, total = [], 0.0
    cpu0, tree0 = cpu_s(), tree_cpu()
    try:
        started = time.perf_counter()
        obs, info = env.reset(options={"task_id": task.id})
        reset_s = time.perf_counter() - started
        ended = False
        while not ended:
            action = policy.act(obs, info)
            before, started = prof.snapshot(), time.perf_counter()
            obs, reward, terminated, truncated, info = env.step(action)
            steps.append(step_rows(before, prof.snapshot(), time.perf_counter() - started))
            total += float(reward)
            ended = terminated or truncated
    finally:
        env.close()  # shadow servers are reaped here: their CPU counts once they exit
    tree1 = tree_cpu()
    return {"task": task.id, "strength": strength, "reset_s": reset_s, "return": total,
            "cpu_s": cpu_s() - cpu0, "steps": steps,
            "tree_cpu_s": None if tree0 is None or tree1 is None else tree1 - tree0}


@contextmanager
def cpu_cgroup() -> Iterator[Callable[[], float | None]]:
    """Run inside a fresh cgroup-v1 ``cpuacct`` group, when one can be made (module
    docstring); yields a reader of its CPU seconds so far (None: no group)."""
    base = Path("/sys/fs/cgroup/cpuacct")
    group = base / f"vera-step-profile-{os.getpid()}"
    try:
        group.mkdir()
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        yield lambda: None
        return
    try:
        yield lambda: int((group / "cpuacct.usage").read_text()) / 1e9
    finally:
        try:
            (base / "cgroup.procs").write_text(str(os.getpid()))
            group.rmdir()  # refused while a process started in it still runs
        except OSError as exc:
            print(f"(cpuacct group {group} left behind: {exc})")


def cpu_s() -> float:
    """CPU seconds of this process and its reaped children (every sandbox)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def median_ms(call: Callable[[], object], n: int) -> tuple[float, float]:
    """Median wall ms of ``call``, and its mean CPU ms (this process and its children)."""
    samples = []
    cpu0 = cpu_s()
    for _ in range(n):
        started = time.perf_counter()
        call()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples) * 1e3, (cpu_s() - cpu0) / n * 1e3


def call_costs(n: int) -> dict[str, Any]:
    """Median ms of a bare subprocess, the agent's path and the check path, one run."""
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)
        data = Path(tmp) / "d.txt"
        data.write_text("x\n")
        box = make_sandbox(EnvSpec().sandbox)
        ws = box.stage({"d.txt": data})
        try:
            ws.run("true")  # the server starts on first use: not a per-call cost
            bare = median_ms(lambda: subprocess.run(["bash", "-c", "true"], check=True), n)
            run = median_ms(lambda: ws.run("true"), n)
            check = median_ms(lambda: ws.run_check("true"), n)
        finally:
            ws.close()
            closer = getattr(box, "close", None)
            if callable(closer):
                closer()
    return {"n": n, "backend": type(box).__name__, "bare_ms": bare[0], "run_ms": run[0],
            "run_check_ms": check[0], "bare_cpu_ms": bare[1], "run_cpu_ms": run[1],
            "run_check_cpu_ms": check[1]}


def summarize(episode: dict[str, Any]) -> dict[str, Any]:
    """Median seconds per row over an episode's steps, shares, and counts."""
    steps = episode["steps"]
    medians = {row: statistics.median(s["rows"][row] for s in steps) for row in ROWS}
    totals = {row: sum(s["rows"][row] for s in steps) for row in ROWS}
    wall = sum(s["wall_s"] for s in steps)
    return {"task": episode["task"], "strength": episode["strength"], "steps": len(steps),
            "return": episode["return"], "reset_s": episode["reset_s"],
            "episode_s": wall, "median_s": medians, "cpu_s_per_step": episode["cpu_s"] / len(steps),
            "tree_cpu_s_per_step": (None if episode.get("tree_cpu_s") is None
                                    else episode["tree_cpu_s"] / len(steps)),
            "fresh_sandboxes": sum(s["fresh_sandboxes"] for s in steps),
            "servers_started": sum(s["servers"] for s in steps),
            "share": {row: totals[row] / wall if wall else 0.0 for row in ROWS},
            "step_wall_median_s": statistics.median(s["wall_s"] for s in steps),
            "check_runs_per_step": sum(s["check_runs"] for s in steps) / len(steps),
            "sandboxes_per_step": sum(s["fresh_sandboxes"] + s["servers"] for s in steps)
            / len(steps),
            "variants_per_episode": sum(s["variants_built"] for s in steps),
            "strength_wall_s": sum(s["strength_wall_s"] for s in steps),
            "worker_busy_s": _summed([s["worker_busy"] for s in steps])}


def _summed(dicts: list[dict[str, float]]) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for d in dicts:
        for key, value in d.items():
            out[key] += value
    return dict(out)


def print_summary(r: dict[str, Any]) -> None:
    state = "on" if r["strength"] else "off"
    print(f"\n### {r['task']}, strength {state}: {r['steps']} steps, {r['episode_s']:.2f} s "
          f"(reset {r['reset_s']:.2f} s), return {r['return']:.3f}\n")
    print("| category | s per step (median) | share of step time (episode) |")
    print("|---|---:|---:|")
    for row in ROWS:
        print(f"| {row} | {r['median_s'][row]:.3f} | {r['share'][row]:.1%} |")
    print(f"| **step wall** | {r['step_wall_median_s']:.3f} | 100% |")
    tree = r["tree_cpu_s_per_step"]
    if tree is not None:
        print(f"\nCPU-s per step, every process of the run's cgroup: {tree:.2f}")
    print(f"\nCPU-s per step {r['cpu_s_per_step']:.2f} (process + sandboxes, episode mean); "
          f"check runs per step {r['check_runs_per_step']:.1f}; sandboxes started per step "
          f"{r['sandboxes_per_step']:.1f}; variants built in the episode "
          f"{r['variants_per_episode']}")
    if r["strength_wall_s"]:
        busy = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["worker_busy_s"].items()))
        print(f"strength wall {r['strength_wall_s']:.2f} s in the episode; its workers busy "
              f"(s, summed over threads): {busy}")


def print_overview(summaries: list[dict[str, Any]]) -> None:
    """One row per episode: the shares of its step time, and its counts."""
    print("\n| task | strength | s / step (median) | CPU-s / step | CPU-s / step (cgroup) | "
          + " | ".join(ROWS) + " | check runs / step | sandboxes / step | variants |")
    print("|---|---|---:|---:|---:|" + "---:|" * (len(ROWS) + 3))
    for r in summaries:
        shares = " | ".join(f"{r['share'][row]:.0%}" for row in ROWS)
        print(f"| {r['task']} | {'on' if r['strength'] else 'off'} | "
              f"{r['step_wall_median_s']:.2f} | {r['cpu_s_per_step']:.2f} | "
              f"{_maybe(r['tree_cpu_s_per_step'])} | {shares} | "
              f"{r['check_runs_per_step']:.1f} | {r['sandboxes_per_step']:.1f} | "
              f"{r['variants_per_episode']} |")


def _maybe(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def load(ids: list[str]) -> list[Task]:
    builtin, tasks = load_tasks("builtin"), []
    for tid in ids:
        source = load_tasks("real") if tid.startswith("real.") else builtin
        try:
            tasks.append(source.get(tid))
        except Exception as exc:  # noqa: BLE001 - a missing real source is reported, not fatal
            print(f"skipping {tid}: {exc}")
    return tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--strength", default="on,off")
    parser.add_argument("--episodes", type=int, default=1, help="episodes per task and mode")
    parser.add_argument("--n", type=int, default=30, help="samples of each per-call cost")
    args = parser.parse_args()
    out: dict[str, Any] = {"machine": machine(), "load_before": os.getloadavg(),
                           "episodes": [], "summaries": []}
    tasks = load(args.tasks.split(","))
    prof = Attribution()
    prof.install()
    try:
        with cpu_cgroup() as tree_cpu:
            for mode in args.strength.split(","):
                for task in tasks:
                    for _ in range(args.episodes):
                        episode = play_episode(task, mode == "on", prof, tree_cpu)
                        out["episodes"].append(episode)
                        out["summaries"].append(summarize(episode))
                        print_summary(out["summaries"][-1])
    finally:
        prof.uninstall()
    print_overview(out["summaries"])
    out["call_costs"] = call_costs(args.n)
    out["load_after"] = os.getloadavg()
    c = out["call_costs"]
    print(f"\nper call ({c['backend']}, median of {c['n']}): bare `bash -c true` "
          f"{c['bare_ms']:.2f} ms; Workspace.run {c['run_ms']:.2f} ms "
          f"({c['run_ms'] / c['bare_ms']:.1f}x); run_check {c['run_check_ms']:.2f} ms "
          f"({c['run_check_ms'] / c['bare_ms']:.1f}x); CPU ms per call (mean): bare "
          f"{c['bare_cpu_ms']:.2f}, run {c['run_cpu_ms']:.2f}, run_check {c['run_check_cpu_ms']:.2f}")
    print(f"load average before {out['load_before']}, after {out['load_after']}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=1, default=str) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
