"""Collect rollouts of any policy into a datasets-loadable JSONL or Parquet file.

    python -m vera_env.training.scripts.collect --policy oracle --num-tasks 50 --output runs/oracle.jsonl
    python -m vera_env.training.scripts.collect --policy openai --base-url http://127.0.0.1:8000/v1 \\
        --model Qwen/Qwen2.5-7B-Instruct --num-tasks 200 --attempts 4 \\
        --tokenizer Qwen/Qwen2.5-1.5B-Instruct --output runs/teacher.parquet

One row per episode: the task, the policy's turns and the observations it answered,
the reward of each step, the env's verdicts (correct, verification reward, unscorable)
and the full ``Attempt`` as JSON (``vera_env.rollout.Attempt.from_json`` reads it back).
``learn`` flags each turn worth imitating: False on a teacher's deliberate mistake (a
policy that ``vera_env.training.collection.MarksMistakes``, e.g. ``--analyst-repair``),
which ``vera_env.training.scripts.sft`` keeps as context only.
With ``--tokenizer``, also ``input_ids`` and ``labels``: the episode as one sequence in
the chat template, exactly as ``vera_env.training.scripts.grpo`` lays it out, with ``-100`` on every
prompt and observation token — ready for ``SFTTrainer``. Load with
``datasets.load_dataset("json", data_files=path)`` (or ``"parquet"``).

Episodes run through ``vera_env.rollout.run_episode``, so a provider or sandbox fault is
a row with its status (``provider``, ``sandbox``) rather than a crash; ``vera_env.training.scripts.sft``
leaves such rows out. This file is the script (its flags, the policy they name, progress
lines); playing and recording the episodes is ``vera_env.training.collection``.

The environment flags are ``vera_env.training.envs.EnvOptions``, whose defaults are the
package's: until 2026-12-07 this script declared its own, a 20-step budget and the
``forced`` wrapper alone, where it now plays 50 steps behind ``gate`` then ``forced``
(pass ``--env-max-steps 20 --wrappers forced`` for the old environment).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from vera_env.policy import Policy
from vera_env.rollout import Attempt
from vera_env.tasks import TaskSource
from vera_env.tasks.builtin.instance import Difficulty
from vera_env.training.collection import collect, write_rows
from vera_env.training.envs import EnvOptions, task_source
from vera_env.training.phase_log import PhaseLog
from vera_env.training.starts import Start, draw_starts
from vera_env.training.transcripts import ChatFormat

PROGRESS_LINE_S = 10.0
"""Least seconds between two progress lines while episodes are played: an oracle
collects dozens a second, a CPU model takes minutes a turn."""


@dataclass
class Args(EnvOptions):
    """Collect rollouts of a policy through VeraEnv."""

    policy: Literal["oracle", "brief", "analyst", "careless", "openai", "transformers"] = "oracle"
    """oracle (reference solutions), brief (vera_env.training.teacher: short verified turns),
    analyst (vera_env.training.analyst: compute, re-derive in a check, answer),
    careless (falls into each trap), openai (an OpenAI-compatible endpoint:
    OpenAIChatPolicy) or transformers (a local model folder)."""
    analyst_repair: float = 0.0
    """Share of tasks (by task id) on which the analyst's first command has a deliberate
    mistake (a misspelt file name, an unclosed quote) that its next turn repairs."""
    analyst_evidence: float = 0.0
    """Share of tasks (by task id) on which the analyst's node also checks the
    intermediates its q.sh prints on lines 2-3, not only the answer on line 1."""
    base_url: str = ""
    """Endpoint root with the version, e.g. http://127.0.0.1:8000/v1 (policy openai)."""
    model: str = ""
    """Served model id (openai) or model folder (transformers)."""
    adapter: tuple[str, ...] = ()
    """LoRA adapter folders merged into --model, in order (transformers;
    vera_env.training.adapters)."""
    temperature: float = 0.7
    """Sampling temperature of model policies (> 0 when attempts > 1)."""
    max_tokens: int = 2048
    """Tokens per turn of model policies."""
    tasks: str = "builtin"
    """Task source: 'builtin', a suite folder or a .jsonl file."""
    difficulties: tuple[Difficulty, ...] = ("easy",)
    """Builtin difficulties to draw from."""
    num_tasks: int = 20
    """Distinct task starts to play."""
    attempts: int = 1
    """Episodes per task start."""
    system_prompt: str = ""
    """System message of model policies (and of the input_ids written with --tokenizer)."""
    concurrency: int = 4
    """Episodes in flight at once."""
    tokenizer: str = ""
    """Tokenizer folder or id; when given, rows get input_ids and labels."""
    output: str = "runs/rollouts.jsonl"
    """Output file: .jsonl or .parquet."""
    seed: int = 0
    """Seed of the task draw."""


