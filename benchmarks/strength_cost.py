"""What counterfactual strength costs, against the floor of the runs it must make.

Strength testing (``vera_env.verification.strength``) shows a passing check variants of
the task's files — frozen under the model's files, or with the episode replayed on
each (``shadows``) — so its unavoidable cost is the sandbox runs it makes: per variant,
the replayed commands and the check. **Floor** = the wall time of every sandbox run
strength made (each replayed command, each check run), summed, divided by the workers:
the work it cannot avoid, if the workers were never idle. What is above the floor is the
harness: building variants, staging shadows, walking them, the threads, and workers
idle at a phase's end (a phase waits for its slowest run). Target: within 1.5x of the
floor once variants are built (a later node). Printed for one worker (the harness's
own overhead) and for the default workers.

Also: the **worst-case step** against its formula (``timeout_s + 16 x check_timeout_s +
strength.deadline_max_s``; measured with small limits so it runs in seconds), check-input
discovery over 30,000 files, decoding a 100,000-member gzip (old loop vs new), how often
a clock-driven check slips through (frozen and replayed) against its bound, how often
raw pins of builtin task data earn, and (unchanged) the containment limits.

Usage::

    python benchmarks/strength_cost.py [--n 5] [--coin 100] [--skip-coin]

Prints markdown tables and writes ``benchmarks/results/strength_cost.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from vera_env.env import VeraEnv
from vera_env.records import StepRecord
from vera_env.sandbox import BwrapSandbox, SandboxLimits, probe_bwrap
from vera_env.sandbox import bwrap as bwrap_module
from vera_env.sandbox import workspace as workspace_module
from vera_env.sandbox.disk import DiskWatch, measure
from vera_env.sandbox.workspace import BaseWorkspace, limits_wrapper
from vera_env.tasks import Task
from vera_env.tasks.builtin import builtin_source
from vera_env.verification.checks import run_checks
from vera_env.verification.rewards import RewardConfig, StrengthConfig, step_bound_s
from vera_env.verification.strength import StrengthSession, StrengthTask
from vera_env.verification.strength.check_inputs import WorkspaceIndex, named_files
from vera_env.verification.strength.encoding import decode
from vera_env.wire.protocol import CheckSpec

RESULTS = Path(__file__).resolve().parent / "results" / "strength_cost.json"
LIMITS = SandboxLimits(timeout_s=60, check_timeout_s=60)
BIG_LINES = 1_000_000
V = " && echo True || echo False"
BIG_SUM = sum(i % 97 for i in range(BIG_LINES))
SUM_AWK = "awk -F'\\t' 'NR > 1 { s += $2 } END { print s }' small.tsv"

# (label, commands the model ran, the check)
CASES: list[tuple[str, list[str], str]] = [
    ("raw pin of the data (frozen)", [], "test $(wc -l < small.tsv) -eq 1001" + V),
    ("vacuous, names the data (frozen)", [], "test -f small.tsv" + V),
    ("recount agrees with a model file (frozen)", [f"{SUM_AWK} > sum.txt"],
     f'test "$({SUM_AWK})" -eq "$(cat sum.txt)"' + V),
    ("pin of a derived file, 1 command (replay)", [f"{SUM_AWK} > sum.txt"],
     'test "$(cat sum.txt)" -eq 500500' + V),
    ("pin of a derived file, 5 commands (replay)",
     [f"{SUM_AWK} > s1.txt", "cat s1.txt > s2.txt", "cat s2.txt > s3.txt",
      "cat s3.txt > s4.txt", "cat s4.txt > s5.txt"], 'test "$(cat s5.txt)" -eq 500500' + V),
    ("self-written pin (no replay needed)", ["echo 42 > a.txt"], 'test "$(cat a.txt)" = 42' + V),
    ("pin of a sum over 12 MB gz (replay)",
     ["zcat big.mtx.gz | awk 'NR > 1 { s += $3 } END { print s }' > total.txt"],
     f'test "$(cat total.txt)" -eq {BIG_SUM}' + V),
]


def write_data(directory: Path) -> dict[str, Path]:
    """A 1,000-row table and a ~12 MB (decompressed) matrix-like gz file."""
    small = directory / "small.tsv"
    small.write_text("id\tvalue\n" + "".join(f"{i}\t{i}\n" for i in range(1, 1001)))
    big = directory / "big.mtx.gz"
    lines = "".join(f"{i % 5000 + 1} {i % 3000 + 1} {i % 97}\n" for i in range(BIG_LINES))
    big.write_bytes(gzip.compress((f"5000 3000 {BIG_LINES}\n" + lines).encode(), 6))
    for path in (small, big):
        path.chmod(0o444)
    return {"small.tsv": small, "big.mtx.gz": big}


def median_s(call: Callable[[], object], n: int) -> float:
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


class RunCounter:
    """Records every sandbox run (replays and checks) while active, with its wall time."""

    def __enter__(self) -> RunCounter:
        self.runs: list[str] = []
        self.checks = 0
        self.busy_s = 0.0
        self._run, self._check = BaseWorkspace.run, BaseWorkspace.run_check
        counter = self

        def timed(call: Callable[..., object], *args: object, **kw: object) -> object:
            started = time.perf_counter()
            try:
                return call(*args, **kw)
            finally:
                counter.busy_s += time.perf_counter() - started

        def run(ws: BaseWorkspace, command: str, **kw: object) -> object:
            counter.runs.append(command)
            return timed(counter._run, ws, command, **kw)

        def run_check(ws: BaseWorkspace, command: str, **kw: object) -> object:
            counter.checks += 1
            return timed(counter._check, ws, command, **kw)
        BaseWorkspace.run, BaseWorkspace.run_check = run, run_check  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        BaseWorkspace.run, BaseWorkspace.run_check = self._run, self._check  # type: ignore


def strength_rows(box: BwrapSandbox, files: dict[str, Path], n: int,
                  workers: int) -> list[dict[str, object]]:
    """Per case: the first node (variants built, shadows staged and replayed) and a
    later one, each against its floor: the sandbox runs strength made, each as long as
    it took, divided by the workers."""
    rows = []
    for label, commands, check in CASES:
        ws = box.stage(files)
        session = StrengthSession(box, StrengthTask(files), ws, StrengthConfig(), LIMITS,
                                  workers=workers)
        for command in commands:
            session.record(command, ws.run(command))
        [result] = run_checks([CheckSpec("range", label, check)], ws, timeout_s=60)
        with RunCounter() as cold:
            started = time.perf_counter()
            [assessed] = session.assess([result])
            cold_s = time.perf_counter() - started
        warm_s, warm_floor = [], []
        for _ in range(n):
            with RunCounter() as warm:
                started = time.perf_counter()
                session.assess([result])
                warm_s.append(time.perf_counter() - started)
            warm_floor.append(warm.busy_s / workers)
        rows.append({"check": label, "check_ms": result.duration_s * 1e3,
                     "replays_cold": len(cold.runs), "check_runs": cold.checks,
                     "cold_ms": cold_s * 1e3, "floor_cold_ms": cold.busy_s / workers * 1e3,
                     "warm_ms": statistics.median(warm_s) * 1e3,
                     "floor_warm_ms": statistics.median(warm_floor) * 1e3,
                     "discriminating": assessed.discriminating, "detail": assessed.detail})
        session.close()
        ws.close()
    return rows


def _record(result: tuple) -> StepRecord:
    """The record of an ``env.step`` return (the observation aside)."""
    _, reward, terminated, truncated, info = result
    return StepRecord.from_info(info, reward, terminated, truncated)


def worst_step_row() -> dict[str, object]:
    """One step that hits every bound at once, with small limits."""
    limits = SandboxLimits(timeout_s=3, check_timeout_s=1.5)
    config = RewardConfig(strength={"deadline_floor_s": 5, "deadline_max_s": 5})
    checks = 16
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        data.mkdir(parents=True)
        (data / "t.tsv").write_text("".join(f"{i}\t{i}\n" for i in range(200)))
        task = Task(id="w", question="q", answer="a", grader={"kind": "exact"}, data_dir=data)
        env = VeraEnv([task], limits=limits, reward=config)
        env.reset(seed=0)
        env.step("<command>cut -f2 t.tsv > v.txt; sleep 1.2</command>")
        turn = "<command>cat v.txt > w.txt; sleep 10</command>\nNODE kind=qc summary=\"slow\"\n"
        turn += "\n".join(f'CHECK range "c{i}" :: sleep 1.4; test "$(tail -1 w.txt)" -ge {i}'
                           + V for i in range(checks))
        started = time.perf_counter()
        step = _record(env.step(turn))
        step_s = time.perf_counter() - started
        env.close()
    bound = step_bound_s(limits, config, checks)
    details = [c.detail for c in step.checks]
    return {"step_s": step_s, "bound_s": bound, "checks": checks,
            "deadline_cut": sum("deadline" in d for d in details),
            "timeout_s": limits.timeout_s, "check_timeout_s": limits.check_timeout_s,
            "deadline_max_s": StrengthConfig(deadline_max_s=5).deadline_max_s}


def discovery_row(n: int) -> dict[str, object]:
    """named_files over 30,000 workspace files and a globbing check."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "many").mkdir()
        listing = [f"many/f{i}" for i in range(30_000)]
        for name in listing:
            (root / name).touch()
        command = "cat many/* | wc -l; test -f many/f1" + V
        limited = median_s(lambda: named_files(command, WorkspaceIndex(listing), root, limit=64), n)
        full = median_s(lambda: named_files(command, listing, root), max(1, n // 2))
    return {"files": 30_000, "limit_64_ms": limited * 1e3, "unlimited_ms": full * 1e3}


def _old_decode(raw: bytes, max_bytes: int) -> bytes:
    """The decoder issue 11 measured: each member copies the rest of the input."""
    out, size, data = [], 0, raw
    while data and size <= max_bytes:
        decoder = zlib.decompressobj(wbits=31)
        chunk = decoder.decompress(data, max_bytes + 1 - size)
        out.append(chunk)
        size += len(chunk)
        if not decoder.eof:
            break
        data = decoder.unused_data
    return b"".join(out)


def decode_rows() -> list[dict[str, object]]:
    rows = []
    for members in (10_000, 30_000, 100_000):
        raw = b"".join(gzip.compress(b"%d\n" % i, mtime=0) for i in range(members))
        started = time.perf_counter()
        new = decode(raw, max_bytes=32 << 20, budget_s=60).content
        new_s = time.perf_counter() - started
        old_s = None
        if members <= 30_000:
            started = time.perf_counter()
            assert _old_decode(raw, 32 << 20) == new
            old_s = time.perf_counter() - started
        rows.append({"members": members, "bytes": len(raw), "new_s": new_s, "old_s": old_s})
    return rows


def limit_rows(ws: object, n: int) -> list[dict[str, object]]:
    rows = []
    command = "cat small.tsv > /dev/null"
    with_watch = median_s(lambda: ws.run(command), n)
    original = workspace_module.DiskWatch

    class NoWatch:  # the same run with the workspace-size watch switched off
        def __init__(self, *args: object, **kwargs: object) -> None:
            self.poll_s = 3600.0
            self.last = None

        def over(self, **_kwargs: object) -> bool:
            return False

    workspace_module.DiskWatch = NoWatch  # type: ignore[misc,assignment]
    try:
        without = median_s(lambda: ws.run(command), n)
    finally:
        workspace_module.DiskWatch = original
    rows.append({"what": f"`{command}` via run, disk watch on vs off",
                 "on_ms": with_watch * 1e3, "off_ms": without * 1e3})
    check = "test -s small.tsv && echo True"
    with_filter = median_s(lambda: ws.run_check(check), n)
    saved = bwrap_module.sandbox_filter
    bwrap_module.sandbox_filter = lambda **_kwargs: None  # type: ignore[assignment]
    try:
        without_filter = median_s(lambda: ws.run_check(check), n)
    finally:
        bwrap_module.sandbox_filter = saved
    rows.append({"what": "run_check, getrandom seccomp filter on vs off",
                 "on_ms": with_filter * 1e3, "off_ms": without_filter * 1e3})
    read_fd, write_fd = os.pipe()
    try:
        wrapped = list(limits_wrapper(LIMITS, write_fd, "true"))
        rows.append({"what": "bare `bash -c true`, with vs without the ulimit wrapper",
                     "on_ms": median_s(lambda: subprocess.run(wrapped, pass_fds=(write_fd,)),
                                       n) * 1e3,
                     "off_ms": median_s(lambda: subprocess.run(["bash", "-c", "true"]), n) * 1e3})
    finally:
        os.close(read_fd)
        os.close(write_fd)
    return rows


def watch_rows(n: int) -> list[dict[str, object]]:
    rows = []
    for files in (10, 1_000, 10_000):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for i in range(files):
                (root / f"f{i}").write_bytes(b"x" * 100)
            watch = DiskWatch(root, 2**30, frozenset(), 0.25)
            rows.append({"files": files, "measure_ms": median_s(watch.measure, n) * 1e3,
                         "poll_s": watch.poll_s, "usage_mb": measure(root).bytes / 2**20})
    return rows


def coin_rows(box: BwrapSandbox, files: dict[str, Path], trials: int,
              p: float = 0.7) -> list[dict[str, object]]:
    """A clock-driven verdict (p = 0.7), frozen in the check or written by a command."""
    threshold = round(p * 10)
    test = f"test $(( 10#$n % 10 )) -lt {threshold}" + V
    cases = [("check reads the clock (frozen)", [],
              "cat small.tsv > /dev/null; n=$(date +%N); " + test),
             ("command wrote the clock (replay)",
              ["head -1 small.tsv > /dev/null; date +%N > t.txt"], "n=$(cat t.txt); " + test)]
    rows = []
    for label, commands, check in cases:
        passed = earned = 0
        for seed in range(trials):
            with box.stage(files) as ws:
                session = StrengthSession(box, StrengthTask(files), ws, StrengthConfig(seed=seed),
                                          LIMITS)
                for command in commands:
                    session.record(command, ws.run(command))
                [result] = run_checks([CheckSpec("range", "clock", check)], ws)
                passed += result.passed
                if result.passed:
                    [out] = session.assess([result])
                    earned += bool(out.earns)
                session.close()
        rows.append({"case": label, "p_pass": p, "trials": trials, "passed": passed,
                     "earned": earned, "earn_rate": earned / trials,
                     "bound": p * (1 - p ** 4) * p * p * (1 - p)})
    return rows


def raw_pin_row() -> dict[str, object]:
    """Raw pins of builtin task data (line counts, content hashes): how many earn."""
    pins = earned = 0
    source = builtin_source(difficulties=["easy"], seeds=[0])
    for task_id in source.ids():
        task = source.get(task_id)
        checks = []
        for name in task.data_files():
            checks += [f'test "$(zcat -f {name} | wc -l)" -eq "$(cat {name}.n)"' + V,
                       f'test "$(zcat -f {name} | md5sum)" = "$(cat {name}.h)"' + V]
        env = VeraEnv([task])
        env.reset(options={"task_id": task_id})
        saves = "; ".join(f"zcat -f {n} | wc -l > {n}.n; zcat -f {n} | md5sum > {n}.h"
                          for n in task.data_files())
        step = _record(env.step(
            f"<command>{saves}</command>\nNODE kind=load summary=\"pins\"\n"
            + "\n".join(f'CHECK range "p{i}" :: {c}' for i, c in enumerate(checks))))
        pins += len(checks)
        earned += sum(c.earns for c in step.checks)  # the reward's own rule
        env.close()
    return {"tasks": len(source.ids()), "pins": pins, "earned": earned}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--coin", type=int, default=100)
    parser.add_argument("--skip-coin", action="store_true")
    parser.add_argument("--workers", type=int, default=min(8, max(2, os.cpu_count() or 2)))
    args = parser.parse_args()
    reason = probe_bwrap()
    if reason:
        raise SystemExit(f"bwrap unusable here: {reason}")
    out: dict[str, object] = {"n": args.n, "workers": args.workers, "machine": machine()}
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)
        files = write_data(Path(tmp))
        with BwrapSandbox(LIMITS) as box:
            out["strength"] = {}
            for workers in sorted({1, args.workers}):  # 1: the harness's own overhead
                out["strength"][workers] = strength_rows(box, files, args.n, workers)
                print_strength(out["strength"][workers], args.n, workers)
            out["worst_step"] = worst_step_row()
            print_worst(out["worst_step"])
            out["discovery"] = discovery_row(args.n)
            out["decode"] = decode_rows()
            print_bounds(out["discovery"], out["decode"])
            out["raw_pins"] = raw_pin_row()
            r = out["raw_pins"]
            print(f"\nraw pins of builtin data (line count and md5 of each file's content, "
                  f"{r['tasks']} easy tasks): {r['earned']} of {r['pins']} earn")
            if not args.skip_coin:
                out["coin"] = coin_rows(box, files, args.coin)
                print_coin(out["coin"])
            with box.stage(files) as ws:
                out["limits"] = limit_rows(ws, max(args.n, 20))
    out["disk_watch"] = watch_rows(args.n)
    print_limits(out["limits"], out["disk_watch"])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(out, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


def print_strength(rows: list[dict], n: int, workers: int) -> None:
    print(f"| check | check ms | replays + check runs (first node) | first node ms | floor ms "
          f"| / floor | later node ms | floor ms | / floor | discriminating |  "
          f"(median of {n}, {workers} workers)")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        cold = r["cold_ms"] / r["floor_cold_ms"] if r["floor_cold_ms"] else float("nan")
        warm = r["warm_ms"] / r["floor_warm_ms"] if r["floor_warm_ms"] else float("nan")
        print(f"| {r['check']} | {r['check_ms']:.0f} | {r['replays_cold']} + {r['check_runs']} | "
              f"{r['cold_ms']:.0f} | {r['floor_cold_ms']:.0f} | {cold:.2f}x | "
              f"{r['warm_ms']:.0f} | {r['floor_warm_ms']:.0f} | {warm:.2f}x | "
              f"{r['discriminating']} |")


def print_worst(r: dict) -> None:
    print(f"\nworst-case step: {r['step_s']:.1f} s measured, bound timeout_s + "
          f"{r['checks']} x check_timeout_s + strength.deadline_max_s = {r['timeout_s']} + "
          f"{r['checks']} x {r['check_timeout_s']} + {r['deadline_max_s']} = {r['bound_s']:.1f} s "
          f"({r['deadline_cut']} checks cut by the deadline)")


def print_bounds(discovery: dict, decode_: list[dict]) -> None:
    print(f"\ncheck-input discovery, 30,000 files + a glob: {discovery['limit_64_ms']:.0f} ms "
          f"(limit 64, as strength calls it), {discovery['unlimited_ms']:.0f} ms unlimited")
    print("\n| gzip members | bytes | new decode s | old decode s |")
    print("|---:|---:|---:|---:|")
    for r in decode_:
        old = f"{r['old_s']:.2f}" if r["old_s"] is not None else "(not run)"
        print(f"| {r['members']:,} | {r['bytes']:,} | {r['new_s']:.2f} | {old} |")


def print_coin(rows: list[dict]) -> None:
    for r in rows:
        print(f"\nclock-driven verdict, {r['case']}, p={r['p_pass']}: passed {r['passed']} of "
              f"{r['trials']}, earned {r['earned']} ({r['earn_rate']:.3f}; bound {r['bound']:.3f})")


def print_limits(limits: list[dict], watch: list[dict]) -> None:
    print("\n| limit | on ms | off ms | cost ms |")
    print("|---|---:|---:|---:|")
    for r in limits:
        print(f"| {r['what']} | {r['on_ms']:.2f} | {r['off_ms']:.2f} | "
              f"{r['on_ms'] - r['off_ms']:+.2f} |")
    print("\n| workspace files | one size measurement ms | poll interval s |")
    print("|---:|---:|---:|")
    for r in watch:
        print(f"| {r['files']:,} | {r['measure_ms']:.2f} | {r['poll_s']:.2f} |")


def machine() -> dict[str, object]:
    bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout
    return {"cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "bwrap": bwrap.strip(),
            "as_root": os.geteuid() == 0}


if __name__ == "__main__":
    main()
