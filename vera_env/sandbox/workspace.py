"""The Workspace and Sandbox protocols, and the lifecycle both backends share.

A workspace is one episode's directory plus everything running in it. Its lifecycle
is the same whatever isolates it, so it lives here once: commands go through one
wrapper that applies the limits and signals that the sandbox is up, through one
reader (``process.run_process``) and one result conversion; ``close()`` kills what is
running and removes the temp dir; a ``weakref.finalize`` does the same for a
workspace nobody closed, so neither a temp dir nor a process outlives it.

Two channels of failure, as everywhere in vera_env: model text that cannot run (a
NUL byte, a command longer than the kernel accepts as one argument) is a result
with status ``error``; a sandbox that cannot start raises ``SandboxError``.

Two extensions serve strength testing (``vera_env.verification.strength``): ``run_check`` takes an
``overlay`` (workspace name -> host file shown in its place, read-only), so a check
can be re-run against a mutant of one file without copying the rest; and
``scratch_dir`` gives the harness a private directory for those files, outside what
the sandbox sees and removed with the workspace. Every command that may write is
watched by the workspace-size limit (``disk``).

Two extension points serve backends that run commands some other way:
``_run_outcome`` (a fresh process per command by default; the ``server`` backend sends
commands and checks without an overlay to long-lived sandboxes and leaves the rest to
this default) and ``_on_close`` (what to stop before the directory goes: those
servers). The
checks around it — the closed workspace, model text that cannot run, the workspace's
own mode, the disk watch, the result — stay here, the same for every backend.

Before every command the workspace directory gets its mode back (0700): measured:
``chmod 000 /work`` made every later command and check fail to start,
``SandboxError`` from model text, so an episode the model was losing became
unscorable, an opt-out of a wrong answer.
"""

from __future__ import annotations

import abc
import ctypes
import os
import shutil
import stat
import tempfile
import weakref
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import replace
from pathlib import Path
from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from vera_env.errors import SandboxError, SandboxStartTimeout
from vera_env.wire.text import describe_char

from .disk import DiskWatch, Usage, inodes_under
from .process import LaunchSpec, ProcessOutcome, ProcessTracker, run_process
from .result import (
    STATUS_DISK_LIMIT,
    STATUS_ERROR,
    STATUS_KILLED,
    STATUS_MEMORY_LIMIT,
    STATUS_OK,
    STATUS_OUTPUT_LIMIT,
    STATUS_TIMEOUT,
    ExecResult,
    SandboxLimits,
)
from .staging import check_rel_name

__all__ = ["BaseWorkspace", "Sandbox", "Workspace", "command_problem", "limits_wrapper",
           "remove_tree"]

_CLOSE_WAIT_S = 10.0
_WORKSPACE_MODE = 0o700
# The kernel refuses a single argument longer than this (MAX_ARG_STRLEN, NUL included).
_MAX_COMMAND_BYTES = 131071

# Runs inside the sandbox as ``bash -c _WRAPPER vera VMEM_KB NPROC FSIZE_KB MARKER_FD CMD``.
# The command is an argument, never spliced into script text. A ulimit that fails
# exits before the marker, so it is reported as a sandbox fault, not ignored.
_WRAPPER = (
    'ulimit -c 0 -v "$1" -u "$2" -f "$3" || exit 125\n'
    'printf s >&"$4"; marker=$4; exec {marker}>&-\n'
    'exec bash -c "$5"'
)


@runtime_checkable
class Workspace(Protocol):
    """One episode's working directory (mounted at ``/work`` inside the sandbox)."""

    path: Path

    def run(self, command: str, *, timeout_s: float | None = None) -> ExecResult: ...

    def run_check(self, command: str, *, timeout_s: float | None = None,
                  overlay: Mapping[str, Path] | None = None) -> ExecResult: ...

    def listing(self) -> list[str]: ...

    def scratch_dir(self, prefix: str = "scratch-") -> Path: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...


@runtime_checkable
class Sandbox(Protocol):
    """Makes workspaces: ``stage`` puts task files in a fresh one.

    ``close`` releases what the sandbox holds: support files, a staging cache, memory
    cgroups, mounted areas, and the workspaces it tracks (bwrap closes those still
    open; a local workspace owns its directory alone). Every backend has it, a no-op
    where there is nothing to release, so an owner closes a sandbox without asking
    which kind it is. It must be idempotent.
    """

    name: str

    def stage(self, files: Mapping[str, Path]) -> Workspace: ...

    def close(self) -> None: ...


