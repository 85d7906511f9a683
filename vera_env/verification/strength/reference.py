"""What a task tells strength about itself: how its answer follows from its files.

A check earns when its verdict *follows the answer*: it holds on every variant of the
task's data that leaves the answer unchanged (a *control*) and fails on one that
changes it (a *mutant*). Which variant is which is not assumed from how it was built —
shuffling the rows of a table changes a median of the first ten rows and not a mean —
it is decided by the task's own reference: ``solve`` recomputes the answer from the
variant's files, and the task's grader compares it with the answer on the unvaried
files. So a hash, a byte count, a line count of a whole file or a copy compared with the
original dies on a control that re-serialises the data, while a recount of what the
question is about holds on every control and dies on a mutant.

A family declares, next to its generator, which *control transforms*
(`CONTROL_TRANSFORMS`) keep its answer for each of its files (``preserving``), which
records of a file its question never reads (``irrelevant``: what ``drop_irrelevant``
may remove), and optionally mutators of its own (``mutators``: content changes aimed at
what the question reads, on top of the generic ones in ``mutants``). ``vera-env tasks
validate`` reports, per family, how many controls and mutants were built and whether
the reference classified them as declared.

On top of what a family declares, strength *probes* every file of a task with a
reference with the rewrites of ``rewrites`` (`REWRITE_TRANSFORMS`: numbers re-formatted,
values moved or permuted among the records of a group, ids renamed, SNV alleles
complemented, prose re-worded): they rewrite the very records the
question reads, so a fingerprint of those records dies on a control too. A probe is kept
only where ``solve`` confirms the answer; a family narrows the probes tried for a file
(``rewriting``) where one keeps the solver's answer but moves a fact an honest analysis
checks on the way.

A task without a reference (a user's suite folder with no solver, a canary whose answer
is "cannot be determined" whatever the data) gets the format-level re-serialisations
only (``FORMAT_TRANSFORMS``) as controls and the generic mutations, unclassified, as
mutants: a weaker guarantee — a fingerprint of a plain-text file's bytes survives it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["CONTROL_TRANSFORMS", "DEFAULT_REWRITES", "FORMAT_TRANSFORMS", "REWRITE_TRANSFORMS",
           "ControlTransform", "Contents", "Mutator", "Reference", "RewriteTransform", "Solver"]

ControlTransform = Literal["recompress", "shuffle_records", "drop_irrelevant", "rewrap",
                           "add_comment", "repeat_irrelevant"]
CONTROL_TRANSFORMS: tuple[ControlTransform, ...] = (
    "recompress", "shuffle_records", "drop_irrelevant", "rewrap", "add_comment",
    "repeat_irrelevant")
"""The answer-preserving transformations strength can build (``transforms``):

* ``recompress``: the same content, encoded with other settings (gzip level, block
  size); only for compressed files;
* ``shuffle_records``: the records in another order (header and meta lines kept first);
* ``drop_irrelevant``: about a tenth (at least one) of the records the family's
  ``irrelevant`` predicate picks, removed;
* ``rewrap``: FASTA sequence lines wrapped at another width;
* ``add_comment``: a comment or meta line added to the header (VCF ``##``, MatrixMarket
  ``%``, GTF/GFF ``#``, SAM ``@CO``), where the format has comments;
* ``repeat_irrelevant``: a few records the ``irrelevant`` predicate picks repeated one
  to four more times at random places: a record count moves by a drawn amount, so a
  count pin gated on a hash of what it counts meets two different mismatches (a
  dropped record and repeated ones), not one.
"""
RewriteTransform = Literal["complement_alleles", "transfer_values", "reformat_numbers",
                          "permute_values", "rename_ids", "respell_fields", "reword_text",
                          "revcomp_records", "swap_homozygous", "transfer_largest"]
REWRITE_TRANSFORMS: tuple[RewriteTransform, ...] = (
    "complement_alleles", "transfer_values", "reformat_numbers", "permute_values",
    "rename_ids", "respell_fields", "reword_text", "revcomp_records", "swap_homozygous",
    "transfer_largest")
"""The rewrites strength can probe (``rewrites``), in the order it tries them (those that
rewrite the values a question reads first), each kept as a control only where the
solver confirms the answer:

* ``complement_alleles``: REF and ALT of about half the VCF's SNVs complemented;
* ``transfer_values``: in every numeric column of a table, ``d`` moved between two
  values of each group's top quarter (a group: records equal in every few-valued
  column), the largest excepted: count, sum, mean, range and median of the group kept;
* ``reformat_numbers``: about half the positive decimals given a leading zero (``38.8``
  -> ``038.8``), in CSV/TSV fields and the VCF QUAL; integers unchanged;
* ``permute_values``: every numeric column of a table permuted within each group;
* ``rename_ids``: a table's ``id``/``*_id`` column, or the VCF ID column, rewritten;
* ``respell_fields``: whole columns respelled, column by column, each kept only where
  the answer holds: every distinct value of a table column given another spelling of
  the same shape (digits for digits, letters for letters, one spelling per value), a
  VCF's QUAL, INFO numbers and each sample's calls and numbers; what the question never
  reads (the other columns, the other samples) changes, equal values stay equal;
