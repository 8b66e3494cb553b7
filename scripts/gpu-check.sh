#!/usr/bin/env bash
# Runs Kiln's GPU checks and benchmarks on a machine with an NVIDIA GPU: the runtime tests
# (GPU ones included), kiln-bench, the Triton/torch peers in the same run, and prints the
# results table last. Uses build/ if present, else the prebuilt bundle .carry/kiln-gpu.tar.xz
# (made by scripts/make-gpu-bundle.sh on the development machine). Full logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kiln-gpu-out}"
mkdir -p "$OUT"
if [ -f .carry/kiln-gpu.tar.xz ]; then
  mkdir -p /tmp/kiln-bundle && tar -xJf .carry/kiln-gpu.tar.xz -C /tmp/kiln-bundle
  BIN=/tmp/kiln-bundle
else
  BIN=build
fi
export LD_LIBRARY_PATH="$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KILN_KERNELS_DIR="$PWD/kernels" KILN_CACHE_WORKER="$BIN/test/runtime/kiln-cache-worker"
export KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1  # only logs go back in $OUT
device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
echo "== device: $device"

echo "== runtime tests (GPU included)"
"$BIN/test/runtime/kiln-runtime-tests" 2>&1 | tee "$OUT/runtime-tests.log" | tail -4
if [ -x "$BIN/test/unit/kiln-lang-tests" ]; then
  echo "== C++ DSL tests (GPU included)"
  "$BIN/test/unit/kiln-lang-tests" 2>&1 | tee "$OUT/lang-tests.log" | tail -4
fi
echo "== kiln-bench"
"$BIN/bench/kiln-bench" --kernels=kernels 2>&1 | tee "$OUT/kiln-bench.txt"
echo "== peers (Triton, torch)"
python3 bench/bench_peers.py 2>&1 | tee "$OUT/peers.txt"
echo
python3 bench/report.py "$OUT/kiln-bench.txt" "$OUT/peers.txt" "$device" | tee "$OUT/results.md"
