"""Memory for a command's whole process tree: one memory cgroup per running command.

``ulimit -v`` bounds one process. Measured: three processes of one command
held 4.5 GB under ``memory_mb=2048``, and ``max_processes`` of them could hold 256
times the limit. So where the harness can make cgroups, each command (and each check,
and each long-lived ``server`` sandbox) runs in a leaf memory cgroup of its own, limited
to ``memory_mb`` with no swap: when the tree together passes it, the kernel's OOM
killer ends a process of that tree (cgroup v2: the whole tree, ``memory.oom.group``)
and the result says ``memory_limit``. What the tree writes to ``/tmp`` and ``/dev/shm``
(tmpfs, so memory) is charged to it as well. The per-process ``ulimit -v`` stays, so a
single process that asks for too much still gets a clean ``MemoryError``.

How the tree gets in without a race: bwrap starts the sandbox blocked (``--block-fd``)
and reports its pid (``--info-fd``); the harness writes that pid into the leaf's
``cgroup.procs``, then unblocks it. Nothing of the command has run yet, and everything
it starts inherits the cgroup. The sandbox never sees the cgroup file system.

Where the leaves go: under the harness's own memory cgroup (cgroup v1, as on this
project's machines; measured 0.03 ms to move a process), or on cgroup v2 under
``SandboxConfig.cgroup_parent``, a delegated cgroup with the memory controller. (A v2
cgroup that holds processes, such as the harness's own, cannot enable controllers for
children, so v2 needs that parent unless the harness runs in the root cgroup.) Each
sandbox makes one directory ``vera-<pidns>-<pid>-<starttime>-<n>`` there and reuses its
leaves (a v1 leaf made and removed per command leaves kernel memory behind); it removes
them on close, and the next sandbox removes those of dead harness processes.

Where none of this is possible (no root, no delegation) the limit stays per process and
``MemoryCgroups.find`` says why; the sandbox warns loudly (``TREE_MEMORY_WARNING``).

The leaf also counts what the tree got of the CPUs (``CommandCgroup.cpu``): the CPU
seconds it used (``cpu.stat``) and the seconds in which some process of it was ready to
run but waited for a CPU (``cpu.pressure``, the kernel's PSI). Strength budgets a
node's runs in their wall time less that wait, which another process's load cannot
raise (``vera_env.verification.strength.budget``). Both files are cgroup v2's, present
without any controller; on v1 the tree is placed as well in a leaf of the unified
hierarchy where it is mounted beside v1 (the "hybrid" layout, as on this project's
machines). Where neither exists, memory is still limited and the usage is unknown.
"""

from __future__ import annotations

import itertools
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

from vera_env.errors import SandboxError

from .process import CpuUsage
from .reaper import owner_alive, owner_tag

__all__ = ["TREE_MEMORY_WARNING", "CommandCgroup", "MemoryCgroups", "cgroup_mounts",
           "own_cgroups", "reap_orphans"]

TREE_MEMORY_WARNING = (
    "vera_env sandbox: memory is limited per process only ({reason}). A command's "
    "processes together may hold max_processes x memory_mb. Run the harness as root on "
    "cgroup v1, or give SandboxConfig.cgroup_parent a delegated cgroup v2 directory "
    "with the memory controller (README, 'The sandbox')."
)
_PREFIX = "vera-"
_counter = itertools.count()


