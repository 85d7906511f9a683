"""Commands and checks run with constant entropy, so a verdict is a function of the data.

Strength testing (``vera_env.verification.strength``) calls a check discriminating when it passes on
the data and says False on a mutant. A check that flips a coin —
``test $((RANDOM % 2)) -eq 0``, ``python3 -c "import random; print(random.random() <
.7)"`` — would sometimes look like that by luck, and a policy would learn to farm the
luck. And strength *replays* the episode's file-writing commands on each variant of
the data (``echo 42 > a.txt`` must replay to the same file, ``awk ... >
het.txt`` to a different count): a command that drew random numbers must draw the same
ones in the replay, or every file it wrote would look like data. So the bwrap backend
runs every command and every check with its randomness sources made constant:

* ``/dev/urandom`` and ``/dev/random`` are ``/dev/zero``, and
  ``/proc/sys/kernel/random/uuid`` is a fixed UUID;
* the ``getrandom`` system call fails with ENOSYS (a seccomp filter), so Python,
  numpy and glibc fall back to ``/dev/urandom`` — zeros — and seed identically
  (glibc malloc's 8-byte key request gets 0 bytes and no error instead, so that it
  cannot overwrite ``errno``: ``seccomp``);
* bash's ``$RANDOM`` is seeded by a ``BASH_ENV`` file.

* address-space layout randomisation is off (``fixed_address_layout``): the launcher
  (bwrap, or the command itself for the local backend) is started with the
  ``ADDR_NO_RANDOMIZE`` personality, which every process under it inherits across
  exec, so the stack, heap, libraries and vDSO sit at the same addresses on every run.
  Measured: a node of coin checks reading the stack's address from
  ``/proc/self/maps`` earned by chance while it moved.

``shuf`` and ``sort -R`` insist on ``getrandom``; shims (``shims``) hand them a fixed
pseudo-random ``--random-source`` instead, so they shuffle, the same way every time.
The clock cannot be frozen this way (``date +%N``), nor the 16 bytes the kernel hands
every program (``AT_RANDOM``: their address is fixed, their value is not); the
controls and the confirmation replay in ``strength`` bound what such a check earns.
"""

from __future__ import annotations

import ctypes
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

from .seccomp import filter_program, seccomp_fd

__all__ = ["ASLR_WARNING", "BASH_ENV_PATH", "BASH_ENV_TEXT", "RANDOM_SOURCE_PATH",
           "UUID_TEXT", "entropy_binds", "fixed_address_layout", "random_source_bytes",
           "seccomp_fd", "seccomp_program"]

ASLR_WARNING = ("address randomisation stays on inside the sandbox ({reason}): a check "
                "reading a stack or library address sees a new value on every run")
_ADDR_NO_RANDOMIZE = 0x0040000
_QUERY = 0xFFFFFFFF
_warned = threading.Event()

BASH_ENV_PATH = "/opt/vera/check-env"
BASH_ENV_TEXT = "RANDOM=4242\n"
UUID_TEXT = "6f1c1d52-2a0e-4b8e-9a53-7e0d1b4c9f21\n"
RANDOM_SOURCE_PATH = "/opt/vera/random"
_RANDOM_SOURCE_BYTES = 4 << 20


def entropy_binds(bash_env: str, uuid: str, random_source: str) -> list[str]:
    """bwrap arguments that make every entropy source but ``getrandom`` constant.

    Args:
        bash_env: Host file holding ``BASH_ENV_TEXT``.
        uuid: Host file holding ``UUID_TEXT``.
        random_source: Host file of ``random_source_bytes()`` (the shims' source).
    """
    return ["--setenv", "BASH_ENV", BASH_ENV_PATH, "--ro-bind", bash_env, BASH_ENV_PATH,
            "--dev-bind", "/dev/zero", "/dev/urandom", "--dev-bind", "/dev/zero", "/dev/random",
            "--ro-bind", uuid, "/proc/sys/kernel/random/uuid",
            "--ro-bind", random_source, RANDOM_SOURCE_PATH]


def random_source_bytes() -> bytes:
    """Fixed pseudo-random bytes for ``shuf``/``sort -R`` (enough for about a million lines)."""
    import random  # noqa: PLC0415 (only the server's start-up needs it)

    return random.Random(4242).randbytes(_RANDOM_SOURCE_BYTES)


def seccomp_program(machine: str | None = None) -> bytes | None:
    """A filter failing ``getrandom`` with ENOSYS; None on unknown arches.

    Built by ``seccomp`` (which also kills calls through a foreign ABI: i386
    ``getrandom`` through ``int $0x80`` would otherwise bypass it). The sandbox itself
    applies ``seccomp.sandbox_filter``, which adds the shared-kernel-state calls.
    """
    return filter_program(("getrandom",), machine)


@contextmanager
def fixed_address_layout() -> Iterator[None]:
    """While open, programs this thread starts run without address randomisation.

    A personality is a property of one thread, copied into the processes it forks
    and kept across exec, so the flag is set on the calling thread only for the time
    of a spawn (``subprocess.Popen`` forks from the calling thread) and restored after;
    the harness's other threads and its own layout are untouched. Where the kernel
    refuses the flag (a container whose seccomp profile allows only some
    personalities) programs start as before, with one warning per process.
    """
    libc = ctypes.CDLL(None, use_errno=True)
    libc.personality.restype = ctypes.c_int
    libc.personality.argtypes = [ctypes.c_ulong]
    before = libc.personality(_QUERY)
    changed = before >= 0 and not before & _ADDR_NO_RANDOMIZE
    if changed and libc.personality(before | _ADDR_NO_RANDOMIZE) < 0:
        changed = False
        if not _warned.is_set():
            _warned.set()
            reason = f"personality(ADDR_NO_RANDOMIZE): errno {ctypes.get_errno()}"
            warnings.warn(ASLR_WARNING.format(reason=reason), UserWarning, stacklevel=3)
    try:
        yield
    finally:
        if changed:
            libc.personality(before)
