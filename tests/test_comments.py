"""Docstrings and comments say why, in words a reader can check: no issue numbers.

A number such as "issue 11" points into a tracker the reader of a wheel does not have;
the incident behind a rule is stated where it explains the rule, and the history goes
to CHANGELOG.md.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest
from sources import python_files

ROOT = Path(__file__).resolve().parents[1]
# An owner/repo#N or a URL names its tracker and stays; a bare #N or "issue N" does not.
ISSUE = re.compile(r"\b[Ii]ssues? ?#?\d+|(?<![\w/&#\"'])#\d{2,}\b")


def _texts(source: str) -> list[tuple[int, str]]:
    """(line, text) of every comment and every string statement (docstrings)."""
    found = [(tok.start[0], tok.string)
             for tok in tokenize.generate_tokens(io.StringIO(source).readline)
             if tok.type == tokenize.COMMENT]
    found += [(node.lineno, node.value.value) for node in ast.walk(ast.parse(source))
              if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
              and isinstance(node.value.value, str)]
    return found


def _files() -> list[Path]:
    return python_files()


@pytest.mark.parametrize("text", ["as issue 11 showed", "(Issue 19)", "see #42",
                                  "until issues 14"])
def test_issue_pattern_matches_issue_references(text: str):
    assert ISSUE.search(text)


@pytest.mark.parametrize("text", ["https://github.com/huggingface/trl/issues/4543",
                                  "huggingface/trl#6427", 'fill="#555"', "the issue is a race",
                                  "&#39;"])
def test_issue_pattern_ignores_links_and_other_numbers(text: str):
    assert not ISSUE.search(text)


def test_no_docstring_or_comment_names_an_issue_number():
    files = _files()
    found = [f"{path.relative_to(ROOT)}:{line}: {match.group(0)}"
             for path in files
             for line, text in _texts(path.read_text(encoding="utf-8"))
             for match in ISSUE.finditer(text)]
    assert len(files) > 150  # the walk found the packages
    assert found == []


def test_no_page_of_the_readme_or_the_docs_names_an_issue_number():
    """The README, the docs site and the benchmarks' record (which the site publishes)
    are read without the tracker too."""
    pages = [ROOT / "README.md", ROOT / "benchmarks" / "README.md",
             *sorted((ROOT / "docs").rglob("*.md"))]
    found = [f"{page.relative_to(ROOT)}:{line}: {match.group(0)}"
             for page in pages
             for line, text in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
             for match in ISSUE.finditer(text)]
    assert len(pages) > 10
    assert found == []
