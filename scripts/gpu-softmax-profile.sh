#!/usr/bin/env bash
# On the GPU machine, after scripts/gpu-python.sh built the extension: the one-row softmax
# kernels of bench/bench_softmax_ceiling.py (Kiln, Triton and the copies of the same tiling)
# under Nsight Compute at one shape (SOFTMAX_SHAPE, default bf16 8192x8192): duration, DRAM
# throughput and bytes, occupancy and its limits, registers, and the warps' stall reasons, a
# line per kernel launch (the second launch of each, caches flushed by ncu). Full report:
# $OUT/ncu-softmax.csv; summary: stdout.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/kiln-gpu-out}"
mkdir -p "$OUT"
export PYTHONPATH="/tmp/kiln-py-build/python:$PWD/kernels/python:$PWD/bench"
export LD_LIBRARY_PATH="/tmp/kiln-bundle/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export KILN_CACHE_DIR=/tmp/kiln-py-cache
METRICS="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
METRICS+=",dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active"
METRICS+=",launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_warps"
METRICS+=",launch__occupancy_limit_shared_mem,launch__block_size,smsp__inst_executed.sum"
METRICS+=",lts__t_sector_hit_rate.pct,sm__cycles_elapsed.avg.per_second"
METRICS+=",smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
METRICS+=",smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
METRICS+=",smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio"
METRICS+=",smsp__average_warps_issue_stalled_drain_per_issue_active.ratio"
METRICS+=",smsp__average_warps_issue_stalled_membar_per_issue_active.ratio"
timeout 300 ncu --clock-control none --metrics "$METRICS" --csv \
  -k "regex:softmax|copy|elementwise" \
  python3 bench/bench_softmax_ceiling.py --once --shapes "${SOFTMAX_SHAPE:-8192x8192}" \
  --dtypes "${SOFTMAX_DTYPE:-bf16}" >"$OUT/ncu-softmax.csv" 2>&1
echo "   ncu exit $?"
python3 - "$OUT/ncu-softmax.csv" <<'PY'
import csv, sys
from collections import OrderedDict
lines = [l for l in open(sys.argv[1]) if l.startswith('"')]
rows = list(csv.reader(lines))
head, body = rows[0], rows[1:]
ix = {c: i for i, c in enumerate(head)}
launches = OrderedDict()
for r in body:
    key = (r[ix["ID"]], r[ix["Kernel Name"]][:40])
    launches.setdefault(key, {})[r[ix["Metric Name"]]] = r[ix["Metric Value"]]
short = {"gpu__time_duration.sum": "ns", "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram%",
         "dram__bytes_read.sum": "rd", "dram__bytes_write.sum": "wr",
         "sm__warps_active.avg.pct_of_peak_sustained_active": "occ%",
         "launch__registers_per_thread": "regs", "launch__occupancy_limit_registers": "lim_reg",
         "launch__occupancy_limit_warps": "lim_warp", "launch__block_size": "threads",
         "smsp__inst_executed.sum": "inst", "lts__t_sector_hit_rate.pct": "l2hit%",
         "sm__cycles_elapsed.avg.per_second": "clk",
         "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio": "st_lsb",
         "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio": "st_bar",
         "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio": "st_lgthr",
         "smsp__average_warps_issue_stalled_drain_per_issue_active.ratio": "st_drain",
         "smsp__average_warps_issue_stalled_membar_per_issue_active.ratio": "st_membar"}
cols = list(short.values())
print("| launch | kernel | " + " | ".join(cols) + " |")
print("|---|---|" + "---:|" * len(cols))
for (i, name), m in launches.items():
    vals = [m.get(k, "") for k in short]
    print(f"| {i} | {name} | " + " | ".join(v.replace(",", "") for v in vals) + " |")
PY
# The SASS of the one-row softmax at that shape, Kiln's and Triton's, at SOFTMAX_WARPS (4):
# $OUT/softmax-{kiln,triton}.sass, with a count of their instructions by opcode.
python3 - "$OUT" "${SOFTMAX_SHAPE:-8192x8192}" "${SOFTMAX_DTYPE:-bf16}" "${SOFTMAX_WARPS:-4}" <<'PY'
import collections, re, subprocess, sys
import torch
import triton
import kiln
from kiln_kernels import softmax as k_sm
from bench_llm_ops import t_softmax_fwd_kernel
out, shape, dname, warps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
M, N = (int(v) for v in shape.split("x"))
dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dname]
x = torch.randn(M, N, device="cuda", dtype=dtype)
y = torch.empty_like(x)
block = triton.next_power_of_2(N)
tk = t_softmax_fwd_kernel[(M,)](y, x, N, N, N, BLOCK=block, LOG=False, num_warps=warps)
open(f"{out}/softmax-triton.cubin", "wb").write(tk.asm["cubin"])
open(f"{out}/softmax-triton.ptx", "w").write(tk.asm["ptx"])
sig = dict(out_ptr=f"*{dname}:16", in_ptr=f"*{dname}:16", in_stride="i32:16",
           out_stride="i32:16", n_cols="i32:16")
kk = kiln.compile(k_sm.softmax_fwd_kernel, signature=sig, constexprs=dict(BLOCK=block, LOG=False),
                  target="sm_90a", num_warps=warps)
open(f"{out}/softmax-kiln.ptx", "w").write(kk.asm["ptx"])
subprocess.run(["ptxas", "-arch=sm_90a", f"{out}/softmax-kiln.ptx", "-o",
                f"{out}/softmax-kiln.cubin"], check=True)
for who in ("kiln", "triton"):
    sass = subprocess.run(["cuobjdump", "-sass", f"{out}/softmax-{who}.cubin"],
                          capture_output=True, text=True).stdout
    open(f"{out}/softmax-{who}.sass", "w").write(sass)
    ops = collections.Counter(m.group(1).split(".")[0] for m in
                              re.finditer(r"/\*[0-9a-f]{4}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9.]*)", sass))
    print(who, sum(ops.values()), "instructions:", dict(ops.most_common()))
PY
