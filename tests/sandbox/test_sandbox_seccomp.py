"""The seccomp filter as a program: what it denies, on which ABI, and its refusals.

What it does to real processes is in ``test_sandbox_channels`` (the keyring, message
queues and foreign-ABI calls through bwrap) and ``test_sandbox_integrity`` (entropy).
"""

from __future__ import annotations

import struct

import pytest

from vera_env.sandbox.entropy import seccomp_program
from vera_env.sandbox.seccomp import (
    CHECK_DENIED,
    COMMAND_DENIED,
    filter_program,
    sandbox_filter,
    syscall_number,
)

ALLOW, KILL = 0x7FFF0000, 0x80000000
ERRNO_ENOSYS = 0x00050000 | 38


def run_filter(program: bytes, arch: int, nr: int, args: tuple[int, ...] = ()) -> int:
    """A tiny classic-BPF interpreter for the four instructions the filter uses.

    ``args`` are the call's arguments, laid out as ``seccomp_data`` holds them (8 bytes
    each from offset 16, low word first); missing ones are 0.
    """
    code = [struct.unpack("<HBBI", program[i:i + 8]) for i in range(0, len(program), 8)]
    data = {0: nr, 4: arch}
    for index, value in enumerate((*args, *[0] * (6 - len(args)))):
        data[16 + 8 * index], data[20 + 8 * index] = value & 0xFFFFFFFF, value >> 32
    pc, acc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == 0x20:
            acc = data[k]
        elif op == 0x15:
            pc += jt if acc == k else jf
        elif op == 0x35:
            pc += jt if acc >= k else jf
        elif op == 0x06:
            return k
        pc += 1


X86_64 = 0xC000003E


@pytest.mark.parametrize("name", ["add_key", "request_key", "keyctl", "mq_open"])
def test_filter_denies_shared_kernel_state_to_commands_and_checks(name):
    for program in (filter_program(COMMAND_DENIED, "x86_64"),
                    filter_program(CHECK_DENIED, "x86_64")):
        assert run_filter(program, X86_64, syscall_number(name, "x86_64")) == ERRNO_ENOSYS


def test_filter_denies_getrandom_to_checks_only():
    getrandom = syscall_number("getrandom", "x86_64")
    assert run_filter(filter_program(CHECK_DENIED, "x86_64"), X86_64, getrandom) == ERRNO_ENOSYS
    assert run_filter(filter_program(COMMAND_DENIED, "x86_64"), X86_64, getrandom) == ALLOW
    assert run_filter(seccomp_program("x86_64"), X86_64, getrandom) == ERRNO_ENOSYS


def test_getrandom_answers_only_mallocs_key_request_with_zero_bytes_and_no_error():
    """glibc's malloc asks for 8 bytes with GRND_NONBLOCK at the first allocation; every
    other request still fails with ENOSYS (and a wider count or other flags never
    match by their low word alone)."""
    getrandom = syscall_number("getrandom", "x86_64")
    program = filter_program(CHECK_DENIED, "x86_64")
    zero_bytes = 0x00050000  # SECCOMP_RET_ERRNO with errno 0: the call returns 0
    assert run_filter(program, X86_64, getrandom, (0x7FFF0000, 8, 1)) == zero_bytes
    for args in ((0, 8, 0), (0, 16, 1), (0, 4096, 1), (0, 8 | 1 << 32, 1), (0, 8, 3),
                 (0, 1, 1), ()):
        assert run_filter(program, X86_64, getrandom, args) == ERRNO_ENOSYS, args
    for name in ("keyctl", "mq_open"):  # the argument block does not swallow other calls
        assert run_filter(program, X86_64, syscall_number(name, "x86_64"),
                          (0, 8, 1)) == ERRNO_ENOSYS
    assert run_filter(program, X86_64, 0, (0, 8, 1)) == ALLOW  # read(0, buf, 8) with "flags" 1
    assert run_filter(filter_program(COMMAND_DENIED, "x86_64"), X86_64, getrandom,
                      (0, 8, 1)) == ALLOW
    aarch64 = filter_program(CHECK_DENIED, "aarch64")
    assert run_filter(aarch64, 0xC00000B7, 278, (0, 8, 1)) == zero_bytes
    assert run_filter(aarch64, 0xC00000B7, 278, (0, 32, 0)) == ERRNO_ENOSYS


def test_filter_allows_everything_else_natively():
    program = filter_program(CHECK_DENIED, "x86_64")
    assert all(run_filter(program, X86_64, nr) == ALLOW for nr in (0, 1, 59, 231, 435))


def test_filter_kills_foreign_abis_i386_and_x32():
    program = filter_program(COMMAND_DENIED, "x86_64")
    assert run_filter(program, 0x40000003, 288) == KILL  # i386 keyctl via int $0x80
    assert run_filter(program, 0x40000003, 20) == KILL  # any i386 call
    assert run_filter(program, X86_64, 0x40000000 | 250) == KILL  # x32 keyctl


def test_filter_for_aarch64_uses_its_own_numbers_and_kills_arm32():
    program = filter_program(COMMAND_DENIED, "aarch64")
    assert run_filter(program, 0xC00000B7, 219) == ERRNO_ENOSYS  # keyctl
    assert run_filter(program, 0xC00000B7, 250) == ALLOW  # not keyctl there
    assert run_filter(program, 0x40000028, 311) == KILL  # arm32


def test_filter_unknown_machine_is_none_and_unknown_call_refused():
    assert filter_program(COMMAND_DENIED, "sparc64") is None
    with pytest.raises(ValueError, match="no system-call number known for \\['ptrace2'\\]"):
        filter_program(["ptrace2"], "x86_64")


def test_sandbox_filter_is_built_once_per_kind():
    assert sandbox_filter(constant_entropy=True) is sandbox_filter(constant_entropy=True)
    assert sandbox_filter(constant_entropy=True) != sandbox_filter(constant_entropy=False)
