"""Fenced code blocks of the docs: found, classified, and run as a reader would run them.

A command in the docs that nobody runs goes stale (issue 21 found a ``--token`` flag for
``serve`` that did not exist, and a ``--tiny`` run "about half a minute" that took four),
so every ```bash / ```sh / ```python block in README.md and docs/**/*.md runs in CI.
A block that must not run (it needs a model endpoint or a GPU, installs from PyPI, is
``make test`` itself, runs for minutes) says so, with its reason, in an HTML comment on
the line directly above it: ``<!-- not-run: needs a model endpoint -->``. Pure output is
fenced as ```text (or ```console, ```toml ...), which is never run. Anything the parser
cannot classify (a fence without a language, an indented fence, an unknown language, a
marker with no block under it) is an error rather than a block silently left out.

The blocks of one page run in order in one scratch folder, so a bash block may use the
run folder an earlier block of the page wrote; each python block runs in a fresh
interpreter and shares nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[2]
RUNNERS: dict[str, Literal["bash", "python"]] = {"bash": "bash", "sh": "bash", "python": "python"}
NEVER_RUN = frozenset({"text", "console", "toml", "yaml", "json", "ini"})
_FENCE = re.compile(r"^```(?P<lang>[A-Za-z0-9_+-]*)\s*$")
_INDENTED_FENCE = re.compile(r"^\s+```")
_MARKER = re.compile(r"^<!--\s*not-run:(?P<reason>.*?)-->\s*$")


class DocBlockError(ValueError):
    """A page whose fences the runner cannot classify (names the file and line)."""


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block: where it is, its language, its code, and why it is not run."""

    path: Path
    line: int
    lang: str
    code: str
    not_run: str | None  # the marker's reason ("" for a marker without one); None: no marker

    @property
    def runs(self) -> bool:
        """Whether CI runs this block: a runnable language and no not-run marker."""
        return self.lang in RUNNERS and self.not_run is None

    @property
    def where(self) -> str:
        """``path:line`` relative to the repository, for failure messages."""
        return f"{self.path.relative_to(ROOT) if self.path.is_relative_to(ROOT) else self.path}:{self.line}"


def parse(path: Path, text: str) -> list[Block]:
    """Every fenced block of one page, in order.

    Raises:
        DocBlockError: a fence without a language or with an unknown one, an indented
            or unterminated fence, or a not-run marker that is not directly above a fence.
    """
    lines = text.split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _INDENTED_FENCE.match(line):
            raise DocBlockError(f"{path}:{i + 1}: indented fence: the runner reads fences at column 0")
        fence = _FENCE.match(line)
        if _MARKER.match(line) and not (i + 1 < len(lines) and _FENCE.match(lines[i + 1])):
            raise DocBlockError(f"{path}:{i + 1}: a not-run marker must be directly above a fence")
        if not fence:
            i += 1
            continue
        lang = fence["lang"]
        if lang not in RUNNERS and lang not in NEVER_RUN:
            raise DocBlockError(f"{path}:{i + 1}: fence language {lang!r} is neither run "
                                f"({sorted(RUNNERS)}) nor output ({sorted(NEVER_RUN)})")
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        if end is None:
            raise DocBlockError(f"{path}:{i + 1}: unterminated fence")
        marker = _MARKER.match(lines[i - 1]) if i else None
        reason = marker["reason"].strip() if marker else None
        blocks.append(Block(path, i + 1, lang, "\n".join(lines[i + 1:end]) + "\n", reason))
        i = end + 1
    return blocks


def pages() -> list[Path]:
    """README.md and every page under docs/ (the MkDocs hooks folder holds no pages)."""
    docs = sorted(p for p in (ROOT / "docs").rglob("*.md") if "hooks" not in p.parts)
    return [ROOT / "README.md", *docs]


@dataclass(frozen=True, slots=True)
class Outcome:
    """What running one block did."""

    block: Block
    returncode: int
    output: str
    seconds: float


def run_block(block: Block, workdir: Path, timeout_s: float) -> Outcome:
    """Run one block as a reader would: bash with ``-euo pipefail``, python in a fresh
    interpreter, in ``workdir``, with this interpreter's scripts (``vera-env``) first on
    ``PATH`` and the repository as ``$REPO`` and on ``PYTHONPATH`` (``policies``)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["REPO"] = str(ROOT)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    argv = (["bash", "-euo", "pipefail", "-c", block.code] if RUNNERS[block.lang] == "bash"
            else [sys.executable, "-c", block.code])
    start = time.monotonic()
    try:
        done = subprocess.run(argv, cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
        code, output = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:
        code, output = 124, f"timed out after {timeout_s} s: {exc.output!r}"
    return Outcome(block, code, output, time.monotonic() - start)
