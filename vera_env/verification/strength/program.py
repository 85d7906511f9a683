"""A task's reference as a program: a `Reference` whose solver runs in the sandbox.

Why. Strength needs a task's reference to tell a control (answer kept) from a mutant
(answer moved); without one it falls back to format-level controls and unclassified
mutants, and there a red team's md5 and byte-count pins earned 0.333 on a small CSV +
FASTA folder suite, four times the reference analysis (0.083). Builtin and real
families write their solver in Python; a person who writes a suite by hand writes a
shell command or a script that prints the answer (``"reference"`` in ``task.json``,
`vera_env.tasks.model.ReferenceProgram`), and this module turns it into a `Reference`.

How it runs. Like a check: in a workspace of the task's sandbox, read-only, with one
variant of each task file under the file's own name. A solver receives *decoded*
content (`Contents`), while the program reads files as the agent sees them, so each
file is written back in its own encoding (`encoding.Decoded.encode`: a ``.gz`` file is
given gzipped); a file whose content is the task's own is the task's file itself. The
answer is the last non-empty line the program prints; a program that fails, times out
or prints nothing raises ``ValueError`` (the variant is then neither control nor
mutant, as for a Python solver that cannot read it).

What a control is. A candidate is a control only if the program prints *exactly* what
it prints on the task's files, a mutant if the task's grader tells the two answers
apart, and neither in between (``ValueError``): with a tolerance (``abs_tol`` 0.01 on a
mean of 489 values) one dropped row moved the mean less than the tolerance, so the
dropped row passed as a control and failed every honest check that counts the rows.

What it declares. A program says nothing about which records its question reads, so
every generic control transform is tried on every file, and the program keeps those that
keep its answer: nothing is assumed, everything is classified. ``drop_irrelevant`` needs
to know which records the question never reads (without it a whole-file line count
survived every control of an exported ``tab.sentinel_mean`` task and earned; the
family's own reference drops rows of other species). The program is asked: a record of
a fixed sample (about one in ten, by a checksum; at most ``_PROBES`` per file, spread
over it) is irrelevant if the file with that record repeated as many times as the file
has records -- half the file, then -- still makes the program print exactly its answer.
The holders of the file's ends (its least and greatest record and column values) are
asked too, and each ``drop_irrelevant`` draw drops the unread holders of some of them
(``Reference.unread_ends``): a pin of the least read count, a KRAS row's, survived every
control of a hand-written task that sums the MYC rows. Dropping a
record whose weight merely rounds away does not pass that: one row of 6,414 in a mean
printed to two decimals did, and failed the honest checks that count the rows.

What a suite can add. Generic mutations rarely move an answer about a few records
(a sentinel's mean, one sample's het count), so a program with only those classified
few mutants and its honest checks earned a third of what the family's own reference
earns on the same task. A task file may declare mutants and controls of its own as
files (``reference.mutants``, ``reference.controls``): tried first, classified by the
program like every candidate. `vera-env tasks export` writes a builtin or real family's
aimed mutants and controls this way.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import tempfile
import threading
import weakref
import zlib
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from vera_env.verification.strength.encoding import Decoded, decode
from vera_env.verification.strength.ends import end_groups
from vera_env.verification.strength.reference import (
    DEFAULT_REWRITES,
    Contents,
    ControlTransform,
    Reference,
    RewriteTransform,
)
from vera_env.verification.strength.transforms import join_records, split_records

if TYPE_CHECKING:
    from vera_env.sandbox import Sandbox, Workspace

__all__ = ["PROGRAM_CONTROLS", "PROGRAM_REWRITES", "program_reference"]

PROGRAM_CONTROLS: tuple[ControlTransform, ...] = (
    "recompress", "shuffle_records", "drop_irrelevant", "repeat_irrelevant", "rewrap",
    "add_comment")
"""The control transforms tried on every file of a task whose reference is a program."""
PROGRAM_REWRITES: tuple[RewriteTransform, ...] = (*DEFAULT_REWRITES, "transfer_largest")
"""The rewrites probed on a file its task names none for: the default ones, and each
group's largest value moved (a program declares no honest check of a range; ``rewrites``)."""

_DECODE_BUDGET_S = 60.0
_PROBES = 8
_DECODE_MAX_BYTES = 1 << 34


