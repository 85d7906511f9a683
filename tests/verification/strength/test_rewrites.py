"""Rewrites of the records a question reads: what each changes, what it keeps, and that a
fingerprint of the read records now dies on a control while the reference still earns."""

from __future__ import annotations

import gzip
import hashlib
import random
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from vera_env import VeraEnv
from vera_env.policy import OraclePolicy, ScriptedPolicy
from vera_env.rollout import run_episode
from vera_env.tasks import TaskSource
from vera_env.tasks.builtin import make_task
from vera_env.verification.grading import grade_against
from vera_env.verification.rewards import RewardConfig
from vera_env.verification.strength import Reference
from vera_env.verification.strength.rewrites import apply_rewrite, compose_rewrites
from vera_env.verification.strength.task import StrengthTask
from vera_env.verification.strength.variants import Settings, census, clear_cache

TABLE = ("id,species,sex,mass_g,bill_mm\n" + "".join(
    f"{i},{('Adelie', 'Gentoo')[i % 2]},{('male', 'female')[i % 3 % 2]},"
    f"{3000 + 37 * i if i != 5 else -999},{30 + i * 0.7:.1f}\n" for i in range(1, 41))).encode()
VCF = ("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tS1\n"
       + "".join(f"chr1\t{i}\t.\t{'ACGT'[i % 4]}\t{'GTAC'[i % 4] if i % 3 else 'CA'}\t"
                 f"{20 + i / 4:.2f}\tPASS\t.\tGT\t{('0/1', '1|1', './.')[i % 3]}\n"
                 for i in range(1, 61))).encode()
FASTA = b">a one\nACGTTGCAacgtNNGG\nCCAT\n>b\nGGGCCCAAATTT\n>c\nATGCATGCATGC\nAT\n"


def _rows(content: bytes) -> list[list[str]]:
    return [line.split(",") for line in content.decode().splitlines()[1:]]


def _groups(content: bytes, col: int) -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in _rows(content):
        out[(r[1], r[2])].append(float(r[col]))
    return out


def _rewrite(transform, name: str, content: bytes, seed: int = 0) -> bytes:
    changed = apply_rewrite(transform, name, content, random.Random(seed))
    assert changed is not None and changed != content
    return changed


@pytest.mark.parametrize("seed", range(5))
def test_transfer_values_keeps_each_groups_count_sum_and_median(seed):
    changed = _rewrite("transfer_values", "t.csv", TABLE, seed)
    for col in (3, 4):
        before, after = _groups(TABLE, col), _groups(changed, col)
        assert before.keys() == after.keys()
        for key, values in before.items():
            assert len(after[key]) == len(values)
            assert sum(after[key]) == pytest.approx(sum(values), abs=1e-9)
            assert statistics.median(after[key]) == statistics.median(values)
            assert (min(after[key]), max(after[key])) == (min(values), max(values))
        assert any(sorted(after[k]) != sorted(before[k]) for k in before)  # values moved
    assert [r[:3] for r in _rows(changed)] == [r[:3] for r in _rows(TABLE)]  # ids, groups
    assert all(len(r[4].split(".")[1]) == 1 for r in _rows(changed))  # same decimals


@pytest.mark.parametrize("seed", range(5))
def test_transfer_largest_moves_each_groups_maximum_and_keeps_its_count_sum_min_and_median(seed):
    changed = _rewrite("transfer_largest", "t.csv", TABLE, seed)
    for col in (3, 4):
        before, after = _groups(TABLE, col), _groups(changed, col)
        for key, values in before.items():
            assert len(after[key]) == len(values)
            assert sum(after[key]) == pytest.approx(sum(values), abs=1e-9)
            assert statistics.median(after[key]) == statistics.median(values)
            assert min(after[key]) == min(values)
        assert any(max(after[k]) < max(before[k]) for k in before)  # the maximum moved
    assert [r[:3] for r in _rows(changed)] == [r[:3] for r in _rows(TABLE)]  # ids, groups


