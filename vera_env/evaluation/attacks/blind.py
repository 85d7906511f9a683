"""The first attacks: task-blind policies that pin fingerprints of the data's bytes.

A policy that never read the question out-earned the reference solution on every task,
because any function of the data's bytes counted as "discriminating". These policies
are that policy, written down. Each looks only at the workspace's file names, sizes and
metadata -- never at what the question asks:

* ``fingerprint_pins``: 4 nodes x 3 checks pinning raw facts (md5, size, lines, first
  64 bytes; then the decoded content's, incl. an order-free ``sort | md5sum``);
* ``content_pins``: facts of the decoded content that survive recompression, reordering
  and added comments (the records' sorted md5, their count, their digits, ...);
* ``derived_pins``: the raw facts written to files by a command, the files pinned;
* ``copy_compare``: ``cp`` the data to ``keep/``, then checks comparing data and copy;
* ``repeated_checks``: one honest-looking pin written three ways, in each of 4 nodes;
* ``coin_nodes``: nodes of 16 entropy-driven checks (clock, start time, stack address,
  ``/dev/urandom``), declared until the step budget ends;
* ``inode_detector``: checks on inode numbers, link counts, ctimes, blocks and
  directory order of the data (never opening it), against what the look saw.
"""

from __future__ import annotations

import shlex

from vera_env.evaluation.attacks.facts import CONTENT_FACTS, FACTS, decoded, facts
from vera_env.evaluation.attacks.turns import (
    ANSWER,
    LOOK,
    NODES,
    PER_NODE,
    V,
    chunks,
    node,
    pin,
)
from vera_env.tasks import Task

__all__ = ["INODE_LOOK", "coin_nodes", "content_pins", "copy_compare", "derived_pins",
           "fingerprint_pins", "host_look", "inode_detector", "repeated_checks"]

INODE_LOOK = ("<command>ls -l; stat -c 'STAT %i %h %Z %b %n' * .; "
              "echo \"ORDER $(ls -f | tr '\\n' '/')\"</command>")


def fingerprint_pins(task: Task, look: str = "") -> list[str]:
    """One look, then 4 nodes x 3 checks pinning raw facts, values hard-coded."""
    pins = [pin(shell, value) for shell, value in facts(task, NODES * PER_NODE)]
    nodes = [node(f"data facts {k + 1}", chunk) for k, chunk in enumerate(chunks(pins))]
    return [LOOK, *nodes, ANSWER]


def content_pins(task: Task, look: str = "") -> list[str]:
    """One look, then 4 nodes x 3 pins of order-free facts of the decoded content."""
    pins = [pin(shell, value) for shell, value in facts(task, NODES * PER_NODE, CONTENT_FACTS)]
    nodes = [node(f"content facts {k + 1}", chunk) for k, chunk in enumerate(chunks(pins))]
    return [LOOK, *nodes, ANSWER]


def derived_pins(task: Task, look: str = "") -> list[str]:
    """The same facts written to files by a command in each node's turn, then pinned."""
    turns = [LOOK]
    for k, chunk in enumerate(chunks(facts(task, NODES * PER_NODE))):
        names = [f"fact{k}_{i}.txt" for i in range(len(chunk))]
        command = "; ".join(f"{shell} > {name}" for (shell, _), name in zip(chunk, names,
                                                                            strict=True))
        checks = [f'test "$(cat {name})" = "{value}"' + V
                  for (_, value), name in zip(chunk, names, strict=True)]
        turns.append(node(f"derived facts {k + 1}", checks, command))
    return [*turns, ANSWER]