def program_reference(command: str, sources: Mapping[str, Path], sandbox: Sandbox, *,
                      same: Callable[[str, str], bool], timeout_s: float = 60.0,
                      rewriting: Mapping[str, tuple[RewriteTransform, ...]] | None = None,
                      mutants: Mapping[str, tuple[tuple[Path, ...], ...]] | None = None,
                      controls: Mapping[str, tuple[Path, ...]] | None = None
                      ) -> Reference:
    """A `Reference` whose ``solve`` runs ``command`` in ``sandbox`` on the variant's files.

    Args:
        command: Bash, run in the folder of the task's files; prints the answer last.
        sources: The task's files (``Task.data_files()``).
        sandbox: Where it runs (the episode's: the same isolation as checks).
        same: Whether two answers agree under the task's grader.
        timeout_s: Wall-clock bound on one run.
        rewriting: File name -> the rewrites to probe for it (``Reference.rewriting``;
            the task file's ``reference.rewrites``); a file not named gets
            ``PROGRAM_REWRITES``.
        mutants: File name -> kinds of declared mutation, each its draws as files (the
            task file's ``reference.mutants``): ``Reference.mutators``.
        controls: File name -> declared controls as files (``reference.controls``):
            ``Reference.controls``.
    """
    program = _Program(command, dict(sources), sandbox, timeout_s, same)
    return Reference(solve=program.solve, preserving={name: PROGRAM_CONTROLS for name in sources},
                     irrelevant={name: partial(program.irrelevant, name) for name in sources},
                     rewriting={name: tuple((rewriting or {}).get(name, PROGRAM_REWRITES))
                                for name in sources},
                     mutators={name: tuple(_Declared(kind) for kind in kinds)
                               for name, kinds in (mutants or {}).items() if name in sources},
                     controls={name: tuple(_Declared((path,)) for path in paths)
                               for name, paths in (controls or {}).items() if name in sources},
                     unread_ends=True)


class _Declared:
    """A declared variant as a `Mutator`: its draws are files, so the random draw is not
    used. Called on the task file's content it gives the first draw; on a draw, the next
    one (strength draws a kind by applying it again to the draw before: the same change
    by a growing amount), and None after the last. Files are read when first asked
    (a ``.gz`` one gunzipped), and kept."""

    def __init__(self, paths: tuple[Path, ...]) -> None:
        self._paths = paths
        self._contents: tuple[bytes, ...] | None = None
        self._lock = threading.Lock()

    def __call__(self, content: bytes, rng: object) -> bytes | None:
        draws = self._draws()
        at = next((i for i, draw in enumerate(draws) if draw == content), -1)
        return draws[at + 1] if at + 1 < len(draws) else None

    def _draws(self) -> tuple[bytes, ...]:
        with self._lock:
            if self._contents is None:
                self._contents = tuple(
                    gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes()
                    for p in self._paths)
            return self._contents


