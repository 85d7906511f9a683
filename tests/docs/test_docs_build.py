"""The documentation site builds with warnings as errors, and no page is left out of the nav.

``mkdocs build --strict`` fails on a broken link, a page missing from the nav, or a
docstring mkdocstrings cannot render, so an API change that breaks the reference or
a moved page that orphans a link fails CI rather than the reader.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mkdocs", reason="the docs extra (mkdocs, mkdocstrings-python)")
yaml = pytest.importorskip("yaml")  # PyYAML comes with mkdocs

ROOT = Path(__file__).resolve().parents[2]


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in _nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in _nav_pages(value)]
    return []


def test_docs_build_strict_succeeds(tmp_path: Path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(tmp_path / "site")], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "api" / "spec" / "index.html").read_text().count("EnvSpec") > 3


def test_docs_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = set(_nav_pages(config["nav"]))
    docs = ROOT / "docs"
    pages = {p.relative_to(docs).as_posix() for p in docs.rglob("*.md") if "hooks" not in p.parts}
    assert sorted(pages - nav) == []
    assert sorted(p for p in nav - pages if not p.startswith("external/")) == []
