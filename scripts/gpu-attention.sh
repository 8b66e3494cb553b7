#!/usr/bin/env bash
# On the GPU machine: flash attention diagnosis. Builds the Python extension and runs the GPU
# attention tests (scripts/gpu-python.sh), then bench/bench_attention.py once per ring depth in
# ATTN_STAGES (default "3"; 1 is the register-staged path) with ATTN_ARGS, and, when ATTN_NCU
# is set, an Nsight Compute profile (with stall reasons) of Kiln's first kernel for each
# ';'-separated set of bench arguments in ATTN_NCU, to $OUT/ncu-attention.txt; ATTN_DUMP=1
# also packs Triton's and Kiln's PTX and SASS of the kernel to $OUT/attention-dump.tgz;
# MATMUL_DUMP=1 Triton's tutorial matmul's to $OUT/matmul-dump.tgz.
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
if [ -n "${ATTN_DUMP:-}" ]; then
  # Triton's PTX and SASS of its twin, and Kiln's (the non-causal D=128 variant the bench runs),
  # to $OUT/attention-dump.tgz.
  d=/tmp/attn-dump && rm -rf "$d" /tmp/attn-triton-cache && mkdir -p "$d"
  TRITON_CACHE_DIR=/tmp/attn-triton-cache python3 bench/bench_attention.py --rep 2 \
    --shapes 4x32x4096 --causal false >/dev/null 2>&1
  find /tmp/attn-triton-cache -name "t_attn_fwd*.ptx" -exec cp {} "$d/" \;
  find /tmp/attn-triton-cache -name "t_attn_fwd*.cubin" -exec cp {} "$d/" \;
  for c in "$d"/*.cubin; do [ -f "$c" ] && cuobjdump -sass "$c" >"${c%.cubin}.sass"; done
  python3 - "$d" <<'PY'
import sys
sys.path.insert(0, "test/python")
import kiln
from kiln_kernels import flash_attention as fa
from test_flash_attention import gpu_signature
bm, bn, nw, ns = fa.tile_config(128)
k = kiln.compile(fa._attn_fwd, signature=gpu_signature("fp16"),
                 constexprs=dict(HEAD_DIM=128, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=False, EVEN_N=True),
                 target="sm_90a", num_warps=nw, num_stages=ns)
open(sys.argv[1] + "/kiln_attn_fwd.ptx", "w").write(k.asm["ptx"])
PY
  ptxas -arch=sm_90a "$d/kiln_attn_fwd.ptx" -o "$d/kiln_attn_fwd.cubin" \
    && cuobjdump -sass "$d/kiln_attn_fwd.cubin" >"$d/kiln_attn_fwd.sass"
  rm -f "$d"/*.cubin
  tar -czf "$OUT/attention-dump.tgz" -C "$d" . && ls -la "$d"
fi
if [ -n "${MATMUL_DUMP:-}" ]; then
  # Triton's PTX and SASS of the tutorial matmul (bench_matmul_python.py) to
  # $OUT/matmul-dump.tgz.
  d=/tmp/matmul-dump && rm -rf "$d" /tmp/matmul-triton-cache && mkdir -p "$d"
  TRITON_CACHE_DIR=/tmp/matmul-triton-cache python3 bench/bench_matmul_python.py --reps 2 \
    >"$d/bench.txt" 2>&1
  find /tmp/matmul-triton-cache -name "matmul_kernel*.ptx" -exec cp {} "$d/" \;
  for c in $(find /tmp/matmul-triton-cache -name "matmul_kernel*.cubin"); do
    cuobjdump -sass "$c" >"$d/$(basename "$(dirname "$c")")-$(basename "${c%.cubin}").sass"
  done
  tar -czf "$OUT/matmul-dump.tgz" -C "$d" . && ls -la "$d"
fi
exit "$status"
