"""Mutants of a task file's content: what each operator changes, and what none may."""

from __future__ import annotations

import pytest

from vera_env.verification.strength.mutants import TEXT_OPERATORS, mutate_content, window

TABLE = b"id\tgroup\tdrinks\n1\ta\t3\n2\tb\t5\n3\ta\t7\n4\tb\t-999\n"


def _mutants(data: bytes, name: str = "t.tsv", **kw) -> list:
    return mutate_content(name, data, n=kw.pop("n", 4), seed=kw.pop("seed", 0))


def test_mutate_content_text_applies_one_operator_per_mutant_in_turn():
    labels = [m.label for m in _mutants(TABLE)]
    assert labels == [f"t.tsv:{op}#{i}" for i, op in enumerate(TEXT_OPERATORS)]


def test_mutate_content_every_mutant_differs_and_none_is_empty():
    for data in (b"3612.78\n", b"True\n", b"ATGAAACCCGGGTTTTAA", TABLE):
        mutants = _mutants(data, n=6)
        contents = [m.content for m in mutants]
        assert mutants and all(contents) and data not in contents
        assert len(set(contents)) == len(contents)


def test_mutate_content_empty_has_no_mutant():
    assert _mutants(b"") == []


def test_mutate_content_same_seed_same_mutants_other_seed_other_mutants():
    big = b"".join(b"%d\t%d\n" % (i, i * 7 % 13) for i in range(200))
    assert _mutants(big, seed=3) == _mutants(big, seed=3)
    assert _mutants(big, seed=3) != _mutants(big, seed=4)


def test_mutate_content_perturbs_every_number_keeping_decimals_and_identifiers():
    data = b"".join(b"HG%05d chr1 %d.%02d\n" % (i, 3000 + i, i % 100) for i in range(100, 150))
    [moved] = [m for m in _mutants(data) if "perturb_numbers" in m.label]
    old_lines, new_lines = data.splitlines(), moved.content.splitlines()
    assert len(old_lines) == len(new_lines)
    for old, new in zip(old_lines, new_lines, strict=True):
        sample, chrom, value = new.split()
        assert (sample, chrom) == tuple(old.split()[:2]) and value != old.split()[2]
        assert len(value.split(b".")[1]) == 2


@pytest.mark.parametrize("token", [b"7" * 5000, b"-" + b"3" * 4400, b"1" * 400 + b".5",
                                   b"1e999", b"2.5e308"])
def test_perturb_numbers_number_of_any_length_changes_without_raising(token):
    data = b"id\tvalue\n1\t" + token + b"\n"
    [moved] = [m for m in _mutants(data) if "perturb_numbers" in m.label]
    value = moved.content.split(b"\t")[-1].strip()
    assert value != token and value.lstrip(b"+-")[:1].isdigit()


def test_mutate_content_file_with_5000_digit_integer_is_mutated():
    data = b"id\tvalue\n1\t12\n2\t" + b"9" * 5000 + b"\n"
    mutants = _mutants(data)
    assert len(mutants) == 4 and all(m.content != data for m in mutants)


def test_drop_header_removes_the_column_header_after_vcf_meta_lines():
    vcf = b"##fileformat=VCFv4.2\n##source=x\n#CHROM\tPOS\tS1\nchr1\t5\t0/1\nchr1\t9\t1/1\n"
    [dropped] = [m for m in _mutants(vcf) if "drop_header" in m.label]
    assert b"#CHROM" not in dropped.content and dropped.content.startswith(b"##fileformat")


def test_drop_header_removes_the_matrixmarket_dimensions_line():
    mtx = b"%%MatrixMarket matrix coordinate integer general\n% made up\n3 3 2\n1 1 5\n2 3 7\n"
    [dropped] = [m for m in _mutants(mtx) if "drop_header" in m.label]
    assert dropped.content == mtx.replace(b"3 3 2\n", b"")


def test_mutate_content_multiline_sequence_without_numbers_falls_back():
    fasta = b">seq1\nACGTACGTAC\nGGGTTTAAAC\nCCCAAAGGGT\n"
    labels = [m.label.split(":")[1] for m in _mutants(fasta)]
    assert labels[1].startswith("duplicate_lines") and len(labels) == 4


def test_mutate_content_binary_flips_or_truncates_bytes():
    data = bytes(range(256)) * 4
    labels = [m.label.split(":")[1] for m in _mutants(data, name="b.bin")]
    assert labels == ["flip_bytes#0", "truncate_tail#1", "flip_bytes#2", "truncate_tail#3"]


def test_window_cuts_text_to_a_line_end_and_binary_anywhere():
    text = b"".join(b"%d\n" % i for i in range(1000))
    cut = window(text, 100)
    assert len(cut) <= 100 and cut.endswith(b"\n") and text.startswith(cut)
    assert window(b"\0" * 300, 100) == b"\0" * 100
