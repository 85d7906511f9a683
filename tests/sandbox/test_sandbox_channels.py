"""Nothing a run leaves behind reaches a later run: one test per channel (issue 11).

Each test writes through a channel in one run and reads it back in a later command,
a later check and, where the channel is machine-wide, another workspace. Both bwrap
backends are tested: a fresh sandbox per run, and the long-lived ``server`` sandbox,
whose namespaces outlive commands. Removing the defence a test names makes it fail
(tried for each: the keyring and message-queue tests without the seccomp filter, the
SysV test without the zygote's cleaning, the ``/dev`` tests without the capped tmpfs
and read-only remount).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest
from sandbox_helpers import FAST, requires_bwrap

from vera_env.sandbox import BwrapSandbox, BwrapWorkspace
from vera_env.sandbox.seccomp import syscall_number
from vera_env.sandbox.server import ServerSandbox

pytestmark = requires_bwrap

BACKENDS = {"bwrap": BwrapSandbox, "server": ServerSandbox}
ENOSYS, ENOENT = 38, 2


@pytest.fixture(scope="module", params=sorted(BACKENDS))
def box(request: pytest.FixtureRequest) -> Iterator[BwrapSandbox]:
    sandbox = BACKENDS[request.param](FAST)
    yield sandbox
    sandbox.close()


@pytest.fixture
def ws(box: BwrapSandbox) -> Iterator[BwrapWorkspace]:
    with box.stage({}) as workspace:
        yield workspace


def py(code: str) -> str:
    """A command running ``code`` with the sandbox's python3."""
    return "python3 - <<'PY'\n" + textwrap.dedent(code) + "PY\n"


def later_runs(ws: BwrapWorkspace, command: str) -> list[str]:
    """``command``'s output in a later command and a later check (stdout and stderr)."""
    return [ws.run(command).as_tool_output(), ws.run_check(command).as_tool_output()]


KEYRING = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
ADD, KEYCTL = {add_key}, {keyctl}
SESSION, SEARCH, READ = -3, 10, 11

def put(description, payload):
    key = libc.syscall(ADD, b"user", description, payload, len(payload), SESSION)
    print("add", key, ctypes.get_errno())

def get(description):
    key = libc.syscall(KEYCTL, SEARCH, SESSION, b"user", description, 0)
    if key < 0:
        print("search failed", ctypes.get_errno())
        return
    buf = ctypes.create_string_buffer(64)
    size = libc.syscall(KEYCTL, READ, key, buf, 64)
    print("found", buf.raw[:size].decode())
"""


def keyring_code(action: str) -> str:
    return KEYRING.format(add_key=syscall_number("add_key"),
                          keyctl=syscall_number("keyctl")) + action + "\n"


def test_keyring_note_never_reaches_a_later_run_or_episode_nor_the_harness_keys():
    # The channel exists only where the harness has a session keyring (systemd services,
    # PAM logins, containers): this harness joins one, stores a secret in it, then plays
    # a check that stores a file's hash on its first run and reads it on the next.
    harness = keyring_code("") + textwrap.dedent(f"""
        assert libc.syscall(KEYCTL, 1, b"vera-test-harness") > 0  # join a session keyring
        put(b"harness-secret", b"s3cret")
        from shlex import quote
        from vera_env.sandbox import BwrapSandbox
        from vera_env.sandbox.server import ServerSandbox
        from vera_env.sandbox import SandboxLimits
        store = {keyring_code('put(b"vera-note", b"hash-of-data")')!r}
        read = {keyring_code('get(b"vera-note"); get(b"harness-secret")')!r}
        for make in (BwrapSandbox, ServerSandbox):
            with make(SandboxLimits(timeout_s=10)) as box:
                with box.stage({{}}) as first, box.stage({{}}) as second:
                    for run in (first.run, first.run_check):
                        print("STORE", run("python3 -c " + quote(store)).as_tool_output())
                    for run in (first.run, first.run_check, second.run_check):
                        print("READ", run("python3 -c " + quote(read)).as_tool_output())
    """)
    done = subprocess.run([sys.executable, "-c", harness], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    stores = [line for line in done.stdout.splitlines() if line.startswith("STORE")]
    assert len(stores) == 4 and all(f"add -1 {ENOSYS}" in line for line in stores)
    assert "found" not in done.stdout
    assert done.stdout.count(f"search failed {ENOSYS}") == 12  # 6 reads x 2 keys


SYSV = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
KEY, CREATE = 0x5645, 0o1600
if sys.argv[1] == "put":
    shm = libc.shmget(KEY, 4096, CREATE)
    ctypes.memmove(libc.shmat(shm, None, 0), b"hash-of-data", 12)
    ids = [shm, libc.semget(KEY, 1, CREATE), libc.msgget(KEY, CREATE)]
    print("made" if min(ids) >= 0 else "failed", ctypes.get_errno())
else:
    print("shm", libc.shmget(KEY, 0, 0), "sem", libc.semget(KEY, 0, 0),
          "msg", libc.msgget(KEY, 0, 0), "errno", ctypes.get_errno())
"""