class _Program:
    """One workspace of the task's own files, staged on the first run; each run shows
    the varied files in place of theirs (``run_check``'s read-only overlay, as strength
    shows a check a variant: half the cost of staging a workspace per run). A varied
    file is written once per content, encoded as the task's file is, into the
    workspace's scratch space, and goes with it.

    The workspace is staged from private copies, never from the task's files: staging
    hard-links, and a link to the task's file raised its link count (and change time)
    in the episode's own workspace, which shares its inode -- a red-team check on
    ``stat -c %h`` saw the harness classify (``33-timestamp-detection``)."""

    def __init__(self, command: str, sources: dict[str, Path], sandbox: Sandbox,
                 timeout_s: float, same: Callable[[str, str], bool]) -> None:
        self._command, self._sources = command, sources
        self._sandbox, self._timeout_s, self._same = sandbox, timeout_s, same
        self._own: str | None = None
        self._verdicts: dict[tuple[str, bytes], bool] = {}
        self._probed: dict[str, frozenset[bytes]] = {}
        self._decoded: dict[str, tuple[Decoded, bytes]] = {}
        self._written: dict[tuple[str, bytes], Path] = {}
        self._lock = threading.Lock()
        self._workspace: Workspace | None = None
        self._scratch = Path()
        self._copies: dict[str, Path] = {}

    def solve(self, contents: Contents) -> str:
        """The answer the program prints on ``contents``.

        Raises:
            ValueError: It printed none, or one within the grader's tolerance of its
                answer on the task's files but not that answer (neither control nor
                mutant: see the module docstring).
        """
        overlay = {name: path for name, content in contents.items()
                   if (path := self._path(name, content)) != self._copies[name]}
        answer = self._run(overlay)
        if overlay:
            if self._own is None:
                self._own = self._run({})
            if answer != self._own and self._same(self._own, answer):
                raise ValueError(f"the reference printed {answer!r}, not {self._own!r} "
                                 "but within the grader's tolerance of it")
        return answer

    def irrelevant(self, name: str, record: bytes) -> bool:
        """Whether ``record`` of ``name`` is one the program's answer never reads (see
        the module docstring): asked of a sample only, each record once."""
        if record not in self._sample(name):
            return False
        key = (name, record)
        with self._lock:
            if key in self._verdicts:
                return self._verdicts[key]
        split = split_records(name, self._original_content(name))
        verdict = False
        if split is not None:
            header, records = split
            heavy = join_records(header, records + [record] * max(1, len(records)))
            try:
                answer = self.solve({name: heavy})
                verdict = answer == self._own
            except ValueError:
                verdict = False
        with self._lock:
            self._verdicts[key] = verdict
        return verdict

    def _sample(self, name: str) -> frozenset[bytes]:
        """The records of ``name`` that may be probed: at most ``_PROBES`` of the
        checksum sample, spread evenly over the file, and the holders of its ends
        (``ends``: a drop of unread records moves an end only where it drops a
        holder). Not the first ones asked about: a file sorted by group (a table's 152
        Adelie rows first) spent every probe on the group the question reads, and no
        record was ever found irrelevant."""
        with self._lock:
            if name in self._probed:
                return self._probed[name]
        split = split_records(name, self._original_content(name))
        records = split[1] if split else []
        sampled = [r for r in records if not zlib.crc32(r) % 10]
        step = max(1, -(-len(sampled) // _PROBES))
        chosen = frozenset({*sampled[::step][:_PROBES],
                            *(records[i] for group in end_groups(records) for i in group)})
        with self._lock:
            return self._probed.setdefault(name, chosen)

    def _original_content(self, name: str) -> bytes:
        with self._lock:
            return self._original(name)[0].content

    def _run(self, overlay: dict[str, Path]) -> str:
        assert self._workspace is not None  # staged by _path
        result = self._workspace.run_check(self._command, timeout_s=self._timeout_s,
                                           overlay=overlay)
        if result.status != "ok" or result.exit_code != 0:
            raise ValueError(f"the reference program ended {result.status}, exit "
                             f"{result.exit_code}: {result.stderr.strip()[-200:]}")
        lines = [line.strip() for line in result.stdout.splitlines() if line.strip()]
        if not lines:
            raise ValueError("the reference program printed no answer")
        return lines[-1]

    def _path(self, name: str, content: bytes) -> Path:
        """A host file of ``name`` holding ``content``, encoded as the task's file is."""
        if name not in self._sources:
            raise ValueError(f"{name} is not among the task's files ({sorted(self._sources)})")
        digest = hashlib.sha256(content).digest()
        with self._lock:
            if self._workspace is None:
                self._stage()
            decoded, own = self._original(name)
            if digest == own:
                return self._copies[name]
            key = (name, digest)
            if key not in self._written:
                path = self._scratch / f"{len(self._written)}-{Path(name).name}"
                path.write_bytes(decoded.encode(content))
                path.chmod(0o444)
                self._written[key] = path
            return self._written[key]

    def _stage(self) -> None:
        folder = Path(tempfile.mkdtemp(prefix="vera-reference-"))
        weakref.finalize(self, shutil.rmtree, folder, ignore_errors=True)
        folder.chmod(0o755)  # the sandbox's user reads what is staged from it
        for i, (name, source) in enumerate(self._sources.items()):
            self._copies[name] = folder / f"{i}-{Path(name).name}"
            shutil.copyfile(source, self._copies[name])
            self._copies[name].chmod(0o444)
        self._workspace = self._sandbox.stage(self._copies)
        weakref.finalize(self, self._workspace.close)
        self._scratch = self._workspace.scratch_dir("reference-")

    def _original(self, name: str) -> tuple[Decoded, bytes]:
        if name not in self._decoded:
            decoded = decode(self._sources[name].read_bytes(), max_bytes=_DECODE_MAX_BYTES,
                             budget_s=_DECODE_BUDGET_S)
            self._decoded[name] = (decoded, hashlib.sha256(decoded.content).digest())
        return self._decoded[name]
