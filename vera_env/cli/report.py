"""``vera-env report DIR``: an HTML report of an eval run (and a PNG of it on request).

The HTML is self-contained: the summary table, every task's attempts, and the analysis
graphs of chosen episodes (``--episode TASK:K`` to pick, otherwise one per task, plus a
contrasting attempt where attempts disagree). ``--png`` also renders it with headless
Chromium (``apt-get install chromium``), for places that show pictures, not pages;
``--markdown`` writes the summary and task tables as Markdown, for places that show
neither (a pull request comment, a CI job summary).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_parser", "cmd_report", "find_browser", "screenshot"]

_BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    """The path of a Chromium-family browser, or None."""
    for name in _BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(html: Path, png: Path, *, width: int = 1280, height: int = 2400,
               timeout_s: float = 120.0) -> None:
    """Render ``html`` to ``png`` with headless Chromium.

    Raises:
        FileNotFoundError: No Chromium-family browser is installed.
        RuntimeError: The browser failed or wrote no picture.
    """
    browser = find_browser()
    if browser is None:
        raise FileNotFoundError("no Chromium found for --png; apt-get install chromium")
    png.unlink(missing_ok=True)
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
           "--no-first-run", "--disable-dev-shm-usage", f"--window-size={width},{height}",
           f"--screenshot={png.resolve()}", html.resolve().as_uri()]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise RuntimeError(f"{browser} did not finish within {timeout_s:.0f} s") from exc
    if not png.exists():
        raise RuntimeError(f"{browser} wrote no screenshot (exit {done.returncode}): "
                           f"{done.stderr.strip()[-500:]}")


def _parse_episode(text: str) -> tuple[str, int]:
    task_id, sep, index = text.rpartition(":")
    if not sep or not index.isdigit():
        raise argparse.ArgumentTypeError(f"--episode takes TASK:K (K the attempt index), "
                                         f"got {text!r}")
    return task_id, int(index)


def cmd_report(args: argparse.Namespace) -> int:
    """Write the report; print where."""
    from vera_env.errors import TaskFileError  # noqa: PLC0415
    from vera_env.evaluation.metrics import latest_attempts  # noqa: PLC0415
    from vera_env.evaluation.report import (  # noqa: PLC0415
        build_markdown,
        build_report,
        choose_episodes,
    )
    from vera_env.evaluation.rundir import RunDir, write_atomic  # noqa: PLC0415
    from vera_env.tasks import load_tasks  # noqa: PLC0415

    run = RunDir(args.run)
    try:
        settings = run.settings()
    except FileNotFoundError as exc:
        print(f"vera-env report: {exc}", file=sys.stderr)
        return 2
    attempts = latest_attempts(_read_results(args.results) if args.results
                               else run.attempts())
    if args.episode:
        by_key = {(a.task_id, a.attempt_index): a for a in attempts}
        missing = [e for e in args.episode if e not in by_key]
        if missing:
            print(f"vera-env report: no such attempt(s) in the run: {missing}", file=sys.stderr)
            return 2
        episodes = [by_key[e] for e in args.episode]
    else:
        episodes = choose_episodes(attempts, args.episodes)
    truths: dict[str, str] = {}
    try:
        source = load_tasks(settings.tasks)
        truths = {t: source.get(t).answer for t in {a.task_id for a in attempts}}
    except (TaskFileError, KeyError) as exc:
        print(f"note: ground truths not shown ({exc})", file=sys.stderr)
    html = build_report(settings, attempts, episodes=episodes, truths=truths)
    out = args.out or run.path / "report.html"
    write_atomic(out, html)
    print(f"report: {out}")
    if args.markdown:
        write_atomic(args.markdown, build_markdown(settings, attempts, truths=truths))
        print(f"markdown: {args.markdown}")
    if args.png:
        try:
            screenshot(out, args.png, height=args.png_height)
        except (FileNotFoundError, RuntimeError) as exc:
            print(f"vera-env report: {exc}", file=sys.stderr)
            return 1
        print(f"picture: {args.png}")
    return 0


def _read_results(path: Path) -> list[Any]:
    from vera_env.rollout import Attempt  # noqa: PLC0415

    return [Attempt.from_json(line) for line in path.read_text("utf-8").splitlines()
            if line.strip()]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``report`` on the ``vera-env`` parser."""
    p = sub.add_parser("report", help="HTML report of an eval run",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("run", type=Path, help="the eval run folder")
    p.add_argument("--out", type=Path, help="HTML file (default RUN/report.html)")
    p.add_argument("--results", type=Path,
                   help="another results.jsonl of this run, e.g. RUN/rescore/results.jsonl")
    p.add_argument("--episode", action="append", type=_parse_episode, default=[],
                   help="draw this attempt's graph, TASK:K (repeatable)")
    p.add_argument("--episodes", type=int, default=12,
                   help="how many episodes to draw when none is named (default %(default)s)")
    p.add_argument("--markdown", type=Path, metavar="FILE",
                   help="also write the summary and task tables as Markdown to FILE")
    p.add_argument("--png", type=Path, help="also render the report to this PNG (Chromium)")
    p.add_argument("--png-height", type=int, default=2400, help="picture height in pixels")
    p.set_defaults(func=cmd_report)
