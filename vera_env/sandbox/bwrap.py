"""The bubblewrap backend: the security boundary around model-written shell.

Each command gets fresh user, network, pid, ipc, uts and cgroup namespaces. What it
sees is built from nothing: ``/usr`` read-only with the merged-usr symlinks, a minimal
read-only ``/etc`` (loader cache, alternatives, a synthetic passwd naming the sandbox
user), a fresh ``/proc`` and ``/dev``, a private size-capped ``/tmp``, and the
workspace at ``/work``. The host's ``/root``, ``/home``, the project checkout, the task
cache (and with it the answers) and other workspaces are simply not there; the root
is remounted read-only so nothing can be created outside ``/work`` and ``/tmp``.

Why each piece:

* **A separate host uid.** A root harness runs bwrap as ``host_uid`` (61000). Staged
  data is then hard-linked, not copied, and stays read-only to the sandbox (see
  ``staging``), and nothing the sandbox does can touch the harness's own files.
* **The pid namespace, ``--as-pid-1`` and ``--die-with-parent``.** The command is
  the namespace's init: when it exits or is killed, the kernel kills every process
  left in the namespace, so ``setsid nohup sleep 1000 &`` cannot outlive it, and bwrap
  reaps it itself (no bwrap init is orphaned to the host's pid 1).
* **``run_check`` mounts ``/work`` read-only.** A check that wrote (``sort -o``, a
  ``>`` redirect, ``rm``) would change what the next check reads, so a node's score
  would depend on check order and a check could manufacture its own evidence.
* **The ``vera_env`` package is masked** wherever a bind exposes it (for example when
  it is installed into the system Python): its directory is replaced by one whose
  ``__init__.py`` raises ImportError, so the agent cannot import the harness.
* **Compressor shims first on PATH** (``/opt/vera/bin``): gzip, bzip2 and xz refuse
  to work in place on a hard-linked file; see ``shims``.
* **Commands and checks get constant entropy** (``entropy``): strength testing
  replays commands on variants of the data, and a check may be shown a file in place
  of one workspace file (``overlay``, a read-only bind over that name).
* **Nothing survives a run.** A seccomp filter (``seccomp``) fails the
  keyring and POSIX message-queue calls, the kernel state the namespaces leave shared;
  the IPC, network and mount namespaces, ``/tmp`` and ``/dev/shm`` are new for every
  run; the rest of ``/dev`` is read-only (a writable ``/dev`` held 2.7 GB).
* **Memory per process tree**: the sandbox starts blocked, is moved into a memory
  cgroup, then runs (``cgroup``); without cgroups the limit is per process, loudly.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
import warnings
import weakref
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Protocol

import vera_env
from vera_env.errors import SandboxError

from .cgroup import TREE_MEMORY_WARNING, CommandCgroup, MemoryCgroups
from .config import SandboxConfig
from .entropy import BASH_ENV_TEXT, UUID_TEXT, entropy_binds, random_source_bytes
from .process import LaunchSpec
from .result import SandboxLimits
from .seccomp import sandbox_filter, seccomp_fd
from .shims import SHIM_DIR, write_shims
from .staging import StagingCache, StagingPolicy, stage_files
from .workspace import BaseWorkspace, limits_wrapper, remove_tree

__all__ = ["BwrapSandbox", "BwrapWorkspace", "launch_fds", "lease_from", "package_dirs"]

_TOP_LEVEL = ("bin", "lib", "lib32", "lib64", "libx32", "sbin")
_MASK_INIT = 'raise ImportError("vera_env is not available inside the sandbox")\n'
_SANDBOX_USER = "vera"


class _Area(Protocol):
    """A size-capped area mounted under the sandbox's root (``capped.CappedArea``),
    named by what the sandbox needs of it: ``capped`` builds on this module, so this
    one does not import it back, not even for a type."""

    def close(self) -> None: ...


def package_dirs() -> list[Path]:
    """Every ``vera_env`` package directory the sandbox's Python could find."""
    found = {Path(vera_env.__file__).resolve().parent}
    for pattern in ("/usr/lib/python3*/*-packages/vera_env",
                    "/usr/local/lib/python3*/*-packages/vera_env"):
        found.update(Path(p).resolve() for p in glob.glob(pattern))
    return sorted(found)


