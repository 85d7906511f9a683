"""The analysis graph: the model's only memory of what it established.

The observation is rebuilt each step from a bounded rendering of this graph plus a short
window of recent commands, never the whole transcript. Measured in the seed run,
transcript replay cost 9,267 tokens per step to deliver ~400 new tokens; at a 4k state
budget the same spend buys about four times the steps.

Rendering within a budget has to choose, and the choice follows from what a summary is:
the only trace of a step the model will ever see again. So ``render`` keeps, in order of
priority, (1) the frontier — leaf nodes, where the next step builds — and the newest
nodes, in full with their failing checks; (2) older nodes as one line each with a
shortened summary; (3) for what still does not fit, one line naming the omitted ids, so
the model knows they exist and can cite them as parents. The result never exceeds its
token budget, for any number of nodes.

A node tells the model the harness's whole verdict on its checks. A check that passed
but also passed on mutated data (``discriminating`` False) earns nothing and cannot open
the emission gate. Rendered as "(checks 2/2 passed)" next to a gate nudge saying no leaf
has a passing check, it would tell the model two contradictory things; so such checks
are counted apart and named (``NOT DISCRIMINATING``) with the fix.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from vera_env.observation.budget import count_tokens, fit_tokens
from vera_env.records import NodeRecord
from vera_env.wire.text import safe_text

__all__ = ["AnalysisState", "normalise", "render_full", "render_short"]

_SHORT_SUMMARY_CHARS = 80
_WEAK = "passed on mutated data too, so it verifies nothing; check a value the data determines"


def render_full(node: NodeRecord) -> str:
    """The node as the model sees it when there is room: its failing and
    non-discriminating checks named, each on its own line."""
    lines = [_head(node, node.summary)]
    for c in node.checks:
        if not c.passed:
            lines.append(f"    FAILED {c.kind} {c.name!r}: {c.detail}")
        elif c.discriminating is False:
            lines.append(f"    NOT DISCRIMINATING {c.kind} {c.name!r}: {_WEAK}")
    return "\n".join(lines)


def render_short(node: NodeRecord) -> str:
    """The node in one line with a shortened summary."""
    summary = node.summary
    if len(summary) > _SHORT_SUMMARY_CHARS:
        summary = summary[: _SHORT_SUMMARY_CHARS - 3] + "..."
    return _head(node, summary)


def _head(node: NodeRecord, summary: str) -> str:
    parents = f" <- {','.join(node.parents)}" if node.parents else ""
    artifact = f" [{node.artifact}]" if node.artifact else ""
    weak = node.n_weak
    tail = f", {node.n_passed - weak} discriminating" if weak else ""
    return (f"{node.id} {node.kind}{parents}: {summary}{artifact} "
            f"(checks {node.n_passed}/{len(node.checks)} passed{tail})")


def normalise(text: str) -> str:
    """``text`` lower-cased with its whitespace runs made one space and its ends
    stripped: the one spelling under which two summaries (or check commands) are the
    same finding, for the graph's duplicates and the env's one rewrite per node."""
    return " ".join(text.lower().split())


@dataclass
class AnalysisState:
    """The growing graph of nodes of one episode."""

    _nodes: dict[str, NodeRecord] = field(default_factory=dict)
    _rendered: dict[str, tuple[str, int, str, int]] = field(default_factory=dict, repr=False)
    _fingerprints: dict[str, tuple[str, frozenset[str]]] = field(default_factory=dict,
                                                                  repr=False)

    def __len__(self) -> int:
        return len(self._nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._nodes

    def __iter__(self) -> Iterator[NodeRecord]:
        return iter(self._nodes.values())

    def __bool__(self) -> bool:
        return bool(self._nodes)

    @property
    def nodes(self) -> tuple[NodeRecord, ...]:
        """All nodes in declaration order."""
        return tuple(self._nodes.values())

    def next_id(self) -> str:
        """The id the next node will get."""
        return f"n{len(self._nodes) + 1}"

    def add(self, node: NodeRecord) -> None:
        """Record ``node``.

        Raises:
            ValueError: The id is taken or a parent is unknown (the env drops unknown
                parents before building the node, so this is a programming error).
        """
        if node.id in self._nodes:
            raise ValueError(f"node id {node.id!r} already recorded")
        unknown = [p for p in node.parents if p not in self._nodes]
        if unknown:
            raise ValueError(f"node {node.id!r} names unknown parents {unknown}")
        self._nodes[node.id] = node
        # Nodes never change once recorded: render, count and fingerprint them once,
        # not every step (re-rendering was 97% of the per-step overhead at 50 nodes).
        # Escaped once here, so every rendering of the graph is valid UTF-8 (a check's
        # detail can quote an undecodable file name).
        short, full = safe_text(render_short(node)), safe_text(render_full(node))
        self._rendered[node.id] = (short, count_tokens(short), full, count_tokens(full))
        self._fingerprints[node.id] = (normalise(node.summary),
                                       frozenset(normalise(c.command) for c in node.checks))

    def leaves(self) -> tuple[NodeRecord, ...]:
        """Nodes that no other node names as a parent (the analysis frontier)."""
        cited = {p for n in self._nodes.values() for p in n.parents}
        return tuple(n for n in self._nodes.values() if n.id not in cited)

    def leaf_verified(self) -> bool:
        """Whether some leaf has a check that earns (passed, and not shown to be
        non-discriminating): the emission gate's rule (``VeraEnv.require_verified_leaf``).

        It reads leaves, not every node: a result the model built on is a step, not what
        its answer rests on; and it reads ``earns``, not ``rho``, since a passing check
        that also passes on mutated data verifies nothing and would be the cheapest way
        past the gate.
        """
        return any(check.earns for node in self.leaves() for check in node.checks)

    def duplicate_of(self, summary: str, check_commands: tuple[str, ...]) -> str:
        """The id of an existing node this declaration repeats, or "".

        A node repeats another when its normalised summary is the same, or when it
        declares exactly the same non-empty set of check commands. Re-declared
        findings earn nothing, so that declaring one result many times cannot farm
        the verification reward.
        """
        want_summary = normalise(summary)
        want_checks = frozenset(normalise(c) for c in check_commands)
        for node_id, (have_summary, have_checks) in self._fingerprints.items():
            if want_summary and have_summary == want_summary:
                return node_id
            if want_checks and have_checks == want_checks:
                return node_id
        return ""

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form of the whole graph."""
        return {"nodes": [n.to_dict() for n in self._nodes.values()]}

    def render(self, budget_tokens: int) -> str:
        """Render the graph within ``budget_tokens`` (see the module docstring).

        Args:
            budget_tokens: The most tokens (``count_tokens``) the rendering may take.

        Returns:
            The rendering; never over budget.
        """
        if not self._nodes:
            return fit_tokens("(no nodes yet)", budget_tokens)
        nodes = self.nodes
        n_checks = sum(len(n.checks) for n in nodes)
        n_pass = sum(n.n_passed for n in nodes)
        n_weak = sum(n.n_weak for n in nodes)
        header = f"{len(nodes)} nodes, {n_pass}/{n_checks} checks passed"
        if n_weak:
            header += f" ({n_weak} of them not discriminating)"
        left = budget_tokens - count_tokens(header) - 1
        if left <= 0:
            return fit_tokens(header, budget_tokens)
        chosen = self._choose(nodes, left)
        lines = [header]
        omitted: list[str] = []
        for node in nodes:
            text = chosen.get(node.id)
            if text is None:
                omitted.append(node.id)
                continue
            if omitted:
                lines.append(_omitted_line(omitted))
                omitted = []
            lines.append(text)
        if omitted:
            lines.append(_omitted_line(omitted))
        return fit_tokens("\n".join(lines), budget_tokens)

    def _choose(self, nodes: tuple[NodeRecord, ...], budget: int) -> dict[str, str]:
        """Pick a rendering per node: short lines by priority first, then upgrade the
        highest-priority ones to full while room is left."""
        leaf_ids = {n.id for n in self.leaves()}
        by_priority = sorted(nodes, key=lambda n: (n.id not in leaf_ids, -n.step,
                                                   -int(n.id[1:] or 0)))
        # Room for the worst-case omission line listing every id.
        left = budget - count_tokens(_omitted_line([n.id for n in nodes])) - 1
        chosen: dict[str, tuple[str, int]] = {}
        for node in by_priority:
            short, short_cost, _, _ = self._rendered[node.id]
            if short_cost + 1 > left:
                break
            chosen[node.id] = (short, short_cost)
            left -= short_cost + 1
        for node in by_priority:
            if node.id not in chosen:
                break
            _, short_cost, full, full_cost = self._rendered[node.id]
            if full_cost - short_cost <= left:
                chosen[node.id] = (full, full_cost)
                left -= full_cost - short_cost
        return {node_id: text for node_id, (text, _) in chosen.items()}


def _omitted_line(ids: list[str]) -> str:
    shown = ids if len(ids) <= 12 else ids[:6] + ["..."] + ids[-5:]
    return f"  ({len(ids)} earlier node(s) not shown: {', '.join(shown)})"
