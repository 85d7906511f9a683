"""Decoding a task file for mutation, and encoding every variant of it the same way.

Strength testing (``vera_env.verification.strength``) mutates a task's source files.
A ``.gz``, ``.bz2`` or ``.xz`` source is decoded, its content mutated, and written back
compressed. Two incidents shaped this module:

* **The encoding told mutants apart.** Mutants were re-encoded (gzip level 1, mtime 0)
  while the controls showed the original bytes, so
  ``print(gzip.compress(gzip.decompress(d), 1, mtime=0) != d)`` passed on the original
  and on every control and failed on every mutant — "discriminating" with no analysis
  at all. Now one ``Codec`` encodes every variant, controls included, with the same
  settings: the only difference between a control and a mutant is their content.
* **Decoding was unbounded.** A gzip file of many tiny members was decoded in time
  quadratic in the number of members (each member copied the rest of the input). The
  decoder here feeds each member a chunk sized to the previous member, so the copying
  is linear, and it stops at ``max_bytes`` of output or ``budget_s`` of wall time,
  whichever comes first; what it decoded by then is the file's window (``complete``
  False), judged like any file larger than the window.

Bytes that only look compressed (a magic number, then garbage) are mutated as they are.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Codec", "Decoded", "decode"]

_MIN_CHUNK = 512
_MAX_CHUNK = 1 << 20


@dataclass(frozen=True, slots=True)
class Codec:
    """A compression format and the one setting every variant is written with."""

    name: str
    magic: bytes
    decompressor: Callable[[], Any]
    compress: Callable[[bytes], bytes]
    compress_alt: Callable[[bytes], bytes]

    def encode(self, content: bytes) -> bytes:
        """``content`` compressed as every variant of the file is."""
        return self.compress(content)

    def encode_alt(self, content: bytes) -> bytes:
        """``content`` compressed with other settings: a ``recompress`` control, whose
        bytes differ from every other variant's while its content does not."""
        return self.compress_alt(content)


@dataclass(frozen=True, slots=True)
class Decoded:
    """A file's content as strength sees it.

    Attributes:
        codec: The compression format, or None for a plain (or undecodable) file.
        content: The decoded bytes (at most ``max_bytes + 1`` of them).
        complete: The whole file was decoded within the bounds.
    """

    codec: Codec | None
    content: bytes
    complete: bool

    def encode(self, content: bytes) -> bytes:
        """``content`` in the file's format (identity for a plain file)."""
        return self.codec.encode(content) if self.codec else content


CODECS: tuple[Codec, ...] = (
    Codec("gzip", b"\x1f\x8b", lambda: zlib.decompressobj(wbits=31),
          lambda b: gzip.compress(b, compresslevel=1, mtime=0),
          lambda b: gzip.compress(b, compresslevel=6, mtime=0)),
    Codec("bzip2", b"BZh", bz2.BZ2Decompressor, lambda b: bz2.compress(b, 1),
          lambda b: bz2.compress(b, 9)),
    Codec("xz", b"\xfd7zXZ\x00", lzma.LZMADecompressor, lambda b: lzma.compress(b, preset=0),
          lambda b: lzma.compress(b, preset=3)),
)


def decode(raw: bytes, *, max_bytes: int, budget_s: float, complete: bool = True) -> Decoded:
    """Decode ``raw`` within a size and a time bound.

    Args:
        raw: The file's bytes, or its first part.
        max_bytes: Stop once more than this many bytes are decoded.
        budget_s: Stop once decoding has taken this long.
        complete: ``raw`` is the whole file.

    Returns:
        The codec, the decoded content, and whether all of ``raw`` was decoded within
        the bounds (never raises on corrupt input: it is then a plain file).
    """
    for codec in CODECS:
        if raw.startswith(codec.magic):
            try:
                content, whole = _members(codec, raw, max_bytes, time.monotonic() + budget_s)
            except (OSError, EOFError, lzma.LZMAError, zlib.error, ValueError):
                break
            return Decoded(codec, content, complete and whole and len(content) <= max_bytes)
    return Decoded(None, raw, complete and len(raw) <= max_bytes)


def _members(codec: Codec, raw: bytes, max_bytes: int, deadline: float) -> tuple[bytes, bool]:
    """Decode member after member (gzip) or stream after stream (bz2, xz)."""
    view = memoryview(raw)
    out: list[bytes] = []
    size = pos = 0
    chunk = _MIN_CHUNK
    while pos < len(raw):
        if size > max_bytes or time.monotonic() > deadline:
            return b"".join(out), False
        if not raw.startswith(codec.magic, pos):
            break  # trailing bytes after the last member: ignored, as gzip does
        member_start = pos
        decoder = codec.decompressor()
        while not decoder.eof and pos < len(raw) and size <= max_bytes:
            piece = view[pos:pos + chunk]
            data = decoder.decompress(piece, max_bytes + 1 - size)
            out.append(data)
            size += len(data)
            used = len(piece) - len(decoder.unused_data)
            if not decoder.eof:
                used -= len(getattr(decoder, "unconsumed_tail", b""))
            pos += used
            chunk = min(_MAX_CHUNK, chunk * 2)
            if time.monotonic() > deadline:
                return b"".join(out), False
            if used == 0 and not data:
                return b"".join(out), False  # output limit reached inside this piece
        if not decoder.eof:
            return b"".join(out), False  # window filled, or the input was cut short
        # The next member's first chunk is sized to this one: tiny members stay cheap.
        chunk = max(_MIN_CHUNK, min(_MAX_CHUNK, 2 * (pos - member_start)))
    return b"".join(out), True
