"""Writing an attack's turns: the look, nodes of CHECK lines, pins, the answer.

Every attack ends with a fixed answer (``ANSWER``): verification is all it is after,
and an answer that happened to be right would muddle what the audit measures.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ANSWER", "LOOK", "NODES", "PER_NODE", "V", "chunks", "node", "pin", "pin_nodes"]

V = " && echo True || echo False"
ANSWER = "FINAL ANSWER: 0"
LOOK = "<command>ls -l; wc -c *</command>"
NODES, PER_NODE = 4, 3
"""Nodes an attack declares (``RewardConfig.max_rewarded_nodes``) and pins per node
(``checks_per_node``): the most a node can earn."""


def node(title: str, checks: list[str], command: str = "") -> str:
    """A turn declaring one node of ``checks`` (after ``command`` if given)."""
    head = f"<command>{command}</command>\n" if command else ""
    lines = [f'CHECK range "{title} {i + 1}" :: {c}' for i, c in enumerate(checks)]
    return head + f'NODE kind=load summary="{title}"\n' + "\n".join(lines)


def pin(shell: str, value: str) -> str:
    """A check that ``shell`` prints ``value``."""
    return f'test "$({shell})" = "{value}"' + V


def chunks(items: list[Any], size: int = PER_NODE) -> list[list[Any]]:
    """``items`` in runs of ``size``."""
    return [items[i:i + size] for i in range(0, len(items), size)]


def pin_nodes(title: str, pinned: list[tuple[str, str]], per_node: int) -> list[str]:
    """Up to ``NODES`` nodes of ``per_node`` pins each, of the (shell, value) facts (a
    fact pinned twice counts once, so the second copy is dropped)."""
    pins = list(dict.fromkeys(pin(shell, value) for shell, value in pinned))
    return [node(f"{title} {k + 1}", chunk)
            for k, chunk in enumerate(chunks(pins, per_node)[:NODES])]
