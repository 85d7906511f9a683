"""What reward integrity costs: strength testing per check, and the limits per command.

Strength testing (``vera_env.verification.strength``) re-runs every passing check against mutants of
the files it names, so its cost is (extra sandbox runs) x (the check's own runtime),
plus building the mutants. This measures, on one bwrap workspace, for checks from
vacuous to heavy: the check alone, the check plus strength with runs in parallel
(default workers) and serial (``workers=1``), with the mutant cache cold (first node
that reads the file) and warm (later nodes), and how many extra runs it took.

Then the containment limits on an ordinary command: the workspace-size watch
(measured before, during and after every ``run``), its cost per workspace size, the
``ulimit`` wrapper, and the constant-entropy seccomp filter on checks.

Last, how often a check driven by the clock's nanoseconds (which no sandbox can
freeze) slips through strength by luck, against the bound the controls and the
confirmation run give.

Usage::

    python benchmarks/strength_cost.py [--n 5] [--coin 200]

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
from collections.abc import Callable
from pathlib import Path

from vera_env.verification import strength
from vera_env.verification.checks import run_checks
from vera_env.wire.protocol import CheckSpec
from vera_env.verification.rewards import RewardConfig
from vera_env.sandbox import BwrapSandbox, SandboxLimits, probe_bwrap
from vera_env.sandbox import bwrap as bwrap_module
from vera_env.sandbox import workspace as workspace_module
from vera_env.sandbox.disk import DiskWatch, measure
from vera_env.sandbox.workspace import limits_wrapper

RESULTS = Path(__file__).resolve().parent / "results" / "strength_cost.json"
LIMITS = SandboxLimits(timeout_s=60, check_timeout_s=60)
BIG_LINES = 1_000_000

CHECKS: list[tuple[str, str]] = [
    ("vacuous, names no file", "echo True"),
    ("vacuous, 1 small file", "test -f small.tsv && echo True || echo False"),
    ("discriminating, shell, small file",
     "test $(wc -l < small.tsv) -eq 1001 && echo True || echo False"),
    ("discriminating, python3, small file",
     "python3 -c \"rows = open('small.tsv').read().split()[2:]; "
     "print(sum(map(int, rows[1::2])) == 500500)\""),
    ("vacuous, 12 MB gz read in full", "zcat big.mtx.gz | wc -l > /dev/null; echo True"),
    ("discriminating, 12 MB gz summed by awk",
     "test $(zcat big.mtx.gz | awk 'NR > 1 { s += $3 } END { print s }') -eq "
     f"{sum(i % 97 for i in range(BIG_LINES))} && echo True || echo False"),
]


def write_data(directory: Path) -> dict[str, Path]:
    """A 1,000-row table and a ~12 MB (decompressed) matrix-like gz file."""
    small = directory / "small.tsv"
    small.write_text("id\tvalue\n" + "".join(f"{i}\t{i}\n" for i in range(1, 1001)))
    big = directory / "big.mtx.gz"
    lines = "".join(f"{i % 5000 + 1} {i % 3000 + 1} {i % 97}\n" for i in range(BIG_LINES))
    big.write_bytes(gzip.compress(("5000 3000 %d\n" % BIG_LINES + lines).encode(), 6))
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


class CountingWorkspace:
    """Counts ``run_check`` calls (the extra sandbox runs strength makes)."""

    def __init__(self, inner: object) -> None:
        self._inner = inner
        self.runs = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self._inner, name)

    def run_check(self, command: str, **kwargs: object) -> object:
        self.runs += 1
        return self._inner.run_check(command, **kwargs)


def strength_rows(ws: object, n: int) -> list[dict[str, object]]:
    config = RewardConfig()
    rows = []
    for label, command in CHECKS:
        spec = CheckSpec("range", label, command)
        [result] = run_checks([spec], ws, timeout_s=LIMITS.check_timeout_s)
        alone = median_s(lambda: run_checks([spec], ws, timeout_s=60), n)
        counted = CountingWorkspace(ws)
        strength._CACHES.pop(counted, None)
        row: dict[str, object] = {"check": label, "check_ms": alone * 1e3}
        for mode, workers in (("parallel", None), ("serial", 1)):
            def cold(w: int | None = workers) -> object:
                strength._CACHES.pop(counted, None)
                return strength.assess([result], counted, config, LIMITS, workers=w)
            row[f"{mode}_cold_ms"] = median_s(cold, n) * 1e3
            strength.assess([result], counted, config, LIMITS, workers=workers)
            row[f"{mode}_warm_ms"] = median_s(
                lambda w=workers: strength.assess([result], counted, config, LIMITS, workers=w),
                n) * 1e3
        counted.runs = 0
        [assessed] = strength.assess([result], counted, config, LIMITS)
        row.update(extra_runs=counted.runs, discriminating=assessed.discriminating,
                   overhead_x=row["parallel_warm_ms"] / row["check_ms"])
        rows.append(row)
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


def coin_row(ws: object, trials: int, p: float = 0.7) -> dict[str, object]:
    threshold = round(p * 10)
    command = ("cat small.tsv > /dev/null; n=$(date +%N); "
               f"test $(( 10#$n % 10 )) -lt {threshold} && echo True || echo False")
    spec = CheckSpec("range", "clock", command)
    passed = earned = 0
    for seed in range(trials):
        [result] = run_checks([spec], ws)
        passed += result.passed
        [out] = strength.assess([result], ws, RewardConfig(strength_seed=seed), LIMITS)
        earned += out.earns
    bound = p * (1 - p ** 4) * p * p * (1 - p)
    return {"p_pass": p, "trials": trials, "passed": passed, "earned": earned,
            "earn_rate": earned / trials, "bound": bound}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=5)
    parser.add_argument("--coin", type=int, default=200)
    args = parser.parse_args()
    reason = probe_bwrap()
    if reason:
        raise SystemExit(f"bwrap unusable here: {reason}")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp).chmod(0o755)
        files = write_data(Path(tmp))
        with BwrapSandbox(LIMITS) as box, box.stage(files) as ws:
            checks = strength_rows(ws, args.n)
            limits = limit_rows(ws, max(args.n, 20))
            coin = coin_row(ws, args.coin)
    watch = watch_rows(args.n)
    print_tables(checks, limits, watch, coin, args.n)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"n": args.n, "machine": machine(), "strength": checks,
                                   "limits": limits, "disk_watch": watch, "coin": coin},
                                  indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


def print_tables(checks: list[dict], limits: list[dict], watch: list[dict], coin: dict,
                 n: int) -> None:
    print(f"| check | check ms | + strength, parallel cold / warm ms | serial cold / warm ms "
          f"| extra runs | discriminating | warm parallel / check |  (median of {n})")
    print("|---|---:|---:|---:|---:|---|---:|")
    for r in checks:
        print(f"| {r['check']} | {r['check_ms']:.0f} | {r['parallel_cold_ms']:.0f} / "
              f"{r['parallel_warm_ms']:.0f} | {r['serial_cold_ms']:.0f} / "
              f"{r['serial_warm_ms']:.0f} | {r['extra_runs']} | {r['discriminating']} | "
              f"{r['overhead_x']:.1f}x |")
    print("\n| limit | on ms | off ms | cost ms |")
    print("|---|---:|---:|---:|")
    for r in limits:
        print(f"| {r['what']} | {r['on_ms']:.2f} | {r['off_ms']:.2f} | "
              f"{r['on_ms'] - r['off_ms']:+.2f} |")
    print("\n| workspace files | one size measurement ms | poll interval s |")
    print("|---:|---:|---:|")
    for r in watch:
        print(f"| {r['files']:,} | {r['measure_ms']:.2f} | {r['poll_s']:.2f} |")
    print(f"\nclock-driven check passing with p={coin['p_pass']}: passed {coin['passed']} of "
          f"{coin['trials']}, earned {coin['earned']} ({coin['earn_rate']:.3f}; "
          f"bound {coin['bound']:.3f})")


def machine() -> dict[str, object]:
    bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout
    return {"cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "bwrap": bwrap.strip(),
            "as_root": os.geteuid() == 0}


if __name__ == "__main__":
    main()
