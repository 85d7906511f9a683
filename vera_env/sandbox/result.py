"""What one sandboxed command produced, and the limits it ran under.

``ExecResult`` is the only thing the rest of the package sees of a command: the env
puts ``as_tool_output()`` into the recent-commands window and ``checks.py`` reads the
verdict from ``stdout``. Every way a command can end is a value here, never an
exception, because the command text comes from the model: a timeout, an output flood
or a fork bomb is the model's doing and must cost it the step, not crash the episode.
Only the infrastructure (bwrap missing, staging failed) raises ``SandboxError``.

Output is clipped at both ends with an explicit marker. The head carries what a
command produced; the tail carries the traceback that says why it stopped. The seed
loop measured what unbounded outputs cost: four 20k-char outputs in a prompt pushed
it to ~324 KB and 68 of 70 problems died as provider timeouts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "STATUS_DISK_LIMIT",
    "STATUS_ERROR",
    "STATUS_KILLED",
    "STATUS_MEMORY_LIMIT",
    "STATUS_OK",
    "STATUS_OUTPUT_LIMIT",
    "STATUS_TIMEOUT",
    "ExecResult",
    "ExecStatus",
    "SandboxLimits",
]

ExecStatus = Literal["ok", "timeout", "output_limit", "memory_limit", "disk_limit", "killed",
                     "error"]
STATUS_OK: ExecStatus = "ok"
STATUS_TIMEOUT: ExecStatus = "timeout"
STATUS_OUTPUT_LIMIT: ExecStatus = "output_limit"
STATUS_MEMORY_LIMIT: ExecStatus = "memory_limit"
STATUS_DISK_LIMIT: ExecStatus = "disk_limit"
STATUS_KILLED: ExecStatus = "killed"
STATUS_ERROR: ExecStatus = "error"


class SandboxLimits(BaseModel):
    """Resource limits applied to every command a workspace runs.

    Memory is per process (``ulimit -v``) and, where the harness can make memory
    cgroups, also per command tree (``cgroup``); file size is per process (``ulimit
    -f``); the process count is per command (each bwrap command has its own user
    namespace, and the kernel counts ``RLIMIT_NPROC`` per namespace).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    timeout_s: float = Field(default=60.0, gt=0)
    """Wall-clock limit of ``Workspace.run``; the process tree is killed at the limit."""
    check_timeout_s: float = Field(default=30.0, gt=0)
    """Wall-clock limit of ``Workspace.run_check``."""
    memory_mb: int = Field(default=2048, ge=16)
    """Virtual memory per process (``ulimit -v``), and memory of the command's whole
    process tree, its ``/tmp`` and ``/dev/shm`` files included, where a memory cgroup
    can be made (``memory_limit`` when the tree passes it)."""
    max_processes: int = Field(default=256, ge=4)
    """Processes and threads per command (``ulimit -u``)."""
    max_file_mb: int = Field(default=1024, ge=1)
    """Largest file a command may write (``ulimit -f``)."""
    max_output_chars: int = Field(default=20_000, ge=100)
    """Characters kept per stream (head + tail, with an elision marker between)."""
    max_output_bytes: int = Field(default=64 * 2**20, ge=1024)
    """Bytes read from stdout+stderr before the command is killed (``output_limit``)."""
    max_workspace_mb: int = Field(default=4096, ge=1)
    """Disk the agent's own files may take in the workspace (staged data excluded).
    ``max_file_mb`` bounds one file, not how many; a command that grows the workspace
    past this is killed (``disk_limit``), so a disk filler cannot fill the host disk
    the workspace lives on. Measured every ``disk_poll_s`` while a command runs and
    once after it ends; the overshoot is what the command writes in one interval."""
    max_workspace_inodes: int = Field(default=100_000, ge=16)
    """Files, directories and links the agent's own entries may number (staged data
    excluded): a million empty files cost the host inodes and every measurement a
    walk, not bytes. Past it the growing command is killed (``disk_limit``)."""
    disk_poll_s: float = Field(default=0.25, gt=0)
    """Interval of the workspace-size measurement while a command runs (stretched
    automatically when one measurement takes long, e.g. a million files)."""


@dataclass(frozen=True, slots=True)
class ExecResult:
    """The outcome of one command.

    Attributes:
        stdout: Standard output, decoded with ``errors="replace"`` and clipped.
        stderr: Standard error, likewise.
        exit_code: The command's exit status; 128+N when a signal N ended it.
        timed_out: The wall-clock limit was reached and the process tree killed.
        duration_s: Wall-clock seconds from spawn to the end of reading.
        status: How the command ended (``ok`` covers any exit code).
        stdout_truncated: ``stdout`` lost characters to the cap.
        stderr_truncated: ``stderr`` lost characters to the cap.
        bytes_read: Bytes read from both streams before clipping.
        cpu_s: CPU seconds (user and system) the command's whole process tree used,
            from its cgroup; None where it is not counted (no cgroup, ``local``).
        cpu_wait_s: Seconds of ``duration_s`` in which some process of the tree was
            ready to run but waited for a CPU (its cgroup's PSI); None where not
            counted. ``duration_s - cpu_wait_s`` is what another process's load cannot
            raise.
    """

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool
    duration_s: float
    status: ExecStatus = STATUS_OK
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    bytes_read: int = 0
    cpu_s: float | None = None
    cpu_wait_s: float | None = None

    @property
    def ok(self) -> bool:
        """The command ran to completion and exited 0."""
        return self.status == STATUS_OK and self.exit_code == 0

    def as_tool_output(self) -> str:
        """Render the result the way the model sees it.

        Returns:
            stdout, then stderr under a ``[stderr]`` marker, then one bracketed note
            for a non-zero exit, a timeout, an output limit or an abort.
        """
        parts: list[str] = []
        if self.stdout:
            parts.append(self.stdout.rstrip("\n"))
        if self.stderr:
            parts.append("[stderr]\n" + self.stderr.rstrip("\n"))
        parts.extend(self._notes())
        return "\n".join(parts)

    def _notes(self) -> list[str]:
        if self.status == STATUS_TIMEOUT:
            return [f"[timed out after {self.duration_s:.1f}s: process tree killed]"]
        if self.status == STATUS_OUTPUT_LIMIT:
            return [
                f"[output limit: stopped reading after {self.bytes_read} bytes: "
                "process tree killed; write large output to a file instead]"
            ]
        if self.status == STATUS_MEMORY_LIMIT:
            return [("[memory limit: the command's processes together used more memory "
                     "than allowed (files in /tmp and /dev/shm count); the kernel killed "
                     f"one of them. Exit {self.exit_code}. Process the data in chunks]")]
        if self.status == STATUS_DISK_LIMIT:
            return [("[disk limit: the workspace grew past its size or file-count limit, "
                     "or has directories the harness cannot measure (nested too deep, "
                     "unreadable); the command was stopped. Delete files you no longer "
                     "need before writing more]")]
        if self.status == STATUS_KILLED:
            return ["[killed: the command was aborted]"]
        if self.status == STATUS_ERROR:
            return ["[not run]"]
        return [f"[exit {self.exit_code}]"] if self.exit_code != 0 else []
