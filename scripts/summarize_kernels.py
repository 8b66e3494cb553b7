"""Compiles each kernels/*.mlir with kilnc and prints a per-kernel summary table.

Columns: registers, spill bytes, shared memory and stack frame (from `ptxas -v`), PTX
instructions in total, global loads/stores and how many of them are 128-bit vector accesses.
"""
import argparse
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile


def ptx_counts(ptx):
    insts = [l.strip() for l in ptx.splitlines()
             if l.strip().endswith(";") and not l.strip().startswith((".", "//"))]
    loads = [i for i in insts if re.search(r"\bld\.global", i)]
    stores = [i for i in insts if re.search(r"\bst\.global", i)]
    v4 = [i for i in loads + stores if ".v4." in i]
    return len(insts), len(loads), len(stores), len(v4)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kilnc", required=True)
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    ptxas = shutil.which("ptxas") or "/usr/local/cuda/bin/ptxas"
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kernel in sorted(pathlib.Path(args.kernels).glob("*.mlir")):
            ptx_path = os.path.join(tmp, kernel.stem + ".ptx")
            r = subprocess.run([args.kilnc, str(kernel), f"--arch={args.arch}", "-o", ptx_path],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(r.stderr, file=sys.stderr)
                rows.append((kernel.stem, "compile failed"))
                continue
            ptx = open(ptx_path).read()
            n, ld, st, v4 = ptx_counts(ptx)
            info = "ptxas not found"
            if os.path.exists(ptxas):
                p = subprocess.run([ptxas, f"-arch={args.arch}", "-v", ptx_path, "-o", os.devnull],
                                   capture_output=True, text=True)
                if p.returncode != 0:
                    rows.append((kernel.stem, "ptxas failed: " + p.stderr.strip()))
                    continue
                regs = re.search(r"Used (\d+) registers", p.stderr)
                stack = re.search(r"(\d+) bytes stack frame", p.stderr)
                spill = re.search(r"(\d+) bytes spill stores", p.stderr)
                smem = re.search(r"(\d+) bytes smem", p.stderr)
                info = (f"regs={regs.group(1) if regs else '?'} stack={stack.group(1) if stack else '?'}B "
                        f"spills={spill.group(1) if spill else '?'}B smem={smem.group(1) if smem else 0}B")
            rows.append((kernel.stem, f"{info}  ptx_insts={n} ld.global={ld} st.global={st} v4={v4}"))
    print(f"\nKiln kernels for {args.arch}:")
    for name, text in rows:
        print(f"  {name:<14} {text}")
    return 0 if all("failed" not in t for _, t in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