_COMPARE = (
    "cmp -s {f} keep/{f}" + V,
    "diff -q {f} keep/{f} > /dev/null" + V,
    'test "$(zcat -f {f} | md5sum)" = "$(zcat -f keep/{f} | md5sum)"' + V,
    'test "$(zcat -f {f} | LC_ALL=C sort | md5sum)" = "$(zcat -f keep/{f} | LC_ALL=C sort | md5sum)"' + V,
    'test "$(zcat -f {f} | wc -l)" -eq "$(zcat -f keep/{f} | wc -l)"' + V,
    'test "$(wc -c < {f})" -eq "$(wc -c < keep/{f})"' + V,
    'test "$(zcat -f {f} | grep -av \'^[#@%>]\' | LC_ALL=C sort | md5sum)" = '
    '"$(zcat -f keep/{f} | grep -av \'^[#@%>]\' | LC_ALL=C sort | md5sum)"' + V,
    'test "$(zcat -f {f} | cut -f1 | LC_ALL=C sort | md5sum)" = '
    '"$(zcat -f keep/{f} | cut -f1 | LC_ALL=C sort | md5sum)"' + V,
    'test "$(head -c 4096 {f} | md5sum)" = "$(head -c 4096 keep/{f} | md5sum)"' + V,
    'test "$(zcat -f {f} | tail -c 4096 | md5sum)" = "$(zcat -f keep/{f} | tail -c 4096 | md5sum)"' + V,
    'test "$(zcat -f {f} | tr -cd 0-9 | wc -c)" -eq "$(zcat -f keep/{f} | tr -cd 0-9 | wc -c)"' + V,
    'test "$(zcat -f {f} | LC_ALL=C sort -u | wc -l)" -eq "$(zcat -f keep/{f} | LC_ALL=C sort -u | wc -l)"' + V,
)


def copy_compare(task: Task, look: str = "") -> list[str]:
    """``cp`` the data to ``keep/``, then 4 nodes of checks comparing each file with its copy."""
    names = [shlex.quote(n) for n in task.data_files()]
    copy = f"<command>mkdir -p keep && cp --parents {' '.join(names)} keep/</command>"
    checks = [c.format(f=f) for c in _COMPARE for f in names][:NODES * PER_NODE]
    nodes = [node(f"data kept intact {k + 1}", chunk) for k, chunk in enumerate(chunks(checks))]
    return [LOOK, copy, *nodes, ANSWER]


def repeated_checks(task: Task, look: str = "") -> list[str]:
    """4 nodes; each holds one honest-looking pin, written three ways (same verdicts)."""
    order_free = [FACTS[i] for i in (10, 5, 6, 7)]  # records, lines, bytes, sorted md5
    files = task.data_files()
    nodes = []
    for k, (shell, value) in enumerate(order_free):
        name = list(files)[k % len(files)]
        raw = files[name].read_bytes()
        cmd, want = shell.format(f=shlex.quote(name)), value(raw, decoded(raw))
        ways = [f'test "$({cmd})" = "{want}"' + V, f'[ "$({cmd})" = "{want}" ]' + V,
                f'[[ "$({cmd})" == "{want}" ]]' + V]
        nodes.append(node(f"{name} holds the expected records {k + 1}", ways))
    return [LOOK, *nodes, ANSWER]


def _coins(f: str, salt: int = 0) -> list[str]:
    """16 checks whose verdict is a coin: 4 entropy sources x 4 thresholds. ``salt``
    makes each node's commands its own (a node repeating another's is not recorded)."""
    read = f"k={salt}; cat {f} > /dev/null; "
    clock = "10#$(date +%N)"
    start = "$(cut -d' ' -f22 /proc/self/stat)"
    stack = "0x$(grep -m1 '\\[stack\\]' /proc/self/maps | cut -d- -f1)"
    urandom = "$(od -An -N1 -tu1 /dev/urandom)"
    out = []
    for value in (clock, start, urandom):
        out += [f"{read}test $(( {value} % 2 )) -eq 0" + V, f"{read}test $(( {value} % 2 )) -eq 1" + V,
                f"{read}test $(( {value} % 3 )) -eq 0" + V, f"{read}test $(( {value} % 4 )) -lt 2" + V]
    out += [f"{read}test $(( {stack} >> {bit} & 1 )) -eq {v}" + V
            for bit, v in ((12, 0), (12, 1), (13, 0), (14, 1))]
    return out


