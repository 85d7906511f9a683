"""The real-data store: pinned members read out of wheels and .debs, refused on a wrong digest.

The store is what the install step (``python -m vera_env.tasks.real.fetch``) filled; these
tests read it as it is, and build small fake archives for the failure cases, so nothing
here touches the network.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import zipfile
from pathlib import Path

import pytest

from vera_env.tasks.real import fetch as fetch_module
from vera_env.tasks.real.sources import (
    SOURCES,
    SOURCES_ENV_VAR,
    MissingSourceError,
    archive_path,
    clear_cache,
    member_bytes,
    source_available,
    sources_dir,
)

REAL_VCF = member_bytes("r-bioc-variantannotation", "chr22.vcf.gz")
REAL_WHEEL = archive_path("palmerpenguins") or Path("/nonexistent")


@pytest.fixture
def empty_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(SOURCES_ENV_VAR, str(tmp_path / "store"))
    clear_cache()
    yield tmp_path / "store"
    clear_cache()


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_every_pinned_member_is_available_with_its_digest(name: str) -> None:
    for member_name, member in SOURCES[name].members.items():
        data = member_bytes(name, member_name)
        assert hashlib.sha256(data).hexdigest() == member.sha256


def test_sources_dir_follows_the_environment_variable(empty_store: Path) -> None:
    assert sources_dir() == empty_store


def test_missing_archive_error_says_how_to_fetch_it(empty_store: Path) -> None:
    with pytest.raises(MissingSourceError, match=r"palmerpenguins 0\.1\.6.*vera_env\.tasks\."
                                                 r"real\.fetch palmerpenguins"):
        member_bytes("palmerpenguins", "penguins.csv")
    assert not source_available("palmerpenguins")


def _wheel(folder: Path, member: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "palmerpenguins-0.1.6-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(member, data)
    return path


def test_member_with_another_digest_is_refused_naming_both(empty_store: Path) -> None:
    _wheel(empty_store / "pypi", "palmerpenguins/data/penguins.csv", b"species\nGentoo\n")
    with pytest.raises(MissingSourceError, match=r"has sha256 [0-9a-f]{16}\.\.\., not the "
                                                 r"pinned f204db2c753b0937"):
        member_bytes("palmerpenguins", "penguins.csv")


def _deb(path: Path, inner: str, data: bytes) -> None:
    payload = io.BytesIO()
    with tarfile.open(fileobj=payload, mode="w:xz") as tar:
        info = tarfile.TarInfo(f"./{inner}")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    members = [(b"debian-binary", b"2.0\n"), (b"control.tar.xz", b""),
               (b"data.tar.xz", payload.getvalue())]
    out = b"!<arch>\n"
    for name, body in members:
        out += name.ljust(16) + b"0".ljust(12) + b"0".ljust(6) + b"0".ljust(6) + \
            b"100644".ljust(8) + str(len(body)).encode().ljust(10) + b"`\n" + body
        out += b"\n" if len(body) % 2 else b""
    path.write_bytes(out)


def test_debian_member_is_read_from_the_data_tarball(empty_store: Path) -> None:
    src = SOURCES["r-bioc-variantannotation"]
    member = src.members["chr22.vcf.gz"]
    (empty_store / "debian").mkdir(parents=True)
    _deb(empty_store / "debian" / f"{src.package}_{src.version}_amd64.deb", member.path,
         REAL_VCF)
    assert member_bytes("r-bioc-variantannotation", "chr22.vcf.gz") == REAL_VCF


def test_debian_member_of_another_release_is_refused(empty_store: Path) -> None:
    src = SOURCES["r-bioc-variantannotation"]
    (empty_store / "debian").mkdir(parents=True)
    _deb(empty_store / "debian" / f"{src.package}_{src.version}_amd64.deb",
         src.members["chr22.vcf.gz"].path, b"##fileformat=VCFv4.1\n")
    with pytest.raises(MissingSourceError, match="not the pinned 5f64f819"):
        member_bytes("r-bioc-variantannotation", "chr22.vcf.gz")


def test_fetch_downloads_missing_sources_with_the_registry_client(empty_store: Path) -> None:
    calls: list[list[str]] = []

    def run(command: list[str], cwd: Path) -> int:  # stands in for pip: the pinned wheel
        calls.append(command)
        (cwd / REAL_WHEEL.name).write_bytes(REAL_WHEEL.read_bytes())
        return 0

    assert fetch_module.fetch(["palmerpenguins"], run=run) == []
    assert calls[0][1:4] == ["-m", "pip", "download"]
    assert "palmerpenguins==0.1.6" in calls[0] and "--no-deps" in calls[0]
    assert member_bytes("palmerpenguins", "penguins.csv").startswith(b"species,island")


def test_fetch_reports_what_it_could_not_download(empty_store: Path) -> None:
    assert fetch_module.fetch(["lifelines"], run=lambda command, cwd: 1) == ["lifelines"]
    with pytest.raises(KeyError):
        fetch_module.fetch(["no-such-source"], run=lambda command, cwd: 0)


def test_fetch_command_line_exits_1_naming_the_missing(empty_store: Path, monkeypatch,
                                                         capsys) -> None:
    monkeypatch.setattr(fetch_module, "_run", lambda command, cwd: 1)
    assert fetch_module.main(["lifelines"]) == 1
    assert "missing: lifelines" in capsys.readouterr().out
