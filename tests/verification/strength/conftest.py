"""Fixtures the strength tests share: one sandbox per test module, and a small task's
files (a table and a one-sample VCF, read-only as a task's are)."""

from __future__ import annotations

import gzip
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from vera_env.sandbox import Sandbox, SandboxLimits, make_sandbox

LIMITS = SandboxLimits(timeout_s=20, check_timeout_s=20)
TABLE = "id\tgroup\tdrinks\n1\ta\t3\n2\tb\t5\n3\ta\t7\n4\tb\t-999\n"
VCF = ("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\tS1\n"
       + "".join(f"chr1\t{i}\t.\tA\tG\t.\t.\t.\tGT:DP\t{'0|1' if i % 3 else '0/0'}:{10 + i * 7 % 23}\n"
                 for i in range(1, 121)))


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        box = make_sandbox("auto", LIMITS)
    yield box
    box.close()


@pytest.fixture
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    data = tmp_path_factory.mktemp("data")
    data.chmod(0o755)
    files = {"alcohol.txt": TABLE.encode(), "calls.vcf.gz": gzip.compress(VCF.encode(), 9)}
    for name, raw in files.items():
        (data / name).write_bytes(raw)
        (data / name).chmod(0o444)
    return {name: data / name for name in files}
