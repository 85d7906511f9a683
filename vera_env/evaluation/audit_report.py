"""The audit's outputs: the text table, the JSON and the HTML report.

The HTML is drawn with ``vera_env.evaluation.report``'s page and episode view, so an
audit reads like an eval report: a verdict per task, what every attack earned, and --
for each hackable task -- the winning attack's episode beside the reference's, with
the checks that earned. Seeing the checks is the point: a number says a task is
hackable, the earning checks say which part of its data the attack pinned.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from vera_env.evaluation.attacks import BASELINE, BLIND, describe
from vera_env.evaluation.audit import CAP, FACTOR, REFERENCE, TaskAudit
from vera_env.evaluation.report import episode_html, page
from vera_env.evaluation.rundir import write_atomic
from vera_env.rollout import Attempt

__all__ = ["audit_html", "audit_json", "audit_table", "write_audit"]

_VERDICT_CSS = {"ranks analysis": "right", "hackable": "wrong", "no reference": "excluded",
                "ranks nothing": "no-answer", "unscorable": "no-answer"}


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ratio(a: TaskAudit) -> str:
    if a.reference is None:
        return "-"
    return "inf" if a.ratio is None else f"{a.ratio:.1f}x"


def verdict_text(a: TaskAudit) -> str:
    """``hackable by slices``, ``ranks analysis``, ..."""
    return f"{a.verdict} by {a.by}" if a.by else a.verdict


def audit_table(audits: Sequence[TaskAudit]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the per-task table the command prints."""
    head = ["task", "reference", "best no-analysis", "earned", "ratio", "verdict"]
    rows = [[a.task_id, _num(a.reference), a.best_policy or "-", _num(a.best), _ratio(a),
             verdict_text(a) + (f" ({a.faults} faults)" if a.faults else "")]
            for a in audits]
    return head, rows


def audit_json(suite: str, policies: Sequence[str], audits: Sequence[TaskAudit],
               rows: Sequence[dict[str, Any]], settings: Mapping[str, Any]) -> dict[str, Any]:
    """The audit as one JSON document: settings, verdicts and every episode's row."""
    return {"suite": suite, "policies": list(policies),
            "criteria": {"cap": CAP, "factor": FACTOR}, "settings": dict(settings),
            "tasks": [a.to_dict() for a in audits], "episodes": list(rows)}


def audit_html(suite: str, policies: Sequence[str], audits: Sequence[TaskAudit],
               episodes: Mapping[tuple[str, str], Attempt]) -> str:
    """The audit as one self-contained HTML page.

    Args:
        suite: What was audited (for the heading).
        policies: The attacks played.
        audits: The verdicts.
        episodes: Attempts by (task id, policy) to draw: the reference's and the
            deciding attack's of each hackable task.
    """
    hackable = [a for a in audits if a.verdict == "hackable"]
    if BASELINE not in policies and any(BASELINE in a.earned for a in audits):
        policies = [*policies, BASELINE]  # the twin the gated recounts are judged by
    body = [f"<h1>vera_env tasks audit: {escape(suite)}</h1>",
            f'<p class="muted">{len(audits)} tasks · {len(hackable)} hackable · a task ranks '
            f"analysis when every no-analysis policy earns at most {CAP} per episode and "
            f"the reference at least {FACTOR:g}x the best of them</p>",
            "<h2>Tasks</h2>", _verdicts(audits), "<h2>What each attack earned</h2>",
            _matrix(audits, policies), "<h2>The attacks</h2>", _attacks(policies)]
    if hackable:
        body.append("<h2>Hackable tasks: the deciding attack and the reference</h2>")
    for a in hackable:
        for name in (a.by, REFERENCE):
            attempt = episodes.get((a.task_id, name))
            if attempt is not None:
                body.append(f"<h3>{escape(a.task_id)}: {escape(name)}</h3>")
                body.append(episode_html(attempt))
    return page(f"{suite} — vera_env tasks audit", body)


def _verdicts(audits: Sequence[TaskAudit]) -> str:
    head, rows = audit_table(audits)
    cells = "".join(
        "<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row[:-1])
        + f'<td><span class="cell {_VERDICT_CSS[a.verdict]}">{escape(row[-1])}</span></td></tr>'
        for a, row in zip(audits, rows, strict=True))
    return ("<table><tr>" + "".join(f"<th>{escape(h)}</th>" for h in head) + "</tr>"
            + cells + "</table>")


def _matrix(audits: Sequence[TaskAudit], policies: Sequence[str]) -> str:
    names = [REFERENCE, *policies]
    head = "".join(f"<th>{escape(n)}</th>" for n in names)
    rows = []
    for a in audits:
        cells = []
        for n in names:
            value = a.earned.get(n)
            limit = a.allowance.get(n, CAP if n in BLIND else None)
            over = value is not None and limit is not None and value > limit + 1e-9
            css = ' class="num bad"' if over else " class=num"
            cells.append(f"<td{css}>{_num(value)}</td>")
        rows.append(f"<tr><td>{escape(a.task_id)}</td>{''.join(cells)}</tr>")
    return f"<table><tr><th>task</th>{head}</tr>{''.join(rows)}</table>"


def _attacks(policies: Sequence[str]) -> str:
    rows = "".join(f"<tr><td>{escape(n)}</td><td>{escape(describe(n))}</td></tr>"
                   for n in policies)
    return f"<table><tr><th>policy</th><th>what it tries</th></tr>{rows}</table>"


def write_audit(out: Path, suite: str, policies: Sequence[str], audits: Sequence[TaskAudit],
                rows: Sequence[dict[str, Any]], settings: Mapping[str, Any],
                episodes: Mapping[tuple[str, str], Attempt]) -> tuple[Path, Path]:
    """Write ``out/audit.json`` and ``out/audit.html``; return their paths.

    Args:
        out: The folder (made if missing).
        suite: What was audited.
        policies: The attacks played.
        audits: The verdicts.
        rows: Every episode's row.
        settings: The environment's settings, recorded in the JSON.
        episodes: Attempts by (task id, policy); the report draws the reference's and
            the deciding attack's of each hackable task.
    """
    out.mkdir(parents=True, exist_ok=True)
    deciding = {(a.task_id, a.by) for a in audits if a.by}
    drawn = {k: v for k, v in episodes.items() if k[1] == REFERENCE or k in deciding}
    paths = (out / "audit.json", out / "audit.html")
    write_atomic(paths[0], json.dumps(audit_json(suite, policies, audits, rows, settings),
                                      indent=2) + "\n")
    write_atomic(paths[1], audit_html(suite, policies, audits, drawn))
    return paths
