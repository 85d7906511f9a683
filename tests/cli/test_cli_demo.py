"""``vera-env demo`` plays real-data tasks beside the builtin ones, or says why not."""

from __future__ import annotations

import pytest

from vera_env.cli import demo, main
from vera_env.cli.demo import demo_tasks
from vera_env.tasks.builtin import TASK_TYPES
from vera_env.tasks.cache import CACHE_ENV_VAR
from vera_env.tasks.real import REAL_TYPES
from vera_env.tasks.real.sources import SOURCES_ENV_VAR, clear_cache


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory,
                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV_VAR, str(tmp_path_factory.getbasetemp() / "demo-cache"))


def test_demo_plays_every_builtin_and_every_real_type() -> None:
    ids = demo_tasks().ids()
    assert len(ids) == len(TASK_TYPES) + len(REAL_TYPES)
    assert {i for i in ids if i.startswith("real.")} == {f"real.{t}.s0" for t in REAL_TYPES}


def test_demo_without_fetched_sources_says_so_and_plays_builtin(
        tmp_path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(SOURCES_ENV_VAR, str(tmp_path / "empty"))
    from vera_env.tasks.real import real_instance

    clear_cache()
    real_instance.cache_clear()
    try:
        ids = demo_tasks().ids()
    finally:
        clear_cache()
        real_instance.cache_clear()
    assert len(ids) == len(TASK_TYPES)
    assert "real-data tasks left out" in capsys.readouterr().err


def test_demo_task_ids_plays_only_those_with_the_legend_under_the_table(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--task-ids", "tab.sentinel_mean.easy.s0", "--concurrency", "1",
                 "--max-steps", "8"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [i for i, line in enumerate(lines)  # as tests/test_packaging.py reads the table
            if len(line.split()) == 10 and line.split()[0] in ("oracle", "careless")]
    assert [lines[i].split()[:2] for i in rows] == [["oracle", "tab.sentinel_mean.easy.s0"],
                                                    ["careless", "tab.sentinel_mean.easy.s0"]]
    legend = {line.split(":")[0]: line for line in lines[rows[-1] + 1:-1] if ":" in line}
    assert "printed True" in legend["passed"]
    assert "mutant" in legend["strong"] and "earn" in legend["strong"]
    assert "verification reward" in legend["verif"] and "0.5" in legend["verif"]
    assert lines[-1].startswith("oracle correct on every task: yes;")


def test_demo_task_ids_unknown_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--task-ids", "tab.sentinel_mean.easy.s9"]) == 2
    assert "tab.sentinel_mean.easy.s9 not among the demo's tasks" in capsys.readouterr().err


def test_demo_without_a_working_bwrap_refuses_in_one_line_before_playing(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import vera_env.sandbox as sandbox_pkg

    monkeypatch.setattr(sandbox_pkg, "probe_bwrap", lambda config=None: "bwrap: not found")
    monkeypatch.setattr(demo, "demo_tasks", lambda: pytest.fail("no task is built"))
    assert main(["demo"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("vera-env demo: sandbox 'auto' needs bubblewrap") and "--sandbox local" in err

