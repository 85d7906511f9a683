"""Controls and mutants of one task file: built once per task, classified by its reference.

Strength shows a check *variants* of a task file and asks whether its verdict follows
the answer. Two properties make that evidence, and each was broken once:

* **A control keeps the answer and changes the bytes; a mutant changes the answer.**
  With unchanged copies as controls, any function of the bytes — a hash, a byte
  count, a copy compared with the original — passed every control, failed every mutant
  and earned; a policy pinning fingerprints out-earned the reference analysis on every
  task. So controls are answer-preserving transformations (``transforms``: records
  re-ordered, irrelevant records dropped, comments added, lines re-wrapped, the file
  recompressed; and, since a hash of exactly the read records survived all of those,
  the read records themselves rewritten: ``rewrites``) and mutants are the generic
  mutations plus the family's aimed ones — and neither is assumed: the task's
  ``Reference`` recomputes the answer on each candidate, a control is kept only if its
  answer equals the unvaried one, a mutant only if it differs (``classify``). A task
  without a reference gets format-level controls and unclassified mutants
  (``Classified.classified`` False).
* **Nothing but content tells variants apart.** Every variant is encoded with the same
  codec and settings (a ``recompress`` control with others, which is the point of
  it), and each episode writes its own fresh files of them, in an order drawn from
  the operating system's randomness, with the staged file's mode and mtime
  (``write_variants``): inode numbers, write order and times say nothing, and the seed
  does not predict them.

Classifying costs a solver run per candidate, so a task file's classified variants
are cached per process (keyed by the task, the file and the settings), within a byte
budget: the second episode of a task pays only for writing files.
"""

from __future__ import annotations

import hashlib
import os
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from vera_env.errors import GraderError
from vera_env.verification.strength.encoding import Codec, Decoded, decode
from vera_env.verification.strength.fingerprints import facets, separator
from vera_env.verification.strength.inodes import fresh_file
from vera_env.verification.strength.mutants import (
    DRAWS,
    RESERVE,
    Mutant,
    draw_of,
    kind_of,
    mutant_candidates,
    mutant_kinds,
    window,
)
from vera_env.verification.strength.outcome import StrengthDeadline
from vera_env.verification.strength.reference import FORMAT_TRANSFORMS, Contents, Reference
from vera_env.verification.strength.rewrites import Recipe, probe_rewrites, rewrite_kept
from vera_env.verification.strength.task import Same, StrengthTask
from vera_env.verification.strength.transforms import apply_control

if TYPE_CHECKING:
    from vera_env.verification.rewards import StrengthConfig

__all__ = ["Blob", "Classified", "Settings", "Variant", "VariantSet", "build_variants",
           "census", "classify", "clear_cache", "copy_variant", "decoded_contents",
           "write_like", "write_variants"]

_CACHE_BYTES = 256 * 2**20
_ORDER = random.SystemRandom()


@dataclass(frozen=True, slots=True)
class Blob:
    """One variant's bytes as written to disk (encoded), in memory."""

    label: str
    control: bool
    data: bytes


