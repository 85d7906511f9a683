"""Staging time against data size (1 MB, 100 MB, 1 GB): the target is flat.

``reset()`` stages the task's files into a fresh workspace. Staging hard-links
read-only source files (see ``vera_env.sandbox.staging``), so its cost should not grow
with the data. This times ``stage()`` + ``close()`` of one file of each size with the
bwrap backend (as the harness runs it: root, task data 0444), and for comparison the
two things staging avoids, in the same run:

* the floor's opposite, a copy: ``shutil.copyfile`` of the same file into the
  workspace's file system (what a copying sandbox would pay per episode);
* the physical floor of moving the bytes at all, a memcpy: ``bytes`` copy of the
  data already in memory (``memoryview`` slice assignment).

Usage::

    python benchmarks/staging.py [--n 20] [--sizes-mb 1,100,1024]

Needs free disk of about twice the largest size under the temp dir.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
from pathlib import Path

from sandbox_latency import machine, measure, summarize

from vera_env.sandbox import BwrapSandbox, SandboxLimits, probe_bwrap

RESULTS = Path(__file__).resolve().parent / "results" / "staging.json"
_CHUNK = 16 * 2**20


def write_file(path: Path, size: int) -> None:
    """A data file of ``size`` bytes (not sparse: real blocks, as task data has)."""
    block = os.urandom(min(size, _CHUNK))
    with open(path, "wb") as handle:
        left = size
        while left > 0:
            handle.write(block[:left])
            left -= len(block)
    path.chmod(0o444)


def memcpy_ms(size: int, n: int) -> dict[str, float]:
    source = bytearray(os.urandom(min(size, _CHUNK))) * max(1, size // _CHUNK)
    target = bytearray(len(source))

    def copy() -> None:
        memoryview(target)[:] = source

    return summarize(measure(copy, n, 2))


def run_size(size_mb: int, n: int, root: Path) -> dict[str, object]:
    size = size_mb * 2**20
    source = root / f"data-{size_mb}mb.bin"
    write_file(source, size)
    limits = SandboxLimits(timeout_s=30)
    with BwrapSandbox(limits) as box:
        def stage() -> None:
            ws = box.stage({"data.bin": source})
            ws.close()

        staged = summarize(measure(stage, n, 2))
        with box.stage({"data.bin": source}) as ws:
            linked = ws.staged_by_link
            target = ws.path.parent / "copy.bin"

            def copy() -> None:
                shutil.copyfile(source, target)
                target.unlink()

            copied = summarize(measure(copy, max(3, n // 4), 1))
    memcpy = memcpy_ms(size, max(3, n // 4))
    source.unlink()
    return {"size_mb": size_mb, "stage": staged, "staged_by_link": linked,
            "copyfile": copied, "memcpy": memcpy,
            "stage_over_memcpy": staged["median_ms"] / memcpy["median_ms"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20)
    parser.add_argument("--sizes-mb", default="1,100,1024")
    args = parser.parse_args()
    reason = probe_bwrap()
    if reason:
        raise SystemExit(f"bwrap unusable here: {reason}")
    with tempfile.TemporaryDirectory(prefix="vera-staging-bench-") as tmp:
        rows = [run_size(int(s), args.n, Path(tmp)) for s in args.sizes_mb.split(",")]
    print(f"| data | stage+close median ms | p90 ms | linked | copyfile ms | memcpy ms | "
          f"stage / memcpy |  (N={args.n})")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row['size_mb']} MB | {row['stage']['median_ms']:.2f} | "
              f"{row['stage']['p90_ms']:.2f} | {row['staged_by_link']} | "
              f"{row['copyfile']['median_ms']:.1f} | {row['memcpy']['median_ms']:.2f} | "
              f"{row['stage_over_memcpy']:.3f}x |")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"n": args.n, "machine": machine(), "rows": rows},
                                  indent=2) + "\n")
    print(f"\nwrote {RESULTS}")


if __name__ == "__main__":
    main()