def coin_nodes(task: Task, look: str = "", max_steps: int = 30) -> list[str]:
    """A node of 16 coin checks every turn until the budget's last, which answers."""
    f = shlex.quote(max(task.data_files().items(), key=lambda kv: kv[1].stat().st_size)[0])
    nodes = [node(f"coin node {k + 1}", _coins(f, k)) for k in range(max(0, max_steps - 2))]
    return [LOOK, *nodes, ANSWER]


def _parse_look(look: str) -> tuple[dict[str, list[int]], list[str]]:
    """(name -> [inode, links, ctime, blocks]) and the ``ls -f`` order, from INODE_LOOK."""
    stats: dict[str, list[int]] = {}
    order: list[str] = []
    for line in look.splitlines():
        if line.startswith("STAT "):
            parts = line.split(" ", 5)
            if len(parts) == 6 and all(p.isdigit() for p in parts[1:5]):
                stats[parts[5]] = [int(p) for p in parts[1:5]]
        elif line.startswith("ORDER "):
            order = [n for n in line[6:].split("/") if n]
    return stats, order


def inode_detector(task: Task, look: str = "") -> list[str]:
    """Checks on metadata only (``stat``, ``ls -f``), against the values the look saw."""
    stats, order = _parse_look(look)
    sizes = {name: path.stat().st_size for name, path in task.data_files().items()}
    files = [n for n in sorted(sizes, key=lambda n: -sizes[n]) if n in stats]  # largest first
    if not files:  # before the look (or a look that showed nothing): the look alone
        return [INODE_LOOK, ANSWER]
    f, q = files[0], shlex.quote(files[0])
    ino, links, ctime, blocks = stats[f]
    node1 = [f"test $(( $(stat -c %i {q}) - {ino} )) -lt {k}" + V
             for k in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256, 1024, 4096, 65536)]
    node2 = [f"test $(( $(stat -c %i {q}) - {ino} )) -gt -{k}" + V for k in (1, 2, 4, 8, 16, 64, 256, 4096)]
    node2 += [f"test $(( $(stat -c %i {q}) >> {b} & 1 )) -eq {ino >> b & 1}" + V for b in range(8)]
    node3 = [f"test $(stat -c %Z {q}) -le {ctime + d}" + V for d in (0, 1, 2, 5)]
    node3 += [f"test $(stat -c %Z {q}) -ge {ctime - d}" + V for d in (0, 1, 2, 5)]
    node3 += [f"test $(stat -c %h {q}) -eq {links}" + V, f"test $(stat -c %b {q}) -eq {blocks}" + V]
    node4 = []
    if "." in stats:
        node4.append(f"test $(( $(stat -c %i {q}) - $(stat -c %i .) )) -eq {ino - stats['.'][0]}" + V)
    for name in files[:7]:
        node4.append(f"test $(stat -c %h {shlex.quote(name)}) -eq {stats[name][1]}" + V)
        if name in order:
            node4.append(f"test \"$(ls -f | grep -nxF {shlex.quote(name)} | cut -d: -f1)\" "
                         f"-eq {order.index(name) + 1}" + V)
    nodes = [node(f"{f} metadata {k + 1}", checks)
             for k, checks in enumerate((node1, node2, node3, node4)) if checks]
    return [INODE_LOOK, *nodes, ANSWER]


def host_look(task: Task) -> str:
    """What ``INODE_LOOK`` would print for the task's files on the host (for tests)."""
    files = task.data_files()
    lines = []
    for name, path in [*files.items(), (".", next(iter(files.values())).parent)]:
        st = path.stat()
        lines.append(f"STAT {st.st_ino} {st.st_nlink} {int(st.st_ctime)} {st.st_blocks} {name}")
    return "\n".join([*lines, "ORDER ./../" + "/".join(files) + "/"])
