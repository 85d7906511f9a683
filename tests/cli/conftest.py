"""Shared fixtures of the CLI tests: a finished oracle eval run to report on and re-score."""

from __future__ import annotations

from pathlib import Path

import pytest

from vera_env.cli import main


@pytest.fixture(scope="session")
def oracle_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An eval run of the oracle on the first 2 builtin tasks, 2 attempts each."""
    out = tmp_path_factory.mktemp("oracle") / "run"
    assert main(["eval", "--policy", "oracle", "--limit", "2", "--attempts", "2",
                 "--max-steps", "10", "--out", str(out)]) == 0
    return out
