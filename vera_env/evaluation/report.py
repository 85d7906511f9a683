"""A self-contained HTML report of an eval run: the table, every task, chosen episodes.

A number says how often a model was right; a reader deciding whether to trust it wants
to see *why*: which tasks it gets right every time, which it never does, and, for a few
episodes, what it established and which of its checks held. The report is built from
the run folder alone (``results.jsonl`` and ``run.json``), so it works on an
interrupted run and on a re-scored one, and it is one file with inline CSS and SVG —
nothing to serve, nothing fetched — that can be attached to an issue or a CI artifact.
``build_markdown`` writes the same summary and task tables as Markdown, for a pull
request comment or a job summary, where HTML is not rendered.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from vera_env.evaluation.graph_svg import FAIL_COLOUR, PASS_COLOUR, render_graph
from vera_env.evaluation.metrics import (
    Summary,
    is_excluded,
    latest_attempts,
    outcome,
    summarise,
    summary_rows,
)
from vera_env.evaluation.rundir import RunSettings
from vera_env.records import NodeRecord, recorded_nodes
from vera_env.rollout import Attempt
from vera_env.wire.protocol import parse_emission

__all__ = ["build_markdown", "build_report", "choose_episodes", "episode_html", "page"]

_OUTPUT_CHARS = 2000
_CSS = f"""
body {{ font: 14px/1.45 "DejaVu Sans", "Liberation Sans", Arial, sans-serif; color: #222;
       margin: 24px auto; max-width: 1180px; padding: 0 16px; }}
