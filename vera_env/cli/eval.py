"""``vera-env eval``: evaluate a model endpoint (or a local checkpoint) on a task suite.

One command from "I have a vLLM endpoint" to a table::

    vera-env eval --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B \\
        --tasks builtin --attempts 5 --concurrency 16 --temperature 0.7 --out runs/qwen3

Each attempt is appended to ``results.jsonl`` the moment it finishes, so a crash loses
nothing and ``--resume`` runs only what is missing (and refuses a folder made with
other settings). Before any episode a one-token request checks the endpoint, so a wrong
URL or model name fails in a second instead of turning every attempt into a
``provider`` exclusion after minutes of retries.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from vera_env.errors import PolicyError, TaskFileError
from vera_env.evaluation.metrics import format_summary, is_excluded, latest_attempts, summarise
from vera_env.evaluation.progress import Progress
from vera_env.evaluation.rundir import RunDir, RunSettings, RunSettingsMismatch, append
from vera_env.rollout import Attempt, arun_many

__all__ = ["add_parser", "cmd_eval", "parse_wrappers"]

POLICIES = ("openai", "oracle", "transformers")
EXIT_SETUP = 2            # bad arguments, unreachable endpoint, mismatched --resume
EXIT_ALL_PROVIDER = 3     # every attempt of this invocation was a provider fault
EXIT_INTERRUPTED = 130


def parse_wrappers(text: str) -> tuple[str, ...]:
    """``"forced,gate"`` -> ``("forced", "gate")``; ``""`` or ``"none"`` -> ``()``.

    Raises:
        argparse.ArgumentTypeError: An unknown wrapper name.
    """
    from vera_env.wrappers import WRAPPER_NAMES  # noqa: PLC0415

    if text.strip().lower() in ("", "none"):
        return ()
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in WRAPPER_NAMES]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown wrapper(s) {unknown}; expected a comma list of {list(WRAPPER_NAMES)}")
    return names


def build_env(source: Any, *, max_steps: int, wrappers: tuple[str, ...], reserve: int,
              sandbox: str, judge: Any = None, observation_variant: str = "full") -> Any:
    """A ``VeraEnv`` with the named wrappers, innermost first (``forced`` gets ``reserve``)."""
    from vera_env.env import VeraEnv  # noqa: PLC0415
    from vera_env.wrappers import EmissionGate, ForcedAnswer  # noqa: PLC0415

    env = VeraEnv(source, max_steps=max_steps, sandbox=sandbox, judge=judge,
                  observation_variant=observation_variant)  # type: ignore[arg-type]
    for name in wrappers:
        env = ForcedAnswer(env, reserve=min(reserve, max_steps)) if name == "forced" \
            else EmissionGate(env)
    return env


def _make_policy(args: argparse.Namespace, source: Any) -> Any:
    if args.policy == "oracle":
        from policies import OraclePolicy  # noqa: PLC0415
        return OraclePolicy(source)
    if args.policy == "transformers":
        from policies import TransformersPolicy  # noqa: PLC0415
        return TransformersPolicy.from_pretrained(
            args.model, system_prompt=args.system_prompt, temperature=args.temperature,
            max_new_tokens=args.max_tokens)
    from policies import OpenAIChatPolicy  # noqa: PLC0415
    return OpenAIChatPolicy(args.base_url, args.model, system_prompt=args.system_prompt,
                            prefill=args.prefill, api_key_env=args.api_key_env,
                            temperature=args.temperature, max_tokens=args.max_tokens,
                            timeout_s=args.timeout_s, max_retries=args.max_retries)


def _settings(args: argparse.Namespace, task_ids: list[str]) -> RunSettings:
    return RunSettings(
        policy=args.policy, model=args.model or args.policy, tasks=str(args.tasks),
        task_ids=tuple(task_ids), attempts=args.attempts, max_steps=args.max_steps,
        wrappers=args.wrappers, reserve=args.reserve, seed=args.seed,
        temperature=args.temperature, max_tokens=args.max_tokens,
        system_prompt=args.system_prompt, prefill=args.prefill, base_url=args.base_url or "",
        concurrency=args.concurrency, judge_model=args.judge_model or "",
        observation_variant=args.observation_variant)


def _check_args(args: argparse.Namespace) -> str:
    """An error message, or "" when the arguments make sense together."""
    if args.policy == "openai" and not (args.base_url and args.model):
        return "--base-url and --model are required with --policy openai"
    if args.policy == "transformers" and not args.model:
        return "--model (a checkpoint folder) is required with --policy transformers"
    for name in ("attempts", "concurrency", "max_steps", "reserve", "max_tokens"):
        if getattr(args, name) < 1:
            return f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}"
    if args.limit is not None and args.limit < 1:
        return f"--limit must be >= 1, got {args.limit}"
    if bool(args.judge_base_url) != bool(args.judge_model):
        return "--judge-base-url and --judge-model go together"
    return ""


def make_judge(base_url: str | None, model: str | None, api_key_env: str) -> Any:
    """The LLM judge of ``llm``-graded tasks, or None."""
    if not (base_url and model):
        return None
    from vera_env.verification.grading import RubricJudge  # noqa: PLC0415

    return RubricJudge.from_endpoint(base_url, model, api_key_env=api_key_env)


def _preflight(policy: Any) -> None:
    """One tiny request, so a wrong URL or model fails now, not as N exclusions later."""
    client = getattr(policy, "client", None)
    if client is not None:
        client.chat([{"role": "user", "content": "Reply with OK."}], max_tokens=1)


def _jobs(task_ids: list[str], attempts: int, seed: int,
          done: set[tuple[str, int]]) -> list[tuple[str, int]]:
    # Attempt-major order: an interrupted run has covered every task once before any twice.
    return [(t, seed + k) for k in range(attempts) for t in task_ids if (t, k) not in done]


async def _run(args: argparse.Namespace, run: RunDir, source: Any, policy: Any,
               jobs: list[tuple[str, int]], progress: Progress) -> list[Attempt]:
    from vera_env.wrappers import RecordEpisode  # noqa: PLC0415

    seed = args.seed
    judge = make_judge(args.judge_base_url, args.judge_model, args.judge_api_key_env)

    def make_env() -> Any:
        env = build_env(source, max_steps=args.max_steps, wrappers=args.wrappers,
                        reserve=args.reserve, sandbox=args.sandbox, judge=judge,
                        observation_variant=args.observation_variant)
        return RecordEpisode(env, run.transcripts, folder_for=lambda task_id, s:
                             run.transcript_dir(task_id, (s or 0) - seed))

    finished: list[Attempt] = []
    with run.open_results() as results:
        def on_done(attempt: Attempt) -> None:
            attempt.attempt_index = (attempt.seed or 0) - seed
            append(results, attempt)
            finished.append(attempt)
            progress.update(attempt)

        async def ticker() -> None:
            while True:
                await asyncio.sleep(1.0)
                progress.tick()

        clock = asyncio.create_task(ticker())
        try:
            await arun_many(make_env, policy, jobs, concurrency=args.concurrency,
                            on_done=on_done)
        finally:
            clock.cancel()
            closer = getattr(policy, "aclose", None)
            if closer is not None:
                await closer()
    return finished


def cmd_eval(args: argparse.Namespace) -> int:
    """Run the evaluation; print the summary table."""
    from vera_env.tasks import load_tasks  # noqa: PLC0415

    problem = _check_args(args)
    if problem:
        print(f"vera-env eval: {problem}", file=sys.stderr)
        return EXIT_SETUP
    try:
        source = load_tasks(args.tasks)
    except TaskFileError as exc:
        print(f"vera-env eval: {exc}", file=sys.stderr)
        return EXIT_SETUP
    task_ids = list(source.ids())[: args.limit]
    run = RunDir(args.out)
    try:
        run.start(_settings(args, task_ids), resume=args.resume)
    except (FileExistsError, FileNotFoundError, RunSettingsMismatch) as exc:
        print(f"vera-env eval: {exc}", file=sys.stderr)
        return EXIT_SETUP
    recorded = latest_attempts(run.attempts())
    if args.retry_exclusions:
        recorded = [a for a in recorded if not is_excluded(a)]
        run.drop({(a.task_id, a.attempt_index) for a in recorded})
    jobs = _jobs(task_ids, args.attempts, args.seed,
                 {(a.task_id, a.attempt_index) for a in recorded})
    if args.attempts > 1 and args.temperature == 0 and args.policy != "oracle":
        print("note: --attempts > 1 at --temperature 0 samples the same reply K times; "
              "pass@k needs sampling (e.g. --temperature 0.7)", file=sys.stderr)
    try:
        policy = _make_policy(args, source)
        if jobs and args.preflight:
            _preflight(policy)
    except PolicyError as exc:
        print(f"vera-env eval: the policy is not usable: {exc}", file=sys.stderr)
        return EXIT_SETUP
    print(f"{len(task_ids)} tasks x {args.attempts} attempts: {len(recorded)} recorded, "
          f"{len(jobs)} to run -> {run.path}", file=sys.stderr)
    progress = Progress(len(jobs), already=len(recorded))
    started = time.perf_counter()
    code = 0
    try:
        finished = asyncio.run(_run(args, run, source, policy, jobs, progress))
    except KeyboardInterrupt:
        print(f"\ninterrupted: every finished attempt is in {run.results_path}; "
              "rerun with --resume to continue", file=sys.stderr)
        finished, code = [], EXIT_INTERRUPTED
    wall_s = time.perf_counter() - started
    summary = _write_summary(run, args, task_ids, wall_s, finished)
    print(format_summary(summary))
    print(f"\nresults: {run.results_path}\nsummary: {run.summary_path}")
    if code == 0 and finished and all(a.status == "provider" for a in finished):
        print("every attempt failed at the provider; first error: "
              f"{finished[0].error}", file=sys.stderr)
        code = EXIT_ALL_PROVIDER
    return code


def _write_summary(run: RunDir, args: argparse.Namespace, task_ids: list[str],
                   wall_s: float, finished: list[Attempt]) -> dict[str, Any]:
    wanted = set(task_ids)
    attempts = [a for a in latest_attempts(run.attempts())
                if a.task_id in wanted and a.attempt_index < args.attempts]
    summary = summarise(attempts, args.attempts)
    summary["settings"] = run.settings().to_dict()
    summary["invocation"] = {
        "attempts_run": len(finished), "wall_s": round(wall_s, 3),
        "episodes_per_min": round(len(finished) / wall_s * 60, 2) if wall_s > 0 else None,
    }
    run.write_summary(summary)
    return summary


def add_parser(sub: argparse._SubParsersAction) -> None:
    """Register ``eval`` on the ``vera-env`` parser."""
    p = sub.add_parser("eval", help="evaluate a model endpoint on a task suite",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--model", help="served model id (or a checkpoint folder with "
                                   "--policy transformers)")
    p.add_argument("--policy", choices=POLICIES, default="openai",
                   help="openai: the endpoint; oracle: replay reference solutions (no "
                        "model); transformers: a local checkpoint")
    p.add_argument("--api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the API key (default %(default)s)")
    p.add_argument("--tasks", default="builtin", help="builtin, a suite folder or a .jsonl")
    p.add_argument("--attempts", type=int, default=1, help="attempts per task (K of pass@k)")
    p.add_argument("--concurrency", type=int, default=4, help="episodes in flight at once")
    p.add_argument("--max-steps", type=int, default=30, help="step budget per episode")
    p.add_argument("--out", required=True, type=Path, help="run folder")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out: skip attempts already recorded")
    p.add_argument("--retry-exclusions", action="store_true",
                   help="with --resume: rerun attempts excluded by provider or sandbox faults")
    p.add_argument("--wrappers", type=parse_wrappers, default=("forced", "gate"),
                   help="comma list of forced,gate (innermost first); 'none' for the bare "
                        "environment (default forced,gate)")
    p.add_argument("--reserve", type=int, default=3,
                   help="steps at the end of the budget that demand an answer (forced)")
    p.add_argument("--limit", type=int, help="only the first N tasks of the source")
    p.add_argument("--seed", type=int, default=0, help="attempt k of a task resets with seed+k")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--max-tokens", type=int, default=2048, help="completion cap per turn")
    p.add_argument("--timeout-s", type=float, default=600.0, help="per request")
    p.add_argument("--max-retries", type=int, default=4, help="on 429, 5xx, dropped connections")
    p.add_argument("--system-prompt", default="", help="optional system message")
    p.add_argument("--no-prefill", dest="prefill", action="store_false",
                   help="for servers without continue_final_message (hosted APIs)")
    p.add_argument("--no-preflight", dest="preflight", action="store_false",
                   help="skip the one-token endpoint check before the run")
    p.add_argument("--judge-base-url", help="endpoint of the LLM judge for llm-graded tasks "
                                             "(without one they are unscorable)")
    p.add_argument("--judge-model", help="the judge's served model id")
    p.add_argument("--judge-api-key-env", default="OPENAI_API_KEY")
    p.add_argument("--sandbox", choices=["auto", "bwrap", "local"], default="auto")
    p.add_argument("--observation-variant", choices=["full", "compact"], default="full",
                   help="how observations tell the rules: full, or compact (short, no "
                        "placeholders; what a model trained with it expects)")
    p.set_defaults(func=cmd_eval)

