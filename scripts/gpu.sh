#!/usr/bin/env bash
# Kiln on a machine with an NVIDIA GPU and no LLVM (the GPU machine). One command per job:
#
#   scripts/gpu.sh check               the runtime tests (GPU ones included), the C++ DSL tests,
#                                      kiln-bench, the Triton/torch peers in the same run
#                                      (bench/bench_peers.py), and the results table last
#                                      (bench/report.py)
#   scripts/gpu.sh python              builds only the Python extension kiln._C against the
#                                      prebuilt libkiln.so, runs the Python tests (the `gpu`
#                                      marker included) and the Python benchmarks
#   scripts/gpu.sh matmul              the runtime tests, kiln-bench --only=matmul (the wgmma
#                                      sweep and the mma.sync path) and the cuBLAS/Triton peers
#                                      in the same run (bench/bench_matmul.py peers)
#   scripts/gpu.sh attention           flash attention: `python` with the attention tests and
#                                      bench/bench_attention.py, then the bench per ring depth,
#                                      optional Nsight Compute profiles and PTX/SASS dumps
#   scripts/gpu.sh attention-profile   where Kiln's attention forward spends its time (ncu, SASS)
#   scripts/gpu.sh llm                 the LLM kernels: their GPU tests and bench/bench_llm_ops.py
#   scripts/gpu.sh persistent-profile  where the persistent matmul spends its time (ncu, SASS)
#   scripts/gpu.sh softmax-profile     the one-row softmax kernels under ncu, and their SASS
#
# The binaries: .carry/kiln-gpu.tar.xz (made on the development machine by
# scripts/make-gpu-bundle.sh), else shared/kiln-gpu.tar.xz or ../shared/kiln-gpu.tar.xz,
# unpacked to /tmp/kiln-bundle; else build/. The Python extension is built in
# /tmp/kiln-py-build (the profile commands build it first when it is not there). Logs and
# results go to $OUT (default /tmp/kiln-gpu-out); caches stay outside it (only logs go back).
#
# Settings, by command (environment variables):
#   matmul      KILN_GTEST_FILTER (runtime tests to run)
#   python      KILN_PYTEST_ARGS (pytest arguments, split as the shell splits them, quotes
#               kept: '-k "a or b"'; default test/python), KILN_PY_BENCHES
#               (benchmark scripts, default bench/bench_python.py; run with kernels/python
#               and bench/ on PYTHONPATH), PYTHON (the interpreter, default python3)
#   attention   ATTN_STAGES (ring depths, default "3"; 1 is the register-staged path),
#               ATTN_ARGS (more bench_attention.py arguments), ATTN_PY_BENCHES (the benches of
#               its `python` step), ATTN_NCU (';'-separated bench argument sets: an ncu profile
#               with stall reasons of Kiln's first kernel for each, to $OUT/ncu-attention.txt),
#               ATTN_DUMP=1 (Triton's and Kiln's PTX and SASS of the kernel to
#               $OUT/attention-dump.tgz), MATMUL_DUMP=1 (Triton's of the tutorial matmul to
#               $OUT/matmul-dump.tgz)
#   attention-profile  PROFILE_OVERLAP (default "on off")
#   llm         BENCH_REP (do_bench rep in ms, default 100), BENCH_ROUNDS (interleaved rounds,
#               default 1), LLM_ONLY=layernorm,rmsnorm (bench subset, tests skipped),
#               LLM_TRITON_DUMP=1 (Triton's cache as $OUT/triton-cache.tgz), LLM_NCU="<regex>
#               ..." (an ncu profile of the first two kernels matching each, Kiln's and
#               Triton's, to $OUT/ncu.txt)
#   persistent-profile  PROFILE_FLATTEN_LIST (default "1 0"), PROFILE_SOURCE=1 (stall samples
#               per SASS instruction of the flattened kernel)
#   softmax-profile     SOFTMAX_SHAPE (default 8192x8192), SOFTMAX_DTYPE (bf16),
#               SOFTMAX_WARPS (4)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
SELF="$PWD/scripts/gpu.sh"
OUT="${OUT:-/tmp/kiln-gpu-out}"
mkdir -p "$OUT"
PY="${PYTHON:-python3}"
PYBUILD=/tmp/kiln-py-build
export PYTHONUNBUFFERED=1

