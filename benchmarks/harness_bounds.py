"""Harness work inside its bounds (issue 19): name scanning and the shadows' disk.

Two measurements, each against the code before issue 19 in the same run:

* **Scanning.** A workspace of 20,000 odd file names (spaces, quotes, unicode) and one
  command running four 1 MB scripts: what one step's harness scan costs — the command
  log's ``record`` (workspace walk, then the names the command and its scripts
  mention) and the check-input discovery of a check naming the same scripts. Before:
  the ``check_inputs`` of the last commit without the automaton, loaded from git
  (``--skip-old`` reports the issue's 70 s instead). Then an adversarial listing
  (names nested as suffixes of one another, the automaton's worst case) to show the
  scan budget holding: ``record`` returns within ``scan_budget_s`` and fails closed.
* **Shadow disk.** One logged command writing 2 GB, replayed into every shadow of a
  task file at a 256 MB budget: the host disk's peak growth (sampled every 20 ms)
  with the shadows staged on the sandbox (before: the budget checked between
  commands) and on a ``CappedArea`` (after: a tmpfs the kernel caps). ``--skip-before``
  skips the first (it writes about 2 GB per shadow to the host disk).

Usage::

    python benchmarks/harness_bounds.py [--skip-old] [--skip-before] [--shadows 4]

Prints markdown tables and writes ``benchmarks/results/harness_bounds.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import shutil
import subprocess
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import TypeVar

from vera_env.sandbox import CappedArea, ExecResult, SandboxLimits, ServerSandbox
from vera_env.verification.strength import check_inputs
from vera_env.verification.strength.command_log import CommandLog
from vera_env.verification.strength.shadows import ShadowGroup
from vera_env.verification.strength.task import StrengthTask
from vera_env.verification.strength.variants import Settings, build_variants

T = TypeVar("T")
ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "harness_bounds.json"
MODULE = "vera_env/verification/strength/check_inputs.py"
ISSUE_BASELINE_S = 70.0
N_NAMES = 20_000
SCRIPT_BYTES = 1 << 20
BUDGET_MB = 256
WRITE = "head -c 2G /dev/zero > big.bin"
TABLE = "".join(f"{i}\t{i * 3}\n" for i in range(400))


def old_check_inputs() -> tuple[ModuleType, str] | None:
    """The newest committed ``check_inputs`` without the automaton, and its commit."""
    try:
        commits = subprocess.run(["git", "-C", str(ROOT), "log", "--format=%H", "--",
                                  MODULE, "vera_env/verification/check_inputs.py"],
                                 capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        return None
    for commit in commits:
        for path in (MODULE, "vera_env/verification/check_inputs.py"):
            shown = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:{path}"],
                                   capture_output=True, text=True)
            if shown.returncode == 0 and "ahocorasick" not in shown.stdout:
                spec = importlib.util.spec_from_loader("old_check_inputs", loader=None)
                assert spec is not None
                module = importlib.util.module_from_spec(spec)
                exec(compile(shown.stdout, f"{commit[:8]}:{path}", "exec"), module.__dict__)
                return module, commit[:8]
    return None


def odd_workspace(root: Path) -> tuple[list[str], str]:
    """20,000 odd names, four 1 MB scripts; the command that runs them."""
    rng = random.Random(0)
    forms = ["sample {i} reads.txt", "it's “quoted” {i}.tsv", "données é {i} ü.csv",
             "run {i} (copy).log"]
    names = [forms[i % len(forms)].format(i=i) for i in range(N_NAMES)]
    for name in names:
        (root / name).write_text("1\n")
    words = ["import", "print", "for", "in", "range", "open", "data", "value", "x", "y",
             "# comment", "sum", "len", "reads", "sample", "'quoted'"]
    for k in range(4):
        lines, size = [], 0
        while size < SCRIPT_BYTES:
            line = " ".join(rng.choice(words) for _ in range(8)) + f" {rng.randrange(10**6)}\n"
            lines.append(line)
            size += len(line)
        lines.insert(100, f"open({names[k * 7]!r})\n")
        (root / f"s{k}.py").write_text("".join(lines))
    command = "; ".join(f"python3 s{k}.py" for k in range(4)) + " > out.txt"
    return names, command


def timed(call: Callable[[], T]) -> tuple[float, T]:
    """Seconds ``call`` took, and what it returned."""
    start = time.perf_counter()
    value = call()
    return time.perf_counter() - start, value


def scan_section(skip_old: bool) -> dict[str, object]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "data.tsv").write_text(TABLE)
        _names, command = odd_workspace(root)
        log = CommandLog(root, ["data.tsv"])
        (root / "out.txt").write_text("x\n")
        ok = ExecResult("", "", 0, False, 1.0)
        record_s, entry = timed(lambda: log.record(command, ok))
        listing = sorted(p.relative_to(root).as_posix() for p in root.iterdir())
        check = "python3 s0.py | grep -q x && python3 s3.py | grep -q y"
        check_s, named = timed(lambda: check_inputs.named_files(
            check, check_inputs.WorkspaceIndex(listing), root, limit=64))
        old_s, old_named, baseline = None, None, "issue 19 (measured, not rerun)"
        if not skip_old and (old := old_check_inputs()) is not None:
            module, commit = old
            old_s, old_named = timed(lambda: module.named_files(
                command, module.WorkspaceIndex(listing), root, limit=64, existing=False))
            baseline = f"check_inputs at {commit}, same run"
        assert entry is not None
        same = old_named is None or list(old_named) == list(entry.mentions)
        adversarial = adversarial_section(root)
    return {"names": N_NAMES, "scripts": 4, "script_bytes": SCRIPT_BYTES,
            "record_s": record_s, "record_scanned": entry.scanned,
            "check_named_files_s": check_s, "check_named": named[:6],
            "old_record_scan_s": old_s, "old_baseline": baseline,
            "same_names_as_old": same, "issue_baseline_s": ISSUE_BASELINE_S,
            "adversarial": adversarial}


def adversarial_section(root: Path) -> dict[str, object]:
    """Names nested as suffixes of one another (a name of one space, of two, ... of
    255) and a script of spaces: the automaton reports every name at every position,
    the one input its cost grows with beyond linear (255 matches a byte here); the
    scan budget must hold anyway."""
    nest = root / "nest"
    nest.mkdir()
    for spaces in range(1, 256):
        (nest / (" " * spaces)).write_text("")
    (nest / "never named").write_text("")  # one name absent: the scan cannot end early
    (root / "pad.sh").write_text(" " * SCRIPT_BYTES)
    budget_s = 3.0
    log = CommandLog(root, ["data.tsv"], scan_budget_s=budget_s)
    (root / "out2.txt").write_text("y\n")
    seconds, entry = timed(lambda: log.record("bash pad.sh > out2.txt", ExecResult(
        "", "", 0, False, 1.0)))
    assert entry is not None
    return {"nested_names": 255, "scan_budget_s": budget_s, "record_s": seconds,
            "scanned": entry.scanned, "mentions": list(entry.mentions)}


class DiskPeak:
    """Samples a file system's used bytes in a thread; the peak above the start."""

    def __init__(self, path: Path, every_s: float = 0.02) -> None:
        self._path, self._every_s = path, every_s
        self.start = shutil.disk_usage(path).used
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, shutil.disk_usage(self._path).used)
            time.sleep(self._every_s)

    def __enter__(self) -> DiskPeak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def grew_mb(self) -> float:
        return (self.peak - self.start) / 2**20