def test_transfer_largest_takes_its_partner_from_the_records_most_alike():
    """A question that selects rows by a field of many values (a gene: too many to be a
    group) keeps its sum only where the value moves between two rows it selects."""
    genes = ["MYC", "KRAS", "TP53", "EGFR", "PTEN", "SOX2", "CDK4", "GAPDH", "ACTB",
             "VEGFA", "BRCA1", "BRCA2", "ALK", "RET"]
    rows = [f"L{i:03d},{genes[i % len(genes)]},ctl,{100 + (i * 53) % 900}\n" for i in range(140)]
    table = ("id,gene,condition,reads\n" + "".join(rows)).encode()
    top = max(rows, key=lambda r: int(r.split(",")[3]))
    for seed in range(5):
        changed = _rewrite("transfer_largest", "t.csv", table, seed)
        moved = [(a, b) for a, b in zip(rows, changed.decode().splitlines(keepends=True)[1:],
                                         strict=True) if a != b]
        assert len(moved) == 2 and top in {a for a, _ in moved}
        assert len({a.split(",")[1] for a, _ in moved}) == 1  # both rows of one gene


def test_permute_values_keeps_each_groups_values_and_changes_records():
    changed = _rewrite("permute_values", "t.csv", TABLE)
    for col in (3, 4):
        before, after = _groups(TABLE, col), _groups(changed, col)
        assert {k: sorted(v) for k, v in before.items()} == \
            {k: sorted(v) for k, v in after.items()}
    assert sum(a != b for a, b in zip(_rows(TABLE), _rows(changed), strict=True)) > 10


def test_reformat_numbers_pads_decimals_and_leaves_integers_and_codes():
    changed = _rewrite("reformat_numbers", "t.csv", TABLE)
    old, new = _rows(TABLE), _rows(changed)
    assert [r[:4] for r in old] == [r[:4] for r in new]  # ids, codes, -999, integers
    assert [float(r[4]) for r in old] == [float(r[4]) for r in new]
    assert any(r[4].startswith("0") for r in new)
    assert all(len(a[4].replace(".", "").lstrip("0")) == len(b[4].replace(".", "").lstrip("0"))
               for a, b in zip(old, new, strict=True))  # `tr -d .` still gives the same value


def test_reformat_numbers_vcf_changes_only_qual():
    changed = _rewrite("reformat_numbers", "calls.vcf", VCF)
    pairs = list(zip(VCF.splitlines(), changed.splitlines(), strict=True))
    for a, b in pairs:
        fa, fb = a.split(b"\t"), b.split(b"\t")
        assert fa[:5] + fa[6:] == fb[:5] + fb[6:]
        if len(fa) > 5 and not a.startswith(b"#"):
            assert float(fa[5]) == float(fb[5])
    assert any(a != b for a, b in pairs)


def test_rename_ids_rewrites_the_id_column_only_and_keeps_them_distinct():
    changed = _rewrite("rename_ids", "t.csv", TABLE)
    old, new = _rows(TABLE), _rows(changed)
    assert [r[1:] for r in old] == [r[1:] for r in new]
    assert len({r[0] for r in new}) == len(new) and not {r[0] for r in new} & {r[0] for r in old}
    vcf = _rewrite("rename_ids", "calls.vcf.gz", VCF)
    ids = [line.split(b"\t")[2] for line in vcf.splitlines()[2:]]
    assert all(i.startswith(b"rs") for i in ids) and len(set(ids)) == len(ids)


_TI = {frozenset("AG"), frozenset("CT")}


def test_complement_alleles_keeps_each_snvs_class_and_every_genotype():
    changed = _rewrite("complement_alleles", "v.vcf", VCF)
    moved = 0
    for a, b in zip(VCF.decode().splitlines()[2:], changed.decode().splitlines()[2:],
                    strict=True):
        fa, fb = a.split("\t"), b.split("\t")
        assert fa[:3] + fa[5:] == fb[:3] + fb[5:]
        if len(fa[4]) > 1:
            assert fa[3:5] == fb[3:5]  # not an SNV: left alone
        else:
            assert (frozenset(fa[3:5]) in _TI) == (frozenset(fb[3:5]) in _TI)
            moved += fa[3:5] != fb[3:5]
    assert moved


