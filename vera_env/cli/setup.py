"""``vera-env setup``: install what the machine lacks (Debian packages, real-data sources).

The step a wheel cannot do: ``pip install vera-env && vera-env setup &&
vera-env demo`` on a fresh Debian machine. It installs the Debian packages of the failed
`vera_env.cli.machine` checks (apt-get as root, through sudo otherwise), h5py into this
interpreter if it lacks it (the h5ad tasks need it; a wheel installed without the
``real`` extra has none, and ``vera-env demo`` then stopped on the first h5ad task), and
fetches the real-data sources not yet in the store (`vera_env.tasks.real.fetch`), then
prints the doctor's table. ``scripts/install.sh`` runs it after its pip install, so a clone and a
wheel are set up by the same code.

Idempotent: what is present is skipped, so a second run runs no command. ``--dry-run``
prints the commands instead. Exit 1 when a command failed or something it installs is
still missing afterwards; bubblewrap that is installed but refused a user namespace is
reported with its fix, not installed (no package fixes a kernel setting), and does not
fail the run: until the fix is applied the environment refuses ``--sandbox auto`` and
runs only with ``--sandbox local`` named (no isolation, warns).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence

from vera_env.cli.doctor import format_checks
from vera_env.cli.machine import (
    SOURCES_FIX,
    Check,
    apt_commands,
    missing_packages,
    missing_requirements,
    run_checks,
)

__all__ = ["add_parser", "cmd_setup", "plan_setup", "run_setup"]

Runner = Callable[[list[str]], int]


def _no_probe() -> str:
    # Planning needs only whether bwrap is installed; the real probe runs in the final table.
    return ""


def plan_setup(checks: Sequence[Check], *, chromium: bool = False) -> list[list[str]]:
    """The commands that fix ``checks``: apt-get, pip for this interpreter, the data fetch.

    Args:
        checks: The machine's checks (`run_checks`).
        chromium: Also install Chromium when no ``chromium`` is on PATH (``vera-env
            report --png`` renders with it; ``make test`` needs it).

    Returns:
        The commands in order; empty when nothing is missing.
    """
    packages = missing_packages(checks)
    if chromium and shutil.which("chromium") is None:
        packages.append("chromium")
    commands = apt_commands(packages)
    requirements = missing_requirements(checks)
    if requirements:
        commands.append([sys.executable, "-m", "pip", "install", "--quiet",
                         "--disable-pip-version-check", *requirements])
    if any(c.fix == SOURCES_FIX and not c.ok for c in checks):
        commands.append([sys.executable, "-m", "vera_env.tasks.real.fetch"])
    return commands


def _run(command: list[str]) -> int:
    try:
        return subprocess.run(command, check=False).returncode
    except FileNotFoundError:
        return 127


def run_setup(commands: Sequence[list[str]], run: Runner | None = None) -> list[str]:
    """Run ``commands`` in order; an apt-get failure stops the apt steps, not the fetch.

    Returns:
        One line per command that failed (empty on success).
    """
    run = run or _run
    failed: list[str] = []
    apt_broken = False
    for command in commands:
        is_apt = "apt-get" in command
        if is_apt and apt_broken:
            continue
        code = run(command)
        if code != 0:
            failed.append(f"{shlex.join(command)}: exit {code}")
            apt_broken = apt_broken or is_apt
    return failed


def cmd_setup(args: argparse.Namespace) -> int:
    """Plan, then print (``--dry-run``) or run the commands and print the doctor's table."""
    if shutil.which("apt-get") is None:
        print("apt-get not found (not Debian): install bubblewrap, gawk, samtools, python3-numpy "
              "and python3-h5py with this system's package manager", file=sys.stderr)
    commands = plan_setup(run_checks(probe=_no_probe), chromium=args.chromium)
    if args.dry_run:
        print("\n".join(shlex.join(c) for c in commands) if commands
              else "# nothing to install: every package and source is present")
        return 0
    for command in commands:
        print(f"$ {shlex.join(command)}", flush=True)
    failed = run_setup(commands)
    checks = run_checks()
    print(format_checks(checks))
    fixable = [c for c in checks
               if not c.ok and (c.apt_package or c.pip_requirement or c.fix == SOURCES_FIX)]
    for line in failed:
        print(f"failed: {line}", file=sys.stderr)
    if any(c.name == "bwrap" and not c.ok and not c.apt_package for c in checks):
        print("bwrap is installed but cannot start a sandbox: until the fix above is applied, "
              "the environment refuses --sandbox auto; --sandbox local runs without "
              "isolation", file=sys.stderr)
    return 1 if failed or fixable else 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``setup`` on the ``vera-env`` parser."""
    setup = sub.add_parser("setup", help="install what doctor finds missing: Debian packages, h5py, data",
                           description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    setup.add_argument("--dry-run", action="store_true",
                       help="print the commands, run none (default: run them)")
    setup.add_argument("--chromium", action="store_true",
                       help="also install Chromium, which `vera-env report --png` renders with "
                            "(default: not installed)")
    setup.set_defaults(func=cmd_setup)