usage() {
  sed -n '2,/^set -uo/p' "$SELF" | sed '$d' | sed 's/^# \{0,1\}//'
}

# BIN: where the prebuilt binaries are (the bundle unpacked, else build/).
find_bundle() {
  local tarball=""
  for t in .carry/kiln-gpu.tar.xz shared/kiln-gpu.tar.xz ../shared/kiln-gpu.tar.xz; do
    if [ -f "$t" ]; then tarball=$t; break; fi
  done
  if [ -n "$tarball" ]; then
    BIN=/tmp/kiln-bundle
    mkdir -p "$BIN" && tar -xJf "$tarball" -C "$BIN"
  else
    BIN="$PWD/build"
  fi
  export LD_LIBRARY_PATH="$BIN/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
}

device_line() {
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
}

# Builds kiln._C against $BIN/lib/libkiln.so in $PYBUILD; $1 names the logs in $OUT.
build_python() {
  local log=$1
  echo "== building kiln._C against $BIN/lib/libkiln.so ($("$PY" --version))"
  local gen=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  local t0
  t0=$(date +%s%N)
  cmake -S . -B "$PYBUILD" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DKILN_PREBUILT_LIB="$BIN/lib/libkiln.so" \
    -DKILN_INCLUDE_DIR="$( [ -d "$BIN/include/kiln" ] && echo "$BIN/include" || echo "$PWD/include")" \
    -DPython_EXECUTABLE="$(command -v "$PY")" >"$OUT/$log-configure.log" 2>&1 \
    || { tail -30 "$OUT/$log-configure.log"; return 1; }
  cmake --build "$PYBUILD" -j"$(nproc)" >"$OUT/$log-build.log" 2>&1 \
    || { tail -30 "$OUT/$log-build.log"; return 1; }
  echo "   built in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}

# The environment of the Python commands: the staged package, the kernels, the benches.
python_env() {
  export PYTHONPATH="$PYBUILD/python:$PWD/kernels/python:$PWD/bench${PYTHONPATH:+:$PYTHONPATH}"
  export KILN_CACHE_DIR="${KILN_CACHE_DIR:-/tmp/kiln-py-cache}"  # not under $OUT
}

# For the profile commands: the extension, built when an earlier `python` did not leave it.
need_python() {
  find_bundle
  if ! ls "$PYBUILD"/python/kiln/_C*.so >/dev/null 2>&1; then
    build_python python || exit 1
  fi
  python_env
}

# ---------------------------------------------------------------------------- check
cmd_check() {
  find_bundle
  export KILN_KERNELS_DIR="$PWD/kernels" KILN_CACHE_WORKER="$BIN/test/runtime/kiln-cache-worker"
  export KILN_CACHE_DIR=/tmp/kiln-cache  # only logs go back in $OUT
  local device
  device=$(device_line)
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
  PYTHONPATH="$PWD/bench${PYTHONPATH:+:$PYTHONPATH}" "$PY" bench/bench_peers.py 2>&1 \
    | tee "$OUT/peers.txt"
  echo
  "$PY" bench/report.py "$OUT/kiln-bench.txt" "$OUT/peers.txt" "$device" | tee "$OUT/results.md"
}

# ---------------------------------------------------------------------------- python
cmd_python() {
  find_bundle
  build_python python || exit 1
  export PYTHONPATH="$PYBUILD/python${PYTHONPATH:+:$PYTHONPATH}"
  export KILN_CACHE_DIR="${KILN_CACHE_DIR:-/tmp/kiln-py-cache}"  # not under $OUT
  echo "== pytest ${KILN_PYTEST_ARGS:-test/python} (gpu marker included)"
  # Split as the shell would, quotes kept: -k "widths or conversions" stays one argument.
  local -a pytest_args
  eval "pytest_args=(${KILN_PYTEST_ARGS:-test/python})"
  "$PY" -m pytest -q -p no:cacheprovider -rs "${pytest_args[@]}" 2>&1 \
    | tee "$OUT/pytest-python.log" | tail -15
  local status=${PIPESTATUS[0]}
  export PYTHONPATH="$PYTHONPATH:$PWD/kernels/python:$PWD/bench"
  for bench in ${KILN_PY_BENCHES:-bench/bench_python.py}; do
    echo "== $bench"
    "$PY" "$bench" 2>&1 | tee "$OUT/$(basename "$bench" .py).txt"
  done
  exit "$status"
}

# ---------------------------------------------------------------------------- matmul
cmd_matmul() {
  find_bundle
  export KILN_KERNELS_DIR="$PWD/kernels" KILN_CACHE_WORKER="$BIN/test/runtime/kiln-cache-worker"
  export KILN_CACHE_DIR=/tmp/kiln-cache
  echo "== device: $(device_line)"
  echo "== runtime tests"
  "$BIN/test/runtime/kiln-runtime-tests" ${KILN_GTEST_FILTER:+--gtest_filter=$KILN_GTEST_FILTER} \
    >"$OUT/runtime-tests.log" 2>&1
  grep -E "FAILED|PASSED|Failure|error" "$OUT/runtime-tests.log" | head -20
  echo "== kiln-bench --only=matmul"
  "$BIN/bench/kiln-bench" --kernels=kernels --only=matmul 2>&1 | tee "$OUT/kiln-matmul.txt" \
    | grep -v "^kiln_.*_err="
  echo "== peers"
  # Kiln's Python package is not built here: the peers run without it (Triton's kernel is
  # the twin of bench/kernel_sources.py's, built from its text).
  PYTHONPATH="$PWD/bench${PYTHONPATH:+:$PYTHONPATH}" "$PY" bench/bench_matmul.py peers 2>&1 \
    | tee "$OUT/peers-matmul.txt"
}

# ---------------------------------------------------------------------------- attention
cmd_attention() {
  KILN_PYTEST_ARGS="${KILN_PYTEST_ARGS:--m gpu test/python/test_flash_attention.py}" \
    KILN_PY_BENCHES="${ATTN_PY_BENCHES:-bench/bench_attention.py}" \
    bash "$SELF" python >"$OUT/gpu-python.log" 2>&1
  local status=$?
  tail -4 "$OUT/gpu-python.log"
  find_bundle
  python_env
  for s in ${ATTN_STAGES:-3}; do
    echo "== bench_attention --stages $s ${ATTN_ARGS:-}"
    # shellcheck disable=SC2086
    "$PY" bench/bench_attention.py --stages "$s" ${ATTN_ARGS:-} 2>&1 | tail -7
  done
  if [ -n "${ATTN_NCU:-}" ]; then
    : >"$OUT/ncu-attention.txt"
    local runs args
    IFS=';' read -ra runs <<<"$ATTN_NCU"
    for args in "${runs[@]}"; do
      echo "== ncu: bench_attention $args" | tee -a "$OUT/ncu-attention.txt"
      # Kiln's kernel launches first (the Triton twin's has the same name, _attn_fwd)
      # shellcheck disable=SC2086
      timeout 200 ncu --clock-control none -k "regex:^_attn_fwd" -c 1 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
        "$PY" bench/bench_attention.py --rep 1 $args >>"$OUT/ncu-attention.txt" 2>&1
      echo "   ncu exit $?"
    done
  fi
  if [ -n "${ATTN_DUMP:-}" ]; then
    # Triton's PTX and SASS of its kernels (the twin, _attn_fwd*, and the tutorial-style peer,
    # attn_fwd*: bench/cliff_sources_attention.py), and Kiln's (the non-causal D=128 variant the bench runs), to
    # $OUT/attention-dump.tgz.
    local d=/tmp/attn-dump
    rm -rf "$d" /tmp/attn-triton-cache && mkdir -p "$d"
    TRITON_CACHE_DIR=/tmp/attn-triton-cache "$PY" bench/bench_attention.py --rep 2 \
      --shapes 4x32x4096 --causal false >/dev/null 2>&1
    local pat
    for pat in "attn_fwd*" "_attn_fwd*"; do
      find /tmp/attn-triton-cache -name "$pat.ptx" -exec cp {} "$d/" \;
      find /tmp/attn-triton-cache -name "$pat.cubin" -exec cp {} "$d/" \;
    done
    for c in "$d"/*.cubin; do [ -f "$c" ] && cuobjdump -sass "$c" >"${c%.cubin}.sass"; done
    "$PY" - "$d" <<'PY'
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
    # Triton's PTX and SASS of the tutorial matmul (bench_matmul.py pointer: the twin of
    # kernel_sources.matmul_kernel, at each of its configurations) to $OUT/matmul-dump.tgz.
    local d=/tmp/matmul-dump
    rm -rf "$d" /tmp/matmul-triton-cache && mkdir -p "$d"
    TRITON_CACHE_DIR=/tmp/matmul-triton-cache "$PY" bench/bench_matmul.py pointer --reps 2 \
      >"$d/bench.txt" 2>&1
    find /tmp/matmul-triton-cache -name "matmul_kernel*.ptx" -exec cp {} "$d/" \;
    local c
    while IFS= read -r c; do
      cuobjdump -sass "$c" >"$d/$(basename "$(dirname "$c")")-$(basename "${c%.cubin}").sass"
    done < <(find /tmp/matmul-triton-cache -name "matmul_kernel*.cubin")
    tar -czf "$OUT/matmul-dump.tgz" -C "$d" . && ls -la "$d"
  fi
  exit "$status"
}

# ---------------------------------------------------------------------------- attention-profile
# Where Kiln's flash attention forward spends its time. For each of PROFILE_OVERLAP, an Nsight
# Compute profile of Kiln's kernel at B4 H32 S4096 D128 (non-causal) with throughput, memory,
# stall and pipe-utilization figures, to $OUT/ncu-attention-<overlap>.txt; then the SASS of
# the kernel of each loop (cuobjdump), to $OUT/attention-<overlap>.sass, and a count of its
# HGMMA, MUFU.EX2, warpgroup waits and barriers on stdout.
cmd_attention_profile() {
  need_python
  local ov
  for ov in ${PROFILE_OVERLAP:-on off}; do
    echo "== ncu, overlap $ov"
    timeout 240 ncu --clock-control none -k "regex:^_attn_fwd" -c 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
      --section WarpStateStats --section Occupancy --section LaunchStats \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active,lts__t_sectors_srcunit_tex_op_read.sum,l1tex__m_xbar2l1tex_read_bytes.sum.per_second" \
      "$PY" bench/bench_attention.py --rep 1 --shapes 4x32x4096 --causal false --overlap "$ov" \
      --triton-tiles "" --peers "" >"$OUT/ncu-attention-$ov.txt" 2>&1
    echo "   ncu exit $?"
    grep -E "Duration|Throughput|Pipe|Stall|stalled|Registers|Issue|Executed Ipc|hmma|xu|L2 Hit|Bandwidth" \
      "$OUT/ncu-attention-$ov.txt" | grep -v "^==PROF" | head -60
  done
  "$PY" - "$OUT" <<'PY'
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
}

# ---------------------------------------------------------------------------- llm
# About 3-5 minutes on an H100.
cmd_llm() {
  find_bundle
  build_python llm || exit 1
  python_env
  device_line | tee "$OUT/llm-device.txt"
  local only=()
  [ -n "${LLM_ONLY:-}" ] && only=(--only "$LLM_ONLY")
  [ -n "${LLM_TRITON_DUMP:-}" ] && export TRITON_CACHE_DIR=/tmp/kiln-triton-cache
  local status=0
  if [ -z "${LLM_ONLY:-}" ]; then
    echo "== pytest -m gpu test/python/test_llm_kernels.py"
    timeout 300 "$PY" -m pytest -q -p no:cacheprovider -rs -m gpu test/python/test_llm_kernels.py \
      2>&1 | tee "$OUT/pytest-llm.log" | tail -25
    status=${PIPESTATUS[0]}
  fi
  echo "== bench/bench_llm_ops.py (Kiln beside Triton and torch)"
  timeout 360 "$PY" bench/bench_llm_ops.py --rep "${BENCH_REP:-100}" --rounds "${BENCH_ROUNDS:-1}" \
    "${only[@]}" 2>&1 | tee "$OUT/bench-llm.txt"
  local bstatus=${PIPESTATUS[0]}
  if [ -n "${LLM_TRITON_DUMP:-}" ]; then
    tar -czf "$OUT/triton-cache.tgz" -C "$TRITON_CACHE_DIR" .
  fi
  if [ -n "${LLM_NCU:-}" ]; then
    : >"$OUT/ncu.txt"
    local k
    for k in $LLM_NCU; do  # the first two launches of each: Kiln's and Triton's correctness runs
      echo "== ncu on the first two kernels matching '$k'"
      timeout 200 ncu --clock-control none -k "regex:$k" -c 2 \
        --section SpeedOfLight --section Occupancy --section LaunchStats \
        --section WarpStateStats --section MemoryWorkloadAnalysis --section SchedulerStats \
        "$PY" bench/bench_llm_ops.py --rep 1 "${only[@]}" >>"$OUT/ncu.txt" 2>&1
      echo "   ncu exit $?"
    done
  fi
  grep -E "_CHECK=FAIL|_ERROR=" "$OUT/bench-llm.txt" && echo "!! bench correctness failures above"
  [ "$status" -eq 0 ] && status=$bstatus
  exit "$status"
}

# ---------------------------------------------------------------------------- persistent-profile
# Where Kiln's persistent matmul (bench_matmul.py persistent's kernel,
# kernel_sources.matmul_persistent, 8192^3 fp16, 128x256x64, 8 warps, 4 stages) spends its
# time with its loops flattened (PROFILE_FLATTEN=1) and not (0): an Nsight Compute profile
# of each (stall reasons, tensor pipe use) to $OUT/ncu-persistent-<f>.txt, and the SASS of
# each (cuobjdump) to $OUT/persistent-<f>.sass with a count of its key instructions.
cmd_persistent_profile() {
  need_python
  cat >/tmp/persistent_once.py <<'PY'
import os, torch
import common, kernel_sources
flat = os.environ.get("PROFILE_FLATTEN", "1") == "1"
k = common.load(kernel_sources, "kiln",
                edits=() if flat else kernel_sources.NOT_FLATTENED).matmul_persistent
M = N = K = 8192
a = torch.randn(M, K, device="cuda", dtype=torch.float16)
b = torch.randn(K, N, device="cuda", dtype=torch.float16)
c = torch.empty(M, N, device="cuda", dtype=torch.float16)
for _ in range(2):
    k[(132,)](a, b, c, M, N, K, K, 1, N, 1, N, 1, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64,
              GROUP_M=8, NUM_SMS=132, num_warps=8, num_stages=4)
torch.cuda.synchronize()
PY
  local f
  for f in ${PROFILE_FLATTEN_LIST:-1 0}; do
    echo "== ncu, flatten $f"
    PROFILE_FLATTEN=$f timeout 200 ncu --clock-control none -k "regex:matmul_persistent" -s 1 -c 1 \
      --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
      --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum" \
      "$PY" /tmp/persistent_once.py >"$OUT/ncu-persistent-$f.txt" 2>&1
    echo "   ncu exit $?"
    grep -E "Duration|Throughput|stalled|hmma|inst_executed|Issued Warp|No Eligible" \
      "$OUT/ncu-persistent-$f.txt" | grep -v "^==PROF" | awk '$NF+0 > 0.05 || /Duration|hmma|inst/' | head -40
  done
  "$PY" - "$OUT" <<'PY'
import subprocess, sys
import kiln
import common, kernel_sources
sig = dict(a_ptr="*fp16:16", b_ptr="*fp16:16", c_ptr="*fp16:16", M="i32:16", N="i32:16",
           K="i32:16", stride_am="i32:16", stride_bk="i32:16", stride_cm="i32:16")
consts = dict(stride_ak=1, stride_bn=1, stride_cn=1, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64,
              GROUP_M=8, NUM_SMS=132)
for f in (0, 1):
    src = common.load(kernel_sources, "kiln", edits=() if f else kernel_sources.NOT_FLATTENED)
    k = kiln.compile(src.matmul_persistent, signature=sig, constexprs=consts, target="sm_90a",
                     num_warps=8, num_stages=4)
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
      "$PY" /tmp/persistent_once.py >/dev/null 2>&1
    echo "   ncu source exit $?"
    ncu --import /tmp/persistent-src.ncu-rep --page source --csv --print-source sass \
      >"$OUT/persistent-1-source.csv" 2>&1
    "$PY" - "$OUT/persistent-1-source.csv" <<'PY'
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
}

# ---------------------------------------------------------------------------- softmax-profile
# The one-row softmax kernels of bench/bench_softmax_ceiling.py (Kiln, its Triton twin and
# the copies of the same tiling) under Nsight Compute at one shape: duration, DRAM throughput
# and bytes, occupancy and its limits, registers, and the warps' stall reasons, a line per
# kernel launch (the second launch of each, caches flushed by ncu). Full report:
# $OUT/ncu-softmax.csv; summary: stdout. Then the SASS of the one-row softmax, Kiln's and
# Triton's, at SOFTMAX_WARPS: $OUT/softmax-{kiln,triton}.sass, with a count by opcode.
cmd_softmax_profile() {
  need_python
  local metrics="gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed"
  metrics+=",dram__bytes_read.sum,dram__bytes_write.sum,sm__warps_active.avg.pct_of_peak_sustained_active"
  metrics+=",launch__registers_per_thread,launch__occupancy_limit_registers,launch__occupancy_limit_warps"
  metrics+=",launch__occupancy_limit_shared_mem,launch__block_size,smsp__inst_executed.sum"
  metrics+=",lts__t_sector_hit_rate.pct,sm__cycles_elapsed.avg.per_second"
  metrics+=",smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
  metrics+=",smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
  metrics+=",smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio"
  metrics+=",smsp__average_warps_issue_stalled_drain_per_issue_active.ratio"
  metrics+=",smsp__average_warps_issue_stalled_membar_per_issue_active.ratio"
  timeout 300 ncu --clock-control none --metrics "$metrics" --csv \
    -k "regex:softmax|copy|elementwise" \
    "$PY" bench/bench_softmax_ceiling.py --once --shapes "${SOFTMAX_SHAPE:-8192x8192}" \
    --dtypes "${SOFTMAX_DTYPE:-bf16}" >"$OUT/ncu-softmax.csv" 2>&1
  echo "   ncu exit $?"
  "$PY" - "$OUT/ncu-softmax.csv" <<'PY'
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
  "$PY" - "$OUT" "${SOFTMAX_SHAPE:-8192x8192}" "${SOFTMAX_DTYPE:-bf16}" "${SOFTMAX_WARPS:-4}" <<'PY'
import collections, re, subprocess, sys
import torch
import kiln
import common
from kiln_kernels import softmax as k_sm
t_softmax_fwd_kernel = common.twin_kernel(k_sm.softmax_fwd_kernel)
out, shape, dname, warps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
M, N = (int(v) for v in shape.split("x"))
dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dname]
x = torch.randn(M, N, device="cuda", dtype=dtype)
y = torch.empty_like(x)
block = kiln.next_power_of_2(N)
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
}

case "${1:-help}" in
  check) cmd_check ;;
  python) cmd_python ;;
  matmul) cmd_matmul ;;
  attention) cmd_attention ;;
  attention-profile) cmd_attention_profile ;;
  llm) cmd_llm ;;
  persistent-profile) cmd_persistent_profile ;;
  softmax-profile) cmd_softmax_profile ;;
  help|-h|--help) usage ;;
  *) echo "scripts/gpu.sh: unknown command '$1'" >&2; usage >&2; exit 2 ;;
esac
