"""The ``vera-env`` command: one module per subcommand, registered here.

Each subcommand module exposes ``add_parser(sub)``; adding a command is one line in
``_COMMANDS``. Imports inside subcommands are deferred so ``vera-env --help`` is fast.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence

from vera_env import __version__

__all__ = ["build_parser", "main"]

# Subcommand modules, in the order `--help` lists them.
_COMMANDS = (
    "vera_env.cli.setup",
    "vera_env.cli.doctor",
    "vera_env.cli.demo",
    "vera_env.cli.eval",
    "vera_env.cli.play",
    "vera_env.cli.report",
    "vera_env.cli.rescore",
    "vera_env.cli.serve",
    "vera_env.cli.tasks",
    "vera_env.cli.train",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``vera-env``."""
    parser = argparse.ArgumentParser(
        prog="vera-env",
        description="Verification-executed reward as a Gymnasium environment for LLM agents.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for name in _COMMANDS:
        importlib.import_module(name).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``vera-env``."""
    args = build_parser().parse_args(argv)
    return int(args.func(args))
