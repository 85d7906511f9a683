"""Controls and mutants of one task file, built by one builder in one pass.

Strength testing shows a check a *variant* of a task file — a control (the content
unchanged) or a mutant (``mutants``) — and asks whether its verdict changes. That is
evidence only if nothing but content tells the variants apart. Issue 11 found two
ways the old builder leaked: mutants were written at another moment than controls
(timestamps), and mutants of a ``.gz`` were re-encoded while controls were the
original bytes (encoding). So here every variant of a file is:

* decoded once and encoded with the same codec and settings (``encoding``): a control
  of a ``.gz`` is re-encoded exactly as its mutants are;
* a fresh file written in the same pass, in a shuffled order, with the same mode and
  the same mtime (the staged file's), so neither ``stat`` nor inode order nor the
  time a file appeared says which is which.

A variant's file is staged (hard-linked) into exactly one shadow workspace, so its
link count is the same for every variant; the confirmation replay of a mutant gets a
copy of its own (``copy_variant``). A file larger than the window (``max_bytes`` after
decoding), or one that could not be decoded within ``budget_s``, is judged on its
window: every variant holds the window only, so controls and mutants stay alike.
"""

from __future__ import annotations

import os
import random
import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from vera_env.verification.encoding import decode
from vera_env.verification.mutants import mutate_content, window

__all__ = ["Variant", "VariantSet", "build_variants", "copy_variant"]

_ENCODERS = 4


@dataclass(frozen=True, slots=True)
class Variant:
    """One variant of a task file, on disk.

    Attributes:
        label: ``<file>:control#<i>`` or ``<file>:<operator>#<i>``.
        control: The content is the file's own (within the window).
        path: A read-only file of the harness, staged in place of the task file.
    """

    label: str
    control: bool
    path: Path


@dataclass(frozen=True, slots=True)
class VariantSet:
    """Every variant of one task file.

    Attributes:
        name: The file's workspace name.
        windowed: The variants hold only the first ``max_bytes`` of the content.
        controls: Variants with the file's own content.
        mutants: Variants with mutated content (fewer than asked when the content
            allows no more; none for an empty file).
        bytes_written: Disk the variants take.
    """

    name: str
    windowed: bool
    controls: tuple[Variant, ...]
    mutants: tuple[Variant, ...]
    bytes_written: int


def build_variants(name: str, source: Path, directory: Path, *, mutants: int, controls: int,
                   seed: int, max_bytes: int, budget_s: float, mtime_ns: int,
                   mode: int = 0o444) -> VariantSet:
    """Decode ``source`` once and write its controls and mutants in one shuffled pass.

    Args:
        name: The file's workspace name (seeds the mutations, labels the variants).
        source: The task's file on the host (never a model-written file).
        directory: Where the variant files go (the harness's scratch space).
        mutants: Mutants wanted.
        controls: Controls wanted.
        seed: ``RewardConfig.strength_seed``.
        max_bytes: The window, in decoded bytes.
        budget_s: Wall-time bound on decoding.
        mtime_ns: The mtime every variant gets.
        mode: The mode every variant gets.

    Raises:
        OSError: The source could not be read or a variant not written (the caller
            reports an infrastructure fault).
    """
    with open(source, "rb") as handle:
        raw = handle.read(max_bytes + 1)
        whole = not handle.read(1)
    decoded = decode(raw, max_bytes=max_bytes, budget_s=budget_s, complete=whole)
    content = decoded.content if decoded.complete else window(decoded.content, max_bytes)
    contents = [(f"{name}:control#{i}", True, content) for i in range(controls)]
    contents += [(m.label, False, m.content)
                 for m in mutate_content(name, content, n=mutants, seed=seed)]
    order = list(range(len(contents)))
    random.Random(f"{seed}|{name}|order").shuffle(order)
    with ThreadPoolExecutor(_ENCODERS) as pool:  # zlib, bz2 and lzma release the GIL
        encoded = list(pool.map(decoded.encode, (c for _, _, c in contents)))
    paths: dict[int, Path] = {}
    for i in order:  # one pass, shuffled: write order says nothing
        paths[i] = _write(directory, encoded[i], mtime_ns, mode)
    total = sum(map(len, encoded))
    made = [Variant(label, control, paths[i]) for i, (label, control, _) in enumerate(contents)]
    return VariantSet(name, not decoded.complete, tuple(v for v in made if v.control),
                      tuple(v for v in made if not v.control), total)


def copy_variant(variant: Variant, directory: Path) -> Path:
    """A second file with ``variant``'s bytes, mode and mtime (its own inode).

    Raises:
        OSError: The copy could not be written.
    """
    st = os.stat(variant.path)
    return _write(directory, variant.path.read_bytes(), st.st_mtime_ns, st.st_mode & 0o7777)


def _write(directory: Path, content: bytes, mtime_ns: int, mode: int) -> Path:
    path = directory / secrets.token_hex(8)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        view = memoryview(content)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
        os.utime(fd, ns=(mtime_ns, mtime_ns))
    finally:
        os.close(fd)
    return path