@dataclass(frozen=True, slots=True)
class Classified:
    """The variants of one task file, before they are files.

    Attributes:
        name: The file's workspace name.
        windowed: The variants hold only the first ``max_bytes`` of the content.
        classified: Controls and mutants were decided by the task's reference.
        controls: Variants whose answer is the file's own.
        mutants: Variants whose answer differs (or, unclassified, mutated content).
        declared: The control transforms declared for the file.
        refuted: Candidates the reference contradicted (a declared transform that
            changed the answer: a family bug ``vera-env tasks validate`` reports).
        note: Why the file is unclassified, if it is.
        content_varied: Some control's *content* differs from the file's (not only its
            encoding): only then can a fingerprint of the content be told from a check
            of the answer (``StrengthSession`` refuses kills through a classified file
            without one).
        reserves: Further draws of the mutants' kinds, each moving the answer (so a
            mutant), never shown to a check before a kill: its confirmations run on them
            (``reserve_for``).
        control_reserves: Further draws of the content-changing controls' kinds, each
            keeping the answer, never shown before a kill: the control each confirmation
            re-runs (``reserve_control``).
        own_facets: The file's fingerprints (``fingerprints.facets``; empty where it is
            not classified): what a gate on one of them would read (``facets_of``).
    """

    name: str
    windowed: bool
    classified: bool
    controls: tuple[Blob, ...]
    mutants: tuple[Blob, ...]
    declared: tuple[str, ...] = ()
    refuted: tuple[str, ...] = ()
    note: str = ""
    content_varied: bool = False
    reserves: tuple[Blob, ...] = ()
    control_reserves: tuple[Blob, ...] = ()
    own_facets: tuple[str, ...] = ()
    codec: Codec | None = field(default=None, compare=False)
    separator: bytes | None = field(default=None, compare=False)
    _facets: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False,
                                                repr=False)

    @property
    def nbytes(self) -> int:
        """Memory its variants take."""
        return sum(len(b.data) for b in (*self.controls, *self.mutants, *self.reserves,
                                         *self.control_reserves))

    def reserve_control(self, k: int) -> Blob | None:
        """The ``k``-th (0-based) reserve control, encoded as the file is, if any."""
        return self.control_reserves[k] if k < len(self.control_reserves) else None

    def facets_of(self, label: str) -> tuple[str, ...] | None:
        """The fingerprints of the variant ``label`` (computed once, when a check first
        needs them: most variants never decide a kill); None where the file has none
        or no variant is so labelled."""
        if not self.own_facets:
            return None
        if (hit := self._facets.get(label)) is not None:
            return hit
        encoded = next((b.data for b in (*self.controls, *self.mutants, *self.control_reserves)
                        if b.label == label), None)
        if encoded is not None and self.codec is not None:
            content: bytes | None = decode(encoded, max_bytes=2**62, budget_s=60.0).content
        else:
            content = encoded if encoded is not None else next(
                (b.data for b in self.reserves if b.label == label), None)  # kept decoded
        if content is None:
            return None
        found = self._facets[label] = facets(content, self.separator)
        return found

    def reserve_for(self, kind: str, k: int) -> Blob | None:
        """The ``k``-th (0-based) reserve draw of mutation ``kind``, encoded as the file
        is (reserves are kept decoded: most are never used), if there is one."""
        drawn = [b for b in self.reserves if kind_of(b.label) == kind]
        if k >= len(drawn):
            return None
        blob = drawn[k]
        return Blob(blob.label, False, self.codec.encode(blob.data) if self.codec else blob.data)


@dataclass(frozen=True, slots=True)
class Variant:
    """One variant of a task file, written for one episode.

    Attributes:
        label: ``<file>:<transform or operator>#<i>``.
        control: Its answer is the file's own.
        path: A read-only file of the harness.
    """

    label: str
    control: bool
    path: Path


@dataclass(frozen=True, slots=True)
class VariantSet:
    """Every variant of one task file, written for one episode.

    Attributes:
        name: The file's workspace name.
        windowed: The variants hold only the first ``max_bytes`` of the content.
        controls: Variants with the file's answer.
        mutants: Variants with another answer (none for an empty file).
        bytes_written: Disk the variants take.
        classified: Controls and mutants were decided by the task's reference.
        source: What they were written from (``write_variants`` writes fresh copies).
    """

    name: str
    windowed: bool
    controls: tuple[Variant, ...]
    mutants: tuple[Variant, ...]
    bytes_written: int
    classified: bool = False
    source: Classified | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class Settings:
    """What a file's variants depend on besides the file (part of the cache key)."""

    mutants: int
    controls: int
    seed: int
    max_bytes: int

    @classmethod
    def of(cls, config: StrengthConfig) -> Settings:
        """The variant settings of a strength configuration."""
        return cls(config.mutants, config.controls, config.seed, config.max_mb * 2**20)


