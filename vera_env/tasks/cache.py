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
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["CACHE_ENV_VAR", "cache_dir", "content_digest", "materialise"]

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
    final = parent / f"{key}-{content_digest(files)}"
    if final.is_dir() and _is_complete(final, files):
        return final
    parent.mkdir(parents=True, exist_ok=True)
    if final.exists():  # damaged by hand; move it aside so the rename below can land
        trash = Path(tempfile.mkdtemp(prefix=".trash-", dir=parent))
        try:
            final.rename(trash / "old")
        except FileNotFoundError:
            pass  # another process moved it first
        shutil.rmtree(trash, ignore_errors=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=parent))
    try:
        _write_tree(staging, files)
        staging.chmod(0o755)
        staging.rename(final)
    except OSError:
        if not (final.is_dir() and _is_complete(final, files)):
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return final
