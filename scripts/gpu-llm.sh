#!/usr/bin/env bash
# On the GPU machine (no LLVM needed): builds kiln._C against the prebuilt libkiln.so from
# .carry/kiln-gpu.tar.xz (falls back to build/), then runs the LLM kernels of
# kernels/python/kiln_kernels: the GPU tests (pytest -m gpu test/python/test_llm_kernels.py)
# and bench/bench_llm_ops.py (Kiln beside Triton and torch, same run). Logs go to $OUT.
# About 3-5 minutes on an H100. BENCH_REP (ms, default 100) sets do_bench's rep, BENCH_ROUNDS
# (default 1) how many interleaved rounds each case is timed (medians reported).
# Optional: LLM_ONLY=layernorm,rmsnorm (bench subset, tests skipped), LLM_TRITON_DUMP=1 (Triton's
# cache, with its PTX and cubins, as $OUT/triton-cache.tgz), LLM_NCU="<regex> ..." (then
# also an Nsight Compute profile of the first two kernels matching each, Kiln's and Triton's,
# to $OUT/ncu.txt).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kiln-gpu-out}"
mkdir -p "$OUT"
if [ -f .carry/kiln-gpu.tar.xz ]; then
  BIN=/tmp/kiln-bundle
  mkdir -p "$BIN" && tar -xJf .carry/kiln-gpu.tar.xz -C "$BIN"
elif [ -f shared/kiln-gpu.tar.xz ] || [ -f ../shared/kiln-gpu.tar.xz ]; then
  BIN=/tmp/kiln-bundle
  TARBALL=$( [ -f shared/kiln-gpu.tar.xz ] && echo shared || echo ../shared )/kiln-gpu.tar.xz
  mkdir -p "$BIN" && tar -xJf "$TARBALL" -C "$BIN"
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
  -DPython_EXECUTABLE="$(command -v "$PY")" >"$OUT/llm-configure.log" 2>&1 \
  || { tail -30 "$OUT/llm-configure.log"; exit 1; }
cmake --build "$PYBUILD" -j"$(nproc)" >"$OUT/llm-build.log" 2>&1 \
  || { tail -30 "$OUT/llm-build.log"; exit 1; }
echo "   built in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
export PYTHONPATH="$PYBUILD/python:$PWD/kernels/python${PYTHONPATH:+:$PYTHONPATH}"
export LD_LIBRARY_PATH="$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KILN_CACHE_DIR="${KILN_CACHE_DIR:-/tmp/kiln-py-cache}"  # not under $OUT: only logs go back
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1 | tee "$OUT/llm-device.txt"

ONLY=()
[ -n "${LLM_ONLY:-}" ] && ONLY=(--only "$LLM_ONLY")
[ -n "${LLM_TRITON_DUMP:-}" ] && export TRITON_CACHE_DIR=/tmp/kiln-triton-cache
status=0
if [ -z "${LLM_ONLY:-}" ]; then
echo "== pytest -m gpu test/python/test_llm_kernels.py"
timeout 300 "$PY" -m pytest -q -p no:cacheprovider -rs -m gpu test/python/test_llm_kernels.py \
  2>&1 | tee "$OUT/pytest-llm.log" | tail -25
status=${PIPESTATUS[0]}
fi

echo "== bench/bench_llm_ops.py (Kiln beside Triton and torch)"
timeout 360 "$PY" bench/bench_llm_ops.py --rep "${BENCH_REP:-100}" --rounds "${BENCH_ROUNDS:-1}" \
  "${ONLY[@]}" 2>&1 \
  | tee "$OUT/bench-llm.txt"
bstatus=${PIPESTATUS[0]}
if [ -n "${LLM_TRITON_DUMP:-}" ]; then
  tar -czf "$OUT/triton-cache.tgz" -C "$TRITON_CACHE_DIR" .
fi
if [ -n "${LLM_NCU:-}" ]; then
  : >"$OUT/ncu.txt"
  for k in $LLM_NCU; do  # the first two launches of each: Kiln's and Triton's correctness runs
    echo "== ncu on the first two kernels matching '$k'"
    timeout 200 ncu --clock-control none -k "regex:$k" -c 2 \
      --section SpeedOfLight --section Occupancy --section LaunchStats \
      --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
      "$PY" bench/bench_llm_ops.py --rep 1 "${ONLY[@]}" >>"$OUT/ncu.txt" 2>&1
    echo "   ncu exit $?"
  done
fi
grep -E "_CHECK=FAIL|_ERROR=" "$OUT/bench-llm.txt" && echo "!! bench correctness failures above"
[ "$status" -eq 0 ] && status=$bstatus
exit "$status"
