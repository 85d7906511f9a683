"""What real-data tasks cost to build: per type, per perturbation and canary kind, per source.

A real task is built from pinned files read out of package archives (a wheel is a zip,
a .deb an ar archive around an xz tarball), then the question, answer and solutions are
computed from the data. The first build of a type in a process pays for reading and
verifying its members; later seeds reuse them. This times, for every type:

* cold: reading the members from the archives (cache cleared) plus building seed 0;
* warm: building one more seed (median of ``--seeds``), the cost a training stream pays;
* the staged size, and for perturbed and canary variants the cost of making the variant
  (base already built) and writing it to the cache.

Times are CPU seconds of this process (``time.process_time``), like
``task_generation.py``: the shared 2-core machine's load inflates wall time.

Usage::

    python benchmarks/real_task_generation.py [--seeds 5]

Prints markdown tables and writes ``benchmarks/results/real_task_generation.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from vera_env.tasks import cache
from vera_env.tasks.canary import canary_ids, make_canary_task
from vera_env.tasks.perturbed import make_perturbed_task, perturbed_ids
from vera_env.tasks.real import REAL_TYPES, real_id, real_instance
from vera_env.tasks.real.sources import SOURCES, archive_path, clear_cache, member_bytes

RESULTS = Path(__file__).resolve().parent / "results" / "real_task_generation.json"


def _cpu(fn, *args) -> float:
    start = time.process_time()
    fn(*args)
    return time.process_time() - start


def time_type(name: str, seeds: int) -> dict[str, float]:
    """Cold (members + seed 0) and warm (median over further seeds) CPU seconds."""
    clear_cache()
    real_instance.cache_clear()
    cold = _cpu(real_instance, real_id(name, 0))
    warm = [_cpu(real_instance, real_id(name, s)) for s in range(1, seeds + 1)]
    staged = sum(len(b) for b in real_instance(real_id(name, 0)).instance.files.values())
    return {"cold_s": cold, "warm_s": statistics.median(warm), "staged_mb": staged / 1e6}


def time_variants() -> dict[str, list[float]]:
    """CPU seconds to make each perturbed and canary variant of seed 0 (base prebuilt)."""
    out: dict[str, list[float]] = {}
    for tid in perturbed_ids([real_id(t) for t in REAL_TYPES],
                             primary_of=lambda b: real_instance(b).primary):
        out.setdefault("perturbed+" + tid.rpartition("+")[2], []).append(
            _cpu(make_perturbed_task, tid))
    for tid in canary_ids():
        out.setdefault("canary+" + tid.rpartition("+")[2], []).append(_cpu(make_canary_task, tid))
    return out


def source_sizes() -> dict[str, dict[str, float]]:
    """Archive and member sizes of every source, in MB."""
    sizes = {}
    for name, src in SOURCES.items():
        archive = archive_path(name)
        sizes[name] = {"archive_mb": archive.stat().st_size / 1e6 if archive else float("nan"),
                       "files_mb": sum(len(member_bytes(name, m)) for m in src.members) / 1e6}
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    os.environ[cache.CACHE_ENV_VAR] = tempfile.mkdtemp(prefix="vera-bench-real-")

    per_type = {name: time_type(name, args.seeds) for name in REAL_TYPES}
    print("| type | first build, CPU s (read archive + seed 0) | next seed, CPU s | "
          "instances per CPU s | staged MB |\n|---|---:|---:|---:|---:|")
    for name, row in per_type.items():
        print(f"| real.{name} | {row['cold_s']:.2f} | {row['warm_s']:.3f} | "
              f"{1 / max(row['warm_s'], 1e-6):,.0f} | {row['staged_mb']:.2f} |")
    variants = time_variants()
    print("\n| variant kind | tasks | median CPU s to make and write |\n|---|---:|---:|")
    for kind, samples in variants.items():
        print(f"| {kind} | {len(samples)} | {statistics.median(samples):.3f} |")
    sizes = source_sizes()
    print("\n| source | archive MB | files used MB |\n|---|---:|---:|")
    for name, row in sizes.items():
        print(f"| {name} | {row['archive_mb']:.2f} | {row['files_mb']:.2f} |")
    print(f"| total | {sum(r['archive_mb'] for r in sizes.values()):.1f} | "
          f"{sum(r['files_mb'] for r in sizes.values()):.1f} |")

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "load": os.getloadavg()},
        "seeds": args.seeds, "types": per_type, "variants": variants, "sources": sizes},
        indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
