"""A size-capped file system for one episode's shadow workspaces: a budget the kernel keeps.

Strength testing replays the episode's commands in a shadow workspace per variant of
the task's data (``vera_env.verification.strength.shadows``), many at once. Each
workspace's own limit (``disk``) is enforced by measuring and killing, and the shadows'
shared budget (``StrengthConfig.max_shadow_mb``) was checked only between commands, so both
overshoot by whatever the running commands write before anyone looks. Measured:
one command writing 2 GB peaked at 13 GB of host disk for one episode (about
28 GB at the limits).

So a root harness stages every shadow workspace of an episode on one tmpfs it mounts
itself, ``size=`` the budget plus the task files it holds: a replay that writes past
the budget gets ENOSPC from the kernel, however many run at once, and the host's disk
is never touched. Layout of the mount (mode 0711, ``nosuid``, ``nodev``):

* ``cache/`` — one root-owned read-only copy of each task file, made when the area is
  made (hard links cannot cross file systems); every shadow links to it, so the task
  data takes its space once, outside the budget;
* ``ws-*/`` — the workspaces (``BwrapSandbox.stage(..., under=)``); a file only one
  shadow holds (its variant) is copied into that workspace's own cache and removed
  with it.

tmpfs pages are memory, charged to the memory cgroup of the command that wrote them,
and they stay charged while the file lives. In the sandbox's pool of reused leaves that
charge would follow the leaf to its next command — the episode's own checks included —
which would then run out of memory early. So the area's workspaces lease their own
pool, each leaf limited to ``memory_mb`` plus the budget: what the shadows hold on the
area never exceeds the budget, so every replay keeps at least the memory the episode's
run had, and the pool goes with the area.

A replay refused disk must not pass for one that ran: its files are cut short, and a
check that fails on them is not evidence. ``spent()`` says when the area is full (less
than ``_MARGIN_BYTES`` or ``_MARGIN_INODES`` left); every workspace staged here watches
it while a command runs (``BaseWorkspace.watch_shared``), so a command running while
the area is full ends ``disk_limit`` and its replay is broken; the shadow also checks
it, and the command's error output, after each replay.

Where a mount is impossible (a harness that is not root, a container whose seccomp
profile refuses ``mount``, the ``local`` backend) the area is a plain directory beside
the sandbox's workspaces, with a warning: the budget is then checked between commands,
as before (``enforced`` False). tmpfs pages are memory (or swap): the cap bounds them,
as ``tmp_mb`` bounds each sandbox's ``/tmp``.
"""

from __future__ import annotations

import ctypes
import os
import tempfile
import threading
import warnings
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Self

from vera_env.errors import SandboxError

from .bwrap import BwrapSandbox
from .cgroup import MemoryCgroups
from .staging import StagingCache
from .workspace import remove_tree

if TYPE_CHECKING:
    from .workspace import Sandbox, Workspace

__all__ = ["UNENFORCED_WARNING", "CappedArea"]

UNENFORCED_WARNING = ("the shadows' disk budget is not enforced by the kernel here ({reason}): "
                      "it is checked between replayed commands, so one command can "
                      "overshoot it by what the workspace limit allows")
_MARGIN_BYTES = 1 << 20
_MARGIN_INODES = 16
_BYTES_PER_INODE = 4096  # as ``disk`` counts an entry: at least one block
_MS_NOSUID, _MS_NODEV = 2, 4
_MNT_DETACH = 2
_PAGE = os.sysconf("SC_PAGE_SIZE")


