"""Putting a task's data files into a fresh workspace: hard link where safe, else copy.

Staging must cost the same for a 1 KB table and a 10 GB matrix, no episode may
corrupt the task data the next episode reads, and yet the workspace has to behave
like an ordinary directory: ``gunzip counts.mtx.gz`` in place, ``sed -i``, ``rm``.

Hard links give all three when the sandbox user is *not* the owner of the linked
inode. The file is then read-only to it (``chmod u+w`` is EPERM, ``>>`` is EACCES),
but the directory entry belongs to the workspace, which the sandbox user owns:
``sed -i`` and ``gunzip`` write a new inode and rename it over the name, ``rm``
unlinks the name, and the shared inode is never written.

So a source is linked only when all of these hold; otherwise it is copied:

* its owner differs from the sandbox's host uid (else the sandbox could ``chmod`` it:
  a non-root harness maps the sandbox user to itself, the owner of its own files);
* it is other-readable, not other-writable, not group-writable by the sandbox's group
  and has no setuid/setgid bit;
* it lies on the workspace's filesystem (links cannot cross devices).

A root harness copies sources that fail a test once per sandbox into a root-owned
0444 cache on the workspace's filesystem and links from there, so the cost of a
copy is paid once, not per episode. A non-root harness copies into the workspace.

Names are relative paths; an absolute name or one with ``..`` could place a file
outside the workspace and is refused with ``SandboxError``.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from vera_env.errors import SandboxError

__all__ = ["StagingCache", "StagingPolicy", "StagingReport", "check_rel_name", "stage_files"]

_UNSAFE_BITS = stat.S_ISUID | stat.S_ISGID | stat.S_IWOTH


@dataclass(frozen=True, slots=True)
class StagingReport:
    """How many files were staged by each route."""

    staged_by_link: int = 0
    staged_by_copy: int = 0


class StagingCache:
    """Root-owned read-only copies, keyed by the source inode and its mtime.

    Args:
        directory: An existing, root-only directory on the workspaces' filesystem.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._lock = threading.Lock()

    def get(self, source: Path, st: os.stat_result) -> Path:
        """The cached copy of ``source``, made (mode 0444) on first use."""
        key = f"{st.st_dev}-{st.st_ino}-{st.st_size}-{st.st_mtime_ns}"
        cached = self.directory / key
        with self._lock:
            if not cached.exists():
                fd, tmp = tempfile.mkstemp(dir=self.directory)
                os.close(fd)
                shutil.copyfile(source, tmp)
                os.chmod(tmp, 0o444)
                os.replace(tmp, cached)
        return cached


@dataclass(frozen=True, slots=True)
class StagingPolicy:
    """Who the sandbox is on the host, and which routes staging may take.

    Attributes:
        sandbox_uid: Host uid the sandboxed commands run as.
        sandbox_gid: Host gid the sandboxed commands run as.
        chown: Give created directories and copies to the sandbox uid (root harness).
        link: Hard links are allowed at all (the local backend always copies).
        cache: Where a root harness keeps read-only copies it can link from.
    """

    sandbox_uid: int
    sandbox_gid: int
    chown: bool = False
    link: bool = True
    cache: StagingCache | None = None

    def linkable(self, st: os.stat_result, dest_dev: int) -> bool:
        """Whether a hard link to this inode is read-only to the sandbox."""
        mode = st.st_mode
        return (
            self.link
            and st.st_dev == dest_dev
            and st.st_uid != self.sandbox_uid
            and bool(mode & stat.S_IROTH)
            and not mode & _UNSAFE_BITS
            and not (st.st_gid == self.sandbox_gid and mode & stat.S_IWGRP)
        )


def check_rel_name(name: str) -> PurePosixPath:
    """Validate a workspace-relative file name.

    Raises:
        SandboxError: The name is empty, absolute, contains ``..`` or a NUL byte.
    """
    if not name or "\0" in name:
        raise SandboxError(f"staging: invalid file name {name!r}")
    rel = PurePosixPath(name)
    if rel.is_absolute() or ".." in rel.parts or not rel.parts:
        raise SandboxError(
            f"staging: {name!r} escapes the workspace; use a relative path without '..'"
        )
    return rel


def stage_files(files: Mapping[str, Path], dest: Path, policy: StagingPolicy) -> StagingReport:
    """Place every source file in ``dest`` under its relative name.

    Args:
        files: Relative name -> source file on the host.
        dest: The (empty) workspace directory.
        policy: Which routes are allowed and who owns what is created.

    Returns:
        How many files were linked and how many copied.

    Raises:
        SandboxError: A name is invalid or taken twice, a source is missing or is not
            a regular file, or the file system refused.
    """
    dest_dev = os.stat(dest).st_dev
    linked = copied = 0
    for name, source in files.items():
        target = dest.joinpath(*check_rel_name(name).parts)
        try:
            st = os.stat(source)
        except OSError as exc:
            raise SandboxError(f"staging {name!r}: source {source} unreadable: {exc}") from exc
        if not stat.S_ISREG(st.st_mode):
            raise SandboxError(f"staging {name!r}: source {source} is not a regular file")
        try:
            _make_parents(dest, target, policy)
            if _place(Path(source), st, target, dest_dev, policy):
                linked += 1
            else:
                copied += 1
        except FileExistsError as exc:
            raise SandboxError(f"staging {name!r}: name staged twice or clashes") from exc
        except OSError as exc:
            raise SandboxError(f"staging {name!r} from {source}: {exc}") from exc
    return StagingReport(staged_by_link=linked, staged_by_copy=copied)


def _place(source: Path, st: os.stat_result, target: Path, dest_dev: int,
           policy: StagingPolicy) -> bool:
    """Link or copy one file; True when it was linked to the source inode."""
    if policy.linkable(st, dest_dev):
        try:
            os.link(source, target)
            return True
        except PermissionError:
            pass  # protected_hardlinks: a non-owner may not link; copy instead
    if policy.cache is not None and policy.link:
        os.link(policy.cache.get(source, st), target)
        return False
    shutil.copyfile(source, target)
    os.chmod(target, 0o644)
    if policy.chown:
        os.chown(target, policy.sandbox_uid, policy.sandbox_gid)
    return False


def _make_parents(dest: Path, target: Path, policy: StagingPolicy) -> None:
    current = dest
    for part in target.relative_to(dest).parts[:-1]:
        current = current / part
        if current.is_dir() and not current.is_symlink():
            continue
        current.mkdir(mode=0o755)
        if policy.chown:
            os.chown(current, policy.sandbox_uid, policy.sandbox_gid)
