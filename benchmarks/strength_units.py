"""Where a group's strength CPU goes: the sandbox primitives, what each costs, how many.

Strength's cost is a count of sandbox operations times their unit cost. This measures
both, so the next speed change can be aimed at the term that dominates:

* **Units** (machine CPU from ``/proc/stat``, so a zygote's CPU that ``getrusage`` never
  sees is counted; run it on a quiet machine): a check on a workspace's warm check
  server, a command on its command server, a check with an overlay (a fresh sandbox per
  run: frozen strength runs), and a shadow's lifecycle (stage, one command, one check,
  close: two server starts).
* **Counts** per episode, by wrapping the primitives: for one episode alone with the
  verdict store off, and for ``--n`` episodes of one task in flight as one GRPO group with
  the store on (``strength_share.py --load``'s setting): fresh sandboxes, server starts,
  shadows staged (of the variants; confirmation twins), replayed commands, check runs.
* **Model**: counts times units against the machine CPU measured over the same run.

Usage::

    python benchmarks/strength_units.py [--task seq.motif_count.easy.s0] [--n 8]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import statistics
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sandbox_latency import machine
from strength_share import load_run

from vera_env.sandbox import bwrap, make_sandbox, persistent, workspace
from vera_env.verification.strength import shadows

RESULTS = Path(__file__).resolve().parent / "results" / "strength_units.json"


def busy_s() -> float:
    """CPU seconds the machine spent busy so far (user, nice, system, irq, softirq)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (fields[0] + fields[1] + fields[2] + fields[5] + fields[6]) / os.sysconf(
        "SC_CLK_TCK")


def units(reps: int) -> dict[str, float]:
    """Median machine CPU ms of each primitive over three batches of ``reps``."""
    sandbox = make_sandbox("auto")
    tmp = Path(tempfile.mkdtemp(dir="/var/tmp"))
    os.chmod(tmp, 0o755)
    data, other = tmp / "data.csv", tmp / "v.csv"
    data.write_text("a,b\n1,2\n3,4\n" * 100)
    other.write_text("a,b\n1,2\n3,5\n" * 100)
    for path in (data, other):
        os.chmod(path, 0o644)
    ws = sandbox.stage({"data.csv": data})
    scratch = ws.scratch_dir()
    shutil.copy(other, scratch / "v.csv")
    check = "test $(wc -l < data.csv) -gt 3 && echo True || echo False"

    def shadow() -> None:
        w = sandbox.stage({"data.csv": other})
        w.run("wc -l data.csv > o.txt")
        w.run_check(check)
        w.close()

    cases: dict[str, tuple[Callable[[], object], int]] = {
        "check_on_server_ms": (lambda: ws.run_check(check), reps),
        "command_on_server_ms": (lambda: ws.run("wc -l data.csv > out.txt"), reps),
        "check_with_overlay_ms": (lambda: ws.run_check(check, overlay={"data.csv": scratch / "v.csv"}),
                                  reps),
        "python3_check_on_server_ms": (lambda: ws.run_check("python3 -c pass"), reps // 2),
        "shadow_stage_command_check_close_ms": (shadow, max(5, reps // 4)),
    }
    out: dict[str, float] = {}
    try:
        for name, (call, n) in cases.items():
            call()
            batches = []
            for _ in range(3):
                time.sleep(0.2)
                before = busy_s()
                for _ in range(n):
                    call()
                batches.append(1000 * (busy_s() - before) / n)
            out[name] = round(statistics.median(batches), 2)
            print(f"{name}: {out[name]} ms", flush=True)
    finally:
        ws.close()
        sandbox.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return out


class Counter:
    """Counts the sandbox primitives while installed (``install`` / ``remove``)."""

    def __init__(self) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._saved: list[tuple[type, str, Any]] = []

    def _wrap(self, cls: type, name: str, tag: Callable[[], str]) -> None:
        original = getattr(cls, name)

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            key = tag()
            with self._lock:
                self.counts[key] += 1
            return original(*args, **kwargs)
        self._saved.append((cls, name, original))
        setattr(cls, name, wrapper)

    def install(self) -> None:
        self._wrap(bwrap.BwrapWorkspace, "_launch", lambda: "fresh_sandboxes")
        self._wrap(persistent.PersistentServer, "start", lambda: "server_starts")
        self._wrap(shadows.ShadowGroup, "_stage", lambda: "twins_staged" if _called_from(
            "twin") else "shadows_staged")
        self._wrap(shadows.Shadow, "extend", lambda: "shadow_extends")
        self._wrap(workspace.BaseWorkspace, "run", lambda: "commands_run")
        self._wrap(workspace.BaseWorkspace, "run_check", lambda: "checks_run")

    def remove(self) -> None:
        for cls, name, original in reversed(self._saved):
            setattr(cls, name, original)
        self._saved = []


def _called_from(function: str) -> bool:
    return any(frame.name == function for frame in traceback.extract_stack(limit=12))


def counted(n: int, group: int, store: bool, task: str) -> dict[str, Any]:
    """One ``load_run`` with the primitives counted, per episode, and its machine CPU."""
    counter = Counter()
    counter.install()
    try:
        before = busy_s()
        row = load_run(n, group, 1.0, True, store, [task])
        busy = busy_s() - before
    finally:
        counter.remove()
    episodes = row["episodes"]
    return {"n": n, "group": group, "store": store, "episodes": episodes,
            "turns": row["turns"], "mean_score": row["mean_score"],
            "machine_cpu_s_per_turn": round(busy / row["turns"], 3),
            "per_episode": {k: round(v / episodes, 1) for k, v in sorted(counter.counts.items())},
            "served": row["served"], "missed": row["missed"]}


def model(unit: dict[str, float], per_episode: dict[str, float]) -> dict[str, float]:
    """CPU-s per episode each term explains (a shadow's lifecycle counted once per staging,
    its command and check apart; a server start priced as the lifecycle less one
    command and one check)."""
    start = max(0.0, (unit["shadow_stage_command_check_close_ms"]
                      - unit["command_on_server_ms"] - unit["check_on_server_ms"]) / 2)
    terms = {
        "fresh_sandboxes": per_episode.get("fresh_sandboxes", 0) * unit["check_with_overlay_ms"],
        "server_starts": per_episode.get("server_starts", 0) * start,
        "commands_on_servers": per_episode.get("commands_run", 0) * unit["command_on_server_ms"],
        "checks_on_servers": max(0.0, per_episode.get("checks_run", 0)
                                 - per_episode.get("fresh_sandboxes", 0))
        * unit["check_on_server_ms"],
    }
    return {k: round(v / 1000, 3) for k, v in terms.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="seq.motif_count.easy.s0")
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--reps", type=int, default=40)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    out: dict[str, Any] = {"machine": machine(), "task": args.task,
                           "load_before": os.getloadavg()}
    out["units_ms"] = units(args.reps)
    out["runs"] = [counted(1, 1, False, args.task), counted(args.n, args.n, True, args.task)]
    for run in out["runs"]:
        run["model_cpu_s_per_episode"] = model(out["units_ms"], run["per_episode"])
        explained = sum(run["model_cpu_s_per_episode"].values())
        run["explained_share"] = round(
            explained / (run["machine_cpu_s_per_turn"] * run["turns"] / run["episodes"]), 3)
        print(json.dumps(run, indent=1), flush=True)
    out["load_after"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
