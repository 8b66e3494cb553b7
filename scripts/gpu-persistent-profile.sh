#!/usr/bin/env bash
# On the GPU machine, after scripts/gpu-python.sh built the extension: where Kiln's persistent
# matmul (bench_matmul_persistent.py's kernel, 8192^3 fp16, 128x256x64, 8 warps, 4 stages)
# spends its time with its loops flattened (PROFILE_FLATTEN=1) and not (0): an Nsight Compute
# profile of each (stall reasons, tensor pipe use) to $OUT/ncu-persistent-<f>.txt, and the
# SASS of each (cuobjdump) to $OUT/persistent-<f>.sass with a count of its key instructions.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kiln-gpu-out}"
mkdir -p "$OUT"
export PYTHONPATH="/tmp/kiln-py-build/python:$PWD/kernels/python:$PWD/bench"
export LD_LIBRARY_PATH="/tmp/kiln-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KILN_CACHE_DIR=/tmp/kiln-py-cache
cat >/tmp/persistent_once.py <<'PY'
import os, torch
from bench_matmul_python import load_kernel
from bench_matmul_persistent import KERNEL
flat = os.environ.get("PROFILE_FLATTEN", "1") == "1"
text = KERNEL if flat else KERNEL.replace("flatten=True", "flatten=False")
k = load_kernel("kiln", text, "matmul_persistent")
M = N = K = 8192
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn(K, N, device="cuda", dtype=torch.float16)
c = torch.empty(M, N, device="cuda", dtype=torch.float16)
for _ in range(2):
    k[(132,)](a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64,
              GROUP_M=8, NUM_SMS=132, num_warps=8, num_stages=4)
torch.cuda.synchronize()
PY
for f in ${PROFILE_FLATTEN_LIST:-1 0}; do
  echo "== ncu, flatten $f"
  PROFILE_FLATTEN=$f timeout 200 ncu --clock-control none -k "regex:matmul_persistent" -s 1 -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum" \
    python3 /tmp/persistent_once.py >"$OUT/ncu-persistent-$f.txt" 2>&1
  echo "   ncu exit $?"
  grep -E "Duration|Throughput|stalled|hmma|inst_executed|Issued Warp|No Eligible" \
    "$OUT/ncu-persistent-$f.txt" | grep -v "^==PROF" | awk '$NF+0 > 0.05 || /Duration|hmma|inst/' | head -40
done
python3 - "$OUT" <<'PY'
import subprocess, sys
import kiln
from bench_matmul_python import load_kernel
from bench_matmul_persistent import KERNEL
sig = dict(a_ptr="*fp16:16", b_ptr="*fp16:16", c_ptr="*fp16:16", M="i32:16", N="i32:16",
           K="i32:16", stride_am="i32:16", stride_bk="i32:16", stride_cm="i32:16")
consts = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64,
              GROUP_M=8, NUM_SMS=132)
for f in (0, 1):
    text = KERNEL if f else KERNEL.replace("flatten=True", "flatten=False")
    k = kiln.compile(load_kernel("kiln", text, "matmul_persistent"), signature=sig,
                     constexprs=consts, target="sm_90a", num_warps=8, num_stages=4)
    name = f"{sys.argv[1]}/persistent-{f}"
    open(name + ".ptx", "w").write(k.asm["ptx"])
    subprocess.run(["ptxas", "-arch=sm_90a", name + ".ptx", "-o", name + ".cubin"], check=True)
    sass = subprocess.run(["cuobjdump", "-sass", name + ".cubin"], capture_output=True,
                          text=True).stdout
    open(name + ".sass", "w").write(sass)
    print(f"persistent-{f}:", {key: sass.count(key) for key in
                               ("HGMMA", "LDGSTS", "BAR.SYNC", "MUFU.RCP", "BRA")})
PY
# Where the flattened kernel's warps stall, per SASS instruction (PROFILE_SOURCE=1): the 40
# instructions with the most stall samples, with their neighbourhood.
if [ "${PROFILE_SOURCE:-0}" = 1 ]; then
  PROFILE_FLATTEN=1 timeout 240 ncu --clock-control none -k "regex:matmul_persistent" -s 1 -c 1 \
    --section SourceCounters --section WarpStateStats --import-source no -f -o /tmp/persistent-src \
    python3 /tmp/persistent_once.py >/dev/null 2>&1
  echo "   ncu source exit $?"
  ncu --import /tmp/persistent-src.ncu-rep --page source --csv --print-source sass \
    >"$OUT/persistent-1-source.csv" 2>&1
  python3 - "$OUT/persistent-1-source.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if r and any("Source" in c for c in r))
cols = rows[head]
print(cols)
body = rows[head + 1:]
src = next(i for i, c in enumerate(cols) if "Source" in c)
stall = next((i for i, c in enumerate(cols) if "Warp Stall Sampling (All" in c), None)
if stall is None:
    sys.exit(0)
def num(r):
    try:
        return float(r[stall].replace(",", ""))
    except (ValueError, IndexError):
        return 0.0
total = sum(num(r) for r in body) or 1
order = sorted(range(len(body)), key=lambda i: -num(body[i]))
for i in order[:40]:
    print(f"{i:5d} {100 * num(body[i]) / total:5.1f}%  {body[i][src][:90]}")
PY
fi
