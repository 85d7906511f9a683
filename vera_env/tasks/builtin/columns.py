"""Writing large tables of integers as ASCII, fast and byte-for-byte reproducibly.

Why not f-strings. A 10x matrix at the largest difficulty has ten million entries; one
f-string per entry costs seconds and a list of ten million strings costs gigabytes. A
generator that is slow at its largest size is a generator nobody runs at that size, so
the digits are computed with numpy, a column of digits at a time, and the padding is
masked away in one indexing step (about a hundred times faster than formatting in
Python, and the output is the same bytes ``"%d %d %d\\n"`` would give).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["int_lines"]

_CHUNK_ROWS = 1 << 20


def _digits(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ASCII digits of non-negative integers, right-aligned, and which of them to keep."""
    top = int(values.max()) if len(values) else 0
    width = len(str(top))
    powers = 10 ** np.arange(width - 1, -1, -1, dtype=np.int64)
    digits = ((values[:, None] // powers) % 10 + 48).astype(np.uint8)
    keep = values[:, None] >= powers
    keep[:, -1] = True  # zero is written as "0"
    return digits, keep


def _chunk(columns: Sequence[np.ndarray], sep: int) -> bytes:
    parts: list[np.ndarray] = []
    masks: list[np.ndarray] = []
    n = len(columns[0])
    for i, column in enumerate(columns):
        digits, keep = _digits(column)
        parts += [digits, np.full((n, 1), sep if i < len(columns) - 1 else 10, np.uint8)]
        masks += [keep, np.ones((n, 1), dtype=bool)]
    packed: bytes = np.hstack(parts)[np.hstack(masks)].tobytes()
    return packed


def int_lines(columns: Sequence[np.ndarray], sep: str = " ") -> bytes:
    """Rows of non-negative integers as text lines, e.g. MatrixMarket entries.

    Args:
        columns: Equal-length 1-D integer arrays, one per column.
        sep: The one-character column separator.

    Returns:
        ``b"1 2 3\\n4 5 6\\n"`` for columns ``[1, 4], [2, 5], [3, 6]``; ``b""`` when empty.

    Raises:
        ValueError: Columns of different lengths, a negative value, or a separator that
            is not one ASCII character.
    """
    arrays = [np.asarray(c, dtype=np.int64) for c in columns]
    if not arrays or len({len(a) for a in arrays}) != 1:
        raise ValueError("int_lines needs one or more columns of equal length")
    if len(sep) != 1 or not sep.isascii():
        raise ValueError(f"sep must be one ASCII character, got {sep!r}")
    if any(len(a) and int(a.min()) < 0 for a in arrays):
        raise ValueError("int_lines writes non-negative integers only")
    n = len(arrays[0])
    return b"".join(_chunk([a[i:i + _CHUNK_ROWS] for a in arrays], ord(sep))
                    for i in range(0, n, _CHUNK_ROWS))
