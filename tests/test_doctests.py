"""Every ``>>>`` example in the package's docstrings runs and shows what it claims.

STYLE.md asks each wrapper for a runnable example; an example nobody runs drifts from
the code it documents. So every module with an example is a case here, every example
runs (the ones that need the sandbox get it: CI installs bubblewrap, which
``make_sandbox("auto")`` needs), and none may opt out with ``# doctest: +SKIP``: an example
that cannot run belongs in a plain code block.
"""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest
from sources import module_name, python_files

ROOT = Path(__file__).resolve().parent.parent
FLAGS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


def _modules_with_examples() -> list[str]:
    names = []
    for path in python_files():
        if ">>>" in path.read_text() and path.name != "__main__.py":
            names.append(module_name(path))
    return names


MODULES = _modules_with_examples()


def test_examples_found() -> None:
    assert "vera_env.wrappers.forced_answer" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # an example that writes files writes them here
    module = importlib.import_module(name)
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    skipped = [f"{t.name} line {t.lineno + e.lineno + 1}" for t in tests for e in t.examples
               if e.options.get(doctest.SKIP)]
    assert skipped == [], "examples marked +SKIP never run; make them runnable or plain text"
    report: list[str] = []
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    for test in tests:
        runner.run(test, out=report.append)
    result = runner.summarize(verbose=False)
    assert result.attempted > 0
    assert result.failed == 0, "".join(report)
