#!/usr/bin/env python3
"""Golden PTX replay: compiles every kernel in kernels/*.mlir with kilnc for each target in
TARGETS and compares the PTX with test/golden/<kernel>.<arch>.ptx, so that a refactor shows it
changed no generated code (and a change that means to shows exactly what it changed).

    scripts/golden_ptx.py                 # check (exit 1 and a diff on any difference)
    scripts/golden_ptx.py --update        # regenerate the golden files after a deliberate change

ctest runs the check (test `golden-ptx`). KILNC=path selects the compiler (default
build/tools/kilnc)."""
import argparse
import difflib
import os
import pathlib
import subprocess
import sys

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
    expected = set()
    changed = []
    for kernel in kernels:
        for arch, warps in TARGETS:
            golden = GOLDEN / f"{kernel.stem}.{arch}.ptx"
            expected.add(golden.name)
            ptx = compile_ptx(args.kilnc, kernel, arch, warps)
            if args.update:
                if not golden.exists() or golden.read_text() != ptx:
                    golden.write_text(ptx)
                    changed.append(golden.name)
                continue
            if not golden.exists():
                changed.append(f"{golden.name}: no golden file (run with --update)")
                continue
            old = golden.read_text()
            if old != ptx:
                diff = list(difflib.unified_diff(old.splitlines(), ptx.splitlines(),
                                                 f"golden/{golden.name}", "now", lineterm="",
                                                 n=2))
                changed.append(f"{golden.name}: {len(diff)} diff lines\n" +
                               "\n".join(diff[:60]))
    stale = sorted(p.name for p in GOLDEN.glob("*.ptx") if p.name not in expected)
    if args.update:
        for name in stale:
            (GOLDEN / name).unlink()
        print(f"golden PTX: {len(expected)} files, {len(changed)} rewritten, "
              f"{len(stale)} removed")
        return 0
    if stale:
        changed.append(f"golden files without a kernel: {stale} (run with --update)")
    if changed:
        print("\n\n".join(changed))
        print(f"\ngolden PTX: {len(changed)} of {len(expected)} differ; if the change is "
              f"meant, run scripts/golden_ptx.py --update and commit the files")
        return 1
    print(f"golden PTX: {len(expected)} files identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
