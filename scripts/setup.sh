#!/usr/bin/env bash
# Installs what Kiln builds with (Debian 12: LLVM/MLIR 22, lld, ninja, gtest, ccache, and the
# pinned clang-format 14 of the format check), then
# configures and builds the release (static LLVM) preset into build/. Idempotent: a second run
# only rebuilds what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
PKGS=(llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools lld-22 libzstd-dev libedit-dev
      libcurl4-openssl-dev zlib1g-dev libffi-dev libxml2-dev ninja-build cmake libgtest-dev
      ccache python3 clang-format-14)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- Python (kiln package): a venv in .venv with what the extension builds and tests with.
# Idempotent: an existing venv with everything importable is left alone.
PY_PKGS=(pybind11 scikit-build-core pytest numpy ml_dtypes)
PY="${KILN_PYTHON:-python3}"
if ! .venv/bin/python -c "import pybind11, scikit_build_core, pytest, numpy, ml_dtypes" 2>/dev/null; then
  if ! "$PY" -c "import venv, ensurepip" 2>/dev/null; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv
  fi
  if ! "$PY" -c "import sysconfig, os, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))"; then
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-dev
  fi
  echo "== creating .venv with: ${PY_PKGS[*]}"
  "$PY" -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check "${PY_PKGS[@]}"
fi
# --- end of the Python block

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/kiln-ccache}"
if [ ! -f build/build.ninja ]; then
  cmake --preset release
fi
cmake --build build -j"$(nproc)"