def make_policy(args: Args, tasks: TaskSource, starts: Sequence[Start]) -> Policy:
    """The policy named by ``args.policy``."""
    if args.adapter and args.policy != "transformers":
        raise SystemExit(f"--adapter needs --policy transformers, got --policy {args.policy}")
    if args.policy == "oracle":
        from vera_env.policies import OraclePolicy  # noqa: PLC0415

        return OraclePolicy(tasks)
    if args.policy == "brief":
        from vera_env.training.teacher import BriefTeacher  # noqa: PLC0415

        return BriefTeacher(tasks)
    if args.policy == "analyst":
        from vera_env.training.analyst import AnalystTeacher  # noqa: PLC0415

        return AnalystTeacher(tasks, repair=args.analyst_repair, evidence=args.analyst_evidence)
    if args.policy == "careless":
        from vera_env.policies import careless_policy  # noqa: PLC0415

        return careless_policy([tasks.get(s.task_id) for s in starts])
    if not args.model:
        raise SystemExit(f"--policy {args.policy} needs --model")
    if args.policy == "openai":
        from vera_env.policies import OpenAIChatPolicy  # noqa: PLC0415

        if not args.base_url:
            raise SystemExit("--policy openai needs --base-url")
        return OpenAIChatPolicy(args.base_url, args.model, temperature=args.temperature,
                                max_tokens=args.max_tokens, system_prompt=args.system_prompt)
    from vera_env.policies import TransformersPolicy  # noqa: PLC0415

    options: dict[str, Any] = {"temperature": args.temperature,
                               "max_new_tokens": args.max_tokens,
                               "system_prompt": args.system_prompt}
    if not args.adapter:
        return TransformersPolicy.from_pretrained(args.model, **options)
    import torch  # noqa: PLC0415 - the training extra

    from vera_env.training.adapters import merge_adapters  # noqa: PLC0415

    # Merged on the CPU, then moved: sampling runs on plain weights, as fast as the base.
    base = TransformersPolicy.from_pretrained(args.model, device="cpu")
    model = merge_adapters(base.model, args.adapter)
    return TransformersPolicy(model.to("cuda" if torch.cuda.is_available() else "cpu"),
                              base.tokenizer, **options)


class _Tally:
    """The collection's progress lines: episodes done, the latest turn, at most one line
    per ``PROGRESS_LINE_S`` and always the last episode's."""

    def __init__(self, log: PhaseLog, total: int) -> None:
        self.log, self.total = log, total
        self.done = self.correct = 0

    def row(self, row: dict[str, Any]) -> None:
        self.done += 1
        self.correct += row["correct"] is True
        message = (f"collected {self.done}/{self.total} episodes ({self.correct} correct; "
                   f"latest {row['task_id']}: {row['status']})")
        if self.done == self.total:
            self.log(message)
        else:
            self.log.every(PROGRESS_LINE_S, message)

    def step(self, attempt: Attempt) -> None:
        self.log.every(PROGRESS_LINE_S, f"collected {self.done}/{self.total} episodes; "
                                        f"{attempt.task_id} played turn {len(attempt.steps)}")


def main(args: Args) -> list[dict[str, Any]]:
    """Collect and write; returns the rows. Each phase is announced on stderr."""
    log = PhaseLog("collect")
    tasks = task_source(args.tasks, args.difficulties, args.num_tasks)
    starts = draw_starts(list(tasks.ids()), args.num_tasks, seed=args.seed)
    fmt = None
    if args.tokenizer:
        from transformers import AutoTokenizer  # noqa: PLC0415

        log(f"loading the tokenizer from {args.tokenizer}")
        fmt = ChatFormat(AutoTokenizer.from_pretrained(args.tokenizer))
    if args.policy == "transformers":
        log(f"loading the model from {args.model}")
    policy = make_policy(args, tasks, starts)
    spec = args.env_spec()
    total = len(starts) * args.attempts
    log(f"playing {total} episodes ({len(starts)} tasks x {args.attempts} attempts, "
        f"{args.concurrency} at a time) with policy {args.policy}")
    tally = _Tally(log, total)
    rows = collect(tasks, policy, starts, attempts=args.attempts, concurrency=args.concurrency,
                   make_env_fn=lambda: spec.build(tasks=tasks),
                   policy_name=args.policy if args.policy in ("oracle", "careless")
                   else f"{args.policy}:{args.model}", fmt=fmt,
                   on_row=tally.row, on_step=tally.step)
    path = write_rows(rows, args.output)
    n_ok = sum(r["status"] == "ok" for r in rows)
    n_correct = sum(r["correct"] is True for r in rows)
    print(f"wrote {len(rows)} episodes to {path}: {n_ok} answered, {n_correct} correct, "
          f"{sum(r['unscorable'] for r in rows)} unscorable")
    return rows


if __name__ == "__main__":
    from vera_env.training.arguments import parse_args

    main(parse_args(Args))
