"""Per-command latency of the sandbox against a bare subprocess of the same command.

Every shell command an agent runs and every check it declares goes through the
sandbox, so its fixed cost per command multiplies by steps x checks x mutants. This
measures that cost: the median and p90 wall time of ``true`` and of ``cat`` of a
small staged file, run (a) as a bare ``subprocess.run(["bash", "-c", cmd])`` — the
floor, a fork+exec of bash — (b) by the bwrap backend (``run`` and ``run_check``,
a fresh sandbox each), (c) by the bwrap backend with its persistent per-workspace
sandboxes (``make_sandbox("bwrap-server")``: ``run`` through the command server,
``run_check`` through the read-only check server, and ``run_check`` with an
``overlay``, which still takes a fresh sandbox), (d) by the default backend
(``make_sandbox("auto")``), (e) by the per-command backend without its memory cgroup
(what placing each sandbox in a cgroup costs) and (f) by the local backend, all in
the same process run, N times each after a warm-up.

A second table times a workspace's whole life — ``stage``, k commands or k checks,
``close`` — for both bwrap backends: a long-lived sandbox costs a start per workspace
and saves per command, so this shows where it pays (strength replays commands and
runs checks in shadow workspaces of their own).

A third table times the workspace-size measurement (``disk.measure``, the walk the
disk watch polls) against the number of entries, whole and stopped at a limit.

``--breakdown`` also times bwrap itself, adding one piece at a time (namespaces,
mounts, the /etc binds, the limits wrapper), to show where the per-command time goes.

Usage::

    python benchmarks/sandbox_latency.py [--n 50] [--warmup 5] [--breakdown]

The first table runs the check paths, the command server and the floor round-robin
(shuffled per round), so a shared machine's load drifts alike for all of them: that is
the table for the per-check cost against bare.

Prints markdown tables and writes ``benchmarks/results/sandbox_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable
from functools import partial
from pathlib import Path

from vera_env.sandbox import (
    BwrapSandbox,
    LocalSandbox,
    SandboxConfig,
    SandboxLimits,
    make_sandbox,
    probe_bwrap,
)
from vera_env.sandbox.disk import measure as measure_disk
from vera_env.sandbox.server import ServerSandbox
from vera_env.sandbox.workspace import limits_wrapper

RESULTS = Path(__file__).resolve().parent / "results" / "sandbox_latency.json"
COMMANDS = ("true", "cat data.txt")
LIFE_COMMANDS = (1, 4, 16)


def measure(call: Callable[[], object], n: int, warmup: int) -> list[float]:
    """Wall seconds of ``n`` calls after ``warmup`` unmeasured ones."""
    for _ in range(warmup):
        call()
    samples = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        samples.append(time.perf_counter() - start)
    return samples


def summarize(samples: list[float]) -> dict[str, float]:
    """Median and p90 in milliseconds."""
    ordered = sorted(samples)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"median_ms": statistics.median(ordered) * 1e3, "p90_ms": p90 * 1e3}


def bare_runner(workdir: Path) -> Callable[[str], Callable[[], object]]:
    def for_command(command: str) -> Callable[[], object]:
        return lambda: subprocess.run(["bash", "-c", command], cwd=workdir,
                                      capture_output=True, check=True)
    return for_command


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--breakdown", action="store_true")
    args = parser.parse_args()

    reason = probe_bwrap()
    if reason:
        raise SystemExit(f"bwrap unusable here: {reason}")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "data.txt"
        source.write_text("gene\tcount\n" + "".join(f"g{i}\t{i}\n" for i in range(100)))
        source.chmod(0o444)
        paired = interleaved(source, args.n, args.warmup)
        rows = run_all(source, args.n, args.warmup)
        lives = lifecycle(source, max(args.n // 4, 5), args.warmup)
    walks = disk_walks(max(args.n // 10, 3))
    print("Interleaved (each round runs every runner once, in a shuffled order):")
    print_table(paired, args.n)
    print("\nOne runner after another:")
    print_table(rows, args.n)
    print_lifecycle(lives)
    print_walks(walks)
    pieces = breakdown(args.n, args.warmup) if args.breakdown else []
    if pieces:
        print_breakdown(pieces, args.n)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"n": args.n, "warmup": args.warmup, "machine": machine(),
                                   "interleaved": paired, "rows": rows,
                                   "lifecycle": lives, "disk_walks": walks,
                                   "breakdown": pieces},
                                  indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


def run_all(source: Path, n: int, warmup: int) -> list[dict[str, object]]:
    limits = SandboxLimits(timeout_s=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # local: no isolation; no cgroup: warned
        local = LocalSandbox(limits)
        no_cgroup = BwrapSandbox(limits, SandboxConfig(memory_cgroup=False))
    default = make_sandbox("auto", limits)
    files = {"data.txt": source}
    rows: list[dict[str, object]] = []
    with BwrapSandbox(limits) as box, box.stage(files) as bws, local.stage(files) as lws, \
            ServerSandbox(limits) as fast_box, fast_box.stage(files) as sws, \
            default, default.stage(files) as dws, no_cgroup, no_cgroup.stage(files) as nws:
        mutant = sws.scratch_dir() / "data.txt"  # readable by the sandbox's host uid
        mutant.write_bytes(source.read_bytes())
        runners: dict[str, Callable[[str], Callable[[], object]]] = {
            "bare subprocess": bare_runner(lws.path),
            "bwrap run": lambda c: lambda: bws.run(c),
            "bwrap run, no memory cgroup": lambda c: lambda: nws.run(c),
            "bwrap run_check": lambda c: lambda: bws.run_check(c),
            "bwrap-server run": lambda c: lambda: sws.run(c),
            "bwrap-server run_check (check server)": lambda c: lambda: sws.run_check(c),
            "bwrap-server run_check with overlay (fresh sandbox)":
                lambda c: lambda: sws.run_check(c, overlay={"data.txt": mutant}),
            f"default (`auto`: {type(default).__name__}) run": lambda c: lambda: dws.run(c),
            "local run": lambda c: lambda: lws.run(c),
        }
        for command in COMMANDS:
            bare_median = None
            for name, runner in runners.items():
                stats = summarize(measure(runner(command), n, warmup))
                bare_median = bare_median or stats["median_ms"]
                rows.append({"command": command, "runner": name, **stats,
                             "ratio_to_bare": stats["median_ms"] / bare_median})
    return rows


def interleaved(source: Path, n: int, warmup: int) -> list[dict[str, object]]:
    """A check's two paths, the command server and the bare floor, run round-robin.

    On a shared machine the load moves between one runner's N runs and the next's;
    here every round runs each runner once, in a shuffled order, so the ratios to
    bare (median, same run) are not a measure of the load's drift.
    """
    limits = SandboxLimits(timeout_s=30)
    files = {"data.txt": source}
    rng = random.Random(0)
    rows: list[dict[str, object]] = []
    with BwrapSandbox(limits) as box, box.stage(files) as bws, \
            ServerSandbox(limits) as fast_box, fast_box.stage(files) as sws:
        for command in COMMANDS:
            calls: dict[str, Callable[[], object]] = {
                "bare subprocess": bare_runner(source.parent)(command),
                "bwrap run_check (fresh sandbox)": partial(bws.run_check, command),
                "bwrap-server run (command server)": partial(sws.run, command),
                "bwrap-server run_check (check server)": partial(sws.run_check, command),
            }
            samples: dict[str, list[float]] = {name: [] for name in calls}
            for round_ in range(warmup + n):
                order = list(calls)
                rng.shuffle(order)
                for name in order:
                    start = time.perf_counter()
                    calls[name]()
                    if round_ >= warmup:
                        samples[name].append(time.perf_counter() - start)
            bare_ms = statistics.median(samples["bare subprocess"]) * 1e3
            for name, taken in samples.items():
                stats = summarize(taken)
                rows.append({"command": command, "runner": name, **stats,
                             "ratio_to_bare": stats["median_ms"] / bare_ms})
    return rows


def lifecycle(source: Path, n: int, warmup: int) -> list[dict[str, object]]:
    """``stage`` + k ``run("true")`` (or k ``run_check("true")``) + ``close`` per bwrap
    backend, k in LIFE_COMMANDS."""
    limits = SandboxLimits(timeout_s=30)
    files = {"data.txt": source}
    rows: list[dict[str, object]] = []
    with BwrapSandbox(limits) as box, ServerSandbox(limits) as fast_box:
        for method in ("run", "run_check"):
            for k in LIFE_COMMANDS:
                for name, sandbox in (("bwrap", box), ("bwrap-server", fast_box)):
                    def life(sandbox: BwrapSandbox = sandbox, k: int = k,
                             method: str = method) -> None:
                        with sandbox.stage(files) as ws:
                            for _ in range(k):
                                getattr(ws, method)("true")
                    stats = summarize(measure(life, n, warmup))
                    rows.append({"method": method, "commands": k, "backend": name, **stats,
                                 "per_command_ms": stats["median_ms"] / k})
    return rows


def print_lifecycle(rows: list[dict[str, object]]) -> None:
    print("\n| runs per workspace | backend | stage+runs+close median ms | p90 ms | "
          "per run ms |")
    print("|---|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['commands']} x `{row['method']}` | {row['backend']} | "
              f"{row['median_ms']:.1f} | {row['p90_ms']:.1f} | {row['per_command_ms']:.2f} |")


def disk_walks(n: int) -> list[dict[str, object]]:
    """``disk.measure`` of 1k, 10k and 100k empty files in 100 directories."""
    rows: list[dict[str, object]] = []
    for entries in (1_000, 10_000, 100_000):
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            for d in range(100):
                (root / f"d{d}").mkdir()
                for f in range(entries // 100):
                    (root / f"d{d}" / f"f{f}").touch()
            whole = summarize(measure(lambda r=root: measure_disk(r), n, 1))
            stopped = summarize(measure(lambda r=root: measure_disk(r, stop_inodes=1_000), n, 1))
            rows.append({"entries": entries, "whole_ms": whole["median_ms"],
                         "per_entry_us": whole["median_ms"] * 1e3 / entries,
                         "stopped_at_1000_ms": stopped["median_ms"]})
    return rows


def print_walks(rows: list[dict[str, object]]) -> None:
    print("\n| entries | whole walk median ms | per entry µs | stopped past 1,000 entries ms |")
    print("|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['entries']:,} | {row['whole_ms']:.1f} | {row['per_entry_us']:.2f} | "
              f"{row['stopped_at_1000_ms']:.1f} |")


def print_table(rows: list[dict[str, object]], n: int) -> None:
    print(f"| command | runner | median ms | p90 ms | median / bare |  (N={n})")
    print("|---|---|---:|---:|---:|")
    for row in rows:
        print(f"| `{row['command']}` | {row['runner']} | {row['median_ms']:.2f} | "
              f"{row['p90_ms']:.2f} | {row['ratio_to_bare']:.2f}x |")


def breakdown(n: int, warmup: int) -> list[dict[str, object]]:
    """bwrap's per-command cost, one piece added at a time (same process run)."""
    limits = SandboxLimits(timeout_s=30)
    with BwrapSandbox(limits) as box, box.stage({}) as ws:
        uid, gid = box.host_ids
        as_user = {"user": uid, "group": gid, "extra_groups": []} if box.as_root else {}
        work = ["--bind", str(ws.path), "/work", "--chdir", "/work"]
        minimal = [box.bwrap, "--unshare-user", "--unshare-pid", "--die-with-parent",
                   "--new-session", "--as-pid-1", "--ro-bind", "/usr", "/usr",
                   "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
                   "--symlink", "usr/lib64", "/lib64"]
        full = [*box.base_args(), *work, "--remount-ro", "/", "--"]
        read_fd, write_fd = os.pipe()
        steps = [
            ("bare `true` binary (fork+exec)", ["true"], {}),
            ("bare `bash -c true`", ["bash", "-c", "true"], {}),
            ("bwrap, no namespaces (`--bind / /`)", [box.bwrap, "--bind", "/", "/", "true"], {}),
            ("+ user and pid namespaces, /usr only", [*minimal, *work, "--", "true"], as_user),
            ("+ net, ipc, uts, cgroup namespaces (`--unshare-all`)",
             [*minimal[:1], "--unshare-all", *minimal[1:], *work, "--", "true"], as_user),
            ("full backend arguments (/etc, /proc, /dev, /tmp, ro root), `true`",
             [*full, "true"], as_user),
            ("full arguments + the `bash -c` limits wrapper (what `run` spawns)",
             [*full, *limits_wrapper(limits, write_fd, "true")],
             {**as_user, "pass_fds": (write_fd,)}),
        ]
        pieces = []
        for name, argv, extra in steps:
            call = lambda a=argv, e=extra: subprocess.run(a, capture_output=True, check=True, **e)  # noqa: E731
            pieces.append({"piece": name, **summarize(measure(call, n, warmup))})
        os.close(read_fd)
        os.close(write_fd)
    return pieces


def print_breakdown(pieces: list[dict[str, object]], n: int) -> None:
    print(f"\n| what is spawned | median ms | p90 ms |  (N={n})")
    print("|---|---:|---:|")
    for piece in pieces:
        print(f"| {piece['piece']} | {piece['median_ms']:.2f} | {piece['p90_ms']:.2f} |")


def machine() -> dict[str, object]:
    bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout
    return {"cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version(), "bwrap": bwrap.strip(),
            "as_root": os.geteuid() == 0,
            "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()]}


if __name__ == "__main__":
    main()