def disk_run(box: ServerSandbox, capped: bool, shadows: int) -> dict[str, object]:
    with tempfile.TemporaryDirectory(dir=box.root.parent) as tmp:
        home = Path(tmp)
        home.chmod(0o755)
        source = home / "t.tsv"
        source.write_text(TABLE)
        source.chmod(0o444)
        scratch = home / "scratch"
        scratch.mkdir(mode=0o711)
        variants = build_variants("t.tsv", StrengthTask({"t.tsv": source}),
                                  Settings(shadows - 1, 1, 0, 1 << 20), scratch, budget_s=30,
                                  stamp=(os.stat(source).st_mtime_ns, 0o444))
        real = home / "real"
        real.mkdir()
        log = CommandLog(real, ["t.tsv"])
        (real / "big.bin").write_bytes(b"\0" * 4096)  # what the episode's run changed
        log.record(WRITE, ExecResult("", "", 0, False, 2.0))
        budget = BUDGET_MB << 20
        area = CappedArea(box, budget, {"t.tsv": source}) if capped else None
        group = ShadowGroup(variants, area or box, {"t.tsv": source}, scratch)
        written = [0]

        def over_budget() -> bool:
            written[0] = max(written[0], group.bytes)
            return group.bytes > budget
        try:
            with DiskPeak(box.root) as peak, ThreadPoolExecutor(2) as pool:
                seconds, _ = timed(lambda: group.extend(log, LIMITS, pool, lambda: 300.0,
                                                        over_budget))
            broken = sorted({s.broken[:60] for s in group.shadows.values()})
            tmpfs_mb = area.used_bytes() / 2**20 if area is not None else 0.0
        finally:
            group.close()
            if area is not None:
                area.close()
    return {"capped": capped, "enforced": area.enforced if area else False,
            "shadows": len(variants.controls) + len(variants.mutants),
            "host_disk_peak_growth_mb": peak.grew_mb, "tmpfs_used_mb_at_end": tmpfs_mb,
            "seconds": seconds, "broken": broken}


