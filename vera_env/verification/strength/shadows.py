"""Shadow workspaces: the episode replayed on each variant of one task file.

For a check to earn, its verdict must follow the task's data through the model's own
derivation. So for each variant of a task file (``variants``: controls and
mutants) strength keeps a *shadow* workspace: the task's files as staged for the
episode, that one file replaced by the variant, and the episode's file-writing
commands (``replay.CommandLog``) replayed in order under the same constant entropy the
real commands ran with (``vera_env.sandbox.entropy``). The check then runs there,
read-only, exactly as it ran in the real workspace.

A ``ShadowGroup`` holds every variant of one task file, and they share one history:
staged together, replayed together, dropped together, each time in a fresh random
order. Otherwise a shadow staged or replayed later than the others would be told
apart by its files' times, and "fails only on the mutant made last" would pass for
discriminating. Audited after the first version: with two workers the controls were
replayed first and the mutants after them, and a check on the age of a derived file
(``sleep 3; cut -f3 data.tsv > v.txt``, then "is v.txt older than 4.5 s?") passed on
the real workspace and the early controls and failed on the later mutants: it earned.
So after every replay the group's shadows are *settled* together: each entry a replay
wrote gets the access and modification times of its namesake in the real workspace
(``Shadow.settle``), which also touches its change time, so every shadow's files
carry the real ones' mtimes and change times set within milliseconds of each other,
in random order. Replays are kept and extended incrementally from node to node; a
group is dropped only as a whole (the episode's shadow budget is full, or a replay
did not end as the real command did). The confirmation replay of a killing mutant
(``twin``) is a separate shadow with a copy of the mutant's file, settled the same way
after its replay; it can only confirm a kill, never make one.

Bounds (``StrengthConfig``): at most ``max_shadows`` shadows live at once and
``max_shadow_mb`` of disk between them (variant files plus what replays
wrote), enforced by dropping the least recently used groups; every replayed command
gets the real command's timeout cut to what is left to the node's strength backstop,
and is charged to its budget (``budget``).

The disk budget is also kept *while* replays write (measured: one command writing
2 GB peaked at 13 GB of host disk when the budget was checked only between commands):
staged on a ``vera_env.sandbox.CappedArea`` (pass it as ``sandbox``), every shadow of
the episode lives on one size-capped tmpfs, and a replay that writes past the budget
gets ENOSPC from the kernel. A replay refused disk wrote less than the episode did, so
its shadow is ``broken`` (its check earns nothing there): when the area was full at
any look during or after the command, or the command said "No space left on device".
A group that cannot even be staged for lack of space raises ``ShadowBudgetSpent``.
"""

from __future__ import annotations

import errno
import os
import random
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vera_env.errors import SandboxError, SandboxStartTimeout, ShadowBudgetSpent
from vera_env.sandbox import CappedArea
from vera_env.sandbox.disk import MAX_DEPTH, walk
from vera_env.verification.strength.command_log import CommandLog, walk_tree
from vera_env.verification.strength.outcome import StrengthDeadline, TimeLeft
from vera_env.verification.strength.variants import Variant, VariantSet, copy_variant

if TYPE_CHECKING:
    from vera_env.sandbox import ExecResult, Sandbox, SandboxLimits, Workspace

__all__ = ["CUT", "OUT_OF_SPACE", "UNWALKABLE", "Shadow", "ShadowBudgetSpent", "ShadowGroup"]

CUT = "the step's deadline cut a replayed command short"
OUT_OF_SPACE = "its replay ran out of the shadows' disk budget (strength.max_shadow_mb)"
UNWALKABLE = (f"its replays wrote a tree the harness cannot walk whole (unreadable, or "
              f"more than {MAX_DEPTH} levels deep)")
_ORDER = random.SystemRandom()  # the order must not be learnable from episode to episode
_ENOSPC_TEXT = "No space left on device"


def _never_full() -> bool:
    return False


def _uncharged(_result: ExecResult) -> None:
    return None


