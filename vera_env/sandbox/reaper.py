"""Workspaces left by a process that died are removed by the next one: owned roots.

A sandbox removes its temp dir on ``close()`` or when it is garbage collected, both of
which need the Python process to end normally. A process killed without that — an
``AsyncVectorEnv`` worker hit by SIGKILL or the OOM killer, a daemonic worker terminated
because its parent exited, a crashed Ray actor — leaves the dir behind. Observed while
building the vector envs: a script that raised before ``envs.close()`` left one
``/tmp/vera-bwrap-*`` per async worker, with every staged file in it. (Its processes do
not outlive it: bwrap runs with ``--die-with-parent``, so the kernel kills the sandbox
when the worker goes.)

So an environment that builds its own sandbox puts it under a directory owned by its
process, ``vera-owned-<pidns>-<pid>-<starttime>`` in the system temp dir. Whenever a
process creates its owned root, it first removes every owned root whose owner is gone
(the pid is dead, a zombie, or now names a process that started at another time).
Roots made in another pid namespace (a container sharing ``/tmp``) are never touched:
their pids mean nothing here. ``reap_orphans()`` does the same on demand. A lease
counts the environments using the root; the last one to close removes it, so a clean
shutdown leaves nothing either.
"""

from __future__ import annotations

import os
import tempfile
import threading
import weakref
from collections.abc import Callable
from pathlib import Path

from .config import SandboxConfig
from .workspace import remove_tree

__all__ = ["RootLease", "owned_root", "owner_alive", "owner_tag", "reap_orphans"]

_PREFIX = "vera-owned-"
# Re-entrant: a lease's finalizer (``_drop``) can run from the garbage collector in the
# middle of ``RootLease.__init__`` on the same thread, which holds the lock; a plain
# lock deadlocked there (seen in the test suite).
_lock = threading.RLock()
_holders: dict[Path, int] = {}


def _pid_namespace() -> int:
    return os.stat("/proc/self/ns/pid").st_ino


def _start_time(pid: int) -> int | None:
    """The process's start time in clock ticks; None when it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            fields = handle.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


def owner_tag(pid: int | None = None) -> str:
    """``<pidns>-<pid>-<starttime>``: names a process for as long as it lives (default: this one)."""
    pid = os.getpid() if pid is None else pid
    return f"{_pid_namespace()}-{pid}-{_start_time(pid)}"


def owner_alive(tag: str) -> bool | None:
    """Whether the process an ``owner_tag`` names is alive; None when the tag is not
    one, or names a process of another pid namespace (whose pids mean nothing here)."""
    parts = tag.split("-")
    if len(parts) != 3 or parts[0] != str(_pid_namespace()) or not parts[1].isdigit():
        return None
    return str(_start_time(int(parts[1]))) == parts[2]


def _name(pid: int) -> str:
    return _PREFIX + owner_tag(pid)


def owned_root(base: Path | None = None) -> Path:
    """This process's owned root under ``base`` (default: the system temp dir), made now.

    Making it first removes the roots of dead owners (``reap_orphans``).
    """
    parent = Path(base or tempfile.gettempdir())
    root = parent / _name(os.getpid())
    if not root.is_dir():
        reap_orphans(parent)
        root.mkdir(mode=0o711, exist_ok=True)
        os.chmod(root, 0o711)  # the sandbox's host uid must traverse it; umask may differ
    return root


def reap_orphans(base: Path | None = None) -> list[Path]:
    """Remove the owned roots under ``base`` whose owning process is gone.

    Returns:
        The roots removed.
    """
    parent = Path(base or tempfile.gettempdir())
    removed = []
    for root in parent.glob(f"{_PREFIX}*"):
        if owner_alive(root.name[len(_PREFIX):]) is not False:
            continue  # alive, or not ours to judge
        try:
            remove_tree(root)
        except OSError:
            continue  # another process is reaping it, or it is not ours to remove
        removed.append(root)
    return removed


class RootLease:
    """A sandbox config whose ``workspace_root`` is this process's owned root, if unset.

    The root is removed when the last lease on it is released (``release()``, or when
    the lease is garbage collected). A config that names its own ``workspace_root`` is
    used as given and the lease holds nothing.

    Args:
        config: The caller's config, or None for the defaults.
    """

    def __init__(self, config: SandboxConfig | None = None) -> None:
        config = config or SandboxConfig()
        self._release: Callable[[], object] = lambda: None
        if config.workspace_root is None:
            with _lock:
                # Hold the root before making it: a finalizer of an older lease that runs
                # in between (see ``_lock``) then sees a holder and leaves it in place.
                root = Path(tempfile.gettempdir()) / _name(os.getpid())
                _holders[root] = _holders.get(root, 0) + 1
                owned_root()
            config = config.model_copy(update={"workspace_root": root})
            self._release = weakref.finalize(self, _drop, root)
        self.config = config

    def release(self) -> None:
        """Give the root back; the last holder removes it. Idempotent."""
        self._release()


def _drop(root: Path) -> None:
    with _lock:
        left = _holders.get(root, 1) - 1
        if left > 0:
            _holders[root] = left
            return
        _holders.pop(root, None)
        if root.name == _name(os.getpid()):  # never a parent's root, after a fork
            remove_tree(root)