def classify(name: str, task: StrengthTask, settings: Settings, *, budget_s: float,
             contents: Callable[[], Contents] | None = None,
             time_left: Callable[[], float] | None = None) -> Classified:
    """Build and classify the variants of one task file (cached by ``task.key``).

    Args:
        name: The file's workspace name (one of ``task.sources``).
        task: The task's files, reference, grader agreement and cache key.
        settings: Counts, seed and window.
        budget_s: Wall-time bound on decoding.
        contents: Every task file's decoded content (for the reference's solver).
        time_left: The step's deadline, checked between solver runs.

    Raises:
        OSError: The source could not be read.
        StrengthDeadline: The deadline passed while classifying (nothing is cached).
    """
    source, reference, same = task.sources[name], task.reference, task.same
    key = _key(task.key, name, source, settings)
    if key and (hit := _CACHE.get(key)) is not None:
        return hit
    with open(source, "rb") as handle:
        raw = handle.read(settings.max_bytes + 1)
        whole = not handle.read(1)
    decoded = decode(raw, max_bytes=settings.max_bytes, budget_s=budget_s, complete=whole)
    content = decoded.content if decoded.complete else window(decoded.content,
                                                                settings.max_bytes)
    if reference is not None and same is not None and contents is not None:
        built = _classified(name, decoded, content, settings, reference, same, contents,
                            time_left or (lambda: float("inf")))
    else:
        built = _unclassified(name, decoded, content, settings, reference,
                              "the task has no reference solver")
    if key:
        _CACHE.put(key, built)
    return built


def build_variants(name: str, task: StrengthTask, settings: Settings, directory: Path, *,
                   budget_s: float, stamp: tuple[int, int],
                   contents: Callable[[], Contents] | None = None,
                   time_left: Callable[[], float] | None = None) -> VariantSet:
    """``classify`` then ``write_variants``: one file's variants, on disk for an episode,
    each with the staged file's ``stamp`` (mtime in ns, mode).

    Raises:
        OSError: The source could not be read or a variant not written.
    """
    built = classify(name, task, settings, budget_s=budget_s, contents=contents,
                     time_left=time_left)
    mtime_ns, mode = stamp
    return write_variants(built, directory, mtime_ns=mtime_ns, mode=mode)


def write_variants(built: Classified, directory: Path, *, mtime_ns: int,
                   mode: int = 0o444) -> VariantSet:
    """Fresh files of every variant, written in a secret random order.

    Raises:
        OSError: A variant could not be written.
    """
    blobs = [*built.controls, *built.mutants]
    order = list(range(len(blobs)))
    _ORDER.shuffle(order)  # write order (so inode order) says nothing, even to the seed
    paths: dict[int, Path] = {}
    for i in order:
        paths[i] = _write(directory, blobs[i].data, mtime_ns, mode)
    made = [Variant(b.label, b.control, paths[i]) for i, b in enumerate(blobs)]
    return VariantSet(built.name, built.windowed, tuple(v for v in made if v.control),
                      tuple(v for v in made if not v.control),
                      sum(len(b.data) for b in blobs), built.classified, built)


def copy_variant(variant: Variant, directory: Path) -> Path:
    """A fresh file with ``variant``'s bytes, mode and mtime (its own inode).

    Raises:
        OSError: The copy could not be written.
    """
    return write_like(variant.path.read_bytes(), variant.path, directory)


def write_like(data: bytes, like: Path, directory: Path) -> Path:
    """A fresh file of ``data`` with ``like``'s mode and mtime (its own inode): a reserve
    draw written beside the variants it was kept apart from.

    Raises:
        OSError: The file could not be written.
    """
    st = os.stat(like)
    return _write(directory, data, st.st_mtime_ns, st.st_mode & 0o7777)


# ----- building -----

