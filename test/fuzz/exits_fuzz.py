#!/usr/bin/env python3
"""Differential fuzz of early exits (kiln/compiler/exits.py): random kernels and @kiln.jit
helpers of nested run-time ifs, `return` (in kernels anywhere, in helpers with a value outside
loops), `break` and `continue` in range / tl.range / tl.static_range / while loops, with an
int32 accumulator and stores, rendered twice: as a Kiln kernel, and as plain Python (int32
wrap-around emulated) that gives the reference. Each program runs on a few program ids.

    python test/fuzz/exits_fuzz.py --start 0 --count 2000     # exit 1 on any disagreement

test/python/test_control_flow_exits.py runs a slice on the CPU backend and compiles one to
PTX."""
import argparse
import importlib.util
import os
import random
import sys
import tempfile
import traceback

import numpy as np

NV = 4  # values loaded per program
SLOTS = 6  # int32 outputs per program
PROGRAMS = 6


class _Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.loops = 0  # loop variables are unique: rebinding one is not what this tests

    def cond(self, names):
        r = self.r
        op = r.choice(["<", ">", "==", "!=", ">=", "<="])
        return f"{r.choice(names)} {op} {r.randint(-3, 3)}"

    def block(self, depth, in_loop, names, helper, n=None):
        """Lines of a block; STORE(slot) stands for a store of acc."""
        r = self.r
        out = []
        for _ in range(n or r.randint(1, 3)):
            k = r.random() * (0.35 if depth > 2 else 1.0)
            if k < 0.25:
                out.append(f"acc = acc + {r.choice(names)} * {r.randint(1, 3)}")
            elif k < 0.35:
                out.append(f"acc = acc - {r.randint(1, 5)}" if helper else
                           f"STORE({r.randrange(SLOTS)})")
            elif k < 0.55:
                out.append(f"if {self.cond(names)}:")
                out += _indent(self.block(depth + 1, in_loop, names, helper))
                if r.random() < 0.5:
                    out.append("else:")
                    out += _indent(self.block(depth + 1, in_loop, names, helper))
            elif k < 0.65:
                if not helper:
                    out.append("return")
                elif not in_loop:
                    out.append(f"return acc + {r.randint(0, 9)}")
            elif k < 0.75 and in_loop:
                out.append(r.choice(["break", "continue"]))
            elif k < 0.87:
                self.loops += 1
                v = f"i{self.loops}"
                it = r.choice([f"range({r.randint(0, 4)})", f"tl.range(0, {r.randint(0, 4)})",
                               f"tl.static_range({r.randint(0, 3)})"])
                out.append(f"for {v} in {it}:")
                out += _indent(self.block(depth + 1, True, names + [v], helper))
            else:
                self.loops += 1
                v = f"j{self.loops}"
                out += [f"{v} = 0", f"while {v} < {r.randint(0, 3)}:", f"    {v} += 1"]
                out += _indent(self.block(depth + 1, True, names + [v], helper))
        return out or ["acc = acc + 1"]


def _indent(lines):
    return ["    " + x for x in lines]


def _wrapped(line):
    """The Python reference's line: int32 wrap-around on acc."""
    s = line.lstrip()
    ind = line[:len(line) - len(s)]
    if s.startswith("acc = "):
        return f"{ind}acc = W({s[6:]})"
    if s.startswith("return acc"):
        return f"{ind}return W({s[7:]})"
    return line


def render(seed):
    """(the Kiln module's source, the Python reference's source) of program `seed`."""
    g = _Gen(seed)
    helper = g.block(0, False, ["a", "b", "acc"], True, n=g.r.randint(1, 4)) + ["return acc"]
    body = g.block(0, False, [f"v{i}" for i in range(NV)] + ["acc"], False, n=g.r.randint(2, 5))
    if g.r.random() < 0.5:
        body.insert(0, "acc = acc + helper(v0, v1)")
    loads = [f"v{i} = tl.load(x_ptr + pid * {NV} + {i})" for i in range(NV)]
    k = ["import kiln", "import kiln.language as tl", "", "", "@kiln.jit",
         "def helper(a, b):", "    acc = a - b"] + _indent(helper)
    k += ["", "", "@kiln.jit", "def kernel(x_ptr, out_ptr):", "    pid = tl.program_id(0)"]
    k += _indent(loads + ["acc = 0"] + [x.replace("STORE(", f"tl.store(out_ptr + pid * {SLOTS} + ")
                                        .replace(")", ", acc)") if "STORE(" in x else x
                                        for x in body])
    p = ["def W(v):", "    return (v + 2 ** 31) % 2 ** 32 - 2 ** 31", "",
         "class tl:", "    static_range = staticmethod(range)",
         "    range = staticmethod(range)", "",
         "def helper(a, b):", "    acc = W(a - b)"] + _indent([_wrapped(x) for x in helper])
    p += ["", "def kernel(x, out, pid):"]
    p += _indent([f"v{i} = int(x[pid * {NV} + {i}])" for i in range(NV)] + ["acc = 0"] +
                 [_wrapped(x).replace("STORE(", f"out.__setitem__((pid * {SLOTS} + ")
                  .replace(")", "), acc)") if "STORE(" in x else _wrapped(x) for x in body])
    return "\n".join(k) + "\n", "\n".join(p) + "\n"


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def load(seed, directory):
    """(the Kiln kernel, the reference function) of program `seed`, written to `directory`."""
    ksrc, psrc = render(seed)
    paths = [os.path.join(directory, f"exits_{w}{seed}.py") for w in ("k", "p")]
    for path, src in zip(paths, (ksrc, psrc)):
        with open(path, "w") as f:
            f.write(src)
    return _load(paths[0], f"exits_k{seed}").kernel, _load(paths[1], f"exits_p{seed}").kernel


def check(seed, directory, device="cpu"):
    """None when Kiln agrees with Python on program `seed`, else what differs."""
    import kiln
    kernel, ref = load(seed, directory)
    x = np.random.default_rng(seed).integers(-3, 4, PROGRAMS * NV).astype(np.int32)
    want = np.full(PROGRAMS * SLOTS, -99, np.int64)
    for pid in range(PROGRAMS):
        ref(x, want, pid)
    out = np.full(PROGRAMS * SLOTS, -99, np.int32)
    if device == "cpu":
        kernel[(PROGRAMS,)](x, out, device="cpu")
    else:
        xd, od = kiln.from_numpy(x), kiln.from_numpy(out)
        kernel[(PROGRAMS,)](xd, od)
        kiln.synchronize()
        out = od.numpy()
    if not np.array_equal(out, want.astype(np.int32)):
        return f"program {seed}: kiln {out.tolist()} != python {want.tolist()}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--start", type=int, default=0)
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        for seed in range(args.start, args.start + args.count):
            try:
                why = check(seed, d, args.device)
            except Exception:
                why = f"program {seed}: {traceback.format_exc()}"
            if why:
                bad += 1
                print(why)
    print(f"{args.count - bad} of {args.count} programs agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
