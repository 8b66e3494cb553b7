#!/usr/bin/env bash
# Matmul on the GPU machine: the runtime tests, kiln-bench --only=matmul (the wgmma sweep and
# the mma.sync path) with the cuBLAS/Triton peers in the same run, SASS of the best kernel, and
# a table last. Uses the bundle of scripts/make-gpu-bundle.sh. Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kiln-gpu-out}"
mkdir -p "$OUT" /tmp/kiln-bundle
tar -xJf .carry/kiln-gpu.tar.xz -C /tmp/kiln-bundle
BIN=/tmp/kiln-bundle
export LD_LIBRARY_PATH="$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KILN_KERNELS_DIR="$PWD/kernels" KILN_CACHE_WORKER="$BIN/test/runtime/kiln-cache-worker"
export KILN_CACHE_DIR=/tmp/kiln-cache PYTHONUNBUFFERED=1
echo "== device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
echo "== runtime tests"
"$BIN/test/runtime/kiln-runtime-tests" ${KILN_GTEST_FILTER:+--gtest_filter=$KILN_GTEST_FILTER} \
  >"$OUT/runtime-tests.log" 2>&1
grep -E "FAILED|PASSED|Failure|error" "$OUT/runtime-tests.log" | head -20
echo "== kiln-bench --only=matmul"
"$BIN/bench/kiln-bench" --kernels=kernels --only=matmul 2>&1 | tee "$OUT/kiln-matmul.txt" | grep -v "^kiln_.*_err="
echo "== peers"
python3 bench/bench_matmul_peers.py 2>&1 | tee "$OUT/peers-matmul.txt"
