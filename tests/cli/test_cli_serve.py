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


def _serve_args(monkeypatch, *argv, token=None):
    """Run ``vera-env serve ARGV`` with ``serve`` replaced: returns (exit code, config)."""
    import vera_env.serve as serve_module
    from vera_env.cli.serve import TOKEN_ENV_VAR

    if token is None:
        monkeypatch.delenv(TOKEN_ENV_VAR, raising=False)
    else:
        monkeypatch.setenv(TOKEN_ENV_VAR, token)
    served = {}
    monkeypatch.setattr(serve_module, "serve",
                        lambda spec, config, splits: served.setdefault("config", config))
    args = build_parser().parse_args(["serve", *argv])
    return args.func(args), served.get("config")


def test_serve_non_loopback_host_without_token_refused_with_one_line(monkeypatch, capsys):
    code, config = _serve_args(monkeypatch, "--host", "0.0.0.0")
    err = capsys.readouterr().err
    assert (code, config) == (2, None)  # refused before anything is served
    assert err.startswith("vera-env serve:") and err.count("\n") == 1
    assert "VERA_SERVE_TOKEN" in err and "--insecure" in err and "0.0.0.0" in err


@pytest.mark.parametrize("argv, token", [
    (["--host", "0.0.0.0", "--insecure"], None),
    (["--host", "10.0.0.5"], "s3cret"),
])
def test_serve_non_loopback_host_with_token_or_insecure_serves(monkeypatch, argv, token):
    code, config = _serve_args(monkeypatch, *argv, token=token)
    assert code == 0 and config.host == argv[1]
    assert (config.token is None) is (token is None)


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "localhost"])
def test_serve_loopback_host_needs_no_token(monkeypatch, host):
    code, config = _serve_args(monkeypatch, "--host", host)
    assert code == 0 and config.host == host and config.token is None


@pytest.mark.parametrize("host, token, insecure, refused", [
    ("0.0.0.0", None, False, True), ("", None, False, True), ("::", None, False, True),
    ("example.org", None, False, True), ("0.0.0.0", "t", False, False),
    ("0.0.0.0", None, True, False), ("::1", None, False, False),
])
def test_exposure_problem_only_for_non_loopback_without_token_or_insecure(
        host, token, insecure, refused):
    from vera_env.cli.serve import exposure_problem

    assert bool(exposure_problem(host, token, insecure=insecure)) is refused
