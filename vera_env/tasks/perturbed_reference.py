"""The reference of a perturbed task: the base task's, reading through the mess.

Strength classifies a perturbed task's variants by this reference (see
`vera_env.verification.strength.reference`). The answer of a ``bom``, ``crlf`` or
``dup_header`` variant is the base task's once the primary file is cleaned, and a
``decoy`` or ``bloat`` variant only adds files the question never reads; so the solver
is the base solver fed the base files, the primary file cleaned first (`_cleaner`).
Three things keep the classification honest on messy files:

* the cleaning happens *anywhere* in the file, since a control may move the line the
  perturbation sits on (a shuffled repeated header, a comment added above a BOM);
* the base's controls that a perturbation breaks are withdrawn (`_controls`: a repeated
  header is no comment) or re-applied around it (`_under_bom`: a BOM hides a VCF's ``#``
  header and a FASTA's first ``>`` from the record transforms);
* a mutant must keep the mess (`_keeping`), or a check that only detects the mess (a
  BOM test, a CR count) would "discriminate" without reading the answer; so must the
  base's own controls (``Reference.controls``), which are carried over like its mutators.

A ``truncated`` variant has none: its answer is "cannot be determined" whatever the
bytes, as for the canaries (`vera_env.tasks.canary`).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from vera_env.verification.strength.reference import (
    Contents,
    ControlTransform,
    Mutator,
    Reference,
)
from vera_env.verification.strength.transforms import apply_control, file_format

__all__ = ["perturbed_reference"]

_BOM = b"\xef\xbb\xbf"
_PREFIX_HEADERS = ("vcf", "mtx", "gff", "sam")  # formats whose header lines take comments
_BOM_HIDES = (*_PREFIX_HEADERS, "fasta")  # a BOM hides their header (or records) from transforms


def _cleaner(kind: str, header: bytes) -> Callable[[bytes], bytes] | None:
    """What the reference solver undoes in the primary file's decoded content before the
    base solver reads it: anywhere in the file, since a control may move the line the
    perturbation sits on (a shuffled duplicate header, a comment added above a BOM)."""
    if kind == "bom":
        return lambda content: content.replace(_BOM, b"")
    if kind == "crlf":
        return lambda content: content.replace(b"\r\n", b"\n")
    if kind == "dup_header":
        def undup(content: bytes) -> bytes:
            lines = content.splitlines(keepends=True)
            return b"".join(lines[:1] + [x for x in lines[1:] if x.rstrip(b"\r\n") != header])
        return undup
    return None


def _signature(kind: str, content: bytes, header: bytes) -> object:
    """What marks the perturbation: a mutant must keep it, or a check that detects the
    mess (a BOM test, a CR count) would 'discriminate' without reading the answer."""
    if kind == "bom":
        return content.startswith(_BOM)
    if kind == "crlf":
        return b"\r\n" in content
    return sum(1 for x in content.splitlines() if x.rstrip(b"\r") == header)


def _keeping(kind: str, header: bytes, mutate: Mutator) -> Mutator:
    """``mutate``, its mutants refused where they lost the perturbation (`_signature`)."""
    def aimed(content: bytes, rng: random.Random) -> bytes | None:
        out = mutate(content, rng)
        same = out is not None and _signature(kind, out, header) == _signature(
            kind, content, header)
        return out if same else None
    return aimed


def _controls(kind: str, primary: str, declared: tuple[ControlTransform, ...]
              ) -> tuple[ControlTransform, ...]:
    """The base task's controls that stay valid on the perturbed primary file (a BOM's
    are re-applied under it by `_under_bom`)."""
    if kind == "bom" and file_format(primary) in _BOM_HIDES:
        return tuple(t for t in declared if t == "recompress")
    if kind == "dup_header":
        return tuple(t for t in declared if t != "add_comment")
    return declared


def _under_bom(primary: str, transforms: tuple[ControlTransform, ...],
               irrelevant: Callable[[bytes], bool] | None) -> tuple[Mutator, ...]:
    """The base's record transforms, applied to the file with its BOM set aside and put
    back: a BOM before a VCF's ``##`` line or a FASTA's ``>`` hides the header and the
    records from the transforms, and a file whose controls only re-encode it would let
    no check earn (a fingerprint of it would pass them)."""
    def under(transform: ControlTransform) -> Mutator:
        def control(content: bytes, rng: random.Random) -> bytes | None:
            if not content.startswith(_BOM):
                return None
            changed = apply_control(transform, primary, content[len(_BOM):], rng, irrelevant)
            return None if changed is None else _BOM + changed
        return control
    return tuple(under(t) for t in transforms if t != "recompress")


def perturbed_reference(base: Reference | None, kind: str, primary: str,
                        names: frozenset[str], extras: tuple[str, ...] = (),
                        header: bytes = b"") -> Reference | None:
    """The reference of a perturbed task, or None (``truncated``: "cannot be determined"
    whatever the bytes; or a base task without one).

    The answer is the base task's, so the solver is the base solver fed the base files
    only (``old/...`` and ``README.md`` are never read) with the primary file cleaned
    (`_cleaner`). Every record of an extra file is irrelevant, so any transform keeps
    the answer there.

    Args:
        base: The base task's reference.
        kind: One of `KINDS`.
        primary: The perturbed file.
        names: The base task's files.
        extras: Files the perturbation added (the decoy, the README).
        header: The primary file's first line (``dup_header``: the line repeated).
    """
    if base is None or kind == "truncated":
        return None
    clean = _cleaner(kind, header)

    def solve(contents: Contents) -> str:
        files = {n: c for n, c in contents.items() if n in names}
        if clean is not None and primary in files:
            files[primary] = clean(files[primary])
        return base.solve(files)

    preserving = {**base.preserving, **{x: _extra_controls(x) for x in extras}}
    irrelevant = {**base.irrelevant, **{x: (lambda record: True) for x in extras}}
    mutators = dict(base.mutators)
    controls = dict(base.controls)
    if clean is not None:
        preserving[primary] = _controls(kind, primary, base.controls_for(primary))
        if primary in base.irrelevant:
            irrelevant[primary] = _irrelevant(kind, header, base.irrelevant[primary])
        mutators[primary] = tuple(_keeping(kind, header, m) for m in base.mutators.get(primary, ()))
        controls[primary] = tuple(_keeping(kind, header, m) for m in base.controls.get(primary, ()))
        if kind == "bom" and file_format(primary) in _BOM_HIDES:
            controls[primary] += _under_bom(primary, base.controls_for(primary),
                                            base.irrelevant.get(primary))
    return Reference(solve=solve, preserving=preserving, irrelevant=irrelevant,
                     mutators=mutators, controls=controls)


def _extra_controls(name: str) -> tuple[ControlTransform, ...]:
    """Every transform that applies to a file the question never reads."""
    fmt = file_format(name)
    applies: dict[ControlTransform, bool] = {
        "recompress": name.endswith(".gz"), "shuffle_records": fmt != "binary",
        "drop_irrelevant": fmt != "binary", "rewrap": fmt == "fasta",
        "add_comment": fmt in _PREFIX_HEADERS}
    return tuple(t for t, ok in applies.items() if ok)


def _irrelevant(kind: str, header: bytes, base: Callable[[bytes], bool]
                ) -> Callable[[bytes], bool]:
    """The base predicate on a cleaned record; a repeated header is never dropped."""
    if kind == "dup_header":
        return lambda record: record.rstrip(b"\r\n") != header and base(record)
    clean = _cleaner(kind, header) or (lambda record: record)
    return lambda record: base(clean(record))