@dataclass
class Shadow:
    """One variant's workspace and how far the derivation is replayed in it.

    Attributes:
        variant: What it shows in place of the task file.
        workspace: The staged workspace (closed with its group).
        replayed: Log entries replayed so far.
        broken: Why the replay stopped matching the episode ("" while it matches).
        cut: The step's deadline cut a replayed command (``broken`` is ``CUT``): the
            shadow is not wrong, only unfinished for good, so the target is dropped
            and built again by a later node (``targets``), and asking its state
            raises ``StrengthDeadline``.
        bytes: Disk its replayed files take (staged files excluded).
    """

    variant: Variant
    workspace: Workspace
    staged: frozenset[tuple[int, int]]
    replayed: int = 0
    broken: str = ""
    cut: bool = False
    bytes: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    spent: Callable[[], bool] = _never_full

    def extend(self, log: CommandLog, limits: SandboxLimits, time_left: TimeLeft,
               over_budget: Callable[[], bool], *,
               charge: Callable[[ExecResult], None] = _uncharged) -> None:
        """Replay the log entries this shadow has not run yet, in order.

        Stops between two commands when the deadline is near (the shadow stays
        consistent and is extended later); a command cut by the deadline, a replay
        that ends otherwise than the real run, or a group over its disk budget marks
        the shadow ``broken``. Each replayed run is passed to ``charge`` (the node's
        strength budget counts its own time).
        """
        with self.lock:
            for i in range(self.replayed, len(log)):
                if self.broken:
                    return
                entry = log.entries[i]
                left = time_left()
                if left <= max(0.05, entry.duration_s):
                    return  # not enough time for it: stop between commands
                try:
                    result = self.workspace.run(entry.command,
                                                timeout_s=min(limits.timeout_s, left))
                except SandboxStartTimeout:
                    if left >= limits.timeout_s:
                        raise
                    self._cut()  # the deadline cut its start, not the sandbox
                    return
                charge(result)
                if self._out_of_space(result):
                    self.broken = OUT_OF_SPACE
                    return
                if result.status != entry.status:
                    if time_left() <= 0.05:
                        self._cut()
                    else:
                        self.broken = (f"replaying command {i + 1} ended '{result.status}' "
                                       f"where the episode's run ended '{entry.status}'")
                    return
                self.replayed = i + 1
                self.measure()
                if over_budget():
                    self.broken = "its replays outgrew strength.max_shadow_mb"
                    return

    def _cut(self) -> None:
        self.broken, self.cut = CUT, True

    def _out_of_space(self, result: ExecResult) -> bool:
        """The kernel may have refused this replay disk: the shared area is full now,
        or was at a look while it ran (``disk_limit``), or the command said so."""
        if self.spent():
            return True
        shared = self.spent is not _never_full
        # On an area, disk_limit may be its watch's doing (the area filled while the
        # command ran); a workspace's own limit reads the same: either way, broken.
        return (shared and result.status == "disk_limit") or _ENOSPC_TEXT in result.stderr

    def measure(self) -> None:
        """Record the disk the replay wrote; a tree it cannot walk whole breaks the
        shadow (its bytes would be a lower bound)."""
        tree = walk_tree(self.workspace.path, self.staged)
        self.bytes = tree.bytes
        if not tree.complete:
            self.broken = self.broken or UNWALKABLE

    def settle(self, real_root: Path) -> None:
        """Give what the replays wrote the times of its namesake under ``real_root``.

        Every entry that is not a staged file gets the access and modification times
        of the same path in the real workspace, or of the real workspace's directory
        when there is no such path; its change time becomes "now". Staged files keep
        theirs (the variant's were set by the builder and its staging, in random order;
        the other task files' inodes are shared with the real workspace). A part of
        the tree the walk cannot see keeps its own times, so it marks the shadow
        broken (``UNWALKABLE``): it could be told apart from the others.
        """
        root = self.workspace.path
        fallback = _mtime_ns(real_root) or 0
        with self.lock:
            for rel, st in walk(root):
                if st is None:
                    self.broken = self.broken or UNWALKABLE
                elif (st.st_dev, st.st_ino) not in self.staged:
                    _touch(root / rel, _mtime_ns(real_root / rel) or fallback)
            _touch(root, fallback)


