"""Cold start of a remote env: OpenEnv's client (the old transport) vs ``VeraRemoteEnv``.

Issue 21 measured 18.8 s to build one ``VeraRemoteEnv`` on a loaded machine, because
the transport was OpenEnv's ``GenericEnvClient`` and importing it loads gradio. The
client now speaks the wire itself (``vera_env.serve.openenv_socket``). A trainer pays
this once per worker process, so each run here is a fresh interpreter:

* ``openenv client``: what the old ``VeraRemoteEnv`` did — import the env module's own
  dependencies (``vera_env.serve.client``: gymnasium, the spaces), import
  ``openenv.core.generic_client``, build ``GenericEnvClient(...).sync()``;
* ``VeraRemoteEnv``: import ``vera_env.serve`` and build the env.

Both then reset one task on the same ``vera-env serve`` (127.0.0.1, one process for the
whole run); old and new runs alternate, so load on the machine falls on both alike.
Reported: medians over ``--runs`` of construct (imports + build, timed inside the
child from its first statement), first reset, and the child's whole wall time
(interpreter start to exit, as a user sees it).

Usage: python benchmarks/remote_client.py [--runs 5] [--out results.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "serve"))

from serve_helpers import ServerProcess  # noqa: E402

from vera_env.tasks import load_tasks  # noqa: E402

_OLD = """
import json, sys, time
t0 = time.perf_counter()
import vera_env.serve.client
from openenv.core.generic_client import GenericEnvClient
client = GenericEnvClient(base_url=sys.argv[1], message_timeout_s=900.0,
                          connect_timeout_s=30.0).sync()
t1 = time.perf_counter()
client.reset(task_id=sys.argv[2])
t2 = time.perf_counter()
client.close()
print(json.dumps({"construct_s": t1 - t0, "reset_s": t2 - t1,
                  "gradio": "gradio" in sys.modules}))
"""

_NEW = """
import json, sys, time
t0 = time.perf_counter()
from vera_env.serve import VeraRemoteEnv
env = VeraRemoteEnv(sys.argv[1])
t1 = time.perf_counter()
env.reset(options={"task_id": sys.argv[2]})
t2 = time.perf_counter()
env.close()
print(json.dumps({"construct_s": t1 - t0, "reset_s": t2 - t1,
                  "gradio": "gradio" in sys.modules}))
"""

CLIENTS = {"openenv client (old)": _OLD, "VeraRemoteEnv (new)": _NEW}


def one_run(code: str, url: str, task_id: str) -> dict[str, float | bool]:
    """One fresh interpreter: its timings, and its wall time from outside."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, url, task_id], capture_output=True,
                          text=True, check=True, cwd=ROOT, timeout=600)
    result: dict[str, float | bool] = json.loads(done.stdout.strip().splitlines()[-1])
    result["process_s"] = time.perf_counter() - start
    return result


def table(results: dict[str, list[dict[str, float | bool]]], runs: int) -> str:
    """The markdown table of medians."""
    lines = [f"| client (median of {runs} fresh processes) | construct s | first reset s | "
             "construct + reset s | process wall s | imports gradio |",
             "|---|---:|---:|---:|---:|---|"]
    for name, rows in results.items():
        def med(key: str, rows: list[dict[str, float | bool]] = rows) -> float:
            return statistics.median(float(r[key]) for r in rows)
        both = statistics.median(float(r["construct_s"]) + float(r["reset_s"]) for r in rows)
        lines.append(f"| {name} | {med('construct_s'):.2f} | {med('reset_s'):.2f} | "
                     f"{both:.2f} | {med('process_s'):.2f} | "
                     f"{'yes' if any(r['gradio'] for r in rows) else 'no'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per client (default 5)")
    parser.add_argument("--out", type=Path, default=None, help="write the raw runs as JSON here")
    args = parser.parse_args()
    task_id = load_tasks("builtin").ids()[0]
    server = ServerProcess("--max-steps", "4")
    results: dict[str, list[dict[str, float | bool]]] = {name: [] for name in CLIENTS}
    try:
        for _ in range(args.runs):
            for name, code in CLIENTS.items():  # alternate: load falls on both alike
                results[name].append(one_run(code, server.url, task_id))
    finally:
        server.stop()
    print(table(results, args.runs))
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
