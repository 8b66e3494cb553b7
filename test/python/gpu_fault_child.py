"""One process of test_gpu_faults.py (a fault makes the CUDA context unusable, so each case
runs in its own process): launches a kernel that reads 4 TiB past its buffer, in the mode
named by argv[1] ("debug" or "normal"), and prints the KilnError Kiln raised, or "no error"."""
import sys

import kiln
import kiln.language as tl


@kiln.jit
def far_load(x_ptr, out_ptr, far, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + far + offs))


def main():
    mode = sys.argv[1]
    x, out = kiln.zeros(1024, "float32"), kiln.zeros(1024, "float32")
    try:
        far_load[(1,)](x, out, 1 << 40, BLOCK=1024, debug=mode == "debug")
        print("launched", flush=True)
        kiln.synchronize()  # normal mode: the first Kiln call that sees the sticky fault
        print("no error", flush=True)
    except kiln.KilnError as e:
        print("KilnError:", e, flush=True)


if __name__ == "__main__":
    main()
