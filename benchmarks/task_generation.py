"""How fast the builtin families generate instances, and how large the largest size is.

A training stream regenerates a task from its id whenever a worker first needs it, so
generation speed bounds how many fresh instances per second a run can draw; and the
largest difficulty (``xl``) should be realistic in size yet generated in seconds. This
times `vera_env.tasks.builtin.generate` (id -> bytes + answer + solution, in memory;
writing to the cache is a separate, one-off cost) for every type at every difficulty,
``--seeds`` instances each, and one ``xl`` instance per type, reporting its files'
compressed and uncompressed sizes.

Times are CPU seconds of this process (``time.process_time``): generation is single-
threaded numpy and zlib, and the shared 2-core machine this runs on is often loaded by
other jobs, which inflates wall time several-fold without saying anything about the
generator. On an idle core, wall time is the CPU time.

Usage::

    python benchmarks/task_generation.py [--seeds 5] [--no-xl]

Prints markdown tables and writes ``benchmarks/results/task_generation.json``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import statistics
import time
from pathlib import Path

from vera_env.tasks.builtin import DIFFICULTIES, FAMILIES, TASK_TYPES, generate, task_id

RESULTS = Path(__file__).resolve().parent / "results" / "task_generation.json"


def time_type(name: str, difficulty: str, seeds: int) -> list[float]:
    """Seconds to generate each of ``seeds`` instances."""
    samples = []
    for seed in range(seeds):
        start = time.process_time()
        generate(task_id(name, difficulty, seed))
        samples.append(time.process_time() - start)
    return samples


def xl_instance(name: str) -> dict[str, float]:
    """Generation CPU time and data size of ``<type>.xl.s0``."""
    start = time.process_time()
    instance = generate(task_id(name, "xl", 0))
    seconds = time.process_time() - start
    stored = sum(len(b) for b in instance.files.values())
    raw = sum(len(gzip.decompress(b)) if n.endswith(".gz") else len(b)
              for n, b in instance.files.items())
    return {"seconds": seconds, "stored_mb": stored / 1e6, "uncompressed_mb": raw / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--no-xl", action="store_true")
    args = parser.parse_args()

    per_type = {name: {d: time_type(name, d, args.seeds) for d in DIFFICULTIES}
                for name in TASK_TYPES}
    print(f"Instances per CPU second (median of {args.seeds} seeds), by type and difficulty\n")
    print("| type | " + " | ".join(DIFFICULTIES) + " |")
    print("|---|" + "---:|" * len(DIFFICULTIES))
    for name, by_diff in per_type.items():
        print(f"| {name} | " + " | ".join(f"{1 / statistics.median(by_diff[d]):,.1f}"
                                          for d in DIFFICULTIES) + " |")
    print("\nInstances per CPU second by family (all its types, all seeds)\n")
    print("| family | " + " | ".join(DIFFICULTIES) + " |")
    print("|---|" + "---:|" * len(DIFFICULTIES))
    families = {}
    for family, label in FAMILIES.items():
        rates = {}
        for d in DIFFICULTIES:
            samples = [s for n, v in per_type.items() if n.startswith(family + ".") for s in v[d]]
            rates[d] = len(samples) / sum(samples)
        families[family] = rates
        print(f"| {label} | " + " | ".join(f"{rates[d]:,.1f}" for d in DIFFICULTIES) + " |")

    xl = {} if args.no_xl else {name: xl_instance(name) for name in TASK_TYPES}
    if xl:
        print("\nThe largest difficulty (xl, seed 0)\n")
        print("| type | generation CPU s | stored MB | uncompressed MB |\n|---|---:|---:|---:|")
        for name, row in xl.items():
            print(f"| {name} | {row['seconds']:.1f} | {row['stored_mb']:.1f} | "
                  f"{row['uncompressed_mb']:.1f} |")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "seeds": args.seeds, "seconds_per_instance": per_type, "instances_per_s_by_family":
        families, "xl": xl}, indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
