"""The prep's T=1 probe: how often a model samples the extra checks GRPO is to reweight.

A verification-only GRPO run learns from groups whose members' verification differs. With
the analyst teacher's extra-evidence share p0 in the SFT data, the SFT model should sample
a node with the extra checks at about p0 at temperature 1 (``notes/LEARNING_PLAN.md``,
section 3.1: gate [0.25, 0.45]). This plays training-seed instances (never the held-out
seeds) ``--attempts`` times each at ``--temperature`` with ``vera-env eval --policy
transformers`` in the learning-curve episode shape, and reports:

- ``extra_check_rate``: the share of recorded node turns with >= 2 checks;
- ``two_earning_node_share``: nodes whose earning checks establish >= 2 distinct facts;
- ``verification_mixed_share``: the share of instances whose attempts' verification
  rewards differ (for 2 attempts: pairs), the within-group signal GRPO would see;
- accuracy and mean verification.

    python benchmarks/t1_probe.py --model runs/lc_evidence_fit/merged_sft \\
        --out runs/lc_evidence_fit/t1_probe --results benchmarks/results/learning_curve/t1_probe.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def summarise(attempts: list[dict[str, Any]]) -> dict[str, Any]:
    """The probe's numbers from ``vera-env eval`` attempt records (JSON dicts).

    Example:
        >>> two = {"checks": [{"name": "a"}, {"name": "b"}]}
        >>> a = {"task_id": "t", "correct": True, "verification_reward": 0.5,
        ...      "steps": [{"node": two}]}
        >>> b = {"task_id": "t", "correct": False, "verification_reward": 0.0, "steps": []}
        >>> s = summarise([a, b])
        >>> s["extra_check_rate"], s["verification_mixed_share"], s["accuracy"]
        (1.0, 1.0, 0.5)
    """
    from curve_columns import evidence_nodes

    nodes = [step["node"] for a in attempts for step in a.get("steps") or ()
             if step.get("node")]
    extra = sum(len(n.get("checks") or ()) >= 2 for n in nodes)
    by_task: dict[str, list[float]] = defaultdict(list)
    for a in attempts:
        by_task[a["task_id"]].append(float(a.get("verification_reward") or 0.0))
    groups = [v for v in by_task.values() if len(v) >= 2]
    mixed = sum(max(v) - min(v) > 1e-9 for v in groups)
    evidence = [evidence_nodes(a) for a in attempts]
    two = sum(e[0] for e in evidence)
    return {
        "episodes": len(attempts), "instances": len(by_task), "node_turns": len(nodes),
        "extra_check_nodes": extra,
        "extra_check_rate": extra / len(nodes) if nodes else None,
        "two_earning_node_share": two / len(nodes) if nodes else None,
        "verification_mixed": mixed, "groups": len(groups),
        "verification_mixed_share": mixed / len(groups) if groups else None,
        "accuracy": sum(a.get("correct") is True for a in attempts) / len(attempts),
        "mean_verification": sum(float(a.get("verification_reward") or 0.0)
                                 for a in attempts) / len(attempts),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, type=Path, help="a model folder (merged)")
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--results", type=Path, default=None, help="write the summary JSON")
    parser.add_argument("--difficulties", nargs="+", default=["easy"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1],
                        help="training seeds (< 1000; the held-out set starts at 100000)")
    parser.add_argument("--attempts", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--turn-tokens", type=int, default=208)
    parser.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args(argv)
    if any(s >= 100000 for s in args.seeds):
        raise SystemExit("--seeds: the probe plays training seeds, not held-out ones")

    from vera_env.tasks.builtin import TASK_TYPES, task_id

    ids = [task_id(t, d, s) for s in args.seeds for d in args.difficulties
           for t in sorted(TASK_TYPES)]
    run = args.out / "eval"
    args.out.mkdir(parents=True, exist_ok=True)
    resume = ["--resume"] if (run / "results.jsonl").is_file() else []
    # Builtin ids, not an exported suite: the suite keeps 4 families' references only.
    cmd = [sys.executable, "-m", "vera_env.cli", "eval", "--policy", "transformers", "--model",
           str(args.model), "--tasks", "builtin", "--task-ids", ",".join(ids),
           "--attempts", str(args.attempts),
           "--max-steps", "3", "--reserve", "1", "--wrappers", "gate,forced",
           "--observation-variant", "compact", "--concurrency", str(args.concurrency),
           "--max-tokens", str(args.turn_tokens), "--temperature", str(args.temperature),
           "--out", str(run), *resume]
    started = time.perf_counter()
    with (args.out / "eval.log").open("a") as log:
        code = subprocess.call(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    if code:
        raise SystemExit(f"vera-env eval failed ({code}); see {args.out / 'eval.log'}")
    attempts = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()
                if line]
    out = {"model": str(args.model), "ids": ids, "attempts_per_instance": args.attempts,
           "temperature": args.temperature,
           "command": [c if c != sys.executable else "python" for c in cmd],
           "wall_s": round(time.perf_counter() - started, 1), **summarise(attempts)}
    if args.results is not None:
        args.results.write_text(json.dumps(out, indent=1))
    print(json.dumps({k: v for k, v in out.items() if k not in ("ids", "command")}))
    return out


if __name__ == "__main__":
    main()