def test_revcomp_records_keeps_gc_and_width_and_undoes_itself():
    changed = _rewrite("revcomp_records", "g.fa", FASTA, seed=3)
    assert changed.upper().count(b"G") + changed.upper().count(b"C") == \
        FASTA.upper().count(b"G") + FASTA.upper().count(b"C")
    assert [line[:1] == b">" and line for line in changed.splitlines()] == \
        [line[:1] == b">" and line for line in FASTA.splitlines()]  # titles kept in place
    assert _rewrite("revcomp_records", "g.fa", changed, seed=3) == FASTA


def test_reword_text_changes_the_prefix_and_keeps_the_words():
    text = b"penguins.csv: one row per penguin.\n\nid       integer\nmass     in g, -999 missing\n"
    changed = _rewrite("reword_text", "codebook.txt", text)
    assert changed[:16] != text[:16]
    assert changed.split()[-len(text.split()):] == text.split()
    assert apply_rewrite("reword_text", "data.csv", b"a,b\n1,2\n", random.Random(0)) is None


def test_rewrites_do_not_apply_to_other_formats():
    rng = random.Random(0)
    assert apply_rewrite("transfer_values", "g.fa", FASTA, rng) is None
    assert apply_rewrite("complement_alleles", "t.csv", TABLE, rng) is None
    assert apply_rewrite("revcomp_records", "v.vcf", VCF, rng) is None
    assert apply_rewrite("permute_values", "x.bam", b"\x1f\x8b\0\0", rng) is None


def test_reference_rejects_an_unknown_rewrite():
    with pytest.raises(ValueError, match="unknown rewrites"):
        Reference(lambda c: "1", rewriting={"t.csv": ("shuffle_columns",)})  # type: ignore[arg-type]


# ----- through the classification: what the reference keeps -----

def _classified(task_id: str) -> dict[str, tuple[tuple[str, bytes], ...]]:
    """Each file's controls (label, decoded content) as strength builds them."""
    task = make_task(task_id)
    clear_cache()
    files = census(StrengthTask(task.data_files(), task.reference,
                                 lambda a, b: grade_against(task.grader, a, b).correct is True),
                   Settings(4, 4, 0, 2**26))
    out = {}
    for f in files:
        decode = gzip.decompress if f.name.endswith(".gz") else (lambda b: b)
        out[f.name] = tuple((b.label, decode(b.data)) for b in f.controls)
    return out


def _md5(lines: list[str]) -> str:
    return hashlib.md5("\n".join(sorted(lines)).encode()).hexdigest()


def test_hash_of_the_sorted_values_a_table_question_reads_dies_on_a_control():
    task = make_task("tab.sentinel_mean.easy.s0")
    controls = _classified(task.id)["penguins.csv"]
    species = next(s for s in ("Adelie", "Chinstrap", "Gentoo") if f" {s} " in task.question)
    col = next(c for c in ("body_mass_g", "flipper_length_mm") if c in task.question)

    def read_values(content: bytes) -> str:
        lines = content.decode().splitlines()
        j = lines[0].split(",").index(col)
        return _md5([r.split(",")[j] for r in lines[1:] if r.split(",")[1] == species])
    original = read_values(task.data_files()["penguins.csv"].read_bytes())
    assert any(read_values(c) != original for _, c in controls)
    assert any(":rewrites#" in label for label, _ in controls)


def test_hash_of_the_alleles_a_vcf_question_reads_dies_on_a_control():
    task = make_task("vcf.titv.easy.s0")
    controls = _classified(task.id)["variants.vcf.gz"]

    def alleles(content: bytes) -> str:
        return _md5(["\t".join(r.split("\t")[3:5]) for r in content.decode().splitlines()
                     if not r.startswith("#")])
    original = alleles(gzip.decompress(task.data_files()["variants.vcf.gz"].read_bytes()))
    assert any(alleles(c) != original for _, c in controls)


