"""``require``: a test folder's optional dependencies, imported in its conftest.

A conftest that calls ``pytest.importorskip`` at import time skips its whole folder
before any hook can turn the skip into a failure (``tests/conftest.py`` does that for
skips inside tests and collectors), so under CI a missing extra showed as one quiet
"SKIPPED tests/serve/conftest.py" and a green run. ``require`` fails there instead.
"""

from __future__ import annotations

import importlib
import os

import pytest

__all__ = ["require"]


def require(*modules: str, extra: str) -> None:
    """Import ``modules``; if one is missing, skip the folder, or fail under CI."""
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            why = f"the {extra!r} extra is not installed ({name}: {exc})"
            if os.environ.get("CI"):  # make test installs every extra: this is a broken install
                raise pytest.UsageError(f"under CI, {why}") from exc
            pytest.skip(why, allow_module_level=True)