def test_sysv_ipc_objects_do_not_survive_their_run(ws: BwrapWorkspace):
    ws.run(f"cat > sysv.py <<'PY'\n{SYSV}PY")
    assert ws.run("python3 sysv.py put").stdout.startswith("made")  # they exist
    for output in later_runs(ws, "python3 sysv.py get"):
        assert output == f"shm -1 sem -1 msg -1 errno {ENOENT}", output


def test_posix_message_queues_cannot_be_opened(ws: BwrapWorkspace):
    probe = py("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        mq = libc.mq_open(b"/vera-note", os.O_CREAT | os.O_RDWR, 0o600, None)
        print("mq_open", mq, ctypes.get_errno())
    """)
    assert ws.run(probe).stdout == f"mq_open -1 {ENOSYS}\n"
    for output in later_runs(ws, probe):
        assert output == f"mq_open -1 {ENOSYS}"


def test_tmp_and_dev_shm_notes_do_not_survive_their_run(ws: BwrapWorkspace):
    ws.run("echo note > /tmp/note; echo note > /dev/shm/note; mkdir /dev/shm/d")
    for output in later_runs(ws, "ls -A /tmp /dev/shm"):
        assert output == "/dev/shm:\n\n/tmp:"


def test_abstract_socket_listener_dies_with_its_command(ws: BwrapWorkspace):
    listen = py("""
        import os, socket
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(b"\\0vera-note")
        server.listen()
        if os.fork() == 0:
            os.setsid()
            while True:
                conn, _ = server.accept()
                conn.sendall(b"hash-of-data")
                conn.close()
        print("listening")
    """)
    connect = py("""
        import socket
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            client.connect(b"\\0vera-note")
            print("got", client.recv(64))
        except OSError as exc:
            print("refused", exc.errno)
    """)
    first = ws.run(listen + connect)
    assert (first.status, first.stdout) == ("ok", "listening\ngot b'hash-of-data'\n")
    for output in later_runs(ws, connect):
        assert output == "refused 111"  # ECONNREFUSED: nobody listens any more


def test_runs_inherit_only_stdio_and_no_terminal(ws: BwrapWorkspace):
    probe = ("ls /proc/$$/fd > /tmp/fds; tr '\\n' ' ' < /tmp/fds; echo; " + py("""
        import fcntl, os, termios
        try:
            os.open("/dev/tty", os.O_RDWR)
        except OSError as exc:
            print("tty", exc.errno)
        for fd in (0, 1, 2):
            try:
                fcntl.ioctl(fd, termios.TIOCSTI, b"x")
                print("TIOCSTI injected", fd)
            except OSError as exc:
                print("TIOCSTI", exc.errno)
    """))
    for output in [ws.run(probe).as_tool_output(), *later_runs(ws, probe)]:
        assert output == "0 1 2 \ntty 6\nTIOCSTI 25\nTIOCSTI 25\nTIOCSTI 25"


# push rbx; mov eax, 288 (i386 keyctl); xor ebx, ebx; mov ecx, -3; xor edx, edx;
# int 0x80; pop rbx; ret: the keyring through the i386 ABI, past a native-only filter.
I386_KEYCTL = "53b82001000031dbb9fdffffff31d2cd805bc3"


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="i386 ABI exists on x86_64 only")
def test_foreign_abi_system_call_kills_the_process(ws: BwrapWorkspace):
    probe = py(f"""
        import ctypes, mmap
        code = bytes.fromhex("{I386_KEYCTL}")
        page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        page.write(code)
        address = ctypes.addressof(ctypes.c_char.from_buffer(page))
        print("keyctl returned", ctypes.CFUNCTYPE(ctypes.c_int)(address)(), flush=True)
    """) + "echo exit=$?"
    for output in [ws.run(probe).stdout, ws.run_check(probe).stdout]:
        assert output == "exit=159\n", output  # 128 + SIGSYS


def test_dev_is_read_only_and_dev_shm_capped(ws: BwrapWorkspace):
    result = ws.run("touch /dev/note; mknod /dev/p p; head -c 100000000 /dev/zero > "
                    "/dev/shm/park; ls -l /dev/shm/park | awk '{print $5}'; "
                    "echo ok > /dev/null && echo null-works")
    assert "touch: cannot touch '/dev/note': Read-only file system" in result.stderr
    assert "No space left on device" in result.stderr
    assert result.stdout == f"{64 * 2**20}\nnull-works\n"
