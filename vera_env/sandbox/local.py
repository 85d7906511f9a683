"""The local backend: plain subprocesses, for machines without bubblewrap. NOT isolation.

A command here runs as the harness user with the host's whole file system in view:
it can read the task's answer, the harness's code and anything else that user can.
The backend exists so the package works (tests, development, a laptop without user
namespaces), and it says so loudly on construction.

What it keeps of the bwrap backend's properties, through the same code:

* the same wall-clock timeout, process-group kill and output cap (``process``), plus
  a ``/proc`` sweep for processes that left the group (``setsid``), found by a
  per-command token in their environment;
* checks run on a throwaway copy of the workspace (copied, run, deleted), so a check
  that writes still cannot change what the next check reads;
* the proxy variables point at a closed local port (127.0.0.1:9) and ``NO_PROXY`` is
  empty: a soft network block for tools that honour them, not a firewall;
* data is copied, never linked: the harness user could write a linked inode.

The process limit is per user here, not per command, so for a non-root harness it is
set to the user's current process count plus ``max_processes``; root is exempt from it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from vera_env.errors import SandboxError

from .config import SandboxConfig
from .process import LaunchSpec
from .result import SandboxLimits
from .staging import StagingPolicy, stage_files
from .workspace import BaseWorkspace, limits_wrapper, remove_tree

__all__ = ["LOCAL_WARNING", "LocalSandbox", "LocalWorkspace"]

LOCAL_WARNING = (
    "vera_env local sandbox: commands run as plain subprocesses of this user with "
    "NO isolation. The agent can read the task answers, your files and the network "
    "(proxy variables only discourage it). Install bubblewrap for the real sandbox."
)
_DEAD_PROXY = "http://127.0.0.1:9"
_TAG_NAME = "VERA_SANDBOX_TAG"


class LocalSandbox:
    """Makes unisolated workspaces in temp dirs (see the module docstring).

    Args:
        limits: Applied to every command (default ``SandboxLimits()``).
        config: Only ``path``, ``env`` and ``workspace_root`` apply here.
        reason: Why the local backend is in use, added to the warning.
    """

    name = "local"

    def __init__(self, limits: SandboxLimits | None = None,
                 config: SandboxConfig | None = None, *, reason: str = "") -> None:
        self.limits = limits or SandboxLimits()
        self.config = config or SandboxConfig()
        message = f"{LOCAL_WARNING} ({reason})" if reason else LOCAL_WARNING
        warnings.warn(message, UserWarning, stacklevel=2)

    def stage(self, files: Mapping[str, Path]) -> LocalWorkspace:
        """Create a workspace holding copies of ``files`` (relative name -> source).

        Raises:
            SandboxError: A name escapes the workspace or a source cannot be copied.
        """
        try:
            root = Path(tempfile.mkdtemp(prefix="vera-local-", dir=self.config.workspace_root))
        except OSError as exc:
            raise SandboxError(f"staging: cannot create a workspace: {exc}") from exc
        try:
            for sub in ("work", "home", "tmp"):
                (root / sub).mkdir(mode=0o700)
            policy = StagingPolicy(sandbox_uid=os.getuid(), sandbox_gid=os.getgid(), link=False)
            report = stage_files(files, root / "work", policy)
        except BaseException:
            remove_tree(root)
            raise
        workspace = LocalWorkspace(root, self.limits, self.config)
        workspace.record_staged()
        workspace.staged_by_copy = report.staged_by_copy
        return workspace

    def close(self) -> None:
        """Nothing to release: each workspace is a temp dir of its own, removed when that
        workspace closes (or is collected), and the sandbox holds no shared files."""


class LocalWorkspace(BaseWorkspace):
    """A workspace whose commands are plain subprocesses (no isolation)."""

    backend = "local"

    def __init__(self, root: Path, limits: SandboxLimits, config: SandboxConfig) -> None:
        super().__init__(root / "work", root, limits)
        self._config = config
        self.staged_by_link = 0
        self.staged_by_copy = 0

    def environment(self) -> dict[str, str]:
        """The environment commands see (the caller's own environment is not inherited)."""
        proxies = {name: _DEAD_PROXY for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")}
        lower = {name.lower(): value for name, value in proxies.items()}
        return {
            "PATH": self._config.path, "HOME": str(self._root / "home"), "LANG": "C.UTF-8",
            "TMPDIR": str(self._root / "tmp"), **proxies, **lower,
            "NO_PROXY": "", "no_proxy": "", **self._config.env,
        }

    @contextmanager
    def _launch(self, command: str, *, check: bool, marker_fd: int,
                overlay: Mapping[str, Path]) -> Iterator[LaunchSpec]:
        token = secrets.token_hex(8)
        env = {**self.environment(), _TAG_NAME: token}
        extra = 0 if os.geteuid() == 0 else _count_processes(os.getuid())
        argv = limits_wrapper(self.limits, marker_fd, command, extra_processes=extra)
        if not check:
            yield LaunchSpec(argv=argv, env=env, cwd=self.path, tag=f"{_TAG_NAME}={token}")
            return
        copy = Path(tempfile.mkdtemp(prefix="check-", dir=self._root))
        try:
            try:
                shutil.copytree(self.path, copy / "work", symlinks=True)
                for name, source in overlay.items():  # a mutant in place of one file
                    target = copy / "work" / name
                    target.unlink()
                    shutil.copyfile(source, target)
            except (OSError, shutil.Error) as exc:
                raise SandboxError(f"cannot make the throwaway copy for a check: {exc}") from exc
            yield LaunchSpec(argv=argv, env=env, cwd=copy / "work", tag=f"{_TAG_NAME}={token}")
        finally:
            remove_tree(copy)


def _count_processes(uid: int) -> int:
    count = 0
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                count += os.stat(f"/proc/{name}").st_uid == uid
            except OSError:
                continue
    return count
