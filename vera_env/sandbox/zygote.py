"""Runs inside one long-lived bwrap sandbox and starts each command there.

This file is copied into the sandbox and run as its pid 1 (``python3 -I -S``); it
imports nothing of vera_env, which is not visible in there. See ``server`` for why it
exists. For each request received on its socket (the command, its limits, and the
write ends of its stdout and stderr pipes as SCM_RIGHTS) it:

1. spawns ``bash -c COMMAND`` (``posix_spawn``: a vfork, not a fork of this Python
   process, whose copy-on-write faults cost more than bash's start) in a new session,
   with the pipes as fds 1 and 2, ``/dev/null`` as 0, no other fd (all of this
   process's are close-on-exec), and the signals Python ignores restored (SIGPIPE,
   SIGXFSZ: ignored dispositions survive exec, and ``yes | head`` would then fail with
   EPIPE instead of dying quietly). The rlimits the bwrap backend applies with
   ``ulimit -c 0 -v -u -f`` are set on this process once, at start, and inherited;
2. waits for that child, then SIGKILLs every other process in the pid namespace
   (``kill(-1)`` from pid 1 spares only pid 1), so background jobs and ``setsid``
   daemons never outlive their command — as when the command was pid 1 itself;
3. reaps everything and reports the wait status (the harness can return the result
   now), then removes what the command left in ``/tmp`` and ``/dev/shm`` and every
   SysV IPC object (shared memory, semaphores, message queues: the IPC namespace is
   this sandbox's, so they would outlive the command), so each command starts as in
   a fresh sandbox, and says so in a second message, which the harness reads before
   it sends the next command. If anything else it can see differs from how it
   started (a mode changed on ``/tmp``, a ``/dev`` entry replaced, an IPC object it
   could not remove, a network counter moved: the namespace's state outlives the
   command's sockets), if the command made a SysV IPC object (removed, it still moves
   the namespace's id sequence on), or the cleaning fails, it asks to be replaced and
   exits: the next command then gets a fresh sandbox.

It makes itself non-dumpable first: commands run as the same uid and could otherwise
ptrace it and run code in the one process that survives between commands. pid 1 gets
no signal it has no handler for from inside its namespace, so with default handlers a
command cannot kill it either; the harness kills it from outside (timeout, abort,
close), which makes the kernel kill the whole namespace.
"""

import ctypes
import os
import resource
import shutil
import signal
import socket
import stat
import sys

_PR_SET_DUMPABLE = 4
_IPC_RMID = 0
_WIPED = ("/tmp", "/dev/shm")
_SYSV = ("shm", "sem", "msg")  # /proc/sysvipc/<kind>: the id is the second column
# Traffic, a TIME_WAIT socket or a failed route all move one of these counters, and a
# command's sockets die with it but the namespace's counters do not: a change replaces
# the sandbox.
_NET = ("/proc/net/dev", "/proc/net/snmp", "/proc/net/snmp6", "/proc/net/netstat")
_MAX_MESSAGE = 1 << 18
_DEFAULT_SIGNALS = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM,
                    signal.SIGQUIT, signal.SIGHUP)


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    if ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        sys.exit("zygote: cannot make itself non-dumpable")
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 2:
            try:
                os.set_inheritable(int(name), False)
            except OSError:
                pass  # the directory's own fd, already closed
    vmem_kb, nproc, fsize_kb = (int(x) for x in sys.argv[2:5])
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_AS, (vmem_kb * 1024,) * 2)
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc,) * 2)
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize_kb * 1024,) * 2)
    baseline = fingerprint()
    sock.send(b"ready")
    while True:
        message, fds, _flags, _addr = socket.recv_fds(sock, _MAX_MESSAGE, 2)
        if not message:
            return  # the harness went away: exiting ends the namespace
        for fd in fds:
            os.set_inheritable(fd, False)
        status = run(message[1:], fds)  # after the b"$" that keeps "" from reading as EOF
        sock.send(b"status %d" % status)  # the harness reads on now
        try:
            # A removed SysV object still moves the namespace's id sequence on.
            used_ipc = any(sysv_ids(kind) for kind in _SYSV)
            clean(baseline)
            fresh = not used_ipc and fingerprint() == baseline
        except OSError:
            fresh = False
        sock.send(b"clean" if fresh else b"replace")  # read before the next command
        if not fresh:
            return


def run(command: bytes, fds: list[int]) -> int:
    out, err = fds
    try:
        try:
            pid = os.posix_spawnp(
                "bash", [b"bash", b"-c", command], os.environ,
                file_actions=[(os.POSIX_SPAWN_DUP2, out, 1), (os.POSIX_SPAWN_DUP2, err, 2)],
                setsid=True, setsigmask=(), setsigdef=_DEFAULT_SIGNALS)
        except OSError as exc:
            os.write(err, f"bash: cannot start: {exc}\n".encode())
            return 127 << 8
        _, status = os.waitpid(pid, 0)
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass  # nothing else was running
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break
        return status
    finally:  # only now: the pipes' end and the status reach the harness together
        os.close(out)
        os.close(err)


def fingerprint() -> dict[str, tuple[int, int, str]]:
    """Type, mode, owner and link target of /dev's entries and the wiped dirs, the
    SysV IPC objects (none, after cleaning) and the network namespace's counters."""
    found = {}
    for path in [*_WIPED, "/dev", *(os.path.join("/dev", n) for n in os.listdir("/dev"))]:
        st = os.lstat(path)
        target = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
        found[path] = (st.st_mode, st.st_uid, target)
    for kind in _SYSV:
        for ipc_id in sysv_ids(kind):
            found[f"sysv:{kind}:{ipc_id}"] = (0, 0, "")
    for path in _NET:
        try:
            with open(path) as counters:
                found[path] = (0, 0, counters.read())
        except FileNotFoundError:
            found[path] = (0, 0, "")  # no IPv6 here
    return found


def clean(baseline: dict[str, tuple[int, int, str]]) -> None:
    for top in _WIPED:
        for name in os.listdir(top):
            remove(os.path.join(top, name))
    for name in os.listdir("/dev"):
        if os.path.join("/dev", name) not in baseline:
            remove(os.path.join("/dev", name))
    libc = ctypes.CDLL(None, use_errno=True)
    control = {"shm": libc.shmctl, "sem": libc.semctl, "msg": libc.msgctl}
    for kind in _SYSV:
        for ipc_id in sysv_ids(kind):  # every process is gone: removal is immediate
            if kind == "sem":
                control[kind](ipc_id, 0, _IPC_RMID)
            else:
                control[kind](ipc_id, _IPC_RMID, None)


def sysv_ids(kind: str) -> list[int]:
    """Ids of this IPC namespace's SysV objects of ``kind`` (shm, sem or msg)."""
    with open(f"/proc/sysvipc/{kind}") as table:
        return [int(line.split()[1]) for line in table.readlines()[1:] if line.strip()]


def remove(path: str) -> None:
    def retry(_func: object, failed: str, _exc: object) -> None:
        try:
            os.chmod(os.path.dirname(failed), stat.S_IRWXU)
            if os.path.isdir(failed) and not os.path.islink(failed):
                os.chmod(failed, stat.S_IRWXU)
                shutil.rmtree(failed, onerror=retry)
            else:
                os.unlink(failed)
        except OSError:
            pass

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, onerror=retry)
    else:
        try:
            os.unlink(path)
        except OSError:
            pass


if __name__ == "__main__":
    main()
