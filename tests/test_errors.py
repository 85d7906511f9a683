"""The error tree: one root, every public exception defined in vera_env.errors, drawn
in its docstring, carrying its context as fields."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pickle
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import vera_env
from vera_env import errors
from vera_env.errors import (
    ErrorFrame,
    FaultError,
    PolicyError,
    RemoteEnvError,
    ResetNeeded,
    TaskFileError,
    UnknownTaskError,
    UsageError,
    VeraError,
)

PACKAGE = Path(vera_env.__file__).parent

# Where each error was defined before the tree: those imports must keep working.
REEXPORTED = {
    "vera_env.tasks": ["UnknownTaskError"],
    "vera_env.tasks.source": ["UnknownTaskError"],
    "vera_env.tasks.cache": ["UnsafeArchiveError"],
    "vera_env.tasks.real.sources": ["MissingSourceError"],
    "vera_env.evaluation.golden": ["GoldenError"],
    "vera_env.evaluation.rundir": ["RunSettingsMismatch"],
    "vera_env.serve.client": ["RemoteEnvError"],
    "vera_env.serve.registry": ["ServerBusy"],
    "vera_env.serve.openenv_socket": ["ErrorFrame"],
    "vera_env.serve.session": ["SessionClosed"],
    "vera_env.verification.strength.outcome": ["StrengthDeadline"],
    "vera_env.verification.strength.shadows": ["ShadowBudgetSpent"],
}


def _modules() -> tuple[list[ModuleType], list[Path]]:
    """Every importable module of vera_env, and the files of those that need an
    optional third-party package this interpreter lacks (checked by their source)."""
    loaded, unloadable = [], []
    for info in pkgutil.walk_packages(vera_env.__path__, "vera_env."):
        if info.name.endswith("__main__"):
            continue  # importing it runs the command line
        try:
            loaded.append(importlib.import_module(info.name))
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] == "vera_env":
                raise
            spec = importlib.util.find_spec(info.name)
            assert spec is not None and spec.origin is not None
            unloadable.append(Path(spec.origin))
    return loaded, unloadable


def _is_error_base(node: ast.expr) -> bool:
    name = node.attr if isinstance(node, ast.Attribute) else getattr(node, "id", "")
    known = isinstance(getattr(builtins, name, None), type) and issubclass(
        getattr(builtins, name), BaseException)
    return known or name.endswith(("Error", "Exception")) or name in errors.__all__


def test_every_public_exception_in_the_package_is_defined_in_errors_under_vera_error():
    loaded, unloadable = _modules()
    strays = []
    for module in loaded:
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (issubclass(cls, BaseException) and cls.__module__.startswith("vera_env")
                    and not cls.__name__.startswith("_")):
                if cls.__module__ != "vera_env.errors" or not issubclass(cls, VeraError):
                    strays.append(f"{cls.__module__}.{cls.__qualname__}")
    for path in unloadable:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.ClassDef) and not node.name.startswith("_")
                    and any(_is_error_base(base) for base in node.bases)):
                strays.append(f"{path.name}: {node.name}")
    assert len(loaded) > 100  # the walk saw the package, not an empty path
    assert strays == []


def test_errors_module_imports_nothing_from_vera_env():
    tree = ast.parse(Path(errors.__file__).read_text(encoding="utf-8"))
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                for alias in node.names]
    imported += [node.module or "" for node in ast.walk(tree)
                 if isinstance(node, ast.ImportFrom)]
    assert not [name for name in imported if name.startswith("vera_env")]


def _drawn_tree() -> dict[str, tuple[str | None, str | None]]:
    """name -> (parent, extra builtin base) as the module docstring draws them."""
    doc = errors.__doc__ or ""
    block = doc.split("Hierarchy::", 1)[1].strip("\n").split("\n\n", 1)[0]
    drawn: dict[str, tuple[str | None, str | None]] = {}
    parents: list[str] = []
    for line in block.splitlines():
        found = re.match(r"^([\s│├└─]*)(\w+)\s*(?:\((\w+)\))?", line)
        assert found, line
        depth = len(found.group(1)) // 4 - 1  # four columns per level; the root has none
        parents = parents[:max(depth, 0)]
        drawn[found.group(2)] = (parents[-1] if parents else None, found.group(3))
        parents.append(found.group(2))
    return drawn


def test_errors_tree_drawn_in_the_docstring_is_the_class_tree():
    drawn = _drawn_tree()
    assert set(drawn) == set(errors.__all__)
    for name, (parent, builtin) in drawn.items():
        cls = getattr(errors, name)
        expected = (getattr(errors, parent),) if parent else (Exception,)
        if builtin:
            expected += (getattr(builtins, builtin),)
        assert cls.__bases__ == expected, name


def test_errors_usage_and_faults_are_disjoint_and_cover_the_tree():
    leaves = [getattr(errors, n) for n in errors.__all__
              if getattr(errors, n) not in (VeraError, UsageError, FaultError)]
    for cls in leaves:
        assert issubclass(cls, UsageError) != issubclass(cls, FaultError), cls.__name__
    assert issubclass(ResetNeeded, UsageError) and issubclass(ResetNeeded, RuntimeError)


@pytest.mark.parametrize(("module", "name"), [(m, n) for m, names in REEXPORTED.items()
                                              for n in names])
def test_errors_old_import_paths_give_the_same_class(module: str, name: str):
    loaded = importlib.import_module(module)
    assert getattr(loaded, name) is getattr(errors, name)
    assert name in loaded.__all__


def test_unknown_task_error_still_caught_as_key_error_and_prints_plainly():
    with pytest.raises(KeyError) as info:
        raise UnknownTaskError("no task 'x' in tasks")
    assert str(info.value) == "no task 'x' in tasks"


@pytest.mark.parametrize(("error", "fields"), [
    (TaskFileError("t.json", "answer", "missing"),
     {"file": "t.json", "field": "answer", "message": "missing"}),
    (PolicyError("POST u: HTTP 502", status=502, endpoint="http://h/v1/chat/completions"),
     {"status": 502, "endpoint": "http://h/v1/chat/completions", "message": "POST u: HTTP 502"}),
    (PolicyError("the player quit"), {"status": None, "endpoint": None}),
    (RemoteEnvError("server full", code="CAPACITY_REACHED"), {"code": "CAPACITY_REACHED"}),
    (ErrorFrame("boom", "EXECUTION_ERROR"), {"message": "boom", "code": "EXECUTION_ERROR"}),
])
def test_errors_carry_their_context_as_fields_through_pickling(error: VeraError,
                                                              fields: dict[str, object]):
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is type(error) and str(copy) == str(error)
    for name, value in fields.items():
        assert getattr(error, name) == value
        assert getattr(copy, name) == value


def test_errors_tree_on_the_protocol_page_is_the_docstring_tree():
    page = (PACKAGE.parent / "docs" / "concepts" / "protocol.md").read_text(encoding="utf-8")
    drawn = page.split("## Errors", 1)[1].split("```text\n", 1)[1].split("```", 1)[0]
    doc = (errors.__doc__ or "").split("Hierarchy::", 1)[1].strip("\n").split("\n\n", 1)[0]
    assert [line.strip() for line in drawn.strip().splitlines()] == \
        [line.strip() for line in doc.splitlines()]
