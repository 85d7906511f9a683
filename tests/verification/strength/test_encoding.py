"""Decoding task files for mutation: formats, corrupt input, and the size and time bounds."""

from __future__ import annotations

import bz2
import gzip
import lzma

import pytest

from vera_env.verification.strength.encoding import decode

TEXT = b"".join(b"row%d\t%d\n" % (i, i * 3) for i in range(2000))


@pytest.mark.parametrize("compress,name", [(gzip.compress, "gzip"), (bz2.compress, "bzip2"),
                                           (lzma.compress, "xz")])
def test_decode_compressed_file_round_trips_with_one_codec(compress, name):
    decoded = decode(compress(TEXT), max_bytes=1 << 20, budget_s=10)
    assert (decoded.codec.name, decoded.content, decoded.complete) == (name, TEXT, True)
    assert decoded.encode(TEXT) == decoded.encode(TEXT)  # one setting for every variant
    assert decode(decoded.encode(b"x\n"), max_bytes=10, budget_s=10).content == b"x\n"


def test_decode_multi_member_gzip_decoded_as_one_stream():
    raw = b"".join(gzip.compress(b"%d\n" % i) for i in range(5000))
    decoded = decode(raw, max_bytes=1 << 20, budget_s=30)
    assert decoded.complete and decoded.content == b"".join(b"%d\n" % i for i in range(5000))


def test_decode_stops_at_the_size_bound_and_says_incomplete():
    decoded = decode(gzip.compress(TEXT), max_bytes=1000, budget_s=10)
    assert not decoded.complete and 1000 < len(decoded.content) <= 1001 + 1024 * 64


def test_decode_stops_at_the_time_bound_and_says_incomplete():
    raw = b"".join(gzip.compress(b"%d\n" % i) for i in range(2000))
    decoded = decode(raw, max_bytes=1 << 20, budget_s=0.0)
    assert not decoded.complete and decoded.codec is not None


def test_decode_bytes_that_only_look_gzipped_are_plain():
    raw = b"\x1f\x8bnot gzip at all\n"
    decoded = decode(raw, max_bytes=1 << 20, budget_s=10)
    assert decoded.codec is None and decoded.content == raw and decoded.complete


def test_decode_plain_file_over_the_window_is_incomplete():
    assert not decode(TEXT, max_bytes=100, budget_s=10).complete
    assert not decode(TEXT[:50], max_bytes=100, budget_s=10, complete=False).complete
