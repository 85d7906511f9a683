"""``vera-env doctor``: what this machine lacks for the environment, and the command that fixes it.

A wheel cannot install bubblewrap or fetch data, so the first thing a user of
``pip install vera-env`` needs is a list of what is missing, each with its fix, before an
eval run spends its budget discovering it one harness error at a time. The checks live in
`vera_env.cli.machine`; ``vera-env setup`` acts on the same list.

Exit 0 when every check passes, 1 otherwise; ``--json`` prints the same as an object.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from dataclasses import asdict

from vera_env import __version__
from vera_env.cli.machine import Check, run_checks

__all__ = ["add_parser", "cmd_doctor", "format_checks", "report_json"]


def format_checks(checks: Sequence[Check]) -> str:
    """A plain-text table: check, status, what was found, and the fix of each failed one."""
    head = ("check", "status", "found", "fix")
    body = [(c.name, "ok" if c.ok else "missing", c.detail, c.fix or "-") for c in checks]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head) - 1)]
    lines = ["  ".join([*(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)),
                        row[-1]]).rstrip() for row in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in [*widths, len(head[-1])]))
    return "\n".join(lines)


def report_json(checks: Sequence[Check]) -> str:
    """The checks as one JSON object: ``ok``, ``version`` and ``checks`` (one object each)."""
    return json.dumps({"ok": all(c.ok for c in checks), "version": __version__,
                       "checks": [asdict(c) for c in checks]}, indent=2)


def cmd_doctor(args: argparse.Namespace) -> int:
    """Run the checks, print them, exit 1 if any failed."""
    checks = run_checks()
    if args.json:
        print(report_json(checks))
    else:
        print(format_checks(checks))
        failed = [c for c in checks if not c.ok]
        print(f"\n{len(checks) - len(failed)}/{len(checks)} ok"
              + ("; `vera-env setup` installs what is missing (see fix)"
                 if failed else ""))
    return 0 if all(c.ok for c in checks) else 1


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``doctor`` on the ``vera-env`` parser."""
    doctor = sub.add_parser("doctor", help="check what this machine lacks (sandbox, tools, data)",
                            description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")
    doctor.set_defaults(func=cmd_doctor)