class CappedArea:
    """Where one episode's shadow workspaces are staged, within one disk budget.

    Passes for a ``Sandbox``: ``stage(files)`` makes a workspace here with the
    sandbox's isolation and limits. Close it (or the sandbox) to unmount it.

    Args:
        sandbox: The episode's sandbox (the bwrap backends can stage elsewhere; any
            other gets an unenforced area).
        max_bytes: What the workspaces may write together (``StrengthConfig.max_shadow_mb``).
        sources: The task's files (name -> host path), cached once on the area.

    Raises:
        ValueError: ``max_bytes`` is not positive.
        SandboxError: The area could not be made, or a task file not cached.
    """

    def __init__(self, sandbox: Sandbox, max_bytes: int,
                 sources: Mapping[str, Path] | None = None) -> None:
        if max_bytes <= 0:
            raise ValueError(f"max_bytes must be > 0, got {max_bytes!r}")
        sources = sources or {}
        self.name = sandbox.name
        self.max_bytes = max_bytes
        self._sandbox = sandbox
        self._bwrap = sandbox if isinstance(sandbox, BwrapSandbox) else None
        self._lock = threading.Lock()
        self._workspaces: weakref.WeakSet[Workspace] = weakref.WeakSet()
        try:
            reserve = sum(_pages(os.stat(p).st_size) for p in sources.values())
        except OSError as exc:
            raise SandboxError(f"capped area: a task file is unreadable: {exc}") from exc
        self.path = _make_dir(self._bwrap.root if self._bwrap is not None else None)
        self._memory: MemoryCgroups | None = None
        if self._bwrap is None:
            why = f"the {sandbox.name} backend stages only in its own directories"
        else:
            memory, why = _own_memory(self._bwrap, max_bytes)
            why = why or _mount_tmpfs(self.path, max_bytes + reserve)
            if memory is not None and why:
                memory.close()  # unmounted: the sandbox's own pool will do
            elif memory is not None:
                self._memory = memory
        self.enforced = not why
        self._finalizer = weakref.finalize(self, _release, self.path, self.enforced,
                                           self._memory)
        if why:
            warnings.warn(UNENFORCED_WARNING.format(reason=why), UserWarning, stacklevel=2)
        self._cached: dict[tuple[int, int, int, int], Path] = {}
        try:
            self._cache_sources(sources)
        except BaseException:
            self.close()
            raise
        self._baseline = self._used()
        if self._bwrap is not None:
            self._bwrap.areas.add(self)  # the sandbox unmounts what is left when it closes

    def _cache_sources(self, sources: Mapping[str, Path]) -> None:
        if not self.enforced:
            return  # on the sandbox's own file system its staging links them directly
        cache_dir = self.path / "cache"
        cache_dir.mkdir(mode=0o700)
        cache = StagingCache(cache_dir)
        for name, source in sources.items():
            try:
                st = os.stat(source)
                copy = cache.get(Path(source), st)
                os.utime(copy, ns=(st.st_atime_ns, st.st_mtime_ns))
            except OSError as exc:
                raise SandboxError(f"capped area: cannot cache {name!r}: {exc}") from exc
            self._cached[_key(st)] = copy

    def stage(self, files: Mapping[str, Path]) -> Workspace:
        """A workspace holding ``files``, made on this area (see ``BwrapSandbox.stage``).

        Task files cached here are linked from the cache; any other file is copied.

        Raises:
            SandboxError: The area is closed, a name escapes the workspace, a source
                cannot be staged, or the area is full (``spent()`` then says so).
        """
        if self.closed:
            raise SandboxError("capped area is closed")
        placed = {}
        for name, source in files.items():
            try:
                placed[name] = self._cached.get(_key(os.stat(source)), source)
            except OSError:
                placed[name] = source  # staging reports it
        workspace: Workspace
        if self._bwrap is None:
            workspace = self._sandbox.stage(placed)
        else:
            staged = self._bwrap.stage(placed, under=self.path, memory=self._memory)
            if self.enforced:
                staged.watch_shared(self.spent)
            workspace = staged
        with self._lock:
            self._workspaces.add(workspace)
        return workspace

    def spent(self) -> bool:
        """The area is full (or nearly): a write there may have got ENOSPC. Always
        False where the budget is not enforced."""
        if not self.enforced:
            return False
        try:
            st = os.statvfs(self.path)
        except OSError:
            return True  # fail closed: unmeasurable counts as full
        return st.f_bavail * st.f_frsize < _MARGIN_BYTES or st.f_favail < _MARGIN_INODES

    def used_bytes(self) -> int:
        """What the workspaces wrote (and the variant files copied into them); 0
        where the budget is not enforced."""
        return max(0, self._used() - self._baseline) if self.enforced else 0

    def _used(self) -> int:
        if not self.enforced or self.closed:
            return 0
        st = os.statvfs(self.path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    @property
    def closed(self) -> bool:
        """``close()`` has run (or the finalizer has)."""
        return not self._finalizer.alive

    def close(self) -> None:
        """Close every workspace staged here, unmount and remove the area. Idempotent."""
        with self._lock:
            workspaces = list(self._workspaces)
        for workspace in workspaces:
            workspace.close()
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _key(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _pages(size: int) -> int:
    return -(-size // _PAGE) * _PAGE


def _make_dir(base: Path | None) -> Path:
    try:
        path = Path(tempfile.mkdtemp(prefix="shadows-", dir=base))
        os.chmod(path, 0o711)
    except OSError as exc:
        raise SandboxError(f"capped area: cannot make its directory: {exc}") from exc
    return path


def _own_memory(box: BwrapSandbox, max_bytes: int) -> tuple[MemoryCgroups | None, str]:
    """The area's pool of memory cgroups (None where memory is limited per process),
    and "" or why it could not be made."""
    if box.memory is None:
        return None, ""
    limit = box.limits.memory_mb * 2**20 + max_bytes
    try:
        return MemoryCgroups(box.memory.root.parent, box.memory.version, limit), ""
    except SandboxError as exc:
        return None, f"no memory cgroups for its workspaces: {exc}"


def _mount_tmpfs(path: Path, size: int) -> str:
    """Mount a tmpfs of ``size`` bytes on ``path``; "" or why it could not be."""
    if os.geteuid() != 0:
        return "the harness is not root, and only root may mount"
    inodes = size // _BYTES_PER_INODE + 1024
    options = f"size={size},nr_inodes={inodes},mode=0711".encode()
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.mount(b"vera-shadows", os.fsencode(path), b"tmpfs",
                  ctypes.c_ulong(_MS_NOSUID | _MS_NODEV), options) != 0:
        return f"mounting a tmpfs failed: {os.strerror(ctypes.get_errno())}"
    return ""


def _release(path: Path, mounted: bool, memory: MemoryCgroups | None) -> None:
    """Unmount (lazily: a sandbox still dying may hold it), remove the directory, then
    the memory cgroups (their charges went with the files)."""
    try:
        _unmount(path, mounted)
    finally:
        if memory is not None:
            memory.close()


def _unmount(path: Path, mounted: bool) -> None:
    if mounted:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.umount2(os.fsencode(path), _MNT_DETACH) != 0:
            remove_tree(path)  # not mounted after all (or gone): remove what is there
            return
        try:
            os.rmdir(path)
        except OSError:
            pass  # already removed with its sandbox
        return
    remove_tree(path)