class ShadowGroup:
    """Every variant of one task file, each in its own shadow, with one history.

    Args:
        variants: The file's controls and mutants (``build_variants``).
        sandbox: Stages the shadows: the episode's ``CappedArea`` (the budget kept
            while replays write), or its sandbox backend (checked between commands).
        sources: The task's files (name -> host path), as staged for the episode.
        scratch: Where twin copies of variant files go.

    Raises:
        ShadowBudgetSpent: The area had no room left to stage a shadow.
    """

    def __init__(self, variants: VariantSet, sandbox: Sandbox, sources: Mapping[str, Path],
                 scratch: Path) -> None:
        self.variants = variants
        self._sandbox = sandbox
        self._sources = dict(sources)
        self._scratch = scratch
        self._spent = sandbox.spent if isinstance(sandbox, CappedArea) else _never_full
        self.shadows: dict[str, Shadow] = {}
        self.twins: dict[str, Shadow] = {}
        self._twin_paths: dict[str, Path] = {}
        self.lock = threading.Lock()
        self.extend_lock = threading.Lock()
        try:
            order = [*variants.controls, *variants.mutants]
            _ORDER.shuffle(order)
            for variant in order:
                self.shadows[variant.label] = self._stage(variant, variant.path)
        except BaseException:
            self.close()
            raise

    @property
    def name(self) -> str:
        """The task file this group varies."""
        return self.variants.name

    @property
    def count(self) -> int:
        """Shadows alive in this group."""
        return len(self.shadows) + len(self.twins)

    @property
    def bytes(self) -> int:
        """Disk the replays wrote."""
        return sum(s.bytes for s in (*self.shadows.values(), *self.twins.values()))

    def twin(self, label: str, variant: Variant | None = None) -> Shadow:
        """The confirmation shadow of mutant ``label`` (made on first use): of that
        shadow's variant, or of ``variant`` (a reserve draw no shadow was made of).

        Raises:
            ShadowBudgetSpent: The area had no room left to stage it.
        """
        with self.lock:
            if label not in self.twins:
                source = variant or self.shadows[label].variant
                self._twin_paths[label] = copy_variant(source, self._scratch)
                self.twins[label] = self._stage(source, self._twin_paths[label])
            return self.twins[label]

    def _stage(self, variant: Variant, path: Path) -> Shadow:
        files = {**self._sources, self.variants.name: path}
        try:
            workspace = self._sandbox.stage(files)
        except SandboxError as exc:
            if self._spent() or _no_space(exc):
                raise ShadowBudgetSpent(f"no room left to stage a shadow of "
                                        f"{self.variants.name}: {exc}") from exc
            raise
        try:
            for name, source in files.items():  # a copy (no hard link) gets the
                _same_mtime(workspace.path / name, source)  # source's mtime, as a link has
            staged = walk_inodes(workspace.path)
        except (OSError, SandboxError):
            workspace.close()
            raise
        return Shadow(variant, workspace, staged, spent=self._spent)

    def state(self, length: int) -> str:
        """"" when every control has replayed ``length`` log entries and every mutant
        has or broke on its own; else why a control's replay failed.

        Raises:
            StrengthDeadline: A replay is unfinished (stopped at the deadline, or cut).
        """
        for shadow in self.shadows.values():
            if shadow.cut or (shadow.replayed < length and not shadow.broken):
                raise StrengthDeadline(self.name)
            if shadow.broken and shadow.variant.control:
                return f"on a control of {self.name}, {shadow.broken}"
        return ""

    def extend(self, log: CommandLog, limits: SandboxLimits, pool: Executor,
               time_left: TimeLeft, over_budget: Callable[[], bool], *,
               charge: Callable[[ExecResult], None] = _uncharged) -> None:
        """Replay the log into every shadow that lags, in parallel (``pool``) and in a
        random order, then settle every shadow of the group together; ``charge`` is
        given each replayed run."""
        with self.extend_lock:
            lagging = [s for s in self.shadows.values() if s.replayed < len(log) and not s.broken]
            if not lagging:
                return
            _ORDER.shuffle(lagging)
            futures = [pool.submit(s.extend, log, limits, time_left, over_budget,
                                   charge=charge) for s in lagging]
            for future in futures:
                future.result()
            shadows = list(self.shadows.values())
            _ORDER.shuffle(shadows)
            for shadow in shadows:
                shadow.settle(log.root)

    def close(self) -> None:
        """Close every shadow (kills what runs there, removes its directory) and delete
        the twins' copies (the variant files belong to the caller)."""
        for shadow in (*self.shadows.values(), *self.twins.values()):
            shadow.workspace.close()
        for path in self._twin_paths.values():
            path.unlink(missing_ok=True)
        self.shadows, self.twins, self._twin_paths = {}, {}, {}


def _no_space(exc: BaseException) -> bool:
    """ENOSPC (or EDQUOT) anywhere in ``exc``'s chain of causes."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        seen = seen.__cause__
    return False


def walk_inodes(root: Path) -> frozenset[tuple[int, int]]:
    """(device, inode) of every entry staged under ``root``.

    Raises:
        SandboxError: Part of the staged tree cannot be walked (unreadable, or deeper
            than ``vera_env.sandbox.disk.MAX_DEPTH``): the harness staged it, so this
            is a broken setup, and a shadow whose staged files are not all known
            would count them as replayed output.
    """
    found: set[tuple[int, int]] = set()
    for path, st in walk(root):
        if st is None:
            raise SandboxError(f"cannot walk the staged shadow workspace {root} at "
                               f"'{path or '.'}' (unreadable, or more than {MAX_DEPTH} "
                               f"levels deep)")
        found.add((st.st_dev, st.st_ino))
    return frozenset(found)


def _mtime_ns(path: Path) -> int | None:
    try:
        return os.lstat(path).st_mtime_ns
    except OSError:
        return None


def _touch(path: Path, stamp_ns: int) -> None:
    try:
        os.utime(path, ns=(stamp_ns, stamp_ns), follow_symlinks=False)
    except OSError:
        pass  # a replay made it unwritable to the harness: its own times stay


def _same_mtime(staged: Path, source: Path) -> None:
    st, src = os.lstat(staged), os.stat(source)
    if (st.st_dev, st.st_ino) != (src.st_dev, src.st_ino):
        os.utime(staged, ns=(src.st_mtime_ns, src.st_mtime_ns), follow_symlinks=False)
