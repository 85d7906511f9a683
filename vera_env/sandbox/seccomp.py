"""The system calls no sandboxed process may make: kernel state the namespaces leave shared.

bwrap's namespaces give every command its own mounts, pids, network, IPC and hostname,
but not everything the kernel keeps is namespaced. Measured on this project's harness
machine: with the harness in a session keyring, as under a systemd service,
a PAM login or a runc/Kubernetes container, a check ran ``add_key("user", "vera-note",
"hash123", @s)`` in one sandbox, and a check in *another episode's* sandbox found the
key and read ``hash123`` back. A check that stores a file's hash on its first run and
compares on the next "discriminates" on any file, one episode can leave notes for the
next, and the harness's own keys are readable. So every command and every check runs
under a seccomp filter that fails:

* ``add_key``, ``request_key``, ``keyctl`` (the keyrings are not namespaced; Docker's
  default profile blocks them for the same reason);
* ``mq_open``: POSIX message queues live in the IPC namespace, which a long-lived
  sandbox (``server``) keeps across commands, and nothing there enumerates them;
* ``getrandom``, for commands and checks alike (``entropy``: constant entropy, so
  strength's replay of a command draws the same numbers the command drew).

They fail with ENOSYS, "this kernel does not have it", which tools handle as a missing
feature. One ``getrandom`` call is answered differently: glibc's ``malloc`` asks for an
8-byte key with ``GRND_NONBLOCK`` at a process's first allocation and, in glibc 2.36,
does not restore ``errno`` when that fails, so a tool whose first allocation follows a
failed ``open`` reported the wrong reason (measured: ``zcat missing.gz`` printed
"Function not implemented"). That exact call (8 bytes, ``GRND_NONBLOCK``) returns 0
bytes and no error: glibc then keys its allocator from the clock, as it does on a
failure, ``errno`` is intact, and no random byte reaches the program.

A filter that matches only the native system-call numbers is not a filter:
a 64-bit process can enter the kernel through the i386 ABI (``int $0x80``; measured:
i386 ``keyctl``, system call 288 there, returned a key id through the getrandom-only
filter this module replaces) or, where the kernel has it, the x32 ABI (numbers with bit 30 set). Both
reach the same kernel functions under other numbers, so a call through a foreign ABI
kills the process (SIGSYS): nothing in a data analysis issues one.
"""

from __future__ import annotations

import errno
import functools
import os
import platform
import struct
from collections.abc import Iterable

__all__ = [
    "CHECK_DENIED",
    "COMMAND_DENIED",
    "filter_program",
    "sandbox_filter",
    "seccomp_fd",
    "syscall_number",
]

COMMAND_DENIED: tuple[str, ...] = ("add_key", "request_key", "keyctl", "mq_open")
"""Failed for every command and check: shared kernel state (see the module docstring)."""
CHECK_DENIED: tuple[str, ...] = (*COMMAND_DENIED, "getrandom")
"""Failed for checks: the above plus entropy (``entropy``)."""

# machine -> (AUDIT_ARCH_*, first number of a foreign ABI sharing the arch or None,
# system-call numbers). x86_64's x32 ABI reuses AUDIT_ARCH_X86_64 with bit 30 set.
_ARCHES: dict[str, tuple[int, int | None, dict[str, int]]] = {
    "x86_64": (0xC000003E, 0x40000000, {
        "add_key": 248, "request_key": 249, "keyctl": 250, "getrandom": 318,
        "mq_open": 240}),
    "aarch64": (0xC00000B7, None, {
        "add_key": 217, "request_key": 218, "keyctl": 219, "getrandom": 278,
        "mq_open": 180}),
}
_LD_ABS_W, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_ARCH_OFFSET, _NR_OFFSET = 4, 0
_ARG_OFFSET = 16
"""``seccomp_data.args[0]``; each argument is 8 bytes, low word first (both arches are
little-endian)."""
MALLOC_KEY_PROBE = (8, 1)
"""(bytes, flags) of glibc malloc's ``getrandom`` (an 8-byte key, ``GRND_NONBLOCK``):
answered with 0 bytes, no error, where ``getrandom`` is denied (module docstring)."""