def _classified(name: str, decoded: Decoded, content: bytes, settings: Settings,
                reference: Reference, same: Same, contents: Callable[[], Contents],
                time_left: Callable[[], float]) -> Classified:
    files = dict(contents())
    if name in files and files[name] != content:
        files[name] = content  # the window: variants and the baseline alike
    try:
        base = reference.solve(files)
    except Exception as exc:  # noqa: BLE001 - a solver that cannot read its own data
        return _unclassified(name, decoded, content, settings, reference,
                             f"the reference could not solve the unvaried files: {exc}"[:200])

    def answer(variant: bytes) -> str | None:
        if time_left() <= 0:
            raise StrengthDeadline(name)
        try:
            return reference.solve({**files, name: variant})
        except Exception:  # noqa: BLE001 - unreadable variant: neither control nor mutant
            return None

    declared = reference.controls_for(name)
    controls: list[Blob] = []
    spare: list[Blob] = []  # kept past the shown ones: reserves, if of a shown kind
    decoded_of: dict[str, bytes] = {}  # each kept control's content
    refuted: list[str] = []
    varied = False
    for label, changed, alt in _control_candidates(name, content, settings, reference):
        got = answer(changed)
        full = len(controls) >= settings.controls
        if got is not None and same(base, got):
            (spare if full else controls).append(Blob(label, True, _encode(decoded, changed, alt)))
            decoded_of[label] = changed
            varied = varied or (changed != content and not full)
        elif not full:
            refuted.append(label)
        if len(controls) >= settings.controls and len(spare) >= 4 * RESERVE:
            break
    def keeps(variant: bytes) -> bool:
        got = answer(variant)
        return got is not None and same(base, got)
    probed = probe_rewrites(name, content, reference, keeps, seed=settings.seed)
    rewritten = [Blob(label, True, _encode(decoded, changed, False))
                 for label, changed, _ in probed]
    decoded_of.update((label, changed) for label, changed, _ in probed)
    shown = _mixed(controls, rewritten, settings.controls)
    varied = varied or bool(rewritten)
    redrawn = _redrawn(name, content, reference, keeps, settings,
                       probed if any(b in shown for b in rewritten) else [])
    decoded_of.update(redrawn)
    pool = [*(Blob(label, True, _encode(decoded, changed, False)) for label, changed in redrawn),
            *_of_shown_kinds(shown, [*controls, *spare], decoded_of, content)]
    sep = separator(content)
    own = facets(content, sep)
    known = {label: facets(decoded_of[label], sep)
             for label in {b.label for b in (*shown, *pool)}}
    control_reserves = _control_reserves(own, [known[b.label] for b in shown], pool, known)
    controls = shown
    mutants: list[Blob] = []
    reserves: list[Blob] = []
    kinds = 0
    for drawn in mutant_kinds(name, content, seed=settings.seed,
                              aimed=tuple(reference.mutators.get(name, ())), reserve=RESERVE):
        if kinds >= settings.mutants:
            break
        kind = [m for m in drawn if draw_of(m.label) < DRAWS]
        moved = [answer(m.content) for m in kind]
        if all(got is not None and not same(base, got) for got in moved):
            single = len(kind) == 1
            if single:
                kind = [*kind, *_disguised(name, kind[0], moved[0], reference, answer, same,
                                           settings.seed)]
            mutants += [Blob(m.label, False, _encode(decoded, m.content, False)) for m in kind]
            reserves += _reserves(drawn, [base, *(a for a in moved if a is not None)],
                                  answer, same)
            if single and len(kind) == 2:  # reserves: further disguises, new contents
                again = {m.content for m in kind}
                for draw in range(DRAWS, DRAWS + RESERVE):
                    for m in _disguised(name, kind[0], moved[0], reference, answer, same,
                                        settings.seed, draw):
                        if m.content not in again:
                            again.add(m.content)
                            reserves.append(Blob(m.label, False, m.content))
            kinds += 1
    return Classified(name, not decoded.complete, True, tuple(controls), tuple(mutants),
                      declared, tuple(refuted), content_varied=varied,
                      reserves=tuple(reserves), control_reserves=control_reserves,
                      own_facets=own, codec=decoded.codec, separator=sep, _facets=known)


_MOVES_VALUES = frozenset({"transfer_values", "transfer_largest", "permute_values", "swap_homozygous"})


def _redrawn(name: str, content: bytes, reference: Reference, keeps: Callable[[bytes], bool],
             settings: Settings, probed: list[tuple[str, bytes, Recipe]]
             ) -> list[tuple[str, bytes]]:
    """(label, content) of further draws of the shown rewrite (the same rewrites of the
    same parts, other random choices), each kept where the reference keeps the answer
    and its content is new: candidates for the reserve controls.

    Why. A rewrite changes the records the question reads, so it moves more of the
    file's fingerprints than any other control (``fingerprints``); where it was the only
    control that moved the sorted records and had no reserve, a confirmation's control
    re-ran an earlier one, a free pass for a gate on them, and an honest check could
    not bound its luck (measured: the references of ``seq.gc_content`` and ``vcf.titv``
    earned nothing through their FASTA and VCF files). Only the rewrites that respell
    (numbers re-formatted, ids renamed, columns respelled, alleles complemented, records
    reverse-complemented, text reworded): a value moved between records lands somewhere
    else on each draw, and where the first draw happened to leave alone a record an
    honest check reads on its way, a further one moved it (measured: ``tab.fold_change``'s
    check of one gene's summed control values failed a redrawn value transfer)."""
    seen = {content, *(changed for _, changed, _ in probed)}
    out = []
    for _, _, recipe in probed:
        respelled = tuple((t, parts) for t, parts in recipe if t not in _MOVES_VALUES)
        for draw in range(1, RESERVE + 1) if respelled else ():
            for label, changed, _ in probe_rewrites(name, content, reference, keeps,
                                                    seed=settings.seed, draw=draw,
                                                    recipe=respelled):
                if changed not in seen:
                    seen.add(changed)
                    out.append((label, changed))
    return out