class BwrapSandbox:
    """Makes bubblewrap-isolated workspaces.

    Args:
        limits: Applied to every command (default ``SandboxLimits()``).
        config: Toolbox and identity (default ``SandboxConfig()``).

    Raises:
        SandboxError: The bwrap executable is not found.
    """

    name = "bwrap"

    def __init__(self, limits: SandboxLimits | None = None,
                 config: SandboxConfig | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self.config = config or SandboxConfig()
        found = shutil.which(self.config.bwrap_path)
        if found is None:
            raise SandboxError(
                f"bubblewrap not found ({self.config.bwrap_path!r}); install the Debian "
                "package 'bubblewrap' or use make_sandbox('local') (no isolation)"
            )
        self.bwrap = found
        self.as_root = os.geteuid() == 0
        base = self.config.workspace_root
        self.root = Path(tempfile.mkdtemp(prefix="vera-bwrap-", dir=base))
        self._workspaces: weakref.WeakSet[BwrapWorkspace] = weakref.WeakSet()
        self.areas: weakref.WeakSet[_Area] = weakref.WeakSet()  # mounted under root
        self._finalizer = weakref.finalize(self, remove_tree, self.root)
        os.chmod(self.root, 0o711)
        self._files = self._write_support_files()
        self._shims = write_shims(self.root / "shims") if self.config.compressor_shims else []
        self.cache = self._make_cache()
        self.memory, self.memory_scope = self._make_memory()
        if self.memory is not None:
            self._memory_finalizer = weakref.finalize(self, self.memory.close)

    @property
    def host_ids(self) -> tuple[int, int]:
        """The host uid and gid the sandboxed commands run as."""
        if self.as_root:
            return self.config.host_uid, self.config.host_gid
        return os.getuid(), os.getgid()

    def _write_support_files(self) -> dict[str, Path]:
        etc = self.root / "etc"
        etc.mkdir(mode=0o755)
        uid = self.config.sandbox_uid
        contents = {
            "passwd": f"root:x:0:0:root:/root:/usr/sbin/nologin\n"
                      f"{_SANDBOX_USER}:x:{uid}:{uid}:sandbox:/tmp:/bin/bash\n"
                      "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
            "group": f"root:x:0:\n{_SANDBOX_USER}:x:{uid}:\nnogroup:x:65534:\n",
            "mask_init": _MASK_INIT,
            "check_env": BASH_ENV_TEXT,
            "random_uuid": UUID_TEXT,
        }
        paths = {}
        for name, text in contents.items():
            path = etc / name
            path.write_text(text)
            path.chmod(0o444)
            paths[name] = path
        paths["random_source"] = etc / "random_source"
        paths["random_source"].write_bytes(random_source_bytes())
        paths["random_source"].chmod(0o444)
        return paths

    def entropy_args(self) -> list[str]:
        """Binds that make a command's or a check's entropy constant (``entropy``)."""
        return entropy_binds(str(self._files["check_env"]), str(self._files["random_uuid"]),
                             str(self._files["random_source"]))

    def support_file(self, name: str) -> Path:
        """A read-only file the sandbox binds (``passwd``, ``group``, ``check_env``...)."""
        return self._files[name]

    def _make_memory(self) -> tuple[MemoryCgroups | None, str]:
        """The memory cgroups, and how memory is limited: "cgroup v1", "cgroup v2" or
        "process" (warned: a tree may hold max_processes x memory_mb)."""
        reason = "SandboxConfig.memory_cgroup is False"
        if self.config.memory_cgroup:
            parent, version, reason = MemoryCgroups.find(self.config.cgroup_parent)
            if parent is not None:
                try:
                    cgroups = MemoryCgroups(parent, version, self.limits.memory_mb * 2**20)
                except SandboxError as exc:
                    reason = str(exc)
                else:
                    return cgroups, f"cgroup v{version}"
        warnings.warn(TREE_MEMORY_WARNING.format(reason=reason), UserWarning, stacklevel=3)
        return None, "process"

    def memory_lease(self) -> AbstractContextManager[CommandCgroup | None]:
        """A memory cgroup for one run (None where memory is limited per process)."""
        return lease_from(self.memory)

    def _make_cache(self) -> StagingCache | None:
        if not self.as_root:
            return None
        cache = self.root / "cache"
        cache.mkdir(mode=0o700)
        return StagingCache(cache)

    def stage(self, files: Mapping[str, Path], *, under: Path | None = None,
              memory: MemoryCgroups | None = None) -> BwrapWorkspace:
        """Create a workspace holding ``files`` (relative name -> source file).

        Args:
            files: Relative name -> source file on the host.
            under: The directory to make it in (default: this sandbox's own), e.g. a
                ``capped.CappedArea``. On another file system a root harness copies
                what it cannot link into a cache of the workspace's own, removed with it.
            memory: The memory cgroups its runs lease (default: the sandbox's).

        Raises:
            SandboxError: A name escapes the workspace or a source cannot be staged.
        """
        if not self._finalizer.alive:
            raise SandboxError("bwrap sandbox is closed")
        base = self.root if under is None else under
        try:
            ws_root = Path(tempfile.mkdtemp(prefix="ws-", dir=base))
        except OSError as exc:
            raise SandboxError(f"staging: cannot create a workspace under {base}: "
                               f"{exc}") from exc
        uid, gid = self.host_ids
        try:
            os.chmod(ws_root, 0o711)
            path = ws_root / "work"
            path.mkdir(mode=0o700)
            if self.as_root:
                os.chown(path, uid, gid)
            policy = StagingPolicy(sandbox_uid=uid, sandbox_gid=gid, chown=self.as_root,
                                   cache=self._cache_for(ws_root))
            report = stage_files(files, path, policy)
        except BaseException:
            remove_tree(ws_root)
            raise
        workspace = self._workspace(path, ws_root, memory or self.memory)
        workspace.record_staged()
        self._workspaces.add(workspace)
        workspace.staged_by_link = report.staged_by_link
        workspace.staged_by_copy = report.staged_by_copy
        return workspace

    def _cache_for(self, ws_root: Path) -> StagingCache | None:
        """The sandbox's cache where it shares the workspace's file system; else (a
        root harness staging on a capped area) one of the workspace's own."""
        if self.cache is None:
            return None
        if os.stat(ws_root).st_dev == os.stat(self.cache.directory).st_dev:
            return self.cache
        own = ws_root / "cache"
        own.mkdir(mode=0o700)
        return StagingCache(own)

    def _workspace(self, path: Path, root: Path,
                   memory: MemoryCgroups | None) -> BwrapWorkspace:
        """The workspace object for a staged directory (a subclass's hook)."""
        return BwrapWorkspace(self, path, root, memory)

    def base_args(self) -> list[str]:
        """The bwrap options every command shares (everything but ``/work``)."""
        cfg = self.config
        uid = str(cfg.sandbox_uid)
        args = [
            self.bwrap, "--unshare-all", "--unshare-user", "--disable-userns",
            "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL",
            "--uid", uid, "--gid", uid, "--hostname", "vera", "--clearenv",
        ]
        for name, value in self.environment().items():
            args += ["--setenv", name, value]
        args += ["--ro-bind", "/usr", "/usr"]
        args += _top_level_links()
        args += ["--perms", "0755", "--dir", "/etc"]
        for entry in cfg.etc_files:
            if os.path.exists(entry):  # follows links: a dangling one would stop bwrap
                args += ["--ro-bind", entry, entry]
        args += ["--ro-bind", str(self._files["passwd"]), "/etc/passwd",
                 "--ro-bind", str(self._files["group"]), "/etc/group"]
        if self._shims:
            args += ["--ro-bind", str(self.root / "shims"), SHIM_DIR]
        for source, dest in cfg.ro_binds.items():
            args += ["--ro-bind", source, dest]
        args += self._mask_args()
        args += ["--proc", "/proc", "--dev", "/dev",
                 "--size", str(cfg.shm_mb * 2**20), "--tmpfs", "/dev/shm",
                 "--remount-ro", "/dev",
                 "--size", str(cfg.tmp_mb * 2**20), "--tmpfs", "/tmp"]
        return args

    def environment(self) -> dict[str, str]:
        """The complete environment commands see inside the sandbox."""
        path = f"{SHIM_DIR}:{self.config.path}" if self._shims else self.config.path
        return {"PATH": path, "HOME": "/tmp", "LANG": "C.UTF-8",
                "TMPDIR": "/tmp", "USER": _SANDBOX_USER, **self.config.env}

    def _mask_args(self) -> list[str]:
        exposed = {"/usr": "/usr", **self.config.ro_binds}
        args: list[str] = []
        for package in package_dirs():
            for source, dest in exposed.items():
                real = Path(source).resolve()
                if package == real or real in package.parents:
                    inside = Path(dest) / package.relative_to(real)
                    args += ["--tmpfs", str(inside),
                             "--ro-bind", str(self._files["mask_init"]),
                             str(inside / "__init__.py"), "--remount-ro", str(inside)]
        return args

    def close(self) -> None:
        """Close every open workspace, then remove support files and cache. Idempotent.

        Workspaces hold a reference to their sandbox, so when left to the garbage
        collector this runs only after the last workspace is gone.
        """
        for workspace in list(self._workspaces):
            workspace.close()
        for area in list(self.areas):  # unmounted before the tree under root goes
            area.close()
        if self.memory is not None:
            self._memory_finalizer()
        self._finalizer()

    def __enter__(self) -> BwrapSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _top_level_links() -> list[str]:
    """Mirror the host's /bin, /lib...: symlinks on merged-usr hosts, binds otherwise."""
    args: list[str] = []
    for name in _TOP_LEVEL:
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    return args


class BwrapWorkspace(BaseWorkspace):
    """A workspace whose commands run under bubblewrap (see the module docstring).

    Attributes:
        staged_by_link: Staged files hard-linked to their source inode.
        staged_by_copy: Staged files copied (into the sandbox's cache or the workspace).
    """

    backend = "bwrap"

    def __init__(self, sandbox: BwrapSandbox, path: Path, root: Path,
                 memory: MemoryCgroups | None = None) -> None:
        super().__init__(path, root, sandbox.limits)
        self._sandbox = sandbox  # keeps the support files alive while we are
        self.memory = memory if memory is not None else sandbox.memory
        self._base_args = sandbox.base_args()
        self.staged_by_link = 0
        self.staged_by_copy = 0

    @contextmanager
    def _launch(self, command: str, *, check: bool, marker_fd: int,
                overlay: Mapping[str, Path]) -> Iterator[LaunchSpec]:
        bind = "--ro-bind" if check else "--bind"
        extra: list[str] = []
        # Constant entropy for commands and checks alike: a coin flip cannot pass for a
        # check, and strength's replay of a command writes what the command wrote.
        extra += self._sandbox.entropy_args()
        for name, source in overlay.items():  # a mutant shown in place of one file
            extra += ["--ro-bind", str(source), f"/work/{name}"]
        with lease_from(self.memory) as memory:
            fds, gate_fd, lockdown = launch_fds(gated=memory is not None, constant_entropy=True)
            argv = [*self._base_args, *lockdown, bind, str(self.path), "/work",
                    *extra, "--chdir", "/work", "--remount-ro", "/", "--",
                    *limits_wrapper(self.limits, marker_fd, command)]
            uid, gid = self._sandbox.host_ids
            root = self._sandbox.as_root
            yield LaunchSpec(
                argv=tuple(argv), env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
                cwd=Path("/"), user=uid if root else None, group=gid if root else None,
                pass_fds=tuple(fds[1:]), info_fd=fds[0], gate_fd=gate_fd, memory=memory,
            )


@contextmanager
def lease_from(pool: MemoryCgroups | None) -> Iterator[CommandCgroup | None]:
    """A leaf of ``pool`` for one run (None where memory is limited per process)."""
    if pool is None:
        yield None
        return
    with pool.lease() as leaf:
        yield leaf


def launch_fds(*, gated: bool, constant_entropy: bool) -> tuple[list[int], int | None,
                                                                  list[str]]:
    """The pipes and filter one bwrap launch is handed, and the options naming them.

    Returns:
        ([info read end, then the fds the launcher inherits], gate write end or None,
        bwrap options): ``--info-fd`` (the sandbox's pid), ``--block-fd`` when
        ``gated`` (held until the harness has placed it in its memory cgroup) and
        ``--seccomp`` (``seccomp.sandbox_filter``).
    """
    info_read, info_write = os.pipe()
    fds, options = [info_read, info_write], ["--info-fd", str(info_write)]
    gate_write = None
    if gated:
        gate_read, gate_write = os.pipe()
        fds.append(gate_read)
        options += ["--block-fd", str(gate_read)]
    program = sandbox_filter(constant_entropy=constant_entropy)
    if program is not None:
        fds.append(seccomp_fd(program))
        options += ["--seccomp", str(fds[-1])]
    return fds, gate_write, options
