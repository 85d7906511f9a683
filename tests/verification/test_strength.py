"""Strength testing: mutants of the data a check reads, and which checks they kill."""

from __future__ import annotations

import bz2
import gzip
import lzma
import os
import warnings
from pathlib import Path

import pytest

from vera_env.verification.checks import CheckResult, run_checks
from vera_env.errors import SandboxError
from vera_env.verification.mutants import TEXT_OPERATORS, mutate
from vera_env.wire.protocol import CheckSpec
from vera_env.verification.rewards import RewardConfig
from vera_env.sandbox import LocalSandbox, SandboxLimits, make_sandbox
from vera_env.verification.strength import assess, named_files

TABLE = "id\tgroup\tdrinks\n1\ta\t3\n2\tb\t5\n3\ta\t7\n4\tb\t-999\n"
LIMITS = SandboxLimits(timeout_s=10, check_timeout_s=10)
CONFIG = RewardConfig()


def _mutants(name: str, data: bytes, **kw) -> list:
    return list(mutate(name, data, complete=True, n=kw.pop("n", 4), seed=kw.pop("seed", 0),
                       max_bytes=kw.pop("max_bytes", 1 << 20)).mutants)


# ----- mutants -----

def test_mutate_text_applies_one_operator_per_mutant_in_turn():
    labels = [m.label for m in _mutants("t.tsv", TABLE.encode())]
    assert labels == [f"t.tsv:{op}#{i}" for i, op in enumerate(TEXT_OPERATORS)]


def test_mutate_every_mutant_differs_and_none_is_empty():
    for data in (b"3612.78\n", b"True\n", b"ATGAAACCCGGGTTTTAA", TABLE.encode()):
        mutants = _mutants("f", data, n=6)
        contents = [m.content for m in mutants]
        assert mutants and all(contents) and data not in contents
        assert len(set(contents)) == len(contents)


def test_mutate_same_seed_same_mutants_other_seed_other_mutants():
    big = "".join(f"{i}\t{i * 7 % 13}\n" for i in range(200)).encode()
    assert _mutants("x", big, seed=3) == _mutants("x", big, seed=3)
    assert _mutants("x", big, seed=3) != _mutants("x", big, seed=4)


def test_mutate_perturbs_numbers_keeping_decimals_and_identifiers():
    [moved] = [m for m in _mutants("m", b"HG00100 chr1 3612.78\n", n=4)
               if "perturb_numbers" in m.label]
    sample, chrom, value = moved.content.split()
    assert (sample, chrom) == (b"HG00100", b"chr1")
    assert value != b"3612.78" and len(value.split(b".")[1]) == 2


@pytest.mark.parametrize("compress,decompress", [
    (gzip.compress, gzip.decompress), (bz2.compress, bz2.decompress),
    (lzma.compress, lzma.decompress)])
def test_mutate_compressed_file_stays_valid_and_content_changes(compress, decompress):
    raw = compress(TABLE.encode())
    for mutant in _mutants("t.tsv.z", raw):
        assert decompress(mutant.content) != TABLE.encode()


def test_mutate_multi_member_gzip_mutated_as_one_stream():
    raw = gzip.compress(b"a\t1\nb\t2\n") + gzip.compress(b"c\t3\nd\t4\n")
    mutants = _mutants("m.gz", raw)
    assert gzip.decompress(mutants[3].content) == b"b\t2\nc\t3\nd\t4\n"  # header dropped


def test_mutate_bytes_that_only_look_gzipped_are_mutated_as_bytes():
    mutants = _mutants("fake.gz", b"\x1f\x8bnot gzip at all\n")
    assert mutants and all(m.content.startswith(b"\x1f") or m.content for m in mutants)


def test_mutate_binary_file_flips_or_truncates_bytes():
    data = bytes(range(256)) * 4
    labels = [m.label.split(":")[1] for m in _mutants("b.bin", data)]
    assert labels == ["flip_bytes#0", "truncate_tail#1", "flip_bytes#2", "truncate_tail#3"]


def test_mutate_empty_file_has_no_mutant():
    assert _mutants("e", b"") == []


def test_mutate_large_file_judged_on_its_window():
    data = b"".join(b"%d\n" % i for i in range(10_000))
    built = mutate("big", data[:1001], complete=False, n=4, seed=0, max_bytes=1000)
    assert built.windowed and built.control == data[:built.control.rfind(b"\n") + 1]
    assert len(built.control) <= 1000 and all(len(m.content) <= 1100 for m in built.mutants)


# ----- which files a check names -----