def _of_shown_kinds(shown: list[Blob], kept: list[Blob], decoded_of: Mapping[str, bytes],
                    content: bytes) -> list[Blob]:
    """The kept controls not shown, each a further draw of a kind of control that was
    (the same transform, another random draw) whose content is not the file's."""
    kinds = {_control_kind(b.label) for b in shown if decoded_of[b.label] != content}
    seen = {b.label for b in shown}
    return [b for b in kept if b.label not in seen and decoded_of[b.label] != content
            and _control_kind(b.label) in kinds]


def _control_reserves(own: tuple[str, ...], shown: list[tuple[str, ...]], pool: list[Blob],
                      known: Mapping[str, tuple[str, ...]]) -> tuple[Blob, ...]:
    """Up to ``2 * RESERVE`` controls a check was not shown, from ``pool`` (further draws
    of the shown rewrite and of the shown kinds of control), each chosen for the
    fingerprints (``fingerprints.FACETS``) it moves to a value no control has had yet,
    those with the fewest values so far weighing most (a renamed symbol, the one draw
    that moves the column a question reads, before a sixth renamed id): none that moves
    none.

    Why. Each confirmation runs a control as well as a mutant: for a coin, a second toss.
    For a check that is a function of what it reads, shaped to pass exactly the
    controls it was shown (a pin gated on a hash: True on some mismatches, False on the
    rest), a control whose value it has seen -- a shown one again, a re-ordering under a
    hash of the sorted records, a draw with the same record count under a count pin --
    repeats its pass (measured: ``gated_true`` 0.052 on ``tab.label_coding`` with shown
    controls re-run, and honest references that could not bound their luck where only
    one control moved the records). A fresh value is a toss for a gate and no harder
    for an honest check, which passed that kind already."""
    seen = [{own[i], *(f[i] for f in shown)} for i in range(len(own))]
    chosen: list[Blob] = []
    left = list(pool)
    while left and len(chosen) < 2 * RESERVE:
        def new(b: Blob) -> float:  # a fingerprint with fewer values so far weighs more
            return sum(1 / len(seen[i]) for i, v in enumerate(known[b.label])
                       if v not in seen[i])
        best = max(left, key=new)  # the first of the best: draws in their order
        if not new(best):
            break
        chosen.append(best)
        left.remove(best)
        for i, v in enumerate(known[best.label]):
            seen[i].add(v)
    return tuple(chosen)


def _control_kind(label: str) -> str:
    """``file:transform#i`` -> ``transform``."""
    return label.rpartition("#")[0].rpartition(":")[2]


def _reserves(drawn: list[Mutant], seen: list[str], answer: Callable[[bytes], str | None],
              same: Same) -> list[Blob]:
    """The reserve draws of one kind, kept decoded: each a mutant (its answer is not the
    file's, ``seen[0]``). Those whose answer is also none the check was shown for the
    kind come first: a further draw that lands on a value already seen gives a gate on
    that value its verdict again (a categorical answer -- a gene, a yes -- may have no
    other value: its draws still differ in every fact but the answer)."""
    fresh: list[Blob] = []
    repeated: list[Blob] = []
    for mutant in drawn:
        if draw_of(mutant.label) < DRAWS:
            continue
        got = answer(mutant.content)
        if got is None or _agree(got, seen[0], same):
            continue
        new = not any(_agree(got, old, same) for old in seen[1:])
        (fresh if new else repeated).append(Blob(mutant.label, False, mutant.content))
        seen = [*seen, got] if new else seen
    return fresh + repeated


