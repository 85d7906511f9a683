"""The package's shape where import-linter cannot see it (its contracts: pyproject.toml).

- No private name crosses a module boundary. ``vector.py`` once imported rollout's
  private ``_conclude``/``_record`` and so grew a second copy of the episode summary;
  a name with an underscore is one its module may change without telling anyone.
- Importing ``vera_env`` leaves Gymnasium as it found it. ``vera_env.env`` once
  replaced ``VectorEnv._add_info`` for the whole process, other projects' envs included,
  so that ``info["node"]`` could batch.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

from sources import module_name, python_files

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("vera_env",)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _dotted(node: ast.expr, bound: dict[str, str]) -> str | None:
    """``bw.sub`` -> ``vera_env.sandbox.bwrap.sub`` when ``bw`` is bound to a project name."""
    if isinstance(node, ast.Name):
        return bound.get(node.id)
    if isinstance(node, ast.Attribute):
        owner = _dotted(node.value, bound)
        return None if owner is None else f"{owner}.{node.attr}"
    return None


def private_imports(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """Private names that ``module`` takes from other modules of ``PACKAGES``.

    Both ``from m import _name`` and ``m._name`` on a name bound to a project module
    count. A module may use its own private names, through any path.
    """
    package = module if is_package else module.rpartition(".")[0]
    found: list[str] = []
    bound: dict[str, str] = {}
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source_module = ".".join(base + ([node.module] if node.module else []))
            else:
                source_module = node.module or ""
            if source_module.split(".")[0] not in PACKAGES:
                continue
            for alias in node.names:
                if _is_private(alias.name) and source_module != module:
                    found.append(f"line {node.lineno}: from {source_module} import {alias.name}")
                bound[alias.asname or alias.name] = f"{source_module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in PACKAGES:
                    root = alias.name.split(".")[0]
                    bound[alias.asname or root] = alias.name if alias.asname else root
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            owner = _dotted(node.value, bound)
            if owner is not None and owner != module:
                found.append(f"line {node.lineno}: {ast.unparse(node)} ({owner})")
    return found


def test_private_imports_detects_from_import_and_attribute_access() -> None:
    source = ("from vera_env.rollout.attempt import _conclude\n"
              "from . import _near\n"
              "import vera_env.sandbox.bwrap as bw\n"
              "x = bw._SECCOMP\n"
              "from vera_env.rollout.attempt import Attempt, _own\n"
              "import json\n"
              "y = json._default_decoder\n"
              "import vera_env.verification.strength\n"
              "z = vera_env.verification.strength._CACHES\n")
    found = private_imports(source, "vera_env.rollout.vector")
    assert found == ["line 1: from vera_env.rollout.attempt import _conclude",
                     "line 2: from vera_env.rollout import _near",
                     "line 5: from vera_env.rollout.attempt import _own",
                     "line 4: bw._SECCOMP (vera_env.sandbox.bwrap)",
                     "line 9: vera_env.verification.strength._CACHES (vera_env.verification.strength)"]


def test_private_imports_allows_own_names_and_dunders() -> None:
    source = ("from vera_env.rollout.vector import _boxed\n"
              "from vera_env import __version__\n"
              "from vera_env.rollout import vector\n"
              "z = vector._boxed\n")
    assert private_imports(source, "vera_env.rollout.vector") == []


def test_no_private_name_imported_across_modules() -> None:
    offences = {}
    for path in python_files():
        found = private_imports(path.read_text(), module_name(path), is_package=path.name == "__init__.py")
        if found:
            offences[str(path.relative_to(ROOT))] = found
    assert offences == {}


# Snapshots Gymnasium's env classes, imports every vera_env module, and prints what
# changed. With "patch" it patches VectorEnv itself, to show that the probe can see it.
_PROBE = """
import importlib, importlib.util, json, pkgutil, sys
import gymnasium, gymnasium.vector

CLASSES = [gymnasium.Env, gymnasium.Wrapper, gymnasium.vector.VectorEnv,
           gymnasium.vector.VectorWrapper, gymnasium.vector.SyncVectorEnv,
           gymnasium.vector.AsyncVectorEnv]
before = [dict(vars(cls)) for cls in CLASSES]
import vera_env
modules = [m.name for m in pkgutil.walk_packages(vera_env.__path__, "vera_env.")
           if not m.name.endswith("__main__")]
# An adapter whose trainer cannot share this interpreter (verifiers pins clash with the
# serve extra; its test runs in its own venv) is imported only where its package is.
OPTIONAL = {"vera_env.integrations.verifiers": "verifiers"}
for name in modules:
    if name in OPTIONAL and importlib.util.find_spec(OPTIONAL[name]) is None:
        continue
    importlib.import_module(name)
if sys.argv[1:] == ["patch"]:
    gymnasium.vector.VectorEnv._add_info = lambda self, *a: None
changed = []
for cls, old in zip(CLASSES, before, strict=True):
    new = vars(cls)
    changed += [f"{cls.__qualname__}.{key}" for key in sorted(set(old) | set(new))
                if old.get(key, None) is not new.get(key, None)]
print(json.dumps({"modules": len(modules), "changed": changed}))
"""


def _probe(*args: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, "-c", _PROBE, *args], capture_output=True, text=True,
                          cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_importing_vera_env_leaves_gymnasium_untouched() -> None:
    result = _probe()
    assert result["modules"] > 50  # every module was imported, not just the package
    assert result["changed"] == []


def test_gymnasium_probe_sees_a_patched_vector_env() -> None:
    assert _probe("patch")["changed"] == ["VectorEnv._add_info"]
