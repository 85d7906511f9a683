"""Virtual environments that adapter tests build: once per requirement set, cached, by uv.

Some adapters cannot share the suite's interpreter (NeMo Gym needs Python 3.12;
verifiers pins clash with the serve extra), so their tests build a venv of their own.
With pip that was the largest single cost of the suite on CI's fresh machine: 94 to
387 s for the NeMo Gym venv, 53 s for verifiers. uv builds the same venv from a cold
cache in seconds (the NeMo Gym one in 6.6 s, 2026-12-06, 2 shared cores), so it is in
the dev extra and used first; pip stays the fallback where uv is missing or fails.

The venv is cached under ``$VERA_ENV_CACHE`` (default ``~/.cache/vera-env``), named by a
hash of what it installs, and published by a rename, so concurrent builders never see a
half-built one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path

__all__ = ["cached_venv"]


def cached_venv(name: str, python: Path | str, requirements: Sequence[str], *,
                timeout_s: float = 1500) -> Path:
    """The cached venv ``name`` with ``requirements`` installed by ``python``, built now if
    missing (older venvs of that name are removed). Returns the venv folder."""
    version = subprocess.run([str(python), "--version"], capture_output=True, text=True,
                             check=True).stdout.strip()
    key = hashlib.sha256(json.dumps([version, list(requirements)]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("VERA_ENV_CACHE", Path.home() / ".cache" / "vera-env"))
    venv = cache / f"{name}-{key}"
    if (venv / "ok").exists():
        return venv
    for stale in cache.glob(f"{name}-*"):  # built for other requirements
        shutil.rmtree(stale, ignore_errors=True)
    building = cache / f".building-{uuid.uuid4().hex[:8]}"
    try:
        _build(str(python), list(requirements), building, timeout_s)
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise
    (building / "ok").write_text("\n".join(requirements) + "\n")
    try:
        building.rename(venv)
    except OSError:  # another builder finished first: use its venv
        shutil.rmtree(building, ignore_errors=True)
    return venv


def _uv() -> str | None:
    beside = Path(sys.executable).with_name("uv")  # the dev extra's, in this venv
    return str(beside) if beside.exists() else shutil.which("uv")


def _build(python: str, requirements: list[str], where: Path, timeout_s: float) -> None:
    uv = _uv()
    if uv is not None:
        made = subprocess.run([uv, "venv", "-q", "--seed", "--python", python, str(where)],
                              capture_output=True, text=True, timeout=timeout_s)
        if made.returncode == 0:
            done = subprocess.run([uv, "pip", "install", "-q", "--python",
                                   str(where / "bin" / "python"), *requirements],
                                  capture_output=True, text=True, timeout=timeout_s)
            if done.returncode == 0:
                return
            print(f"uv could not install {requirements}: {done.stderr[-2000:]}; using pip")
        shutil.rmtree(where, ignore_errors=True)
    subprocess.run([python, "-m", "venv", str(where)], check=True, timeout=timeout_s)
    subprocess.run([str(where / "bin" / "python"), "-m", "pip", "install", "-q",
                    "--disable-pip-version-check", *requirements], check=True, timeout=timeout_s)