def _disguised(name: str, mutant: Mutant, moved: str | None, reference: Reference,
               answer: Callable[[bytes], str | None], same: Same, seed: int, draw: int = 1
               ) -> list[Mutant]:
    """A second draw for a kind with one possible outcome (the one value a family can
    move): the mutant with the file's answer-preserving edits applied on top -- its own
    controls, then every rewrite, then its declared re-orderings -- kept where the
    reference gives the mutant's answer again (none where no edit applies or keeps it).
    ``draw`` 2, 3, ...: further disguises with other random choices, the kind's reserves.

    Why. A kind drawn once tests nothing about a check's consistency: a pin gated on a
    hash of what it reads (False on some mismatches, True on the rest) chooses its
    verdict on that mutant by a coin, so each single-draw kind was a free bit in the
    pattern the pin could shape into "distinct" facts (measured: 0.083 per episode on
    ``mtx.knockout_gene`` and ``vcf.trio_parentage``, one aimed kind drawn twice and
    two or three drawn once). On the disguised draw every fact about the data that the
    controls keep -- the answer, the counts an honest analysis checks on its way --
    reads as it did on the mutant; the hash does not, so the gate splits the kind.

    Not ``respell_fields``: a mutant that moves a column (two samples' names swapped)
    leaves an honest check reading the column by the index it found on the task's file,
    and on the mutant that column is one the answer no longer reads, so respelling it
    split honest checks of the asked sample (measured: two of ``vcf.het_count``'s nine
    and one of ``tab.sentinel_mean``'s).
    """
    rng = random.Random(f"{seed}|{name}|disguise" + (f"|{draw}" if draw > 1 else ""))

    def keeps(changed: bytes) -> bool:
        return _agree(moved, answer(changed), same)
    out = mutant.content
    for control in reference.controls.get(name, ()):
        changed = control(out, rng)
        if changed is not None and changed != out and keeps(changed):
            out = changed
    for transform in reference.rewrites_for(name):
        if transform != "respell_fields":  # see the docstring
            out = rewrite_kept(transform, name, out, rng, keeps)
    for declared in reference.controls_for(name):
        changed = (apply_control(declared, name, out, rng, reference.irrelevant.get(name))
                   if declared != "recompress" else None)
        if changed is not None and changed != out and keeps(changed):
            out = changed
    if out == mutant.content:
        return []
    return [Mutant(f"{mutant.label.rsplit('#', 1)[0]}#{draw}", out)]


def _agree(a: str | None, b: str | None, same: Same) -> bool:
    """Two solver answers agree: equal, or the grader says so (an answer it cannot
    read -- "cannot be determined" -- agrees only with itself)."""
    if a is None or b is None:
        return False
    try:
        return a == b or same(a, b)
    except GraderError:
        return False


def _unclassified(name: str, decoded: Decoded, content: bytes, settings: Settings,
                  reference: Reference | None, note: str) -> Classified:
    declared = reference.controls_for(name) if reference else FORMAT_TRANSFORMS
    fmt_only = reference is None
    candidates = _control_candidates(name, content, settings, reference,
                                     transforms=FORMAT_TRANSFORMS if fmt_only else None
                                     )[:settings.controls]
    controls = [Blob(label, True, _encode(decoded, changed, alt))
                for label, changed, alt in candidates]
    aimed = tuple(reference.mutators.get(name, ())) if reference else ()
    mutants = [Blob(m.label, False, _encode(decoded, m.content, False))
               for m in mutant_candidates(name, content, seed=settings.seed,
                                          limit=settings.mutants, aimed=aimed)]
    return Classified(name, not decoded.complete, False, tuple(controls), tuple(mutants),
                      tuple(declared), (), note,
                      content_varied=any(c != content for _, c, _ in candidates))


def _control_candidates(name: str, content: bytes, settings: Settings,
                        reference: Reference | None,
                        transforms: tuple[str, ...] | None = None
                        ) -> list[tuple[str, bytes, bool]]:
    """(label, content, recompressed) candidates: the family's own controls first, then
    the transforms in turn; identity copies fill up when nothing else applies (the
    weakest control: only bytes of equal content pass it)."""
    names = transforms if transforms is not None else (
        reference.controls_for(name) if reference else FORMAT_TRANSFORMS)
    irrelevant = reference.irrelevant.get(name) if reference else None
    ends = reference is not None and reference.unread_ends
    aimed = tuple(reference.controls.get(name, ())) if reference and transforms is None else ()
    out: list[tuple[str, bytes, bool]] = []
    seen: set[tuple[bytes, bool]] = {(hashlib.sha256(content).digest(), False)}

    def add(label: str, changed: bytes | None, alt: bool) -> None:
        key = (hashlib.sha256(changed).digest(), alt) if changed is not None else None
        if changed is not None and key is not None and key not in seen:
            seen.add(key)
            out.append((f"{name}:{label}#{len(out)}", changed, alt))

    for attempt in range(2 * settings.controls + 2):
        for i, edit in enumerate(aimed):
            add(f"control{i}", edit(content, random.Random(
                f"{settings.seed}|{name}|control{i}|{attempt}")), False)
        for transform in names:
            rng = random.Random(f"{settings.seed}|{name}|{transform}|{attempt}")
            add(transform, apply_control(transform, name, content, rng,  # type: ignore[arg-type]
                                         irrelevant, ends=ends), transform == "recompress")
        if len(out) >= 2 * settings.controls + 4 * RESERVE:
            break  # enough to show, and to choose reserves from (``_control_reserves``)
    i = 0
    while len(out) < settings.controls:
        out.append((f"{name}:copy#{i}", content, False))
        i += 1
    return out