* ``reword_text``: a prose side file (``.txt``, ``.md``, README) titled and re-spaced;
* ``revcomp_records``: about half the FASTA records reverse-complemented (only where a
  family names it: it moves strands and positions an honest analysis checks);
* ``swap_homozygous``: about half the homozygous VCF calls swapped, ``0/0`` with ``1/1``
  (only where a family names it: a het count keeps, an honest trio analysis does not);
* ``transfer_largest``: in a table, ``d`` moved from each group's largest value to a
  value above its median, of the record most alike: count, sum, mean, minimum and
  median kept, the maximum not (only where a reference names it, and by default for a program reference, which
  declares no honest check of a range; a family keeps its range checks).

A file gets one control of rewrites: each that applies, kept where the solver confirms
the answer, and the declared transforms on top; the other controls are declared.
"""
DEFAULT_REWRITES: tuple[RewriteTransform, ...] = REWRITE_TRANSFORMS[:-3]
"""The rewrites probed for a file its family does not name in ``Reference.rewriting``."""
FORMAT_TRANSFORMS: tuple[ControlTransform, ...] = ("recompress", "add_comment")
"""The controls of a task with no reference: re-serialisations that keep every record."""

Contents = Mapping[str, bytes]
"""Every task file's *decoded* content (gzip and friends undone), by workspace name."""
Solver = Callable[[Contents], str]
"""Recompute the task's answer from its files; raise on content it cannot read."""
Mutator = Callable[[bytes, random.Random], bytes | None]
"""Change a file's decoded content (None: cannot); the reference decides if the answer moved."""


@dataclass(frozen=True, slots=True)
class Reference:
    """How a task's answer follows from its files (see the module docstring).

    Attributes:
        solve: Recomputes the answer from every task file's decoded content, formatted
            as the task's answer is (the task's grader compares the two). It must not
            use anything but its argument and what the generator fixed (the subject:
            a sample, a motif, a species), and must raise on content it cannot read.
        preserving: File name -> the control transforms that keep the answer for it.
            A file not named gets ``FORMAT_TRANSFORMS``.
        irrelevant: File name -> predicate on one record (a line; for FASTA a whole
            ``>`` record; for FASTQ four lines) saying the question never reads it.
            ``drop_irrelevant`` needs one for the file.
        mutators: File name -> mutators aimed at what the question reads, tried before
            the generic mutations.
        controls: File name -> answer-preserving edits of the family's own, for files
            the generic transforms cannot vary (a codebook, a barcode or feature list
            indexed by line number, a README): renamed identifiers the question does not
            name, reworded text, an added blank or comment line the format allows.
            Classified by ``solve`` like every candidate, and tried first.
        unread_ends: Whether ``drop_irrelevant`` also drops the unread holders of some
            of a file's ends (``ends``: its least and greatest record and column
            values) on each draw. A program reference's (``program``): its probes find
            few unread records, and a pin of an end held by an unread one survived
            every control. A family's predicate names every unread record, and
            dropping ends on every draw cost its references (measured in ``ends``).
        rewriting: File name -> the rewrites to probe for it (a file not named gets
            `DEFAULT_REWRITES`, those that apply to its format; ``()``: none): fewer
            where a rewrite keeps the solver's answer but moves a fact an honest
            analysis checks on its way to the answer, ``revcomp_records`` where strands
            do not matter.
    """

    solve: Solver
    preserving: Mapping[str, tuple[ControlTransform, ...]] = field(default_factory=dict)
    irrelevant: Mapping[str, Callable[[bytes], bool]] = field(default_factory=dict)
    mutators: Mapping[str, tuple[Mutator, ...]] = field(default_factory=dict)
    controls: Mapping[str, tuple[Mutator, ...]] = field(default_factory=dict)
    rewriting: Mapping[str, tuple[RewriteTransform, ...]] = field(default_factory=dict)
    unread_ends: bool = False

    def __post_init__(self) -> None:
        for name, transforms in self.preserving.items():
            unknown = set(transforms) - set(CONTROL_TRANSFORMS)
            if unknown:
                raise ValueError(f"Reference.preserving[{name!r}]: unknown transforms "
                                 f"{sorted(unknown)}; expected some of {CONTROL_TRANSFORMS}")
            for needs in ("drop_irrelevant", "repeat_irrelevant"):
                if needs in transforms and name not in self.irrelevant:
                    raise ValueError(f"Reference.preserving[{name!r}] declares {needs} "
                                     "but irrelevant has no predicate for that file")
        for name, rewrites in self.rewriting.items():
            strange = set(rewrites) - set(REWRITE_TRANSFORMS)
            if strange:
                raise ValueError(f"Reference.rewriting[{name!r}]: unknown rewrites "
                                 f"{sorted(strange)}; expected some of {REWRITE_TRANSFORMS}")

    def rewrites_for(self, name: str) -> tuple[RewriteTransform, ...]:
        """The rewrites to probe for file ``name`` (`DEFAULT_REWRITES` if not named)."""
        return tuple(self.rewriting.get(name, DEFAULT_REWRITES))

    def controls_for(self, name: str) -> tuple[ControlTransform, ...]:
        """The control transforms declared for file ``name`` (format-level if none)."""
        return tuple(self.preserving.get(name, FORMAT_TRANSFORMS))
