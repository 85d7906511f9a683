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

from .seccomp import filter_program, seccomp_fd

__all__ = ["BASH_ENV_PATH", "BASH_ENV_TEXT", "seccomp_fd", "seccomp_program"]

BASH_ENV_PATH = "/opt/vera/check-env"
BASH_ENV_TEXT = "RANDOM=4242\n"


def seccomp_program(machine: str | None = None) -> bytes | None:
    """A filter failing ``getrandom`` with ENOSYS; None on unknown arches.

    Built by ``seccomp`` (which also kills calls through a foreign ABI: i386
    ``getrandom`` through ``int $0x80`` would otherwise bypass it). The sandbox itself
    applies ``seccomp.sandbox_filter``, which adds the shared-kernel-state calls.
    """
    return filter_program(("getrandom",), machine)