class CommandCgroup:
    """One leaf cgroup, used by one command (or one long-lived sandbox) at a time.

    Args:
        path: The leaf.
        version: 1 or 2.
        account: On v1, its paired leaf in the unified hierarchy, which counts the CPU
            (None: not counted).
    """

    def __init__(self, path: Path, version: int, account: Path | None = None) -> None:
        self.path = path
        self.version = version
        self.account = account if version == 1 else path

    def attach(self, pid: int) -> None:
        """Move process ``pid`` (and its future children) into this cgroup.

        A process that has already exited is left alone: nothing of it can run outside
        the cgroup, and its exit says why it ended (bwrap failing to set up the sandbox
        exits before it can be placed; reporting "no such process" instead of bwrap's own
        message once failed CI).

        Raises:
            SandboxError: The kernel refused (the cgroup vanished, or no permission).
        """
        for leaf in (self.path, self.account) if self.version == 1 else (self.path,):
            if leaf is None:
                continue
            try:
                (leaf / "cgroup.procs").write_text(f"{pid}\n")
            except ProcessLookupError:
                return
            except OSError as exc:
                raise SandboxError(f"cannot move the sandbox into {leaf}: {exc}") from exc

    def cpu(self) -> CpuUsage | None:
        """What its processes got of the CPUs so far; None where it is not counted."""
        if self.account is None:
            return None
        used = _field(_read(self.account / "cpu.stat"), "usage_usec")
        if used is None:
            return None
        wait = _field(_read(self.account / "cpu.pressure"), "some", "total")
        return CpuUsage(used / 1e6, None if wait is None else wait / 1e6)

    def oom_kills(self) -> int:
        """Processes the kernel's OOM killer has ended in this cgroup so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            text = (self.path / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def members(self) -> list[int]:
        """Pids in this cgroup now."""
        return _members(self.path)

    def kill_members(self) -> None:
        """SIGKILL whatever is left in the cgroup (normally nothing: the pid namespace
        died with the command)."""
        if self.version == 1 and self.account is not None:  # the tree is in both leaves
            for pid in _members(self.account):
                with suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
        if self.version == 2 and (self.path / "cgroup.kill").exists():
            with suppress(OSError):
                (self.path / "cgroup.kill").write_text("1")
            return
        for pid in self.members():
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


class MemoryCgroups:
    """A sandbox's pool of leaf memory cgroups, each limited to ``limit_bytes``.

    Args:
        parent: Where to make this sandbox's directory (``find`` discovers it).
        version: 1 or 2.
        limit_bytes: Memory limit of each leaf (swap included).

    Raises:
        SandboxError: The directory or its first leaf cannot be made.
    """

    def __init__(self, parent: Path, version: int, limit_bytes: int) -> None:
        self.version = version
        self._limit = limit_bytes
        self._lock = threading.Lock()
        self._free: list[CommandCgroup] = []
        self._all: list[CommandCgroup] = []
        reap_orphans(parent)
        self.root = parent / f"{_PREFIX}{owner_tag()}-{next(_counter)}"
        try:
            self.root.mkdir()
            if version == 2:
                (self.root / "cgroup.subtree_control").write_text("+memory")
        except OSError as exc:
            _remove(self.root)
            raise SandboxError(f"cannot make memory cgroups under {parent}: {exc}") from exc
        self.account_root = _account_root(self.root.name) if version == 1 else None
        self._free.append(self._make_leaf())  # fail now, not at the first command

    @classmethod
    def find(cls, configured: Path | None = None) -> tuple[Path | None, int, str]:
        """Where this process may make memory cgroups.

        Returns:
            (parent, version, "") when there is such a place; (None, 0, why not) else.
        """
        if configured is not None:
            if (configured / "cgroup.controllers").exists():
                return _v2_parent(configured)
            if (configured / "memory.limit_in_bytes").exists():
                return configured, 1, ""
            return None, 0, f"{configured} is not a memory cgroup"
        own = own_cgroups(_read(Path("/proc/self/cgroup")))
        mounts = cgroup_mounts(_read(Path("/proc/self/mountinfo")))
        reason = "no memory cgroup controller is available to this process"
        if "memory" in own and "memory" in mounts:  # v1: the controller is bound there
            path = _join(mounts["memory"], own["memory"])
            if path is not None and os.access(path, os.W_OK):
                return path, 1, ""
            reason = f"the memory cgroup {path} is not writable by this user"
        elif "" in own and "cgroup2" in mounts:  # the unified hierarchy
            path = _join(mounts["cgroup2"], own[""])
            if path is not None and "memory" in _read(path / "cgroup.controllers").split():
                found = _v2_parent(path)
                if found[0] is not None:
                    return found
                reason = found[2]
        return None, 0, reason

    @contextmanager
    def lease(self) -> Iterator[CommandCgroup]:
        """A leaf for one command; back to the pool (emptied) when the block exits."""
        leaf = self.acquire()
        try:
            yield leaf
        finally:
            self.release(leaf)

    def acquire(self) -> CommandCgroup:
        """A free leaf (made when none is free).

        Raises:
            SandboxError: A new leaf cannot be made.
        """
        with self._lock:
            if self._free:
                return self._free.pop()
        return self._make_leaf()

    def release(self, leaf: CommandCgroup) -> None:
        """Return ``leaf`` to the pool, killing anything still in it."""
        leaf.kill_members()
        with self._lock:
            self._free.append(leaf)

    def _make_leaf(self) -> CommandCgroup:
        with self._lock:
            name = f"c{len(self._all)}"
            path = self.root / name
            leaf = CommandCgroup(path, self.version, _account_leaf(self.account_root, name))
            self._all.append(leaf)
        try:
            path.mkdir()
            if self.version == 2:
                _write_optional(path / "memory.swap.max", "0")
                (path / "memory.max").write_text(str(self._limit))
                _write_optional(path / "memory.oom.group", "1")
            else:
                (path / "memory.limit_in_bytes").write_text(str(self._limit))
                _write_optional(path / "memory.memsw.limit_in_bytes", str(self._limit))
        except OSError as exc:
            raise SandboxError(f"cannot make the memory cgroup {path}: {exc}") from exc
        return leaf

    def close(self) -> None:
        """Kill what is left in the leaves and remove them. Idempotent."""
        with self._lock:
            leaves, self._all, self._free = self._all, [], []
        for leaf in leaves:
            leaf.kill_members()
        _remove(self.root)
        if self.account_root is not None:
            _remove(self.account_root)


def reap_orphans(parent: Path) -> list[Path]:
    """Remove the sandbox directories under ``parent`` whose harness process is gone."""
    removed = []
    with suppress(OSError):
        for entry in parent.iterdir():
            tag = entry.name[len(_PREFIX):].rsplit("-", 1)[0]
            if entry.name.startswith(_PREFIX) and owner_alive(tag) is False:
                for leaf in _leaves(entry):
                    CommandCgroup(leaf, 2 if (leaf / "cgroup.kill").exists() else 1
                                  ).kill_members()
                if _remove(entry):
                    removed.append(entry)
    return removed


def _account_root(name: str) -> Path | None:
    """A directory ``name`` beside the harness's own cgroup in the unified hierarchy
    mounted beside v1 (its dead harnesses' directories reaped first), or None where
    there is none or it is not writable: the CPU is then not counted."""
    own = own_cgroups(_read(Path("/proc/self/cgroup")))
    mounts = cgroup_mounts(_read(Path("/proc/self/mountinfo")))
    if "" not in own or "cgroup2" not in mounts:
        return None
    parent = _join(mounts["cgroup2"], own[""])
    if parent is None or not (parent / "cgroup.procs").exists():
        return None
    reap_orphans(parent)
    try:
        (parent / name).mkdir()
    except OSError:
        return None
    return parent / name


def _account_leaf(root: Path | None, name: str) -> Path | None:
    """The accounting leaf ``name`` under ``root``, made now (None: not counted)."""
    if root is None:
        return None
    try:
        (root / name).mkdir(exist_ok=True)
    except OSError:
        return None
    return root / name


def _members(leaf: Path) -> list[int]:
    try:
        return [int(p) for p in (leaf / "cgroup.procs").read_text().split()]
    except OSError:
        return []


def _field(text: str, key: str, sub: str = "") -> int | None:
    """The integer after ``key`` in ``key value`` lines (``cpu.stat``), or after
    ``sub=`` on the line ``key`` starts (``cpu.pressure``'s ``some ... total=N``)."""
    for line in text.splitlines():
        head, _, rest = line.partition(" ")
        if head != key:
            continue
        if not sub:
            return int(rest) if rest.strip().isdigit() else None
        for item in rest.split():
            name, _, value = item.partition("=")
            if name == sub and value.isdigit():
                return int(value)
    return None


def _remove(root: Path) -> bool:
    """rmdir the leaves, then the directory (cgroup files cannot be unlinked)."""
    ok = True
    for leaf in _leaves(root):
        ok = _rmdir(leaf) and ok
    return _rmdir(root) and ok


def _leaves(root: Path) -> list[Path]:
    """The leaf cgroups ``c0``, ``c1``... of a sandbox directory (not its control files)."""
    try:
        return [entry for entry in root.iterdir()
                if entry.name[:1] == "c" and entry.name[1:].isdigit() and entry.is_dir()]
    except OSError:
        return []


def _rmdir(path: Path) -> bool:
    for _ in range(50):  # a killed process leaves its cgroup a moment after SIGKILL
        try:
            path.rmdir()
            return True
        except FileNotFoundError:
            return True
        except OSError:
            time.sleep(0.01)
    return False


def _v2_parent(path: Path) -> tuple[Path | None, int, str]:
    if "memory" in _read(path / "cgroup.subtree_control").split():
        return path, 2, ""
    try:
        (path / "cgroup.subtree_control").write_text("+memory")
    except OSError as exc:
        return None, 0, (f"cgroup v2: cannot enable the memory controller below {path} "
                         f"({exc.strerror}; a cgroup that holds processes cannot)")
    return path, 2, ""


def own_cgroups(text: str) -> dict[str, str]:
    """controller ("" for the unified hierarchy) -> cgroup path, from /proc/PID/cgroup."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        if line.count(":") < 2:
            continue
        _id, controllers, path = line.split(":", 2)
        for name in controllers.split(",") if controllers else [""]:
            found[name] = path
    return found


def cgroup_mounts(text: str) -> dict[str, tuple[str, str]]:
    """"memory" (v1) / "cgroup2" -> (mount root, mount point), from /proc/PID/mountinfo."""
    found: dict[str, tuple[str, str]] = {}
    for line in text.splitlines():
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        fstype, options = tail[0], tail[2].split(",")
        if fstype == "cgroup2":
            found.setdefault("cgroup2", (fields[3], fields[4]))
        elif fstype == "cgroup" and "memory" in options:
            found.setdefault("memory", (fields[3], fields[4]))
    return found


def _join(mount: tuple[str, str], path: str) -> Path | None:
    root, point = mount
    if root != "/" and not (path == root or path.startswith(root.rstrip("/") + "/")):
        return None
    rel = path[len(root):] if root != "/" else path
    return Path(point) / rel.lstrip("/")


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write_optional(path: Path, value: str) -> None:
    if path.exists():
        path.write_text(value)