h1 {{ font-size: 22px; margin-bottom: 4px; }} h2 {{ font-size: 18px; margin-top: 32px;
       border-bottom: 1px solid #ddd; }} h3 {{ font-size: 15px; margin-bottom: 4px; }}
table {{ border-collapse: collapse; margin: 8px 0; }}
td, th {{ border: 1px solid #ddd; padding: 3px 8px; text-align: left; vertical-align: top; }}
th {{ background: #f4f4f4; }} .num {{ text-align: right; font-variant-numeric: tabular-nums; }}
.muted {{ color: #777; }} pre {{ background: #f7f7f7; padding: 6px; white-space: pre-wrap;
       word-break: break-word; margin: 2px 0; font-size: 12px; }}
.cell {{ display: inline-block; min-width: 64px; padding: 1px 6px; margin: 1px;
        border-radius: 3px; font-size: 12px; }}
.right {{ background: #d9f2dd; color: {PASS_COLOUR}; }} .wrong {{ background: #f8d3d0;
        color: {FAIL_COLOUR}; }} .no-answer {{ background: #fbecc8; color: #8a5300; }}
.excluded {{ background: #e8e8e8; color: #555; }}
.ok {{ color: {PASS_COLOUR}; }} .bad {{ color: {FAIL_COLOUR}; }}
svg.graph text {{ font: 12px "DejaVu Sans Mono", "Liberation Mono", monospace; }}
svg.graph .t-head {{ font-weight: bold; }} svg.graph .t-ok {{ fill: {PASS_COLOUR}; }}
svg.graph .t-bad {{ fill: {FAIL_COLOUR}; }} svg.graph .t-muted {{ fill: #777; }}
.episode {{ margin-bottom: 28px; }} details {{ margin: 6px 0; }}
"""


def choose_episodes(attempts: Sequence[Attempt], limit: int) -> list[Attempt]:
    """Up to ``limit`` episodes worth reading: one per task, scored ones first.

    A right and a wrong episode of the same task side by side say most, so after one
    per task, a second attempt is added for tasks whose attempts disagree.
    """
    by_task: dict[str, list[Attempt]] = {}
    for a in sorted(attempts, key=lambda a: (a.task_id, a.attempt_index)):
        by_task.setdefault(a.task_id, []).append(a)
    first, second = [], []
    for group in by_task.values():
        scored = [a for a in group if not is_excluded(a)] or group
        first.append(scored[0])
        other = [a for a in scored if a.correct != scored[0].correct]
        if other:
            second.append(other[0])
    return (first + second)[:limit]


def build_report(settings: RunSettings, attempts: Sequence[Attempt], *,
                 episodes: Sequence[Attempt], truths: dict[str, str] | None = None,
                 title: str = "") -> str:
    """The report as one HTML document.

    Args:
        settings: The run's settings.
        attempts: The run's attempts (latest per task and index).
        episodes: The attempts whose analysis graphs are drawn.
        truths: Ground-truth answers by task id, shown beside the model's (optional).
        title: Heading (default: the model name).
    """
    attempts = latest_attempts(attempts)
    summary = summarise(attempts, settings.attempts)
    truths = truths or {}
    shown = {(a.task_id, a.attempt_index) for a in episodes}
    body = [f"<h1>{escape(title or f'vera_env eval: {settings.model}')}</h1>",
            f'<p class="muted">{escape(_settings_line(settings))}</p>',
            "<h2>Summary</h2>", _summary_table(summary),
            "<h2>Tasks</h2>", _task_table(summary, attempts, truths, shown),
            "<h2>Episodes</h2>"]
    body += [_episode(a, truths.get(a.task_id)) for a in episodes] or [
        '<p class="muted">No episodes chosen.</p>']
    return page(f"{title or settings.model} — vera_env eval", body)


def page(title: str, body: Sequence[str]) -> str:
    """One self-contained HTML document in the report's style (``vera-env tasks audit``
    writes its report with it too).

    Args:
        title: The document's title (escaped here).
        body: HTML fragments, in order.
    """
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{escape(title)}</title>"
            f"<style>{_CSS}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def episode_html(attempt: Attempt, truth: str | None = None) -> str:
    """One episode as the report draws it: outcome, analysis graph, checks and turns."""
    return _episode(attempt, truth)


def build_markdown(settings: RunSettings, attempts: Sequence[Attempt], *,
                   truths: dict[str, str] | None = None, title: str = "") -> str:
    """The summary and the per-task table as one Markdown document (no episodes).

    Args:
        settings: The run's settings.
        attempts: The run's attempts (latest per task and index).
        truths: Ground-truth answers by task id (optional).
        title: Heading (default: the model name).
    """
    attempts = latest_attempts(attempts)
    summary = summarise(attempts, settings.attempts)
    truths = truths or {}
    lines = [f"# {_md(title or f'vera_env eval: {settings.model}')}", "",
             _md(_settings_line(settings)), "", "| metric | value |", "|---|---|"]
    lines += [f"| {_md(name)} | {_md(value)} |" for name, value in summary_rows(summary)]
    lines += ["", "| task | expected | outcomes | right | pass@1 |", "|---|---|---|---:|---:|"]
    for task_id, t in summary.per_task.items():
        p1 = "-" if t.pass_at_1 is None else f"{100 * t.pass_at_1:.0f}%"
        lines.append(f"| {_md(task_id)} | {_md(truths.get(task_id, '-'))} | "
                     f"{_md(' '.join(t.outcomes))} | {t.correct}/{t.scored} | {p1} |")
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    """Text safe inside a Markdown table cell: one line, pipes escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _settings_line(s: RunSettings) -> str:
    wrappers = ",".join(s.wrappers) or "none"
    return (f"policy {s.policy} · model {s.model} · tasks {s.tasks} ({len(s.task_ids)}) · "
            f"{s.attempts} attempt(s) per task · max {s.max_steps} steps · wrappers "
            f"{wrappers} · temperature {s.temperature} · seed {s.seed}")


def _summary_table(summary: Summary) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>"
                   for k, v in summary_rows(summary))
    return f'<table class="summary">{rows}</table>'


def _task_table(summary: Summary, attempts: Sequence[Attempt],
                truths: dict[str, str], shown: set[tuple[str, int]]) -> str:
    head = ("<tr><th>task</th><th>expected</th><th>attempts (answer)</th>"
            "<th class=num>right</th><th class=num>pass@1</th></tr>")
    rows = []
    for task_id, t in summary.per_task.items():
        cells = []
        for a in sorted((a for a in attempts if a.task_id == task_id),
                        key=lambda a: a.attempt_index):
            result = outcome(a)
            css = result.split(":")[0]
            label = escape(_clip(a.answer, 24) or result)
            tip = escape(f"#{a.attempt_index} {a.status}: {a.answer or a.error}", quote=True)
            inner = f'<span class="cell {css}" title="{tip}">{label}</span>'
            if (a.task_id, a.attempt_index) in shown:
                inner = f'<a href="#{_anchor(a)}">{inner}</a>'
            cells.append(inner)
        p1 = t.pass_at_1
        rows.append(f"<tr><td>{escape(task_id)}</td><td>{escape(truths.get(task_id, '-'))}</td>"
                    f"<td>{''.join(cells)}</td><td class=num>{t.correct}/{t.scored}</td>"
                    f"<td class=num>{'-' if p1 is None else f'{100 * p1:.0f}%'}</td></tr>")
    return f"<table>{head}{''.join(rows)}</table>"


def _anchor(a: Attempt) -> str:
    return "ep-" + "".join(c if c.isalnum() else "-" for c in a.task_id) + f"-{a.attempt_index}"


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _episode(a: Attempt, truth: str | None) -> str:
    result = outcome(a)
    css = result.split(":")[0]
    nodes = recorded_nodes(a.steps)
    passed = sum(n.n_passed for n in nodes)
    n_checks = sum(len(n.checks) for n in nodes)
    facts = (f"{a.n_steps} steps · {len(nodes)} nodes · checks {passed}/{n_checks} passed"
             f" · {a.n_discriminating} discriminating · verification reward "
             f"{a.verification_reward:.3f}" + (" · answer forced" if a.answer_forced else ""))
    answer = (f'answer <b>{escape(a.answer)}</b>' if a.answer else "no answer")
    if truth is not None:
        answer += f" · expected <b>{escape(truth)}</b>"
    if a.error:
        answer += f' · <span class="muted">{escape(_clip(a.error, 200))}</span>'
    title = f"{a.task_id} · attempt {a.attempt_index}"
    return "\n".join([
        f'<div class="episode" id="{_anchor(a)}">',
        f'<h3>{escape(title)} · <span class="cell {css}">{escape(result)}</span></h3>',
        f"<p>{answer}<br><span class=\"muted\">{escape(facts)}</span></p>",
        render_graph(nodes, title=title),
        _checks_table(nodes), _turns(a), "</div>"])


def _checks_table(nodes: list[NodeRecord]) -> str:
    rows = []
    for n in nodes:
        for c in n.checks:
            verdict = ('<span class="ok">passed</span>' if c.passed
                       else '<span class="bad">failed</span>')
            strength = {True: "strong", False: "weak (passes on mutated data)",
                        None: "not tested"}[c.discriminating]
            rows.append(f"<tr><td>{escape(n.id)}</td><td>{escape(c.kind)}</td>"
                        f"<td>{escape(c.name)}</td><td>{verdict}</td>"
                        f"<td>{strength}</td><td><pre>{escape(c.command)}</pre>"
                        f"{escape(c.detail)}</td></tr>")
    if not rows:
        return ""
    return ("<details><summary>Checks the harness ran</summary><table><tr><th>node</th>"
            "<th>kind</th><th>check</th><th>verdict</th><th>strength</th>"
            f"<th>command / detail</th></tr>{''.join(rows)}</table></details>")


def _turns(a: Attempt) -> str:
    items = []
    for i, s in enumerate(a.steps):
        emission = parse_emission(s.action)
        note = s.error
        # info["forcing"] describes the next observation: the previous step's flag says
        # whether this turn was asked for an answer only.
        forced = i > 0 and a.steps[i - 1].forcing
        head = f"step {s.step}" + (" (answer forced)" if forced else "")
        if emission.command:
            head += f": $ {_clip(emission.command.splitlines()[0], 90)}"
        output = _clip(s.command_output, _OUTPUT_CHARS)
        items.append(f"<li><b>{escape(head)}</b>"
                     + (f' <span class="bad">rejected: {escape(note)}</span>' if note else "")
                     + f"<pre>{escape(s.action)}</pre>"
                     + (f"<pre class=muted>{escape(output)}</pre>" if output else "") + "</li>")
    return f"<details><summary>Turns ({len(a.steps)})</summary><ol>{''.join(items)}</ol></details>"
