"""Which workspace files a check or a command names: words, globs, scripts, links."""

from __future__ import annotations

from pathlib import Path

import pytest

from vera_env.verification.strength.check_inputs import WorkspaceIndex, mentioned, named_files

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