@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for name, text in {"seqs.fa": ">a\nAC\n", "seqs.fa.gz": "x", "data/t.tsv": TABLE,
                       "check.py": "print(len(open('data/t.tsv').read()) > 0)\n",
                       "ok.txt": "True\n", "mean.txt": "5\n", "run.sh": "cat seqs.fa\n"}.items():
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


def test_named_files_glob_matches_workspace_files(tree: Path):
    assert set(named_files("cat *.txt > /dev/null", _listing(tree), tree)) == {"mean.txt"}


def test_named_files_script_replaced_by_the_files_it_reads(tree: Path):
    listing = _listing(tree)
    assert named_files("python3 check.py", listing, tree) == ["data/t.tsv"]
    assert named_files("bash run.sh | grep -q A", listing, tree) == ["seqs.fa"]


def test_named_files_verdict_file_is_not_data(tree: Path):
    assert named_files("grep -qx True ok.txt && echo True || echo False",
                       _listing(tree), tree) == []


def test_named_files_never_follows_a_link_out_of_the_workspace(tree: Path, tmp_path_factory):
    secret = tmp_path_factory.mktemp("host") / "secret"
    secret.write_text("1\n2\n")
    (tree / "s").symlink_to(secret)
    (tree / "d").symlink_to(secret.parent, target_is_directory=True)
    assert named_files("cat s d/secret", ["s", "d/secret"], tree) == []


# ----- assess against a real workspace -----

@pytest.fixture(scope="module")
def sandbox():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        box = make_sandbox("auto", LIMITS)
    yield box
    box.close()


@pytest.fixture
def ws(sandbox, tmp_path_factory):
    data = tmp_path_factory.mktemp("data")
    data.chmod(0o755)
    (data / "alcohol.txt").write_text(TABLE)
    (data / "alcohol.txt").chmod(0o444)
    with sandbox.stage({"alcohol.txt": data / "alcohol.txt"}) as workspace:
        workspace.run("awk -F'\\t' 'NR>1 && $3!=-999 {s+=$3;n++} END{print s/n}' alcohol.txt"
                      " > mean.txt; echo True > ok.txt; printf 'echo True\\n' > ok.sh")
        yield workspace


def _assess(ws, commands, config=CONFIG, **kw):
    specs = [CheckSpec("range", f"c{i}", c) for i, c in enumerate(commands)]
    results = run_checks(specs, ws, timeout_s=LIMITS.check_timeout_s)
    return assess(results, ws, config, LIMITS, **kw)


VACUOUS = ["echo True", "test -f alcohol.txt && echo True || echo False",
           "test -s alcohol.txt && echo True || echo False", 'python3 -c "print(1==1)"',
           "awk 'END { print \"True\" }' alcohol.txt", "cat ok.txt",
           "grep -qx True ok.txt && echo True || echo False", "bash ok.sh",
           "cat alcohol.txt > /dev/null; test $(wc -l < /etc/passwd) -gt 0 && echo True"]


def test_assess_vacuous_checks_pass_but_do_not_discriminate(ws):
    results = _assess(ws, VACUOUS)
    assert all(r.passed for r in results), [r.detail for r in results]
    assert [r.discriminating for r in results] == [False] * len(VACUOUS)
    assert all(r.detail.startswith("not discriminating") and not r.earns for r in results)


def test_assess_real_checks_discriminate_and_name_their_killers(ws):
    results = _assess(ws, [
        'test "$(cat mean.txt)" = 5 && echo True || echo False',
        "test $(awk -F'\\t' 'NR>1 && $3!=-999' alcohol.txt | wc -l) -eq 3 && echo True "
        "|| echo False"])
    assert [r.discriminating for r in results] == [True, True]
    assert results[0].killed_by and results[0].killed_by[0].startswith("mean.txt:")
    assert results[1].killed_by[0].startswith("alcohol.txt:") and results[1].earns


def test_assess_failing_check_not_tested(ws):
    [result] = _assess(ws, ["test $(wc -l < alcohol.txt) -eq 99 && echo True || echo False"])
    assert (result.passed, result.discriminating, result.killed_by) == (False, None, ())


def test_assess_node_artifact_is_mutated_too(ws):
    [blind] = _assess(ws, ["python3 ok.sh 2>/dev/null; test \"$(cat m*n.txt)\" = 5 && "
                           "echo True || echo False"])
    [seen] = _assess(ws, ['test "$(cat m*n.txt)" = 5 && echo True || echo False'],
                     artifact="mean.txt")
    assert blind.discriminating is False and seen.discriminating is True


