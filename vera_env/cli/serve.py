"""``vera-env serve``: the environment over OpenEnv or ORS, for trainers on any machine.

    vera-env serve --protocol openenv --tasks builtin --port 8000 --max-sessions 64
    vera-env serve --protocol ors --tasks suites/train --test-tasks suites/test
    vera-env serve --observation-variant compact   # for a policy trained on compact

Binds 127.0.0.1 unless ``--host`` says otherwise; set ``VERA_SERVE_TOKEN`` to require a
bearer token. Stops on SIGTERM or Ctrl-C, killing every sandbox.

A host beyond loopback needs the token, or ``--insecure`` to say the open port is
meant: ``--host 0.0.0.0`` with no token used to start without a word, open to anyone
who could reach the port.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys

from vera_env.observation.prompts import OBSERVATION_VARIANTS
from vera_env.spec import SANDBOX_NAMES
from vera_env.wrappers import DEFAULT_WRAPPERS, WRAPPERS_HELP

__all__ = ["TOKEN_ENV_VAR", "add_parser", "cmd_serve", "exposure_problem"]

TOKEN_ENV_VAR = "VERA_SERVE_TOKEN"


def exposure_problem(host: str, token: str | None, *, insecure: bool) -> str:
    """Why serving on ``host`` this way is refused, or "" when it is not.

    Loopback (``127.0.0.0/8``, ``::1``, ``localhost``) is reachable only from this
    machine and needs nothing; any other host (``0.0.0.0``, ``::``, "" and names
    included) needs a token, or ``insecure`` to accept an open port.
    """
    if token or insecure or _is_loopback(host):
        return ""
    return (f"--host {host or repr(host)} is reachable beyond this machine and no token is "
            f"set: set {TOKEN_ENV_VAR} to require one, or pass --insecure to serve it open")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name other than localhost may resolve anywhere
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve until stopped."""
    from vera_env.errors import TaskFileError  # noqa: PLC0415
    from vera_env.sandbox import SandboxLimits  # noqa: PLC0415
    from vera_env.serve import ServeConfig, serve  # noqa: PLC0415
    from vera_env.spec import EnvSpec  # noqa: PLC0415

    token = os.environ.get(TOKEN_ENV_VAR) or None
    problem = exposure_problem(args.host, token, insecure=args.insecure)
    if problem:
        print(f"vera-env serve: {problem}", file=sys.stderr)
        return 2
    try:
        limits = SandboxLimits(timeout_s=args.command_timeout_s,
                               check_timeout_s=args.check_timeout_s)
        spec = EnvSpec(tasks=str(args.tasks), max_steps=args.max_steps, wrappers=args.wrappers,
                       reserve=args.reserve, sandbox=args.sandbox, limits=limits,
                       observation_variant=args.observation_variant)
        config = ServeConfig(
            protocol=args.protocol, host=args.host, port=args.port,
            max_sessions=args.max_sessions, idle_timeout_s=args.idle_timeout_s,
            sandbox_rate_per_s=args.sandbox_rate, sandbox_burst=args.sandbox_burst,
            token=token,
            shutdown_grace_s=args.shutdown_grace_s, log_level=args.log_level)
        splits = {name: value for name, value in (("validation", args.validation_tasks),
                                                  ("test", args.test_tasks)) if value}
        serve(spec, config, splits=splits)
    except (TaskFileError, ValueError, OSError) as exc:  # pydantic's ValidationError too
        print(f"vera-env serve: {exc}", file=sys.stderr)
        return 2
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``serve`` on the ``vera-env`` parser."""
    from vera_env.cli.eval import parse_wrappers  # noqa: PLC0415

    p = sub.add_parser("serve", help="serve the environment over OpenEnv or ORS",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--protocol", choices=["openenv", "ors"], default="openenv")
    p.add_argument("--tasks", default="builtin",
                   help="the train split: builtin, a suite folder, a .jsonl or a "
                        "BioMysteryBench folder")
    p.add_argument("--validation-tasks", help="the validation split (a task source)")
    p.add_argument("--test-tasks", help="the test split (a task source)")
    p.add_argument("--host", default="127.0.0.1",
                   help=f"address to bind (default: loopback); any other needs "
                        f"{TOKEN_ENV_VAR} or --insecure")
    p.add_argument("--insecure", action="store_true",
                   help=f"serve a non-loopback --host without {TOKEN_ENV_VAR}: anyone who "
                        "reaches the port can run episodes")
    p.add_argument("--port", type=int, default=8000, help="0: any free port")
    p.add_argument("--max-sessions", type=int, default=64,
                   help="sessions alive at once; one more is answered 'busy'")
    p.add_argument("--idle-timeout-s", type=float, default=1800.0,
                   help="close sessions untouched this long (longer than any generation pause)")
    p.add_argument("--sandbox-rate", type=float, default=16.0,
                   help="workspaces staged per second at most (resets beyond it wait)")
    p.add_argument("--sandbox-burst", type=int, default=16)
    p.add_argument("--max-steps", type=int, default=30, help="step budget per episode")
    p.add_argument("--wrappers", type=parse_wrappers, default=DEFAULT_WRAPPERS,
                   help=WRAPPERS_HELP)
    p.add_argument("--reserve", type=int, default=3, help="forced-answer steps at the end")
    p.add_argument("--command-timeout-s", type=float, default=60.0)
    p.add_argument("--check-timeout-s", type=float, default=30.0)
    p.add_argument("--sandbox", choices=SANDBOX_NAMES, default="auto")
    p.add_argument("--observation-variant", choices=OBSERVATION_VARIANTS, default="full",
                   help="how observations tell the rules: full, or compact (the layout a "
                        "policy trained or evaluated with --observation-variant compact "
                        "expects)")
    p.add_argument("--shutdown-grace-s", type=float, default=10.0,
                   help="on SIGTERM, how long running steps may finish before sandboxes "
                        "are killed")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"],
                   default="info")
    p.set_defaults(func=cmd_serve)
