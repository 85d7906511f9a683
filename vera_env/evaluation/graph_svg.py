"""The analysis graph of one episode as an inline SVG a person can read.

The graph is the episode's argument: what the model established (each node's summary),
what it built on (the edges), and which of its claims the harness confirmed (each
check, passed or failed, strong or weak). The drawing puts that in one picture: nodes
top to bottom by depth, each box coloured by its checks (green: all passed, amber: some
failed, red: none passed, grey: no checks) and listing every check with its verdict.

Plain SVG with no script and no external font, so the report stays one self-contained
file that renders the same in a browser, a headless screenshot, or a CI artifact.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from html import escape

from vera_env.records import NodeRecord

__all__ = ["node_colour", "render_graph"]

BOX_W = 420
GAP_X, GAP_Y = 40, 44
LINE_H = 16
PAD = 10
WRAP = 54

_FILL = {"pass": "#d9f2dd", "mixed": "#fbecc8", "fail": "#f8d3d0", "none": "#e8e8e8"}
_STROKE = {"pass": "#2e7d32", "mixed": "#b26a00", "fail": "#c62828", "none": "#757575"}
PASS_COLOUR, FAIL_COLOUR = "#2e7d32", "#c62828"


def node_colour(node: NodeRecord) -> str:
    """``pass``, ``mixed``, ``fail`` or ``none`` (no checks) for a node."""
    if not node.checks:
        return "none"
    passed = node.n_passed
    return "pass" if passed == len(node.checks) else "fail" if passed == 0 else "mixed"


def _layers(nodes: Sequence[NodeRecord]) -> dict[str, int]:
    depth: dict[str, int] = {}
    for node in nodes:  # nodes come in the order they were declared: parents first
        parents = [depth[p] for p in node.parents if p in depth]
        depth[node.id] = max(parents) + 1 if parents else 0
    return depth


def _lines(node: NodeRecord) -> list[tuple[str, str]]:
    """(css class, text) lines of one box."""
    head = f"{node.id}  {node.kind}"
    if node.artifact:
        head += f"  [{node.artifact}]"
    out = [("head", head)]
    out += [("summary", line) for line in textwrap.wrap(node.summary, WRAP) or [""]]
    for check in node.checks:
        mark = "✓" if check.passed else "✗"
        strength = {True: " · strong", False: " · weak", None: ""}[check.discriminating]
        text = f"{mark} {check.kind}: {check.name}{strength}"
        css = "ok" if check.passed else "bad"
        wrapped = textwrap.wrap(text, WRAP, subsequent_indent="   ") or [text]
        out += [(css, line) for line in wrapped]
    if not node.checks:
        out.append(("muted", "no checks: nothing verified this node"))
    return out


def render_graph(nodes: Sequence[NodeRecord], *, title: str = "") -> str:
    """An ``<svg>`` element drawing ``nodes`` (the recorded nodes of an episode).

    Returns:
        The SVG markup; a short note when there are no nodes.
    """
    if not nodes:
        return '<p class="muted">No nodes: the model declared nothing it established.</p>'
    depth = _layers(nodes)
    rows: dict[int, list[NodeRecord]] = {}
    for node in nodes:
        rows.setdefault(depth[node.id], []).append(node)
    boxes: dict[str, tuple[float, float, float, list[tuple[str, str]]]] = {}
    width = max(len(r) for r in rows.values()) * (BOX_W + GAP_X) + GAP_X
    y = GAP_Y / 2
    for level in sorted(rows):
        row = rows[level]
        offset = (width - len(row) * (BOX_W + GAP_X) + GAP_X) / 2
        heights: list[float] = []
        for i, node in enumerate(row):
            lines = _lines(node)
            box_h = float(2 * PAD + LINE_H * len(lines))
            boxes[node.id] = (offset + i * (BOX_W + GAP_X), y, box_h, lines)
            heights.append(box_h)
        y += max(heights) + GAP_Y
    height = y - GAP_Y / 2
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="graph" width="{width:.0f}" '
             f'height="{height:.0f}" viewBox="0 0 {width:.0f} {height:.0f}" role="img" '
             f'aria-label="{escape(title or "analysis graph")}">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" '
             'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
             '<path d="M 0 0 L 10 5 L 0 10 z" fill="#555"/></marker></defs>']
    for node in nodes:
        cx, cy, _, _ = boxes[node.id]
        for parent in node.parents:
            if parent not in boxes:
                continue
            px, py, ph, _ = boxes[parent]
            x1, y1, x2, y2 = px + BOX_W / 2, py + ph, cx + BOX_W / 2, cy
            mid = (y1 + y2) / 2
            parts.append(f'<path d="M {x1:.0f} {y1:.0f} C {x1:.0f} {mid:.0f}, {x2:.0f} '
                         f'{mid:.0f}, {x2:.0f} {y2 - 2:.0f}" fill="none" stroke="#555" '
                         f'stroke-width="1.4" marker-end="url(#arrow)"/>')
    for node in nodes:
        x, y0, h, lines = boxes[node.id]
        colour = node_colour(node)
        parts.append(f'<g class="node node-{colour}" data-node="{escape(node.id)}">'
                     f'<rect x="{x:.0f}" y="{y0:.0f}" width="{BOX_W}" height="{h:.0f}" rx="6" '
                     f'fill="{_FILL[colour]}" stroke="{_STROKE[colour]}" stroke-width="1.6"/>')
        for i, (css, text) in enumerate(lines):
            ty = y0 + PAD + LINE_H * (i + 1) - 4
            parts.append(f'<text x="{x + PAD:.0f}" y="{ty:.0f}" class="t-{css}">'
                         f'{escape(text)}</text>')
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts)
