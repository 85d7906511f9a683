"""Replay a task's solution turns with real shell tools, outside any sandbox.

Why here and not through ``vera_env.sandbox``: these tests prove that the *task data and
solutions* are right -- every CHECK prints True on the real data, the final answer is the
one the commands computed -- independently of the sandbox under construction. A later
test replays the same turns through the sandbox.

Checks must run read-only; as root a chmod does not stop writes, so each check is run
between two snapshots of the workspace, which must be identical.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "STRENGTH_TESTED", "Replay", "Turn", "awk_variants", "check_fails_on_some_mutant",
    "mutants", "parse_turn", "replay",
]

STRENGTH_TESTED = frozenset({"seq.longest_orf", "mtx.knockout_gene", "vcf.titv",
                             "tab.label_coding"})
"""One type per family whose reference checks `test_builtin_env` strength-tests in the
real sandbox; the cheaper derived-file mutation test here covers the others."""

_COMMAND = re.compile(r"<command>(.*?)</command>", re.S)
_NODE = re.compile(r"^NODE\s+(.*)$", re.M)
_CHECK = re.compile(r'^CHECK\s+(\w+)\s+"([^"]*)"\s*::[ \t]*(.+?)\s*$', re.M)
_ANSWER = re.compile(r"^FINAL ANSWER:\s*(.+?)\s*$", re.M)
_NODE_KINDS = {"load", "qc", "transform", "test", "interpret", "answer"}
_CHECK_KINDS = {"conservation", "range", "invariance", "type"}


@dataclass(frozen=True)
class Turn:
    command: str
    node: str
    checks: tuple[tuple[str, str, str], ...]
    answer: str


def parse_turn(text: str) -> Turn:
    """Split one turn the way the wire protocol does, asserting it is well formed."""
    command_match = _COMMAND.search(text)
    command = command_match.group(1) if command_match else ""
    rest = _COMMAND.sub("", text)
    nodes = _NODE.findall(rest)
    checks = tuple(_CHECK.findall(rest))
    assert len(nodes) <= 1, text
    assert len(checks) == rest.count("\nCHECK "), f"malformed CHECK line in {text!r}"
    node = nodes[0] if nodes else ""
    if node:
        kind = re.search(r"kind=(\w+)", node)
        assert kind and kind.group(1) in _NODE_KINDS, node
    assert all(kind in _CHECK_KINDS for kind, _, _ in checks), checks
    assert not checks or node, "CHECK lines without a NODE"
    answers = _ANSWER.findall(rest)
    return Turn(command, node, checks, answers[-1] if answers else "")


def _snapshot(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def awk_variants() -> list[str]:
    """The awk implementations installed here (solutions must work under each)."""
    return [name for name in ("gawk", "mawk") if shutil.which(name)]


@dataclass
class Replay:
    outputs: list[str] = field(default_factory=list)
    verdicts: list[tuple[str, str]] = field(default_factory=list)  # (check name, last line)
    answer: str = ""


def _bash(command: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120, check=False)


def replay(turns: tuple[str, ...], files: dict[str, Path], workdir: Path, awk: str) -> Replay:
    """Copy ``files`` into ``workdir`` and run every command and check in order.

    Commands must exit 0. Each check's last non-empty stdout line is recorded, and the
    workspace must be byte-identical before and after it.
    """
    for name, src in files.items():
        (workdir / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src, workdir / name)
    bindir = workdir.parent / f"bin-{awk}"
    bindir.mkdir(exist_ok=True)
    if not (bindir / "awk").exists():
        (bindir / "awk").symlink_to(shutil.which(awk) or awk)
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    out = Replay()
    for text in turns:
        turn = parse_turn(text)
        if turn.command:
            done = _bash(turn.command, workdir, env)
            assert done.returncode == 0, f"{turn.command!r} failed: {done.stderr}"
            out.outputs.append(done.stdout)
        for _, name, command in turn.checks:
            assert "\n" not in command
            before = _snapshot(workdir)
            done = _bash(command, workdir, env)
            assert _snapshot(workdir) == before, f"check {name!r} wrote to the workspace"
            lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
            out.verdicts.append((name, lines[-1] if lines else f"<no output; {done.stderr}>"))
        out.answer = turn.answer or out.answer
    return out


def _numbers_shifted(text: str, which: int, delta: int = 1) -> str:
    matches = list(re.finditer(r"\d+", text))
    if not matches:
        return text
    m = matches[which]
    return text[:m.start()] + str(int(m.group()) + delta) + text[m.end():]


def mutants(text: str) -> list[str]:
    """Wrong versions of a derived file: lines lost, numbers off by one, values doubled."""
    lines = text.splitlines(keepends=True)
    doubled = re.sub(r"\d+", lambda m: str(2 * int(m.group())), text)
    candidates = ["".join(lines[1:]), "".join(lines[:-1]), "".join(lines[::2]),
                  _numbers_shifted(text, 0), _numbers_shifted(text, -1), doubled]
    return [c for c in candidates if c != text]


def check_fails_on_some_mutant(command: str, workdir: Path, derived: list[Path],
                               awk: str = "gawk") -> str | None:
    """Mutate each derived file in turn; return a description of the first mutation under
    which ``command`` no longer prints True, or None if it always does."""
    bindir = workdir.parent / f"bin-{awk}"
    env = {**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    for path in derived:
        original = path.read_text()
        for i, mutant in enumerate(mutants(original)):
            path.write_text(mutant)
            try:
                lines = [x for x in _bash(command, workdir, env).stdout.splitlines() if x.strip()]
            finally:
                path.write_text(original)
            if not lines or lines[-1].strip() != "True":
                return f"{path.name} mutant {i}"
    return None
