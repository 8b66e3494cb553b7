#!/usr/bin/env python3
"""Golden PTX replay: compiles every kernel in kernels/*.mlir with kilnc for each target in
TARGETS and compares the PTX with test/golden/<kernel>.<arch>.ptx, so that a refactor shows it
changed no generated code (and a change that means to shows exactly what it changed).

    scripts/golden_ptx.py                 # check (exit 1 and a diff on any difference)
    scripts/golden_ptx.py --update        # regenerate the golden files after a deliberate change

ctest runs the check (test `golden-ptx`). KILNC=path selects the compiler (default
build/tools/kilnc)."""
import argparse
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from golden_files import GoldenSet  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "test" / "golden"
# sm_90a: wgmma, TMA and the warpgroup paths; sm_80: cp.async rings, ldmatrix and mma.sync.
TARGETS = [("sm_90a", 4), ("sm_80", 4)]
# num_stages 4: the dot operand rings of 4 slots these files were made with (kilnc's default
# before num_stages had one meaning at every door; its default is now Triton's 3).
NUM_STAGES = 4


def compile_ptx(kilnc, kernel, arch, warps):
    r = subprocess.run([kilnc, str(kernel), "--emit=ptx", f"--arch={arch}",
                        f"--num-warps={warps}", f"--num-stages={NUM_STAGES}"], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{kernel.name} ({arch}): kilnc failed:\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--update", action="store_true", help="rewrite the golden files")
    ap.add_argument("--kilnc", default=os.environ.get("KILNC", str(ROOT / "build/tools/kilnc")))
    args = ap.parse_args()
    kernels = sorted((ROOT / "kernels").glob("*.mlir"))
    files = GoldenSet(GOLDEN, "golden")
    for kernel in kernels:
        for arch, warps in TARGETS:
            files.record(f"{kernel.stem}.{arch}.ptx", compile_ptx(args.kilnc, kernel, arch, warps),
                         args.update)
    return files.finish(args.update, "golden PTX", "scripts/golden_ptx.py",
                        f"{len(files.expected)} files")

if __name__ == "__main__":
    sys.exit(main())
