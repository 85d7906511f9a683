"""Keep generated task data out of the user's cache: one throwaway cache per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from vera_env.tasks.cache import CACHE_ENV_VAR


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("vera-cache")


@pytest.fixture(autouse=True)
def _isolated_cache(session_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV_VAR, str(session_cache))


_MADE: dict[str, object] = {}


@pytest.fixture
def built():
    """``built(tid)``: the builtin task, generated once per session (data in the session cache)."""
    from vera_env.tasks.builtin import make_task

    def get(tid: str):
        if tid not in _MADE:
            _MADE[tid] = make_task(tid)
        return _MADE[tid]

    return get
