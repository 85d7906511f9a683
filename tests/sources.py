"""The package's Python files as the wheel ships them.

``vera_env/policies`` and ``vera_env/training`` are symbolic links to the repository's
top-level ``policies/`` and ``training/`` folders (one import name, the layout kept), and
``Path.rglob`` does not follow links: a scan of ``vera_env`` by it would silently leave
both out. Tests that read every module (comments, doctests, private imports) use this.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "vera_env"


def python_files() -> list[Path]:
    """Every ``.py`` file of ``vera_env``, through its links, sorted (paths under vera_env/)."""
    found = [Path(folder) / name
             for folder, dirs, files in os.walk(PACKAGE, followlinks=True)
             if "__pycache__" not in Path(folder).parts
             for name in files if name.endswith(".py")]
    return sorted(found)


def module_name(path: Path) -> str:
    """``vera_env/training/scripts/grpo.py`` -> ``vera_env.training.scripts.grpo`` (``__init__`` is its package)."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
