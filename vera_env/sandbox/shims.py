"""Compressor shims: make ``gunzip data.gz`` work on hard-linked staged files.

Staging hard-links task data into the workspace (see ``staging``), so a staged file
has at least two links: the shared source and the workspace's name. gzip, bzip2 and
xz refuse to work in place on such a file, a safety check meant for humans::

    $ gunzip counts.mtx.gz
    gzip: counts.mtx.gz has 1 other link -- file ignored

Found while building this backend: ``gunzip`` in place is the first thing an agent
does with a count matrix, and the design requires it to work as in any directory.
So the sandbox puts a directory of shims first on PATH (``/opt/vera/bin``). A shim
gives each multiply-linked file operand a private copy (copy, then rename over the
name: the shared inode is only read) and runs the real tool from the rest of PATH.
Streaming uses (``-c``, ``zcat``, ``-t``, ``-l``) never copy. The copy costs about
what the decompression that follows costs; staging stays free.

``shuf`` and ``sort`` get a second kind of shim: commands run with ``getrandom``
failing (``entropy``: strength replays them and needs the same output), and these two
read randomness only through it — unless given ``--random-source``. Their shim passes
the sandbox's fixed pseudo-random file, so ``shuf -n 100`` and ``sort -R`` work and
give the same answer every time.
"""

from __future__ import annotations

import os
from pathlib import Path

from .entropy import RANDOM_SOURCE_PATH

__all__ = ["RANDOM_TOOLS", "SHIMMED_TOOLS", "SHIM_DIR", "write_shims"]

SHIM_DIR = "/opt/vera/bin"
SHIMMED_TOOLS = ("gzip", "bzip2", "bunzip2", "xz", "unxz", "lzma", "unlzma")
RANDOM_TOOLS = ("shuf", "sort")

_SHIM = f"""#!/bin/sh
# vera_env shim (see vera_env/sandbox/shims.py): gives multiply-linked file operands a
# private copy, because the real tool refuses to work in place on them.
tool=${{0##*/}}
PATH=${{PATH#{SHIM_DIR}:}}
copy=yes
options=yes
for arg do
  [ $options = yes ] || continue
  case $arg in
    --) options=no ;;
    --stdout|--to-stdout|--test|--list) copy=no ;;
    --*) ;;
    -*[ctl]*) copy=no ;;
  esac
done
if [ $copy = yes ]; then
  options=yes
  for arg do
    if [ $options = yes ]; then
      case $arg in --) options=no; continue ;; -*) continue ;; esac
    fi
    if [ -f "$arg" ] && [ ! -L "$arg" ] && [ "$(stat -c %h -- "$arg")" -gt 1 ]; then
      tmp="$arg.vera-copy.$$"
      if cp -p -- "$arg" "$tmp" 2>/dev/null; then mv -f -- "$tmp" "$arg"; else rm -f -- "$tmp"; fi
    fi
  done
fi
exec "$tool" "$@"
"""


_RANDOM_SHIM = f"""#!/bin/sh
# vera_env shim (see vera_env/sandbox/shims.py): getrandom fails in the sandbox, so
# hand the tool the sandbox's fixed pseudo-random source unless it was given one.
tool=${{0##*/}}
PATH=${{PATH#{SHIM_DIR}:}}
for arg do
  case $arg in --random-source|--random-source=*) exec "$tool" "$@" ;; --) break ;; esac
done
exec "$tool" --random-source={RANDOM_SOURCE_PATH} "$@"
"""


def write_shims(directory: Path, bin_dir: Path = Path("/usr/bin")) -> list[str]:
    """Write a shim for each compressor and random tool present in ``bin_dir``.

    Returns:
        The names of the shims written.
    """
    directory.mkdir(mode=0o755, exist_ok=True)
    written = []
    for tools, text in ((SHIMMED_TOOLS, _SHIM), (RANDOM_TOOLS, _RANDOM_SHIM)):
        for tool in tools:
            if os.path.exists(bin_dir / tool):
                path = directory / tool
                path.write_text(text)
                path.chmod(0o555)
                written.append(tool)
    return written
