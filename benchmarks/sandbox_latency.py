"""Per-command latency of the sandbox against a bare subprocess of the same command.

Every shell command an agent runs and every check it declares goes through the
sandbox, so its fixed cost per command multiplies by steps x checks x mutants. This
measures that cost: the median and p90 wall time of ``true`` and of ``cat`` of a
small staged file, run (a) as a bare ``subprocess.run(["bash", "-c", cmd])`` — the
floor, a fork+exec of bash — (b) by the bwrap backend (``run`` and ``run_check``),
(c) by the bwrap backend with its persistent per-workspace sandbox
(``make_sandbox("bwrap-server")``, ``run``) and (d) by the local backend, all in the
same process run, N times each after a warm-up.

``--breakdown`` also times bwrap itself, adding one piece at a time (namespaces,
mounts, the /etc binds, the limits wrapper), to show where the per-command time goes.

Usage::

    python benchmarks/sandbox_latency.py [--n 50] [--warmup 5] [--breakdown]

Prints markdown tables and writes ``benchmarks/results/sandbox_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

from vera_env.sandbox import BwrapSandbox, LocalSandbox, SandboxLimits, probe_bwrap
from vera_env.sandbox.server import ServerSandbox
from vera_env.sandbox.workspace import limits_wrapper

RESULTS = Path(__file__).resolve().parent / "results" / "sandbox_latency.json"
COMMANDS = ("true", "cat data.txt")


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
        rows = run_all(source, args.n, args.warmup)
    print_table(rows, args.n)
    pieces = breakdown(args.n, args.warmup) if args.breakdown else []
    if pieces:
        print_breakdown(pieces, args.n)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"n": args.n, "warmup": args.warmup, "machine": machine(),
                                   "rows": rows, "breakdown": pieces}, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


def run_all(source: Path, n: int, warmup: int) -> list[dict[str, object]]:
    limits = SandboxLimits(timeout_s=30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the local backend's isolation warning
        local = LocalSandbox(limits)
    files = {"data.txt": source}
    rows: list[dict[str, object]] = []
    with BwrapSandbox(limits) as box, box.stage(files) as bws, local.stage(files) as lws, \
            ServerSandbox(limits) as fast_box, fast_box.stage(files) as sws:
        runners: dict[str, Callable[[str], Callable[[], object]]] = {
            "bare subprocess": bare_runner(lws.path),
            "bwrap run": lambda c: lambda: bws.run(c),
            "bwrap run_check": lambda c: lambda: bws.run_check(c),
            "bwrap-server run": lambda c: lambda: sws.run(c),
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
