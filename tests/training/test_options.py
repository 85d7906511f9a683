"""Typed training options: ``Literal`` flags reject typos, and ``Args`` build the spec."""

from __future__ import annotations

import dataclasses
import typing

import pytest

from vera_env.spec import EnvSpec
from vera_env.training.arguments import parse_args
from vera_env.training.envs import EnvOptions
from vera_env.training.scripts import collect, grpo, sft


def test_parse_args_bad_wrapper_in_a_tuple_exits_naming_the_choices(capsys):
    with pytest.raises(SystemExit):
        parse_args(grpo.Args, ["--wrappers", "forced", "gaet"])
    assert "invalid choice: 'gaet'" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value"), [("--sandbox", "docker"),
                                             ("--observation-variant", "short"),
                                             ("--difficulties", "trivial"),
                                             ("--vllm-mode", "remote"),
                                             ("--report-to", "mlflow")])
def test_parse_args_bad_literal_value_exits_listing_valid_values(flag, value, capsys):
    with pytest.raises(SystemExit):
        parse_args(grpo.Args, [flag, value])
    err = capsys.readouterr().err
    assert f"invalid choice: '{value}'" in err and "choose from" in err


def test_parse_args_literal_values_reach_the_env_spec():
    args = parse_args(grpo.Args, ["--sandbox", "local", "--wrappers", "gate", "forced",
                                  "--observation-variant", "compact", "--env-max-steps", "2",
                                  "--state-budget", "900"])
    spec = args.env_spec()
    assert spec.sandbox == "local" and spec.wrappers == ("gate", "forced")
    assert spec.observation_variant == "compact" and spec.state_budget == 900
    assert spec.max_steps == 2 and spec.reserve == 2  # the default reserve 3 is clipped


def test_collect_and_grpo_args_with_the_same_flags_build_the_same_spec():
    flags = ["--env-max-steps", "7", "--wrappers", "forced", "--reserve", "2",
             "--sandbox", "local", "--observation-variant", "compact"]
    assert parse_args(collect.Args, flags).env_spec() == parse_args(grpo.Args, flags).env_spec()


def test_args_env_spec_equals_the_options_alone():
    args = grpo.Args(env_max_steps=5, wrappers=(), reserve=1, sandbox="local")
    assert args.env_spec() == EnvOptions(env_max_steps=5, wrappers=(), reserve=1,
                                         sandbox="local").env_spec()


@pytest.mark.parametrize("cls", [grpo.Args, collect.Args])
def test_env_options_default_to_the_package_spec(cls):
    assert cls().env_spec() == EnvSpec()
    assert parse_args(cls, []).env_spec() == EnvSpec()


@pytest.mark.parametrize("cls", [grpo.Args, collect.Args])
def test_env_options_are_declared_once_not_per_script(cls):
    own = cls.__dict__.get("__annotations__", {})
    assert not {f.name for f in dataclasses.fields(EnvOptions)} & own.keys()


CHOICE_FIELDS = {"sandbox", "wrappers", "observation_variant", "layout", "advantage",
                 "vllm_mode", "report_to", "difficulties", "policy", "select"}


@pytest.mark.parametrize("cls", [grpo.Args, collect.Args, sft.Args])
def test_args_fields_that_name_a_choice_are_literals(cls):
    hints = typing.get_type_hints(cls)
    present = CHOICE_FIELDS & hints.keys()
    elements = {name: typing.get_args(hints[name])[0]
                if typing.get_origin(hints[name]) is tuple else hints[name] for name in present}
    assert present and all(typing.get_origin(kind) is typing.Literal
                           for kind in elements.values()), elements