def syscall_number(name: str, machine: str | None = None) -> int | None:
    """The native number of system call ``name`` on ``machine``; None if unknown."""
    arch = _ARCHES.get(machine or platform.machine())
    return None if arch is None else arch[2].get(name)


def filter_program(denied: Iterable[str], machine: str | None = None,
                   *, errno_value: int = errno.ENOSYS) -> bytes | None:
    """A classic-BPF seccomp program: ``denied`` calls fail, foreign ABIs are killed.

    Args:
        denied: System-call names (each must be known for ``machine``).
        machine: ``platform.machine()`` spelling; default this machine.
        errno_value: What a denied call returns (as ``-errno``).

    Returns:
        The program (what bwrap ``--seccomp`` reads), or None on an architecture this
        module has no table for.

    Raises:
        ValueError: A name in ``denied`` is not in the table.
    """
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, foreign_from, numbers = arch
    unknown = sorted(set(denied) - set(numbers))
    if unknown:
        raise ValueError(f"no system-call number known for {unknown}")
    probe = numbers["getrandom"] if "getrandom" in denied else None
    targets = sorted({numbers[name] for name in denied} - {probe})
    # Layout: [arch check] [load nr] [foreign-number check] [one jeq per target]
    # [getrandom: jeq, then its arguments compared with MALLOC_KEY_PROBE, RET 0 bytes]
    # ALLOW, DENY(errno), KILL. Jump offsets count from the next instruction; classic BPF
    # jumps only forwards, so the probe's block sits before ALLOW.
    block: list[tuple[int, int, int, int]] = []
    if probe is not None:
        size, flags = MALLOC_KEY_PROBE
        compares = [(_ARG_OFFSET + 8, size), (_ARG_OFFSET + 12, 0), (_ARG_OFFSET + 16, flags)]
        block.append((_JEQ_K, 0, 2 * len(compares) + 1, probe))  # not getrandom: ALLOW
        for index, (offset, value) in enumerate(compares):
            block.append((_LD_ABS_W, 0, 0, offset))
            block.append((_JEQ_K, 0, 2 * (len(compares) - index), value))  # else DENY
        block.append((_RET_K, 0, 0, _RET_ERRNO))  # errno 0: the call returns 0 bytes
    body: list[tuple[int, int, int, int]] = []
    n_targets = len(targets)
    checks = 1 if foreign_from is not None else 0
    tail = checks + n_targets + len(block)  # instructions between "load nr" and ALLOW
    body.append((_LD_ABS_W, 0, 0, _ARCH_OFFSET))
    body.append((_JEQ_K, 0, 1 + tail + 2, audit_arch))  # else KILL
    body.append((_LD_ABS_W, 0, 0, _NR_OFFSET))
    if foreign_from is not None:
        body.append((_JGE_K, tail - checks + 2, 0, foreign_from))  # x32 numbers: KILL
    for index, number in enumerate(targets):
        body.append((_JEQ_K, n_targets - index + len(block), 0, number))  # to DENY
    body.extend(block)
    body.append((_RET_K, 0, 0, _RET_ALLOW))
    body.append((_RET_K, 0, 0, _RET_ERRNO | (errno_value & 0xFFFF)))
    body.append((_RET_K, 0, 0, _RET_KILL_PROCESS))
    return b"".join(struct.pack("<HBBI", *ins) for ins in body)


@functools.cache
def sandbox_filter(*, constant_entropy: bool) -> bytes | None:
    """The filter a sandboxed run gets: ``CHECK_DENIED`` with constant entropy, else
    ``COMMAND_DENIED``; None on an architecture without a table."""
    return filter_program(CHECK_DENIED if constant_entropy else COMMAND_DENIED)


def seccomp_fd(program: bytes) -> int:
    """A fresh readable fd holding ``program`` (bwrap ``--seccomp`` reads it once)."""
    fd = os.memfd_create("vera-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