def _mixed(declared: list[Blob], rewritten: list[Blob], n: int) -> list[Blob]:
    """``n`` controls: the declared ones in order (the family's own first), with slots
    left for the rewrites, identity copies last (a copy proves least)."""
    real = [b for b in declared if ":copy#" not in b.label]
    head = real[:max(0, n - len(rewritten))]
    return [*head, *rewritten, *real[len(head):],
            *(b for b in declared if ":copy#" in b.label)][:n]


def _encode(decoded: Decoded, content: bytes, recompress: bool) -> bytes:
    if recompress and decoded.codec is not None:
        return decoded.codec.encode_alt(content)
    return decoded.encode(content)


def _write(directory: Path, content: bytes, mtime_ns: int, mode: int) -> Path:
    path = fresh_file(directory)  # an inode drawn at random: see ``inodes``
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        os.utime(fd, ns=(mtime_ns, mtime_ns))
    finally:
        os.close(fd)
    return path


# ----- the per-process cache -----

def _key(cache_key: str, name: str, source: Path, settings: Settings) -> tuple[object, ...]:
    if not cache_key:
        return ()
    try:
        st = os.stat(source)
    except OSError:
        return ()
    return (cache_key, name, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, settings)


class _Cache:
    """Classified variants by key, least recently used dropped past a byte budget."""

    def __init__(self, max_bytes: int) -> None:
        self._items: OrderedDict[tuple[object, ...], Classified] = OrderedDict()
        self._lock = threading.Lock()
        self._max_bytes = max_bytes
        self.hits = self.misses = 0
        self.built_s = 0.0
        self._started = time.monotonic()

    def get(self, key: tuple[object, ...]) -> Classified | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                self.misses += 1
                return None
            self.hits += 1
            self._items.move_to_end(key)
            return hit

    def put(self, key: tuple[object, ...], value: Classified) -> None:
        with self._lock:
            self._items[key] = value
            while sum(v.nbytes for v in self._items.values()) > self._max_bytes \
                    and len(self._items) > 1:
                self._items.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


_CACHE = _Cache(_CACHE_BYTES)


def clear_cache() -> None:
    """Forget every classified file (tests; a task file changed on disk is keyed anew)."""
    _CACHE.clear()


def census(task: StrengthTask, settings: Settings, *, budget_s: float = 30.0
           ) -> list[Classified]:
    """Every task file's classified variants, as an episode would build them (the same
    cache): what ``vera-env tasks validate`` reports per family.

    Raises:
        OSError: A task file could not be read.
    """
    files: dict[str, bytes] = {}

    def contents() -> Contents:
        if not files:
            files.update(decoded_contents(task.sources, settings.max_bytes, budget_s))
        return files
    return [classify(name, task, settings, budget_s=budget_s, contents=contents)
            for name in task.sources]


def decoded_contents(sources: Mapping[str, Path], max_bytes: int, budget_s: float
                     ) -> dict[str, bytes]:
    """Every task file's decoded content (within the window), for a reference's solver."""
    out: dict[str, bytes] = {}
    for name, path in sources.items():
        with open(path, "rb") as handle:
            raw = handle.read(max_bytes + 1)
            whole = not handle.read(1)
        decoded = decode(raw, max_bytes=max_bytes, budget_s=budget_s, complete=whole)
        out[name] = decoded.content if decoded.complete else window(decoded.content, max_bytes)
    return out
