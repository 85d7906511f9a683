"""Fixtures for the sandbox tests: a real bwrap sandbox and root-owned task data.

The boundary is tested for real, with bubblewrap; where this machine cannot run it
the bwrap tests skip with the probe's reason instead of passing vacuously.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import BWRAP_REASON, FAST

from vera_env.sandbox import BwrapSandbox


@pytest.fixture(scope="module")
def sandbox() -> Iterator[BwrapSandbox]:
    """One bwrap sandbox per test module, with short limits."""
    if BWRAP_REASON:
        pytest.skip(f"bwrap unusable: {BWRAP_REASON}")
    box = BwrapSandbox(FAST)
    yield box
    box.close()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    """Task data as the task cache holds it: owned by the harness, mode 0444."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "table.tsv").write_text("gene\tcount\nA\t3\nB\t5\n")
    (data / "notes.txt").write_text("alpha\nbeta\n")
    (data / "counts.txt.gz").write_bytes(gzip.compress(b"1\n2\n3\n"))
    for path in data.iterdir():
        path.chmod(0o444)
    return data
