#!/usr/bin/env bash
# On the GPU machine, after scripts/gpu-python.sh built the extension: where Kiln's flash
# attention forward spends its time. For each of PROFILE_OVERLAP (default "on off"), an Nsight
# Compute profile of Kiln's kernel at B4 H32 S4096 D128 (non-causal) with throughput, memory,
# stall and pipe-utilization figures, to $OUT/ncu-attention-<overlap>.txt; then the SASS of the
# kernel of each loop (cuobjdump), to $OUT/attention-<overlap>.sass, and a count of its
# HGMMA, MUFU.EX2, warpgroup waits and barriers on stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kiln-gpu-out}"
mkdir -p "$OUT"
export PYTHONPATH="/tmp/kiln-py-build/python:$PWD/kernels/python"
export LD_LIBRARY_PATH="/tmp/kiln-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KILN_CACHE_DIR=/tmp/kiln-py-cache
for ov in ${PROFILE_OVERLAP:-on off}; do
  echo "== ncu, overlap $ov"
  timeout 240 ncu --clock-control none -k "regex:^_attn_fwd" -c 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum.per_second" \
    python3 bench/bench_attention.py --rep 1 --shapes 4x32x4096 --causal false --overlap "$ov" \
    --triton-tiles "" >"$OUT/ncu-attention-$ov.txt" 2>&1
  echo "   ncu exit $?"
  grep -E "Duration|Throughput|Pipe|Stall|stalled|Registers|Issue|Executed Ipc|hmma|xu|L2 Hit|Bandwidth" \
    "$OUT/ncu-attention-$ov.txt" | grep -v "^==PROF" | head -60
done
python3 - "$OUT" <<'PY'
import subprocess, sys
sys.path.insert(0, "test/python")
import kiln
from kiln_kernels import flash_attention as fa
from test_flash_attention import gpu_signature
bm, bn, nw, ns = fa.tile_config(128)
for ov in (True, False):
    k = kiln.compile(fa._attn_fwd, signature=gpu_signature("fp16"),
                     constexprs=dict(HEAD_DIM=128, BLOCK_M=bm, BLOCK_N=bn, CAUSAL=False,
                                     EVEN_N=True, OVERLAP=ov),
                     target="sm_90a", num_warps=nw, num_stages=ns)
    name = f"{sys.argv[1]}/attention-{'on' if ov else 'off'}"
    open(name + ".ptx", "w").write(k.asm["ptx"])
    subprocess.run(["ptxas", "-arch=sm_90a", "-v", name + ".ptx", "-o", name + ".cubin"])
    sass = subprocess.run(["cuobjdump", "-sass", name + ".cubin"], capture_output=True,
                          text=True).stdout
    open(name + ".sass", "w").write(sass)
    keys = ("HGMMA", "MUFU.EX2", "WARPGROUP.DEPBAR", "WARPGROUP.ARRIVE", "BAR.SYNC", "LDGSTS",
            "DEPBAR", "BRA")
    print(name, {key: sass.count(key) for key in keys})
PY