def limits_wrapper(limits: SandboxLimits, marker_fd: int, command: str,
                   *, extra_processes: int = 0) -> tuple[str, ...]:
    """The argv that applies ``limits`` and then runs ``command`` with bash."""
    return (
        "bash", "-c", _WRAPPER, "vera",
        str(limits.memory_mb * 1024),
        str(limits.max_processes + extra_processes),
        str(limits.max_file_mb * 1024),
        str(marker_fd),
        command,
    )


def remove_tree(path: Path) -> None:
    """Delete ``path`` even where the command removed its own permissions."""

    top = os.path.abspath(path)

    def _retry(_func: object, failed: str, _exc: object) -> None:
        try:
            if os.path.ismount(failed) and _detach(failed):  # a capped area left mounted
                os.rmdir(failed)
                return
            if os.path.abspath(failed) != top:  # never touch anything above the tree
                os.chmod(os.path.dirname(failed), stat.S_IRWXU)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, stat.S_IRWXU)
                shutil.rmtree(failed, onerror=_retry)
            else:
                os.unlink(failed)
        except FileNotFoundError:
            pass  # removed concurrently (a check's throwaway copy); gone is the goal

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=_retry)


def _detach(path: str) -> bool:
    """Lazily unmount ``path`` (root only): a strength area (``capped``) whose episode
    was never closed is still mounted when its sandbox's root is removed."""
    if os.geteuid() != 0:
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    return bool(libc.umount2(os.fsencode(path), 2) == 0)  # 2: MNT_DETACH


def _finalize(tracker: ProcessTracker, root: Path, closers: list[Callable[[], None]]) -> None:
    for closer in closers:  # what a backend runs beside the tracked commands (a server)
        closer()
    tracker.kill_all(close=True)
    # A command killed from another thread is still being drained and reaped there;
    # removing the tree under it could race with its last writes.
    tracker.wait_idle(_CLOSE_WAIT_S)
    remove_tree(root)


