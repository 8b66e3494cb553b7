#!/usr/bin/env bash
# On a machine with an NVIDIA GPU and no LLVM (the GPU machine): builds only the Python
# extension kiln._C against the prebuilt libkiln.so from .carry/kiln-gpu.tar.xz (made here by
# scripts/make-gpu-bundle.sh; falls back to build/), stages the package, runs the Python tests
# (the `gpu` marker included) and bench/bench_python.py (Kiln beside Triton). Logs go to $OUT.
# KILN_PYTEST_ARGS replaces the pytest arguments (default: test/python); KILN_PY_BENCHES the
# benchmark scripts (default: bench/bench_python.py), run with kernels/python on PYTHONPATH.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kiln-gpu-out}"
mkdir -p "$OUT"
if [ -f .carry/kiln-gpu.tar.xz ]; then
  BIN=/tmp/kiln-bundle
  mkdir -p "$BIN" && tar -xJf .carry/kiln-gpu.tar.xz -C "$BIN"
else
  BIN="$PWD/build"
fi
PY="${PYTHON:-python3}"
PYBUILD=/tmp/kiln-py-build
export PYTHONUNBUFFERED=1

echo "== building kiln._C against $BIN/lib/libkiln.so ($("$PY" --version))"
GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
t0=$(date +%s%N)
cmake -S . -B "$PYBUILD" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DKILN_PREBUILT_LIB="$BIN/lib/libkiln.so" \
  -DKILN_INCLUDE_DIR="$( [ -d "$BIN/include/kiln" ] && echo "$BIN/include" || echo "$PWD/include")" \
  -DPython_EXECUTABLE="$(command -v "$PY")" >"$OUT/python-configure.log" 2>&1 \
  || { tail -30 "$OUT/python-configure.log"; exit 1; }
cmake --build "$PYBUILD" -j"$(nproc)" >"$OUT/python-build.log" 2>&1 \
  || { tail -30 "$OUT/python-build.log"; exit 1; }
echo "   built in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
export PYTHONPATH="$PYBUILD/python${PYTHONPATH:+:$PYTHONPATH}"
export LD_LIBRARY_PATH="$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-/tmp/kiln-py-cache}"  # not under $OUT: only logs go back

echo "== pytest ${KILN_PYTEST_ARGS:-test/python} (gpu marker included)"
# shellcheck disable=SC2086
"$PY" -m pytest -q -p no:cacheprovider -rs ${KILN_PYTEST_ARGS:-test/python} 2>&1 \
  | tee "$OUT/pytest-python.log" | tail -15
status=${PIPESTATUS[0]}

export PYTHONPATH="$PYTHONPATH:$PWD/kernels/python"
for bench in ${KILN_PY_BENCHES:-bench/bench_python.py}; do
  echo "== $bench"
  "$PY" "$bench" 2>&1 | tee "$OUT/$(basename "$bench" .py).txt"
done
exit "$status"
