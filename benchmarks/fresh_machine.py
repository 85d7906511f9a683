"""The README's two commands as a newcomer runs them: a fresh clone, Debian's python3.

A new user's first command failed in one second on a stock Debian python3 (PEP 668:
"externally-managed-environment"), and CI's time crept towards its limit unmeasured.
This rehearses either command from a fresh clone of this repository with only the
system's directories on PATH (so ``python3`` is Debian's ``/usr/bin/python3``: no pyenv,
no activated venv) and cold caches of its own (pip's cache off, uv's and the adapter
venvs' in the scratch folder), then records what it took: the wall time, each install
phase (``scripts/install.sh`` prints them), the test count and pytest's own time, the
load average before and after, the commit and the interpreter.

    python benchmarks/fresh_machine.py demo --out benchmarks/results/fresh_machine_demo.json
    python benchmarks/fresh_machine.py test --out benchmarks/results/fresh_machine_test.json

What it cannot make fresh: the Debian packages already installed on this machine
(bubblewrap, Chromium: ``vera-env setup`` finds them and installs nothing) and the
real-data sources under ``~/.local/share/vera_env`` (24 MB, about 10 s to fetch).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = {"demo": ["make", "demo"], "test": ["bash", ".ci/run"]}
_PHASE = re.compile(r"^\[install \+(\d+)s\] (.*)$")
_COUNT = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|warnings?)\b")
_SECONDS = re.compile(r" in ([\d.]+)s\b")


def rehearse(target: str, scratch: Path) -> dict[str, object]:
    """Clone, run the command with Debian's python first on PATH, and measure it."""
    scratch.chmod(0o755)  # the sandbox's unprivileged user reads the clone (tests bind it)
    clone = scratch / "clone"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(ROOT), str(clone)], check=True)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True,
                            text=True, check=True).stdout.strip()
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(PATH="/usr/sbin:/usr/bin:/sbin:/bin", PIP_NO_CACHE_DIR="1",
               UV_CACHE_DIR=str(scratch / "uv-cache"), VERA_ENV_CACHE=str(scratch / "cache"),
               CI="true")
    python = subprocess.run(["python3", "-c", "import sys; print(sys.executable, sys.version.split()[0])"],
                            env=env, capture_output=True, text=True, check=True).stdout.split()
    load_before = os.getloadavg()
    started = time.perf_counter()
    log = scratch / f"{target}.log"
    with log.open("w") as out:
        proc = subprocess.Popen(COMMANDS[target], cwd=clone, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        phases: list[dict[str, object]] = []
        tests: list[dict[str, object]] = []  # one per pytest run (make test runs two)
        for line in proc.stdout:
            out.write(line)
            sys.stdout.write(line)
            if match := _PHASE.match(line.strip()):
                phases.append({"at_s": int(match.group(1)), "phase": match.group(2)})
            seconds = _SECONDS.search(line)
            if seconds and re.search(r"\d+ (passed|failed)", line):  # pytest's last line
                run: dict[str, object] = {kind: int(n) for n, kind in _COUNT.findall(line)}
                tests.append(run | {"pytest_s": float(seconds.group(1)),
                                    "summary": line.strip().strip("= ")})
        code = proc.wait()
    return {"target": target, "command": " ".join(COMMANDS[target]), "returncode": code,
            "wall_s": round(time.perf_counter() - started, 1), "commit": commit,
            "python": {"executable": python[0], "version": python[1]},
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "cpus": os.cpu_count(), "install_phases": phases, "pytest_runs": tests,
            "date": time.strftime("%Y-%m-%d"), "log_tail": log.read_text()[-2000:]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", choices=list(COMMANDS))
    parser.add_argument("--out", type=Path, help="write the record here as JSON")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="vera-fresh-") as scratch:
        record = rehearse(args.target, Path(scratch))
    text = json.dumps(record, indent=2) + "\n"
    if args.out:
        args.out.write_text(text)
    print({k: v for k, v in record.items() if k != "log_tail"})
    return int(record["returncode"] != 0)


if __name__ == "__main__":
    raise SystemExit(main())
