"""Compiles every kernels/*.mlir with kilnc for sm_80 and sm_90 and assembles the PTX with ptxas.

Prints one line per kernel and architecture; exits non-zero if any step fails.
"""
import argparse
import pathlib
import subprocess
import sys

ORDER = ["vector_add", "kl_div", "copy_2d"]  # checked first, in this order; others follow


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--ptxas", required=True)
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    kernels = sorted(pathlib.Path(args.kernels).glob("*.mlir"),
                     key=lambda p: (ORDER.index(p.stem) if p.stem in ORDER else len(ORDER), p.stem))
    failed = False
    for kernel in kernels:
        for arch in ["sm_80", "sm_90"]:
            ptx = out / f"{kernel.stem}.{arch}.ptx"
            steps = [[args.kilnc, str(kernel), f"--arch={arch}", "-o", str(ptx)],
                     [args.ptxas, f"-arch={arch}", str(ptx), "-o", str(out / f"{kernel.stem}.{arch}.cubin")]]
            for cmd in steps:
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    print(f"{kernel.stem} {arch} FAILED: {' '.join(cmd)}\n{r.stderr}")
                    failed = True
                    break
            else:
                print(f"{kernel.stem} {arch} ok")
    if failed:
        return 1
    print("all kernels assembled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
