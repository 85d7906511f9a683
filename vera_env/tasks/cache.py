"""Where generated task data lives, and how it gets there safely.

Why a content-addressed cache. Builtin tasks are regenerated from their id on every
``get`` (generation is cheap and deterministic), but their files must exist on disk for
the sandbox to stage them, and a vector env starts many processes that all ask for the
same task at once. Each task's files therefore go to
``<cache_dir>/builtin/<task_id>-<sha256 prefix of the contents>/``:

* the folder is written under a temporary name and renamed into place in one step, so a
  reader never sees half a folder and two writers cannot interleave (the loser of the
  rename race deletes its copy and uses the winner's, which is byte-identical);
* the name carries a hash of the contents, so changing a generator never serves stale
  files under an old id;
* files are made read-only (0444): the sandbox stages them by hard link, and an episode
  must not be able to change the data the next episode reads.

Only data goes here. The answer is never written into a data folder: anything in it is
staged into the agent's workspace.

Archives (a BioMysteryBench ``data/<id>.zip``) get the same treatment through
`extract_zip`: extracted once per content hash, atomically, read-only, and staged from
there by hard link -- never unpacked into a workspace, and never twice.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import tempfile
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

from vera_env.errors import UnsafeArchiveError

__all__ = ["CACHE_ENV_VAR", "UnsafeArchiveError", "archive_members", "cache_dir",
           "content_digest", "extract_zip", "file_digest", "materialise"]

CACHE_ENV_VAR = "VERA_ENV_CACHE"


def cache_dir() -> Path:
    """The root folder of vera_env's generated data.

    ``$VERA_ENV_CACHE`` if set, else ``$XDG_CACHE_HOME/vera_env``, else
    ``~/.cache/vera_env``. Read on every call, so tests and workers can redirect it.

    Returns:
        The folder (it may not exist yet).
    """
    explicit = os.environ.get(CACHE_ENV_VAR, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".cache"
    return base / "vera_env"


def content_digest(files: Mapping[str, bytes]) -> str:
    """A short hash of a set of named files (names and bytes, order-independent)."""
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return digest.hexdigest()[:12]


def _is_complete(folder: Path, files: Mapping[str, bytes]) -> bool:
    present = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}
    return present == set(files) and all(
        (folder / name).stat().st_size == len(data) for name, data in files.items())


def _write_tree(root: Path, files: Mapping[str, bytes]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o444)


def _publish(parent: Path, name: str, fill: Callable[[Path], None],
             complete: Callable[[Path], bool]) -> Path:
    """Build a folder under a temporary name with ``fill`` and rename it to ``name``."""
    final = parent / name
    if final.is_dir() and complete(final):
        return final
    parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        # Judged again now that it exists: another writer may have renamed its copy into
        # place since the look above, and moving a complete folder aside pulls it from
        # under a caller that already returned it (measured: a GRPO group's four env
        # workers drawing one new id, one episode's Task found its data_dir gone).
        if final.is_dir() and complete(final):
            return final
        # Damaged by hand; move it aside so the rename below can land.
        trash = Path(tempfile.mkdtemp(prefix=".trash-", dir=parent))
        try:
            final.rename(trash / "old")
        except FileNotFoundError:
            pass  # another process moved it first
        shutil.rmtree(trash, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=parent))
    try:
        fill(staging)
        staging.chmod(0o755)
        staging.rename(final)
    except OSError:
        if not (final.is_dir() and complete(final)):
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final


def materialise(key: str, files: Mapping[str, bytes], *, root: Path | None = None) -> Path:
    """Make ``files`` exist, read-only, in a folder named for ``key`` and their contents.

    Safe to call from many processes at once: the folder appears atomically, and a
    folder already there with the same contents is reused without writing.

    Args:
        key: A readable name (a task id); no slashes.
        files: Relative POSIX path -> bytes.
        root: The folder to write under; ``cache_dir() / "builtin"`` by default.

    Returns:
        The folder holding exactly ``files``.
    """
    parent = root if root is not None else cache_dir() / "builtin"
    return _publish(parent, f"{key}-{content_digest(files)}",
                    lambda folder: _write_tree(folder, files),
                    lambda folder: _is_complete(folder, files))


_JUNK = ("__MACOSX/",)
_JUNK_NAMES = frozenset({".DS_Store", "Thumbs.db"})


def file_digest(path: Path) -> str:
    """A short sha256 of a file's bytes, read in chunks (archives can be gigabytes)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()[:12]


def archive_members(archive: zipfile.ZipFile) -> dict[str, zipfile.ZipInfo]:
    """The files of a zip that would be extracted, by safe relative POSIX path.

    Directory entries and packaging junk (``__MACOSX/``, ``.DS_Store``) are skipped.

    Raises:
        UnsafeArchiveError: A member has an absolute path or ``..`` (it would be written
            outside the folder: "zip slip"), is a symbolic link, or two members name the
            same file.
    """
    members: dict[str, zipfile.ZipInfo] = {}
    for info in archive.infolist():
        name = info.filename.replace("\\", "/")
        if info.is_dir() or name.startswith(_JUNK) or PurePosixPath(name).name in _JUNK_NAMES:
            continue
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or (path.parts and ":" in path.parts[0]):
            raise UnsafeArchiveError(f"member {info.filename!r} would be written outside "
                                     "its folder")
        if stat.S_ISLNK(info.external_attr >> 16):
            raise UnsafeArchiveError(f"member {info.filename!r} is a symbolic link")
        key = path.as_posix()
        if key in members:
            raise UnsafeArchiveError(f"member {key!r} appears twice")
        members[key] = info
    return members


def _extract(archive_path: Path, folder: Path) -> None:
    with zipfile.ZipFile(archive_path) as archive:
        for name, info in archive_members(archive).items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            target.chmod(0o444)
        for sub in sorted((p for p in folder.rglob("*") if p.is_dir()), reverse=True):
            sub.chmod(0o755)


def _extracted_complete(archive_path: Path, folder: Path) -> bool:
    with zipfile.ZipFile(archive_path) as archive:
        members = archive_members(archive)
    present = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    return set(present) == set(members) and all(
        present[n].stat().st_size == info.file_size for n, info in members.items())


def extract_zip(key: str, archive_path: Path, *, root: Path | None = None) -> Path:
    """Extract a zip once into ``<root>/<key>-<sha256 prefix of the zip>/``, read-only.

    Safe under concurrency like `materialise`; a folder already extracted from the same
    bytes is reused without reading the members again.

    Args:
        key: A readable name (a task id); no slashes.
        archive_path: The zip file.
        root: The folder to extract under; ``cache_dir() / "archives"`` by default.

    Returns:
        The folder holding the archive's files.

    Raises:
        UnsafeArchiveError: See `archive_members`.
        zipfile.BadZipFile: The file is not a zip.
    """
    parent = root if root is not None else cache_dir() / "archives"
    return _publish(parent, f"{key}-{file_digest(archive_path)}",
                    lambda folder: _extract(archive_path, folder),
                    lambda folder: _extracted_complete(archive_path, folder))
