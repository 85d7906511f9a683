"""``vera-env eval`` options: presets, defaults in ``--help``, ``--task-ids``, the preflight."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from vera_env.cli import build_parser, main
from vera_env.cli.eval import parse_task_ids
from vera_env.cli.presets import BASE_DEFAULTS, PRESETS, DefaultsHelpFormatter, resolve_preset
from vera_env.evaluation.preflight import FETCH_COMMAND, missing_sources
from vera_env.evaluation.rundir import RunDir
from vera_env.tasks import load_tasks
from vera_env.tasks.named import SOURCE_NAMES
from vera_env.tasks.real import real_id
from vera_env.tasks.real.sources import SOURCES_ENV_VAR, source_available

BUILTIN_IDS = load_tasks("builtin").ids()
PRESET_KEYS = ("max_steps", "max_tokens", "observation_variant", "concurrency")


def _parsed(*argv: str) -> argparse.Namespace:
    return resolve_preset(build_parser().parse_args(["eval", "--out", "x", *argv]))


def _eval_parser() -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["eval"]


def test_preset_cpu_small_sets_short_compact_sequential_runs() -> None:
    args = _parsed("--preset", "cpu-small")
    assert tuple(getattr(args, k) for k in PRESET_KEYS) == (12, 512, "compact", 1)


def test_preset_explicit_flag_wins_over_the_preset() -> None:
    args = _parsed("--preset", "cpu-small", "--max-steps", "20", "--observation-variant", "full")
    assert tuple(getattr(args, k) for k in PRESET_KEYS) == (20, 512, "full", 1)


def test_preset_absent_gives_the_base_defaults() -> None:
    args = _parsed()
    assert tuple(getattr(args, k) for k in PRESET_KEYS) == (30, 2048, "full", 4)
    assert args.preset is None


def test_preset_unknown_name_raises_with_the_known_ones() -> None:
    with pytest.raises(ValueError, match="cpu-small"):
        resolve_preset(argparse.Namespace(preset="gpu-huge"))


def test_eval_help_every_option_with_a_value_shows_its_default(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "500")  # one line per option: no wrap inside "cpu-small"
    parser = _eval_parser()
    formatter = DefaultsHelpFormatter("vera-env eval")
    silent = [a.dest for a in parser._actions if a.option_strings and a.nargs != 0
              and (a.default is not None or a.dest in BASE_DEFAULTS.values())
              and "default" not in (formatter._get_help_string(a) or "")]
    assert silent == []
    text = " ".join(parser.format_help().split())
    assert "step budget per episode (default: 30; --preset cpu-small: 12)" in text
    assert "(default: gate,forced)" in text  # a tuple default, written as it is typed
    for key, value in PRESETS["cpu-small"].values().items():
        assert f"--{key.replace('_', '-')} {value}" in text  # --preset says what it sets


def test_eval_help_tasks_lists_every_named_source_and_file_kind() -> None:
    tasks = next(a for a in _eval_parser()._actions if a.dest == "tasks")
    for word in (*SOURCE_NAMES, "suite folder", ".jsonl", "BioMysteryBench"):
        assert word in (tasks.help or "")


@pytest.mark.parametrize("text, message", [(" , ", "at least one"), ("a,b,a", "repeats")])
def test_parse_task_ids_bad_list_rejected(text: str, message: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=message):
        parse_task_ids(text)


def test_eval_task_ids_and_preset_run_only_those_tasks_with_the_preset(tmp_path: Path) -> None:
    out = tmp_path / "run"
    chosen = [BUILTIN_IDS[2], BUILTIN_IDS[0]]
    assert main(["eval", "--policy", "oracle", "--preset", "cpu-small", "--max-steps", "14",
                 "--task-ids", ",".join(chosen), "--out", str(out)]) == 0
    settings = json.loads((out / "run.json").read_text())
    assert settings["task_ids"] == chosen
    assert (settings["env"]["max_steps"], settings["max_tokens"], settings["concurrency"],
            settings["env"]["observation_variant"]) == (14, 512, 1, "compact")
    attempts = RunDir(out).attempts()
    assert sorted(a.task_id for a in attempts) == sorted(chosen)
    assert all(a.correct for a in attempts)


def test_eval_task_ids_unknown_exits_2_naming_them(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    code = main(["eval", "--policy", "oracle", "--task-ids", f"{BUILTIN_IDS[0]},nope.s0",
                 "--out", str(out)])
    assert code == 2
    err = capsys.readouterr().err
    assert "nope.s0" in err and BUILTIN_IDS[0] + "," not in err.split("e.g.")[0]
    assert not out.exists()


def test_eval_task_ids_takes_an_unlisted_builtin_id_the_source_can_make(
        tmp_path: Path) -> None:
    """``--tasks builtin`` lists seed 0 of each type; a held-out seed is made with its
    family's reference (an exported suite keeps it for four families only)."""
    held_out = "mtx.doublets.easy.s100000"
    assert held_out not in BUILTIN_IDS
    out = tmp_path / "run"
    assert main(["eval", "--policy", "oracle", "--tasks", "builtin", "--task-ids", held_out,
                 "--max-steps", "3", "--out", str(out)]) == 0
    assert [a.task_id for a in RunDir(out).attempts()] == [held_out]
    assert load_tasks("builtin").get(held_out).reference is not None


@pytest.mark.parametrize("tasks", ["real", "canary"])
def test_eval_preflight_missing_sources_refuses_before_any_episode(
        tasks: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SOURCES_ENV_VAR, str(tmp_path / "empty-store"))
    out = tmp_path / "run"
    assert main(["eval", "--policy", "oracle", "--tasks", tasks, "--limit", "2",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vera-env eval:") and FETCH_COMMAND in err
    assert not out.exists()  # no run folder, so no episode and nothing to --resume


def test_missing_sources_names_each_source_and_its_tasks(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SOURCES_ENV_VAR, str(tmp_path))
    lung, builtin = real_id("csv.lung_median"), BUILTIN_IDS[0]
    missing = missing_sources([lung, lung + "+absent", builtin])
    assert missing.tasks_by_source == {"lifelines": (lung, lung + "+absent")}
    assert f"{FETCH_COMMAND} lifelines" in missing.message()
    monkeypatch.delenv(SOURCES_ENV_VAR)
    if not source_available("lifelines"):
        pytest.skip("lifelines not fetched here (`python -m vera_env.tasks.real.fetch`)")
    assert not missing_sources([lung, builtin])  # the store the install step filled


def test_eval_without_a_working_bwrap_refuses_in_one_line_and_makes_no_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # It recorded every attempt as a sandbox exclusion instead, after playing none.
    import vera_env.sandbox as sandbox_pkg

    monkeypatch.setattr(sandbox_pkg, "probe_bwrap", lambda config=None: "bwrap: not found")
    out = tmp_path / "run"
    assert main(["eval", "--policy", "oracle", "--tasks", "builtin", "--task-ids",
                 "seq.motif_count.easy.s0", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("vera-env eval: sandbox 'auto' needs bubblewrap")
    assert not out.exists()
    assert main(["eval", "--policy", "oracle", "--tasks", "builtin", "--task-ids",
                 "seq.motif_count.easy.s0", "--out", str(out), "--sandbox", "local",
                 "--max-steps", "3"]) == 0  # named explicitly, the local backend runs
