"""Checks run without entropy, so a coin flip cannot pass for a discriminating check.

Strength testing (``vera_env.verification.strength``) calls a check discriminating when it passes on
the data and says False on a mutant. A check that flips a coin —
``test $((RANDOM % 2)) -eq 0``, ``python3 -c "import random; print(random.random() <
.7)"`` — would sometimes look like that by luck, and a policy would learn to farm the
luck. So the bwrap backend runs every check (never a command) with its randomness
sources made constant:

* ``/dev/urandom`` and ``/dev/random`` are ``/dev/zero``;
* the ``getrandom`` system call fails with ENOSYS (a seccomp filter), so Python,
  numpy and glibc fall back to ``/dev/urandom`` — zeros — and seed identically;
* bash's ``$RANDOM`` is seeded by a ``BASH_ENV`` file.

Tools that insist on ``getrandom`` (``shuf``, ``sort -R``) fail inside a check, which is
right: a check whose verdict depends on a shuffle is not a check. The clock cannot be
frozen this way (``date +%N``); the controls and the confirmation run in ``strength``
bound what a clock-driven check earns.
"""

from __future__ import annotations

import os
import platform
import struct

__all__ = ["BASH_ENV_PATH", "BASH_ENV_TEXT", "seccomp_program", "seccomp_fd"]

BASH_ENV_PATH = "/opt/vera/check-env"
BASH_ENV_TEXT = "RANDOM=4242\n"

# (AUDIT_ARCH_*, __NR_getrandom) of the architectures the filter knows.
_ARCHES = {"x86_64": (0xC000003E, 318), "aarch64": (0xC00000B7, 278)}
_LD_ABS_W, _JEQ_K, _RET_K = 0x20, 0x15, 0x06
_SECCOMP_RET_ALLOW = 0x7FFF0000
_SECCOMP_RET_ERRNO = 0x00050000
_ENOSYS = 38


def seccomp_program(machine: str | None = None) -> bytes | None:
    """A classic-BPF filter failing ``getrandom`` with ENOSYS; None on unknown arches."""
    arch = _ARCHES.get(machine or platform.machine())
    if arch is None:
        return None
    audit_arch, nr_getrandom = arch
    instructions = (
        (_LD_ABS_W, 0, 0, 4),                    # A = seccomp_data.arch
        (_JEQ_K, 0, 3, audit_arch),              # another ABI: allow
        (_LD_ABS_W, 0, 0, 0),                    # A = seccomp_data.nr
        (_JEQ_K, 0, 1, nr_getrandom),
        (_RET_K, 0, 0, _SECCOMP_RET_ERRNO | _ENOSYS),
        (_RET_K, 0, 0, _SECCOMP_RET_ALLOW),
    )
    return b"".join(struct.pack("<HBBI", *ins) for ins in instructions)


def seccomp_fd(program: bytes) -> int:
    """A fresh readable fd holding ``program`` (bwrap ``--seccomp`` reads it once)."""
    fd = os.memfd_create("vera-check-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd
