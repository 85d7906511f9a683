"""``vera-env serve`` on a broken setup: exit code 2 and the reason, before binding."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vera_env.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def test_serve_parser_defaults_bind_loopback_with_a_cap():
    args = build_parser().parse_args(["serve"])
    assert (args.protocol, args.host, args.port, args.max_sessions) == \
        ("openenv", "127.0.0.1", 8000, 64)
    assert args.idle_timeout_s == 1800.0 and args.wrappers == ("gate", "forced")


@pytest.mark.parametrize("args,message", [
    (["--tasks", "/nonexistent/suite"], "does not exist"),
    (["--max-sessions", "0"], "max_sessions"),
    (["--protocol", "ors", "--test-tasks", "/nonexistent/test"], "/nonexistent/test"),
])
def test_serve_cli_bad_setup_exits_2_with_the_reason(args, message):
    done = subprocess.run([sys.executable, "-m", "vera_env.cli", "serve", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("vera-env serve:") and message in done.stderr


@pytest.mark.parametrize("variant", ["full", "compact"])
def test_serve_observation_variant_reaches_the_served_env(variant, monkeypatch):
    import vera_env.serve as serve_module

    served = {}
    monkeypatch.setattr(serve_module, "serve",
                        lambda spec, config, splits: served.setdefault("spec", spec))
    args = build_parser().parse_args(["serve", "--observation-variant", variant,
                                      "--wrappers", "none"])
    assert args.func(args) == 0
    env = served["spec"].build()
    try:
        obs, _ = env.reset(seed=0)
    finally:
        env.close()
    # The compact rules are the short layout without placeholders (NODE kind=<kind> ...).
    assert env.unwrapped.observation_variant == variant
    assert ("<kind>" in obs) is (variant == "full")


def test_serve_observation_variant_default_is_full():
    assert build_parser().parse_args(["serve"]).observation_variant == "full"
