"""``vera-env eval``: evaluate a model endpoint (or a local checkpoint) on a task suite.

One command from "I have a vLLM endpoint" to a table::

    vera-env eval --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B \\
        --tasks builtin --attempts 5 --concurrency 16 --temperature 0.7 --out runs/qwen3

Each attempt is appended to ``results.jsonl`` the moment it finishes, so a crash loses
nothing and ``--resume`` runs only what is missing (and refuses a folder made with
other settings). Before any episode a one-token request checks the endpoint, so a wrong
URL or model name fails in a second instead of turning every attempt into a
``provider`` exclusion after minutes of retries; and a run whose tasks cannot be built
(real-data sources not fetched) is refused. Either refusal comes before ``run.json`` is
written, so the corrected command with the same ``--out`` needs no ``--resume``.

For a small local model on CPU::

    vera-env eval --preset cpu-small --base-url http://127.0.0.1:8080/v1 --model local \\
        --tasks builtin --task-ids ID,ID --out runs/small
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from vera_env.cli.policy_loader import POLICY_NAMES, add_model_arguments, make_policy
from vera_env.cli.presets import PRESETS, DefaultsHelpFormatter, preset_help, resolve_preset
from vera_env.errors import PolicyError, TaskFileError
from vera_env.evaluation.metrics import (
    Summary,
    format_summary,
    is_excluded,
    latest_attempts,
    summarise,
)
from vera_env.evaluation.preflight import FETCH_COMMAND, missing_sources
from vera_env.evaluation.progress import Progress
from vera_env.evaluation.rundir import RunDir, RunSettings, RunSettingsMismatch, append
from vera_env.observation.prompts import ObservationVariant
from vera_env.policy import AsyncClosable, ChatBacked, Policy
from vera_env.rollout import Attempt, arun_many
from vera_env.sandbox import sandbox_refusal
from vera_env.spec import SANDBOX_NAMES, EnvSpec, JudgeEndpoint
from vera_env.tasks import TaskSource
from vera_env.tasks.named import SOURCE_NAMES
from vera_env.tasks.real.sources import MissingSourceError
from vera_env.wrappers import DEFAULT_WRAPPERS, WRAPPERS_HELP, parse_wrapper_names

__all__ = ["add_parser", "cmd_eval", "env_spec", "parse_task_ids", "parse_wrappers"]

POLICIES = tuple(name for name in POLICY_NAMES if name != "human")
EXIT_SETUP = 2            # bad arguments, unreachable endpoint, mismatched --resume
EXIT_ALL_PROVIDER = 3     # every attempt of this invocation was a provider fault
EXIT_HARNESS_ERROR = 4    # some attempt ended in status error: a bug, never the model's text
EXIT_INTERRUPTED = 130


def parse_wrappers(text: str) -> tuple[str, ...]:
    """``"forced,gate"`` -> ``("forced", "gate")``; ``""`` or ``"none"`` -> ``()``.

    Raises:
        argparse.ArgumentTypeError: An unknown or repeated wrapper name.
    """
    try:
        return parse_wrapper_names(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def parse_task_ids(text: str) -> tuple[str, ...]:
    """``"a,b"`` -> ``("a", "b")``: the ``--task-ids`` list (blanks dropped).

    Raises:
        argparse.ArgumentTypeError: No id, or an id given twice.
    """
    ids = tuple(part.strip() for part in text.split(",") if part.strip())
    if not ids:
        raise argparse.ArgumentTypeError("--task-ids needs at least one task id")
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    if repeated:
        raise argparse.ArgumentTypeError(f"--task-ids repeats {repeated}")
    return ids


def _select(args: argparse.Namespace, source: TaskSource) -> tuple[list[str], str]:
    """The run's task ids (``--task-ids`` then ``--limit``), or an error message.

    An id the source does not list but can make is taken: ``--tasks builtin`` lists seed
    0 of each type, and regenerates any valid id (a held-out ``...easy.s100000``) with its
    family's reference, which an exported suite of the same ids keeps for only four
    families -- the rest would pay their checks nothing.
    """
    from vera_env.tasks import UnknownTaskError  # noqa: PLC0415

    ids = list(source.ids())
    if args.task_ids:
        known = set(ids)

        def makeable(task_id: str) -> bool:
            try:
                source.get(task_id)
            except UnknownTaskError:
                return False
            return True

        unknown = [t for t in args.task_ids if t not in known and not makeable(t)]
        if unknown:
            return [], (f"--task-ids: {len(unknown)} id(s) not in --tasks {args.tasks}: "
                        f"{', '.join(unknown[:10])}; `vera-env tasks list` shows the ids "
                        f"(e.g. {', '.join(ids[:3])})")
        ids = list(args.task_ids)
    return ids[: args.limit], ""


def env_spec(args: argparse.Namespace, *, judge: JudgeEndpoint | None = None,
             observation_variant: ObservationVariant = "full") -> EnvSpec:
    """The environment the command line describes.

    ``args`` carries the flags ``eval`` and ``play`` share (``--tasks``, ``--max-steps``,
    ``--wrappers``, ``--reserve``, ``--sandbox``); what only ``eval`` offers comes by
    keyword, so each command reads only flags its own parser defines.
    """
    return EnvSpec(tasks=str(args.tasks), max_steps=args.max_steps, wrappers=args.wrappers,
                   reserve=args.reserve, sandbox=args.sandbox, judge=judge,
                   observation_variant=observation_variant)


def _eval_spec(args: argparse.Namespace) -> EnvSpec:
    """``env_spec`` with ``eval``'s own flags: the judge (when both halves are given) and
    ``--observation-variant`` (always set once the preset is resolved)."""
    judge = (JudgeEndpoint(base_url=args.judge_base_url, model=args.judge_model,
                           api_key_env=args.judge_api_key_env)
             if args.judge_base_url and args.judge_model else None)
    return env_spec(args, judge=judge, observation_variant=args.observation_variant)


def _settings(args: argparse.Namespace, spec: EnvSpec, task_ids: list[str]) -> RunSettings:
    return RunSettings(
        policy=args.policy, model=args.model or args.policy, task_ids=tuple(task_ids),
        attempts=args.attempts, seed=args.seed, temperature=args.temperature,
        max_tokens=args.max_tokens, env=spec, system_prompt=args.system_prompt,
        prefill=args.prefill, base_url=args.base_url or "", concurrency=args.concurrency)


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
    return JudgeEndpoint(base_url=base_url, model=model, api_key_env=api_key_env).build()


def _preflight(policy: Policy) -> None:
    """One tiny request, so a wrong URL or model fails now, not as N exclusions later."""
    if isinstance(policy, ChatBacked):
        policy.client.chat([{"role": "user", "content": "Reply with OK."}], max_tokens=1)


def _claim(run: RunDir, settings: RunSettings, resume: bool, *, write: bool) -> str:
    """Why ``run`` cannot take this run ("" when it can); with ``write``, take it.

    Checked before the policy is built and the endpoint asked, written only after: a
    run refused by its preflight (a wrong URL or model) must leave ``--out`` as it found
    it, or the corrected command is refused as "already holds a run".
    """
    try:
        if write:
            run.start(settings, resume=resume)
        else:
            run.check(settings, resume=resume)
    except (FileExistsError, FileNotFoundError, RunSettingsMismatch) as exc:
        return str(exc)
    return ""


def _jobs(task_ids: list[str], attempts: int, seed: int,
          done: set[tuple[str, int]]) -> list[tuple[str, int]]:
    # Attempt-major order: an interrupted run has covered every task once before any twice.
    return [(t, seed + k) for k in range(attempts) for t in task_ids if (t, k) not in done]


async def _run(args: argparse.Namespace, run: RunDir, spec: EnvSpec, source: TaskSource,
               policy: Policy, jobs: list[tuple[str, int]], progress: Progress
               ) -> list[Attempt]:
    from vera_env.wrappers import RecordEpisode  # noqa: PLC0415

    seed = args.seed
    judge = spec.judge.build() if spec.judge else None  # one judge, shared by every env

    def make_env() -> Any:
        return RecordEpisode(spec.build(tasks=source, judge=judge), run.transcripts,
                             folder_for=lambda task_id, s:
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
                            on_done=on_done, on_step=progress.step, on_turn=progress.turn)
        finally:
            clock.cancel()
            if isinstance(policy, AsyncClosable):
                await policy.aclose()
    return finished


def _load(args: argparse.Namespace) -> tuple[TaskSource, list[str]] | str:
    """The task source and the run's task ids, or why the run cannot start.

    Every task must be buildable before the first episode: a missing real-data source
    would otherwise turn each attempt into a harness error after the run's whole time
    (`vera_env.evaluation.preflight`).
    """
    from vera_env.tasks import load_tasks  # noqa: PLC0415

    try:
        source = load_tasks(args.tasks)
    except TaskFileError as exc:
        return str(exc)
    except MissingSourceError as exc:  # canary ids depend on the real files' columns
        return (f"--tasks {args.tasks} cannot be listed: {exc}. Fix: `{FETCH_COMMAND}` "
                "fetches every real-data source")
    task_ids, problem = _select(args, source)
    if problem:
        return problem
    missing = missing_sources(task_ids)
    return missing.message() if missing else (source, task_ids)


def cmd_eval(args: argparse.Namespace) -> int:
    """Run the evaluation; print the summary table."""
    args = resolve_preset(args)
    problem = _check_args(args) or sandbox_refusal(args.sandbox)  # not one exclusion per attempt
    if problem:
        print(f"vera-env eval: {problem}", file=sys.stderr)
        return EXIT_SETUP
    loaded = _load(args)
    if isinstance(loaded, str):
        print(f"vera-env eval: {loaded}", file=sys.stderr)
        return EXIT_SETUP
    source, task_ids = loaded
    spec = _eval_spec(args)
    run, settings = RunDir(args.out), _settings(args, spec, task_ids)
    problem = _claim(run, settings, args.resume, write=False)
    if problem:
        print(f"vera-env eval: {problem}", file=sys.stderr)
        return EXIT_SETUP
    recorded = latest_attempts(run.attempts())
    if args.retry_exclusions:
        recorded = [a for a in recorded if not is_excluded(a)]
    jobs = _jobs(task_ids, args.attempts, args.seed,
                 {(a.task_id, a.attempt_index) for a in recorded})
    if args.attempts > 1 and args.temperature == 0 and args.policy != "oracle":
        print("note: --attempts > 1 at --temperature 0 samples the same reply K times; "
              "pass@k needs sampling (e.g. --temperature 0.7)", file=sys.stderr)
    try:
        policy = _load_policy(args, source)
        if jobs and args.preflight:
            _preflight(policy)
    except PolicyError as exc:
        print(f"vera-env eval: the policy is not usable: {exc}", file=sys.stderr)
        return EXIT_SETUP
    problem = _claim(run, settings, args.resume, write=True)  # only now: see `_claim`
    if problem:
        print(f"vera-env eval: {problem}", file=sys.stderr)
        return EXIT_SETUP
    if args.retry_exclusions:
        run.drop({(a.task_id, a.attempt_index) for a in recorded})
    print(f"{len(task_ids)} tasks x {args.attempts} attempts: {len(recorded)} recorded, "
          f"{len(jobs)} to run -> {run.path}", file=sys.stderr)
    progress = Progress(len(jobs), already=len(recorded))
    started = time.perf_counter()
    code = 0
    try:
        finished = asyncio.run(_run(args, run, spec, source, policy, jobs, progress))
    except KeyboardInterrupt:
        progress.close()
        print(f"\ninterrupted: every finished attempt is in {run.results_path}; "
              "rerun with --resume to continue", file=sys.stderr)
        finished, code = [], EXIT_INTERRUPTED
    progress.close()
    wall_s = time.perf_counter() - started
    summary = _write_summary(run, args, task_ids, wall_s, finished)
    print(format_summary(summary))
    print(f"\nresults: {run.results_path}\nsummary: {run.summary_path}")
    if code == 0 and finished and all(a.status == "provider" for a in finished):
        print("every attempt failed at the provider; first error: "
              f"{finished[0].error}", file=sys.stderr)
        code = EXIT_ALL_PROVIDER
    if code == 0 and summary.statuses["error"]:
        first = summary.harness_errors[0]
        print(f"vera-env eval: {summary.statuses['error']} attempt(s) ended in a harness "
              "error, a bug in vera_env or the policy (model text cannot cause one); they "
              f"are left out of every rate. First: {first.task_id} "
              f"#{first.attempt_index}: {first.error}", file=sys.stderr)
        code = EXIT_HARNESS_ERROR
    return code


def _load_policy(args: argparse.Namespace, source: TaskSource) -> Policy:
    """``make_policy``, saying on stderr when it loads a local checkpoint: on CPU that is
    a minute or more before the first turn, with nothing else on the screen."""
    if args.policy != "transformers":
        return make_policy(args.policy, args, source)
    print(f"loading the model from {args.model} ...", file=sys.stderr, flush=True)
    began = time.perf_counter()
    policy = make_policy(args.policy, args, source)
    print(f"loaded in {time.perf_counter() - began:.1f} s", file=sys.stderr, flush=True)
    return policy


def _write_summary(run: RunDir, args: argparse.Namespace, task_ids: list[str],
                   wall_s: float, finished: list[Attempt]) -> Summary:
    wanted = set(task_ids)
    attempts = [a for a in latest_attempts(run.attempts())
                if a.task_id in wanted and a.attempt_index < args.attempts]
    summary = summarise(attempts, args.attempts)
    run.write_summary({**summary.to_dict(), "settings": run.settings().to_dict(),
                       "invocation": {
                           "attempts_run": len(finished), "wall_s": round(wall_s, 3),
                           "episodes_per_min": (round(len(finished) / wall_s * 60, 2)
                                                if wall_s > 0 else None)}})
    return summary


def _tasks_help() -> str:
    named = "; ".join(f"{name}: {what}" for name, what in SOURCE_NAMES.items())
    return (f"the task source: a named source ({named}); a suite folder "
            "(<id>/task.json + <id>/data/); a .jsonl file (one task per line); or a "
            "BioMysteryBench folder (problems.csv or .parquet + data/)")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``eval`` on the ``vera-env`` parser."""
    p = sub.add_parser("eval", help="evaluate a model endpoint on a task suite",
                       description=__doc__, formatter_class=DefaultsHelpFormatter)
    add_model_arguments(p)
    # Preset-able flags have no parser default: `resolve_preset` tells "unset" from "typed".
    p.set_defaults(max_tokens=None)
    for action in p._actions:
        if action.dest == "temperature":
            action.help = "sampling temperature (0: greedy)"
        elif action.dest == "timeout_s":
            action.help = "seconds per request"
    p.add_argument("--preset", choices=sorted(PRESETS), help=preset_help())
    p.add_argument("--policy", choices=POLICIES, default="openai",
                   help="openai: the endpoint; oracle: replay reference solutions (no "
                        "model); transformers: a local checkpoint")
    p.add_argument("--tasks", default="builtin", help=_tasks_help())
    p.add_argument("--task-ids", type=parse_task_ids, metavar="ID[,ID...]",
                   help="run only these tasks of --tasks (before --limit)")
    p.add_argument("--attempts", type=int, default=1, help="attempts per task (K of pass@k)")
    p.add_argument("--concurrency", type=int, help="episodes in flight at once")
    p.add_argument("--max-steps", type=int, help="step budget per episode")
    p.add_argument("--out", required=True, type=Path, help="run folder")
    p.add_argument("--resume", action="store_true",
                   help="continue the run in --out: skip attempts already recorded")
    p.add_argument("--retry-exclusions", action="store_true",
                   help="with --resume: rerun attempts excluded by provider or sandbox faults")
    p.add_argument("--wrappers", type=parse_wrappers, default=DEFAULT_WRAPPERS,
                   help=WRAPPERS_HELP)
    p.add_argument("--reserve", type=int, default=3,
                   help="steps at the end of the budget that demand an answer (forced)")
    p.add_argument("--limit", type=int, help="only the first N tasks (default: all)")
    p.add_argument("--seed", type=int, default=0, help="attempt k of a task resets with seed+k")
    p.add_argument("--no-preflight", dest="preflight", action="store_false",
                   help="skip the one-token endpoint check before the run")
    p.add_argument("--judge-base-url", help="endpoint of the LLM judge for llm-graded tasks "
                                             "(without one they are unscorable)")
    p.add_argument("--judge-model", help="the judge's served model id")
    p.add_argument("--judge-api-key-env", default="OPENAI_API_KEY",
                   help="environment variable holding the judge's API key")
    p.add_argument("--sandbox", choices=SANDBOX_NAMES, default="auto",
                   help="how commands are isolated (auto: bubblewrap, refused where it "
                        "cannot run; local: no isolation, only when named)")
    p.add_argument("--observation-variant", choices=["full", "compact"],
                   help="how observations tell the rules: full, or compact (short, no "
                        "placeholders; what a model trained with it expects)")
    p.set_defaults(func=cmd_eval)