def test_family_can_narrow_the_probes_and_copies_give_way_to_rewrites(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(TABLE)

    def mean(contents) -> str:
        rows = _rows(contents["t.csv"])
        kept = [float(r[3]) for r in rows if r[1] == "Adelie" and r[3] != "-999"]
        return f"{sum(kept) / len(kept):.2f}"

    def labels(reference: Reference) -> list[str]:
        clear_cache()
        [f] = census(StrengthTask({"t.csv": path}, reference,
                                 lambda a, b: a == b), Settings(4, 4, 0, 2**20))
        return [b.label.split(":")[1].split("#")[0] for b in f.controls]
    assert labels(Reference(mean, preserving={"t.csv": ()})) == [
        "rewrites", "copy", "copy", "copy"]  # every rewrite at once
    assert labels(Reference(mean, preserving={"t.csv": ()}, rewriting={"t.csv": ()})) == \
        ["copy"] * 4


# ----- through the environment: pins of the read records against the reference -----

@pytest.fixture(scope="module")
def env():
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    environment = VeraEnv(TaskSource(name="rewrites", factory=make_task), max_steps=10,
                          reward=RewardConfig())
    yield environment
    environment.close()


@pytest.mark.parametrize("task_id", ["tab.sentinel_mean.easy.s0", "vcf.het_count.easy.s0"])
def test_pins_of_the_read_records_earn_nothing_while_the_reference_earns(env, task_id):
    from read_pins import script

    pins = run_episode(env, ScriptedPolicy({task_id: script(env.tasks.get(task_id))}),
                       task_id=task_id, seed=0)
    checks = [c for s in pins.steps for c in s.checks]
    assert len(checks) == 3 and all(c.passed for c in checks), [c.detail for c in checks]
    assert not any(c.earns for c in checks) and pins.verification_reward == 0
    reference = run_episode(env, OraclePolicy(env.tasks), task_id=task_id, seed=0)
    assert reference.correct and reference.verification_reward > 0


def test_swap_homozygous_keeps_every_het_call():
    changed = _rewrite("swap_homozygous", "calls.vcf", VCF)
    old = [r.split("\t")[9] for r in VCF.decode().splitlines()[2:]]
    new = [r.split("\t")[9] for r in changed.decode().splitlines()[2:]]
    assert [g for g in old if g not in ("1|1", "0|0")] == \
        [g for g in new if g not in ("1|1", "0|0")]
    assert old != new and "0|0" in new


def test_compose_rewrites_applies_every_rewrite_that_applies():
    changed = compose_rewrites(("transfer_values", "reformat_numbers", "rename_ids",
                                "revcomp_records"), "t.csv", TABLE, random.Random(0))
    assert changed is not None
    old, new = _rows(TABLE), _rows(changed)
    assert all(a[0] != b[0] for a, b in zip(old, new, strict=True))  # ids renamed
    assert any(b[4].startswith("0") for b in new)  # decimals padded
    assert sorted(float(r[3]) for r in old) != sorted(float(r[3]) for r in new)  # moved
    assert compose_rewrites(("revcomp_records",), "t.csv", TABLE, random.Random(0)) is None


def _column(content: bytes, c: int) -> list[str]:
    return [r[c] for r in _rows(content)]


def test_respell_fields_gives_each_value_of_a_column_one_new_spelling_of_its_shape():
    changed = apply_rewrite("respell_fields", "t.csv", TABLE, random.Random(0),
                            parts=frozenset({0, 2}))
    assert changed is not None
    assert changed.splitlines()[0] == TABLE.splitlines()[0]  # the header stays
    for c in (1, 3, 4):  # columns not asked for stay
        assert _column(changed, c) == _column(TABLE, c)
    for c in (0, 2):
        before, after = _column(TABLE, c), _column(changed, c)
        assert sorted(before) != sorted(after)  # a hash of the sorted column dies
        pairs = set(zip(before, after, strict=True))
        # one spelling per value, and distinct values stay distinct
        assert len(pairs) == len(set(before)) == len(set(after))
        for old, new in pairs:  # one longer where the shape has no spelling left (ids 1-9)
            assert len(new) in (len(old), len(old) + 1)
            assert [ch.isdigit() for ch in old] == [ch.isdigit() for ch in new[:len(old)]]
            assert [ch.isupper() for ch in old] == [ch.isupper() for ch in new[:len(old)]]


def test_respell_fields_rewrites_other_samples_and_numbers_of_a_vcf_not_its_sites():
    vcf = VCF.replace(b"\tGT\t", b"\tGT:DP\t").replace(b"\tS1\n", b"\tS1\tS2\n")
    vcf = b"".join(line.rstrip(b"\n") + (b":%d\t1/1:%d\n" % (i + 10, 30 + i)
                                          if not line.startswith(b"#") else b"\n")
                   for i, line in enumerate(vcf.splitlines(keepends=True)))
    changed = apply_rewrite("respell_fields", "calls.vcf", vcf, random.Random(1),
                            parts=frozenset({20, 21, 19}))  # S2's call and depth, S1's depth
    assert changed is not None
    for old, new in zip(vcf.splitlines(), changed.splitlines(), strict=True):
        a, b = old.split(b"\t"), new.split(b"\t")
        assert a[:9] == b[:9]  # the sites stay
        if not old.startswith(b"#"):
            assert b[9].split(b":")[0] == a[9].split(b":")[0]  # S1's call stays
            assert b[10].split(b":")[0] == b"1/1"  # the only call S2 has
    assert changed != vcf
    depths = [line.split(b"\t")[9].split(b":")[1] for line in changed.splitlines()
              if not line.startswith(b"#")]
    assert depths != [line.split(b"\t")[9].split(b":")[1] for line in vcf.splitlines()
                      if not line.startswith(b"#")]


def test_rewrite_kept_respells_every_column_the_answer_does_not_read_by_halving():
    wide = b"".join(b",".join(b"%s%d" % (chr(97 + c).encode(), (r * 7 + c) % 50)
                              for c in range(16)) + b"\n" for r in range(40))
    read = 11
    asked: list[bytes] = []

    def keeps(content: bytes) -> bool:  # a question that reads column 11
        asked.append(content)
        return [line.split(b",")[read] for line in content.splitlines()] == \
            [line.split(b",")[read] for line in wide.splitlines()]
    from vera_env.verification.strength.rewrites import rewrite_kept

    out = rewrite_kept("respell_fields", "w.csv", wide, random.Random(0), keeps)
    columns = list(zip(*(line.split(b",") for line in wide.splitlines()), strict=True))
    kept = list(zip(*(line.split(b",") for line in out.splitlines()), strict=True))
    assert kept[read] == columns[read]
    assert all(kept[c] != columns[c] for c in range(16) if c != read)
    assert len(asked) <= 9  # 1 + 2 per halving of 16, not one run per column


def test_repeat_irrelevant_repeats_only_unread_records_by_a_drawn_amount():
    from vera_env.verification.strength.transforms import apply_control

    def gentoo(record: bytes) -> bool:
        return b",Gentoo," in record
    counts = set()
    for seed in range(6):
        changed = apply_control("repeat_irrelevant", "t.csv", TABLE, random.Random(seed), gentoo)
        assert changed is not None
        before, after = TABLE.decode().splitlines(), changed.decode().splitlines()
        assert after[0] == before[0]
        assert sorted(set(after)) == sorted(set(before))  # nothing new, nothing lost
        assert [r for r in after if "Gentoo" not in r] == [r for r in before
                                                           if "Gentoo" not in r]
        counts.add(len(after) - len(before))
    assert min(counts) >= 1 and len(counts) > 1  # the record count moves, by varying amounts
    assert apply_control("repeat_irrelevant", "t.csv", TABLE, random.Random(0), None) is None


def test_reference_declaring_repeat_irrelevant_needs_a_predicate():
    with pytest.raises(ValueError, match="repeat_irrelevant"):
        Reference(solve=lambda c: "1", preserving={"t.csv": ("repeat_irrelevant",)})


def test_respell_fields_moves_the_ends_of_a_vcf_part_and_keeps_alleles():
    vcf = b"".join(
        (b"##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tS1\n",
         *(b"chr1\t%d\t.\tA\tG\t50\tPASS\tDP=%d\tGT:DP\t0/1:%d\n" % (i, 10 + i % 90, 10 + i % 90)
           for i in range(1, 400))))
    for seed in range(4):
        changed = apply_rewrite("respell_fields", "v.vcf", vcf, random.Random(seed))
        assert changed is not None
        before = [r.split(b"\t") for r in vcf.splitlines()[2:]]
        after = [r.split(b"\t") for r in changed.splitlines()[2:]]
        for c in (7, 9):  # INFO and the sample: their smallest and largest values move
            old, new = sorted(r[c] for r in before), sorted(r[c] for r in after)
            assert old[0] != new[0] and old[-1] != new[-1]
        assert all(r[3:5] == [b"A", b"G"] for r in after)  # the alleles stay as written
