"""Runs the tutorial matmul through the mma.sync path on this process's GPU and checks every
result: run with KILN_ARCH=sm_90 (plain sm_90 has no wgmma, so on an H100 the dots read
cp.async rings with ldmatrix and multiply with mma.sync). test_dot_scan.py's
test_tutorial_matmul_mma_sync_rings_gpu starts it in a fresh process, since the process JIT's
target is fixed at its first use. Prints one line per case and exits 1 if any case fails."""
import os
import sys
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

import kiln  # noqa: E402
from test_dot_scan import CASES, _gpu_arrays, check, launch_matmul, make_inputs  # noqa: E402
from test_flatten import persistent_matmul  # noqa: E402

# (M, N, K, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages): aligned; sizes not multiples
# of the blocks (masked edges, K tail); rows not 16-byte aligned (element copies); 8 warps
# on 128 x 256; one column band per warp (ldmatrix.x2 of B); 2 and 4 stages; K of one block.
SHAPES = [(256, 256, 256, 128, 128, 64, 4, 3), (1000, 520, 328, 128, 128, 64, 4, 3),
          (129, 257, 65, 64, 256, 64, 4, 3), (384, 512, 192, 128, 256, 64, 8, 3),
          (128, 32, 96, 64, 32, 32, 4, 2), (256, 128, 512, 128, 64, 32, 4, 4),
          (96, 64, 32, 32, 64, 32, 4, 3)]


def run(case, shape, b_order, a_order):
    M, N, K, BM, BN, BK, warps, stages = shape
    _, out_dtype, acc_dtype, precision, _ = CASES[case]
    to_dev, to_np = _gpu_arrays()
    a, b = make_inputs(case, M, N, K, seed=M + N + K)
    c = np.full((M, N), -7, dtype=np.dtype(out_dtype))
    # Column-major operands: the transposed array, read through swapped strides.
    da = to_dev(a) if a_order == "row" else to_dev(np.ascontiguousarray(a.T))
    db = to_dev(b) if b_order == "row" else to_dev(np.ascontiguousarray(b.T))
    sa = (K, 1) if a_order == "row" else (1, M)
    sb = (N, 1) if b_order == "row" else (1, K)
    dc = to_dev(c)
    launch_matmul(da, db, dc, M, N, K, BM, BN, BK, acc_dtype, precision,
                  strides=(sa, sb, (N, 1)), device="gpu", num_warps=warps, num_stages=stages)
    check(case, to_np(dc), a, b)


def run_persistent(shape):
    M, N, K, BM, BN, BK, warps, sms = shape
    to_dev, to_np = _gpu_arrays()
    a, b = make_inputs("fp16", M, N, K, seed=M + N + K)
    c = np.full((M, N), -7, dtype=np.float16)
    dc = to_dev(c)
    persistent_matmul[(sms,)](to_dev(a), to_dev(b), dc, M, N, K, K, 1, N, 1, N, 1,
                              BLOCK_M=BM, BLOCK_N=BN, BLOCK_K=BK, GROUP_M=4, NUM_SMS=sms,
                              FLATTEN=True, device="gpu", num_warps=warps, num_stages=3)
    out = to_np(dc)
    if K == 0:
        assert not out.any()
    else:
        check("fp16-out-fp16", out, a, b)


def main():
    if os.environ.get("KILN_ARCH") != "sm_90" or not kiln.has_gpu():
        print("needs KILN_ARCH=sm_90 and a GPU")
        return 2
    failed = 0
    for case in ("fp16", "fp16-out-fp16", "bf16", "int8"):
        for shape in SHAPES:
            for a_order, b_order in (("row", "row"), ("row", "col"), ("col", "row")):
                name = f"{case} {'x'.join(map(str, shape))} A {a_order} B {b_order}"
                try:
                    run(case, shape, b_order, a_order)
                    print("ok  ", name, flush=True)
                except Exception:  # noqa: BLE001 - every case is reported
                    failed += 1
                    print("FAIL", name, flush=True)
                    traceback.print_exc()
    # The persistent kernel with its loops flattened (the dot completes in each iteration on
    # this path; its accumulator restarts through a select).
    for shape in [(1000, 520, 328, 128, 128, 64, 4, 7), (300, 200, 0, 128, 128, 64, 4, 5),
                  (512, 1024, 256, 128, 256, 64, 8, 5)]:
        name = f"persistent flatten {'x'.join(map(str, shape))}"
        try:
            run_persistent(shape)
            print("ok  ", name, flush=True)
        except Exception:  # noqa: BLE001
            failed += 1
            print("FAIL", name, flush=True)
            traceback.print_exc()
    print(f"{failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
