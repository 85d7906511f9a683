"""Which workspace files a check or a command names: words, globs, scripts, links."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vera_env.verification.strength.check_inputs import WorkspaceIndex, mentioned, named_files
from vera_env.verification.strength.outcome import StrengthDeadline

TABLE = "id\tvalue\n1\t3\n2\t5\n"


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name, text in {"seqs.fa": ">a\nAC\n", "seqs.fa.gz": "x", "data/t.tsv": TABLE,
                       "check.py": "print(len(open('data/t.tsv').read()) > 0)\n",
                       "ok.txt": "True\n", "mean.txt": "5\n", "run.sh": "cat seqs.fa\n",
                       "my file.tsv": TABLE}.items():
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    return tmp_path


def _listing(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()
                  or p.is_symlink())


def test_named_files_paths_basenames_and_artifact_in_order(tree: Path):
    command = "awk '{print}' /work/mean.txt && cut -f3 t.tsv | wc -l"
    assert named_files(command, _listing(tree), tree, artifact="./seqs.fa") == [
        "mean.txt", "data/t.tsv", "seqs.fa"]


def test_named_files_longer_name_not_mistaken_for_its_prefix(tree: Path):
    assert named_files("zcat seqs.fa.gz | wc -l", _listing(tree), tree) == ["seqs.fa.gz"]


def test_named_files_word_inside_code_and_at_sentence_end(tree: Path):
    listing = _listing(tree)
    assert named_files("python3 -c \"open('mean.txt')\"", listing, tree) == ["mean.txt"]
    assert named_files("echo see mean.txt.", listing, tree) == ["mean.txt"]


def test_named_files_quoted_name_with_a_space(tree: Path):
    assert named_files("wc -l 'my file.tsv'", _listing(tree), tree) == ["my file.tsv"]


def test_named_files_glob_matches_workspace_files(tree: Path):
    assert set(named_files("cat *.txt > /dev/null", _listing(tree), tree)) == {
        "mean.txt", "ok.txt"}


def test_named_files_script_then_the_files_it_names(tree: Path):
    listing = _listing(tree)
    assert named_files("python3 check.py", listing, tree) == ["check.py", "data/t.tsv"]
    assert named_files("bash run.sh | grep -q A", listing, tree) == ["run.sh", "seqs.fa"]


def test_named_files_never_follows_a_link_out_of_the_workspace(tree: Path, tmp_path_factory):
    secret = tmp_path_factory.mktemp("host") / "secret"
    secret.write_text("1\n2\n")
    (tree / "s").symlink_to(secret)
    (tree / "d").symlink_to(secret.parent, target_is_directory=True)
    assert named_files("cat s d/secret", ["s", "d/secret"], tree) == []


def test_named_files_existing_false_keeps_names_that_are_gone(tree: Path):
    listing = [*_listing(tree), "calls.vcf.gz"]
    assert named_files("gunzip calls.vcf.gz", listing, tree) == []
    assert named_files("gunzip calls.vcf.gz", listing, tree, existing=False) == ["calls.vcf.gz"]


def test_named_files_limit_stops_a_glob_over_thirty_thousand_files(tmp_path: Path):
    many = tmp_path / "many"
    many.mkdir()
    names = [f"many/f{i}" for i in range(30_000)]
    for name in names[:5]:
        (tmp_path / name).write_text("1\n")
    index = WorkspaceIndex(names)
    found = named_files("cat many/* | wc -l", index, tmp_path, limit=4)
    assert found == names[:4]
    assert len(named_files("cat many/*", index, tmp_path)) == 5  # the rest do not exist


def test_mentioned_many_names_with_one_base_name_each_counted_once():
    index = WorkspaceIndex([f"d{i}/x.tsv" for i in range(5000)])
    assert len(mentioned("cat x.tsv x.tsv x.tsv", index)) == 5000
    assert mentioned("cat x.tsv", index, limit=3) == ["d0/x.tsv", "d1/x.tsv", "d2/x.tsv"]


# ----- issue 19: linear name matching, one deadline -----

def _substring_reference(text: str, names: list[str], limit: int | None = None) -> list[str]:
    """The matching before issue 19, word lookups plus one ``find`` per odd name, kept
    as the semantics the automaton must reproduce."""
    index = WorkspaceIndex(names)
    first: dict[str, int] = {}
    for match in re.finditer(r"[\w./+@%~-]+", text):
        for candidate in (match.group(), match.group().rstrip(".")):
            for name in index.lookup(candidate):
                first.setdefault(name, match.start())
        if limit is not None and len(first) >= limit:
            break
    for name in index.odd_names():
        for form in (name, os.path.basename(name)):
            at = text.find(form)
            if at >= 0:
                first.setdefault(name, at)
                break
    ordered = sorted(first, key=first.__getitem__)
    return ordered if limit is None else ordered[:limit]


_PIECES = st.sampled_from(["a", "b.txt", "my file", "d/", "it's", "é", " ", "./", "/work/",
                           "'", ".", "x y.tsv", "\n"])
_TEXTS = st.lists(_PIECES, max_size=30).map("".join)


@settings(max_examples=300, deadline=None)
@given(names=st.lists(_TEXTS.filter(lambda n: n.strip("/ ") and "//" not in n),
                      max_size=8, unique=True),
       text=_TEXTS, limit=st.sampled_from([None, 1, 3]))
def test_mentioned_automaton_matches_the_substring_semantics(names, text, limit):
    names = [n.strip("/") for n in names]
    names = [n for n in dict.fromkeys(names) if n and os.path.normpath(n) == n]
    assert mentioned(text, WorkspaceIndex(names), limit) == _substring_reference(
        text, names, limit)


def test_mentioned_odd_name_at_its_full_form_before_its_base_name():
    index = WorkspaceIndex(["d x/my file.tsv", "other file.tsv"])
    text = "cat 'other file.tsv' 'my file.tsv' 'd x/my file.tsv'"
    assert mentioned(text, index) == ["other file.tsv", "d x/my file.tsv"]


def test_named_files_prefixes_of_a_long_word_cut_once(tree: Path):
    word = "/work/" * 2000 + "./" * 50_000 + "mean.txt"
    assert named_files(f"cat {word}", _listing(tree), tree) == ["mean.txt"]


def test_named_files_glob_word_longer_than_a_path_ignored(tree: Path):
    assert named_files("cat " + "*" * 5000 + "x", _listing(tree), tree) == []


def test_named_files_deadline_passed_raises_strength_deadline(tree: Path):
    with pytest.raises(StrengthDeadline, match="deadline passed"):
        named_files("python3 check.py", _listing(tree), tree, time_left=lambda: 0.0)


def test_mentioned_deadline_looked_at_while_scanning_a_long_text():
    index = WorkspaceIndex(["a b.txt", "c.txt"])
    looks: list[int] = []

    def time_left() -> float:
        looks.append(1)
        return 1.0 if len(looks) < 3 else 0.0

    with pytest.raises(StrengthDeadline):
        mentioned("w " * 20_000, index, time_left=time_left)
    assert len(looks) == 3


def test_mentioned_twenty_thousand_odd_names_found_in_one_pass():
    names = [f"sample {i} “reads”.txt" for i in range(20_000)]
    text = "x " * 100_000 + f"cat '{names[123]}'" + " y" * 100_000
    assert mentioned(text, WorkspaceIndex(names)) == [names[123]]