def test_assess_check_detecting_the_overlay_is_flaky_not_discriminating(ws):
    [result] = _assess(ws, ["cat alcohol.txt > /dev/null; grep -q ' /work/alcohol.txt ' "
                            "/proc/self/mountinfo && echo False || echo True"])
    assert result.passed and result.discriminating is False
    assert "flaky" in result.detail


def test_assess_check_pinning_inode_or_mtime_is_flaky(ws):
    inode, mtime = ws.run("stat -c %i alcohol.txt; stat -c %Y mean.txt").stdout.split()
    results = _assess(ws, [
        f'test "$(stat -c %i alcohol.txt)" = {inode} && echo True || echo False',
        f'test "$(stat -c %Y mean.txt)" = {mtime} && echo True || echo False'])
    assert all(r.passed for r in results)
    assert [r.discriminating for r in results] == [False, False]


def test_assess_verdicts_reproducible_and_independent_of_workers(ws):
    commands = ['test "$(cat mean.txt)" = 5 && echo True || echo False', "echo True",
                "sort -c alcohol.txt 2>/dev/null && echo False || echo True"]
    first = _assess(ws, commands, workers=1)
    second = _assess(ws, commands, workers=4)
    assert [(r.discriminating, r.killed_by) for r in first] == [
        (r.discriminating, r.killed_by) for r in second]


def test_assess_strength_seed_changes_the_mutants(ws):
    command = ["test $(awk -F'\\t' 'NR>1' alcohol.txt | wc -l) -eq 4 && echo True || echo False"]
    killers = {_assess(ws, command, RewardConfig(strength_seed=s))[0].killed_by
               for s in range(3)}
    assert all(k for k in killers)


def test_assess_verdict_past_the_window_earns_nothing(ws):
    ws.run("seq 1 200000 > big.txt")
    [result] = _assess(ws, ["test $(tail -1 big.txt) -eq 200000 && echo True || echo False"],
                       RewardConfig(strength_max_mb=1))
    assert result.discriminating is False and "past the first 1 MiB" in result.detail


def test_assess_scratch_failure_is_a_sandbox_error(ws, monkeypatch):
    def broken(prefix="x"):
        raise SandboxError("disk full")
    monkeypatch.setattr(ws, "scratch_dir", broken)
    with pytest.raises(SandboxError, match="disk full"):
        _assess(ws, ["test $(wc -l < alcohol.txt) -eq 5 && echo True || echo False"],
                RewardConfig(strength_seed=99))


def test_assess_leaves_the_workspace_byte_identical(ws):
    before = {p: (ws.path / p).read_bytes() for p in ws.listing()}
    _assess(ws, VACUOUS + ['test "$(cat mean.txt)" = 5 && echo True || echo False'])
    assert {p: (ws.path / p).read_bytes() for p in ws.listing()} == before


def test_assess_on_local_backend_uses_copies(tmp_path):
    (tmp_path / "t.tsv").write_text(TABLE)
    with pytest.warns(UserWarning):
        box = LocalSandbox(LIMITS)
    with box.stage({"t.tsv": tmp_path / "t.tsv"}) as ws:
        results = _assess(ws, ["test $(wc -l < t.tsv) -eq 5 && echo True || echo False",
                               "test -f t.tsv && echo True || echo False"])
        assert [r.discriminating for r in results] == [True, False]
        assert (ws.path / "t.tsv").read_text() == TABLE


def test_non_discriminating_check_earns_nothing_unless_strength_off():
    weak = CheckResult("c", "range", "echo True", True, discriminating=False)
    untested = CheckResult("c", "range", "echo True", True)
    assert not weak.earns and untested.earns
    assert RewardConfig().strength is True


def test_workspace_overlay_refuses_links_and_escapes(ws):
    source = ws.scratch_dir("t-") / "m"
    source.write_text("x\n")
    source.chmod(0o444)
    ws.run("ln -s alcohol.txt link.txt")
    for name in ("link.txt", "../alcohol.txt", "/etc/passwd", "missing.txt"):
        with pytest.raises(ValueError, match="overlay"):
            ws.run_check("true", overlay={name: source})
    assert os.path.islink(ws.path / "link.txt")


def test_assess_keeps_only_the_current_version_of_a_file_in_its_cache(ws):
    command = ["test $(wc -l < big.txt) -gt 0 && echo True || echo False"]
    sizes = []
    for step in range(3):
        ws.run(f"seq 1 {50_000 + step} > big.txt")
        _assess(ws, command)
        files = list(ws.path.parent.glob("strength-*/*"))
        sizes.append(sum(f.stat().st_size for f in files))
    assert sizes[2] < 1.5 * sizes[0]  # earlier versions' mutants were deleted
