#!/usr/bin/env python3
"""One kernel compiled by Kiln and by Triton on the same source, side by side, without a GPU:
what ptxas makes of each (registers, spills, stack) and counts of the PTX instructions that
tell the two schedules apart (wgmma, cp.async, TMA copies, barriers, global and shared
accesses). The quickest question to ask before spending GPU time on a gap in bench_cliffs.

    python3 bench/compare_ptx_triton.py cliff_sources_attention:attn_bwd \\
        --signature '{"Q": "*fp16:16", ..., "stride_d": "i32:1", "N_CTX": "i32:16"}' \\
        --constexprs '{"HEAD_DIM": 64, "BLOCK_M1": 32, ...}' --num-warps 4 --num-stages 5

MODULE is a module of bench/ (or anything importable), loaded as it is for Kiln and as its
Triton twin (common.twin: the text unchanged, kiln imports rebound). The signature is Kiln's
spelling (kiln.compile): a ":16" suffix becomes Triton's tt.divisibility 16, ":1" (equal to
one) a Triton constexpr 1, as Triton specializes them. Needs triton (pip install triton; no
GPU or driver: it compiles for the target named) and ptxas ($PTXAS, else
/usr/local/cuda/bin/ptxas).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

OPS = ["wgmma.mma_async", "mma.sync", "cp.async.cg", "cp.async.ca", "cp.async.bulk.tensor",
       "bar.sync", "mbarrier.try_wait", "ld.global", "st.global", "ld.shared", "st.shared",
       "ldmatrix", "stmatrix", "ld.local", "st.local"]


def ptxas_report(ptx, arch, ptxas):
    """(registers, spill stores, spill loads, stack bytes) ptxas reports for `ptx`."""
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "k.ptx")
        with open(src, "w") as f:
            f.write(ptx)
        r = subprocess.run([ptxas, f"-arch={arch}", "-v", src, "-o", os.path.join(d, "k.cubin")],
                           capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"ptxas failed: {r.stderr.strip()[-500:]}")
    text = r.stderr
    num = (lambda pat: int(m.group(1)) if (m := re.search(pat, text)) else 0)
    return (num(r"Used (\d+) registers"), num(r"(\d+) bytes spill stores"),
            num(r"(\d+) bytes spill loads"), num(r"(\d+) bytes stack frame"))


def triton_ptx(fn, signature, constexprs, num_warps, num_stages, capability):
    """Triton's PTX of `fn` (its twin) for the Kiln-spelled signature."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, compile as tcompile
    sig, consts, attrs = {}, dict(constexprs), {}
    names = list(fn.arg_names)
    defaults = {p.name: p.default for p in fn.params if p.is_constexpr and p.has_default}
    for name in names:
        if name in constexprs or (name not in signature and name in defaults):
            sig[name] = "constexpr"
            consts.setdefault(name, defaults.get(name))
            continue
        spec = signature[name]
        ty, _, hint = spec.partition(":")
        if hint == "1":
            sig[name], consts[name] = "constexpr", 1
            continue
        sig[name] = ty
        if hint == "16":
            attrs[(names.index(name),)] = [["tt.divisibility", 16]]
    src = ASTSource(fn, sig, consts, attrs)
    return tcompile(src, target=GPUTarget("cuda", capability, 32),
                    options=dict(num_warps=num_warps, num_stages=num_stages)).asm["ptx"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kernel", help="MODULE:FUNCTION")
    p.add_argument("--signature", required=True, help="JSON: Kiln's signature")
    p.add_argument("--constexprs", default="{}", help="JSON")
    p.add_argument("--num-warps", type=int, default=4)
    p.add_argument("--num-stages", type=int, default=3)
    p.add_argument("--target", default="sm_90a")
    p.add_argument("--save", default=None, help="a directory for both PTX files")
    args = p.parse_args(argv)
    common.setup_paths()
    import importlib
    import kiln
    modname, _, fname = args.kernel.partition(":")
    module = importlib.import_module(modname)
    signature, constexprs = json.loads(args.signature), json.loads(args.constexprs)
    ptxas = os.environ.get("PTXAS", "/usr/local/cuda/bin/ptxas")
    arch = args.target
    capability = int(re.match(r"sm_(\d+)", arch).group(1))
    ptx = {"kiln": kiln.compile(getattr(module, fname), signature=signature,
                                constexprs=constexprs, target=arch, num_warps=args.num_warps,
                                num_stages=args.num_stages).asm["ptx"]}
    try:
        twin = common.twin(module)
        ptx["triton"] = triton_ptx(getattr(twin, fname), signature, constexprs, args.num_warps,
                                   args.num_stages, capability)
    except ImportError as e:
        print(f"triton unavailable ({e}): Kiln only", file=sys.stderr)
    rows = []
    for lib, text in ptx.items():
        if args.save:
            os.makedirs(args.save, exist_ok=True)
            with open(os.path.join(args.save, f"{fname}.{lib}.ptx"), "w") as f:
                f.write(text)
        regs, st, ld, stack = ptxas_report(text, arch, ptxas)
        rows.append([lib, regs, st, ld, stack] + [text.count(op) for op in OPS])
    headers = ["", "registers", "spill stores", "spill loads", "stack"] + OPS
    # one column a compiler: the counts read down
    print(f"{args.kernel} {arch} num_warps={args.num_warps} num_stages={args.num_stages} "
          f"{json.dumps(constexprs)}")
    width = max(len(h) for h in headers)
    for i, h in enumerate(headers):
        print(f"{h:<{width}}  " + "  ".join(f"{str(r[i]):>8}" for r in rows))


if __name__ == "__main__":
    main()
