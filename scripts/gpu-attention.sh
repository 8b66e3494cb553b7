#!/usr/bin/env bash
# On the GPU machine: flash attention diagnosis. Builds the Python extension and runs the GPU
# attention tests (scripts/gpu-python.sh), then bench/bench_attention.py once per ring depth in
# ATTN_STAGES (default "3"; 1 is the register-staged path) with ATTN_ARGS, and, when ATTN_NCU
# is set, an Nsight Compute profile (with stall reasons) of Kiln's first kernel for each
# ';'-separated set of bench arguments in ATTN_NCU, to $OUT/ncu-attention.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kiln-gpu-out}"
mkdir -p "$OUT"
KILN_PYTEST_ARGS="${KILN_PYTEST_ARGS:--m gpu test/python/test_flash_attention.py}" \
  KILN_PY_BENCHES="${ATTN_PY_BENCHES:-bench/bench_attention.py}" bash scripts/gpu-python.sh >"$OUT/gpu-python.log" 2>&1
status=$?
tail -4 "$OUT/gpu-python.log"
export PYTHONPATH="/tmp/kiln-py-build/python:$PWD/kernels/python"
export LD_LIBRARY_PATH="/tmp/kiln-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KILN_CACHE_DIR=/tmp/kiln-py-cache
for s in ${ATTN_STAGES:-3}; do
  echo "== bench_attention --stages $s ${ATTN_ARGS:-}"
  # shellcheck disable=SC2086
  python3 bench/bench_attention.py --stages "$s" ${ATTN_ARGS:-} 2>&1 | tail -7
done
if [ -n "${ATTN_NCU:-}" ]; then
  : >"$OUT/ncu-attention.txt"
  IFS=';' read -ra runs <<<"$ATTN_NCU"
  for args in "${runs[@]}"; do
    echo "== ncu: bench_attention $args" | tee -a "$OUT/ncu-attention.txt"
    # shellcheck disable=SC2086
    timeout 200 ncu --clock-control none -k "regex:^_attn_fwd" -c 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
      python3 bench/bench_attention.py --rep 1 $args >>"$OUT/ncu-attention.txt" 2>&1
    echo "   ncu exit $?"
  done
fi
exit "$status"