LIMITS = SandboxLimits(timeout_s=120, check_timeout_s=30)


def disk_section(skip_before: bool, shadows: int) -> list[dict[str, object]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        box = ServerSandbox(LIMITS)
    try:
        runs = [] if skip_before else [disk_run(box, False, shadows)]
        runs.append(disk_run(box, True, shadows))
    finally:
        box.close()
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-old", action="store_true")
    parser.add_argument("--skip-before", action="store_true")
    parser.add_argument("--shadows", type=int, default=4)
    args = parser.parse_args()
    scan = scan_section(args.skip_old)
    disk = disk_section(args.skip_before, args.shadows)
    old = scan["old_record_scan_s"]
    print("\n## One step's scan: 20,000 odd names, a command running four 1 MB scripts\n")
    print("| what | seconds | vs before |")
    print("|---|---:|---:|")
    before = old if isinstance(old, float) else ISSUE_BASELINE_S
    print(f"| before: command scan ({scan['old_baseline']}) | {before:.2f} | 1.00x |")
    for label, key in (("after: `CommandLog.record` (walk + scan)", "record_s"),
                       ("after: check-input discovery of one check", "check_named_files_s")):
        value = float(scan[key])  # type: ignore[arg-type]
        print(f"| {label} | {value:.2f} | {value / before:.4f}x |")
    adv = scan["adversarial"]
    assert isinstance(adv, dict)
    print(f"| adversarial ({adv['nested_names']} nested names): record, budget "
          f"{adv['scan_budget_s']} s | "
          f"{adv['record_s']:.2f} | scanned={adv['scanned']} |")
    print(f"\nsame names found as before: {scan['same_names_as_old']}\n")
    print(f"## Host disk while {len(disk) and disk[-1]['shadows']} shadows replay "
          f"`{WRITE}` at a {BUDGET_MB} MB budget\n")
    print("| shadows staged | kernel cap | host disk peak growth MB | tmpfs MB at end | "
          "seconds | shadows broken |")
    print("|---|---|---:|---:|---:|---|")
    for run in disk:
        where = "CappedArea (tmpfs)" if run["capped"] else "sandbox dir (before)"
        print(f"| {where} | {run['enforced']} | {run['host_disk_peak_growth_mb']:.0f} | "
              f"{run['tmpfs_used_mb_at_end']:.0f} | {run['seconds']:.1f} | "
              f"{'; '.join(run['broken']) or '-'} |")  # type: ignore[arg-type]
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "kernel": platform.release(), "root": os.geteuid() == 0},
        "when": time.strftime("%Y-%m-%d %H:%M"), "scan": scan, "disk": disk}, indent=2))
    print(f"\nwrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
