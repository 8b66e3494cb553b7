"""One process of test_gpu_faults.py (a fault makes the CUDA context unusable, so each case
runs in its own process): launches a kernel that reads 4 TiB past its buffer, in the mode
named by argv[1] ("debug" or "normal"; "overflow": a debug launch whose int32 offsets wrap),
and prints the KilnError Kiln raised, or "no error"."""
import sys

import kiln
import kiln.language as tl


@kiln.jit
def far_load(x_ptr, out_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + far + offs))


@kiln.jit
def wrapped_offsets(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK << tl.arange(0, BLOCK)  # wraps: int32 overflow in address arithmetic
    tl.store(out_ptr + pid * BLOCK + tl.arange(0, BLOCK), tl.load(x_ptr + offs, mask=offs < n))


def main():
    mode = sys.argv[1]
    x, out = kiln.zeros(1024, "float32"), kiln.zeros(1024, "float32")
    try:
        if mode == "overflow":  # debug mode: the wrap is caught before the access
            wrapped_offsets[(1,)](x, out, 1024, BLOCK=1024, debug=True)
        else:
            far_load[(1,)](x, out, 1 << 40, BLOCK=1024, debug=mode == "debug")
        print("launched", flush=True)
        kiln.synchronize()  # normal mode: the first Kiln call that sees the sticky fault
        print("no error", flush=True)
    except kiln.KilnError as e:
        print("KilnError:", e, flush=True)


if __name__ == "__main__":
    main()