class BaseWorkspace(abc.ABC):
    """Lifecycle, limits and result conversion; a backend supplies ``_launch``.

    Args:
        path: The writable workspace directory on the host.
        root: The temp dir that holds ``path`` and anything else of this workspace;
            removed on close.
        limits: Applied to every command.
    """

    backend = "base"

    def __init__(self, path: Path, root: Path, limits: SandboxLimits) -> None:
        self.path = path
        self.limits = limits
        self._root = root
        self._tracker = ProcessTracker()
        self._closers: list[Callable[[], None]] = []
        self._finalizer = weakref.finalize(self, _finalize, self._tracker, root, self._closers)
        self._staged: frozenset[tuple[int, int]] = frozenset()
        self._usage: Usage | None = None  # after the last command (disk watch)
        self._shared_full: Callable[[], bool] | None = None

    @abc.abstractmethod
    def _launch(self, command: str, *, check: bool, marker_fd: int,
                overlay: Mapping[str, Path]) -> AbstractContextManager[LaunchSpec]:
        """How a backend starts one command (bwrap argv, or a plain subprocess)."""

    def _on_close(self, closer: Callable[[], None]) -> None:
        """Run ``closer`` first when the workspace closes (or is collected), before its
        commands are killed and its directory removed. It must not hold the workspace."""
        self._closers.append(closer)

    def record_staged(self) -> None:
        """Remember what staging put here: those inodes do not count against the
        workspace-size limit (called by the sandbox right after staging)."""
        self._staged = inodes_under(self.path)

    def watch_shared(self, full: Callable[[], bool]) -> None:
        """Also stop a command while ``full()`` says the file system this workspace
        shares with others is full (``capped.CappedArea``): the kernel may have refused
        it disk (ENOSPC) because of another workspace's writes, so it ends
        ``disk_limit``, not as if nothing had happened."""
        self._shared_full = full

    def run(self, command: str, *, timeout_s: float | None = None) -> ExecResult:
        """Run a shell command with the workspace writable.

        Args:
            command: Shell text, run by ``bash -c`` in the workspace.
            timeout_s: Wall-clock limit; default ``limits.timeout_s``.

        Returns:
            The result; every way the command itself can end is a value in it.

        Raises:
            SandboxError: The sandbox could not start, or the workspace is closed.
            ValueError: ``timeout_s`` is not positive.
        """
        return self._execute(command, _timeout(timeout_s, self.limits.timeout_s), check=False)

    def run_check(self, command: str, *, timeout_s: float | None = None,
                  overlay: Mapping[str, Path] | None = None) -> ExecResult:
        """Run a check: the workspace is read-only to it (``/tmp`` stays writable).

        A check that wrote would change what the next check reads, so its verdict
        would depend on check order; read-only makes a node's checks independent.

        Args:
            command: The check's shell text.
            timeout_s: Wall-clock limit; default ``limits.check_timeout_s``.
            overlay: Workspace file name -> host file to show in its place (read-only)
                for this run only; the workspace itself is never touched. Used by
                strength testing to run a check against a mutant of its data.

        Raises:
            SandboxError: The sandbox could not start, or the workspace is closed.
            ValueError: ``timeout_s`` is not positive, or an overlay name is not a
                regular file of the workspace or its source not a regular file.
        """
        layers = self._checked_overlay(overlay or {})
        return self._execute(command, _timeout(timeout_s, self.limits.check_timeout_s),
                             check=True, overlay=layers)

    def scratch_dir(self, prefix: str = "scratch-") -> Path:
        """A new private directory for harness files (never visible to commands).

        It lies beside the workspace, on the same file system, traversable (0711) so
        a bwrap backend can bind files from it; ``close()`` removes it with the rest.

        Raises:
            SandboxError: The workspace is closed or the directory cannot be made.
        """
        if self.closed:
            raise SandboxError(f"{self.backend} workspace {self.path} is closed")
        try:
            path = Path(tempfile.mkdtemp(prefix=prefix, dir=self._root))
            os.chmod(path, 0o711)
        except OSError as exc:
            raise SandboxError(f"cannot make a scratch directory: {exc}") from exc
        return path

    def _checked_overlay(self, overlay: Mapping[str, Path]) -> dict[str, Path]:
        # A name must be a regular file reached without a symlink: a bind onto a link
        # would land wherever the link points.
        base = os.path.realpath(self.path)
        checked: dict[str, Path] = {}
        for name, source in overlay.items():
            try:
                rel = check_rel_name(name).as_posix()
            except SandboxError as exc:
                raise ValueError(f"overlay name {name!r}: {exc}") from exc
            target = os.path.join(base, rel)
            if (os.path.realpath(target) != target or not os.path.isfile(target)
                    or not os.path.isfile(source) or os.path.islink(source)):
                raise ValueError(f"overlay {name!r} -> {source}: both must be regular files, "
                                 "the name inside the workspace and not behind a link")
            checked[rel] = Path(source)
        return checked

    def _execute(self, command: str, timeout_s: float, *, check: bool,
                 overlay: Mapping[str, Path] | None = None) -> ExecResult:
        if self.closed:
            raise SandboxError(f"{self.backend} workspace {self.path} is closed")
        problem = command_problem(command)
        if problem:
            return ExecResult("", problem, -1, False, 0.0, status=STATUS_ERROR)
        _restore_mode(self.path)
        watch = None if check else DiskWatch(
            self.path, self.limits.max_workspace_mb * 2**20, self._staged,
            self.limits.disk_poll_s, start=self._usage,
            limit_inodes=self.limits.max_workspace_inodes, shared_full=self._shared_full)
        outcome = self._run_outcome(command, timeout_s=timeout_s, check=check,
                                    overlay=overlay or {}, watch=watch)
        if watch is not None:
            self._usage = None
            if outcome.started:
                if watch.over(full=True) and not outcome.disk_limited:
                    outcome = replace(outcome, disk_limited=True)  # ended between two polls
                # Only commands write the workspace (checks see it read-only), so the
                # next command starts from this measurement instead of walking again.
                self._usage = watch.last
        return self._to_result(outcome, timeout_s)

    def _run_outcome(self, command: str, *, timeout_s: float, check: bool,
                     overlay: Mapping[str, Path], watch: DiskWatch | None) -> ProcessOutcome:
        """Run one command in a fresh process (``_launch``) and report what it did.

        The extension point for backends that run commands another way: override it,
        handle what you can (the ``server`` backend: anything without an overlay)
        and call ``super()._run_outcome`` for the rest. The caller has already refused
        a closed workspace and text that cannot run, and turns the outcome into the
        result; ``watch`` (None for checks) must be polled while the command runs.

        Raises:
            SandboxError: The sandbox could not start.
        """
        read_fd, write_fd = os.pipe()
        handed_over = False
        try:
            with self._launch(command, check=check, marker_fd=write_fd,
                              overlay=overlay) as spec:
                spec = replace(spec, pass_fds=(*spec.pass_fds, write_fd), marker_fd=read_fd)
                handed_over = True  # run_process closes both ends from here on
                return run_process(
                    spec, self._tracker, timeout_s=timeout_s,
                    max_output_chars=self.limits.max_output_chars,
                    max_output_bytes=self.limits.max_output_bytes, watchdog=watch,
                )
        finally:
            if not handed_over:
                os.close(read_fd)
                os.close(write_fd)

    def _to_result(self, outcome: ProcessOutcome, timeout_s: float) -> ExecResult:
        if not outcome.started and not outcome.aborted:
            if outcome.timed_out:
                raise SandboxStartTimeout(f"{self.backend} sandbox did not start within "
                                          f"{outcome.duration_s:.1f}s", timeout_s)
            raise SandboxError(
                f"{self.backend} sandbox failed to start (exit {outcome.returncode}): "
                f"{outcome.stderr.strip()[-2000:] or 'no message'}"
            )
        if outcome.timed_out:
            status = STATUS_TIMEOUT
        elif outcome.output_limited:
            status = STATUS_OUTPUT_LIMIT
        elif outcome.memory_limited:
            status = STATUS_MEMORY_LIMIT
        elif outcome.disk_limited:
            status = STATUS_DISK_LIMIT
        elif outcome.aborted:
            status = STATUS_KILLED
        else:
            status = STATUS_OK
        return ExecResult(
            stdout=outcome.stdout, stderr=outcome.stderr, exit_code=outcome.returncode,
            timed_out=outcome.timed_out, duration_s=outcome.duration_s, status=status,
            stdout_truncated=outcome.stdout_truncated,
            stderr_truncated=outcome.stderr_truncated, bytes_read=outcome.bytes_read,
            cpu_s=outcome.cpu_s, cpu_wait_s=outcome.cpu_wait_s,
        )

    def listing(self) -> list[str]:
        """Relative paths of the files now in the workspace, sorted."""
        found: list[str] = []
        for directory, _dirs, files in os.walk(self.path):
            rel = Path(directory).relative_to(self.path)
            found.extend((rel / name).as_posix() for name in files)
        return sorted(found)

    def abort(self) -> None:
        """Kill whatever is running now (its result gets status ``killed``)."""
        self._tracker.kill_all()

    @property
    def closed(self) -> bool:
        """``close()`` has run (or the finalizer has)."""
        return not self._finalizer.alive

    def close(self) -> None:
        """Kill everything running and remove the temp dir. Idempotent."""
        self._finalizer()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def _timeout(given: float | None, default: float) -> float:
    if given is None:
        return default
    if not given > 0:
        raise ValueError(f"timeout_s must be > 0 seconds, got {given!r}")
    return float(given)


def _restore_mode(path: Path) -> None:
    try:
        if stat.S_IMODE(os.lstat(path).st_mode) != _WORKSPACE_MODE:
            os.chmod(path, _WORKSPACE_MODE)
    except OSError as exc:
        raise SandboxError(f"cannot restore the workspace's mode: {exc}") from exc


def command_problem(command: str) -> str:
    """Why ``command`` cannot run at all ("" when it can): the model's to fix."""
    if "\0" in command:
        return "command contains a NUL byte; remove it"
    try:
        size = len(command.encode("utf-8", errors="surrogateescape"))
    except UnicodeEncodeError as exc:  # a lone surrogate outside surrogateescape's range
        return (f"command contains {describe_char(command[exc.start])}; write the byte as "
                "an escape ($'\\xff')")
    if size > _MAX_COMMAND_BYTES:
        return (f"command is {size} bytes, over the {_MAX_COMMAND_BYTES}-byte limit; "
                "write long scripts to a file first")
    return ""

