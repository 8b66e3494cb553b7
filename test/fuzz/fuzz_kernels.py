#!/usr/bin/env python3
"""Front-end fuzzer: mutants of small seed kernels (seeds.py), each run as its own script.

A mutant is the text of a seed's script (the @kiln.jit kernel, numpy inputs, a launch on the
CPU backend and a `kiln.compile` of the kernel to PTX for sm_90) with one or two mutations:
swapped operators, other constexpr values, input dtypes and casts, dropped or altered masks,
shifted offsets, dropped, duplicated or renamed lines and names, wrong launch arguments (count,
types), grids, signatures and launch options. Each mutant runs in a subprocess of its own with
a timeout; all share one KILN_CACHE_DIR. Its outcome is

    ok        the script exited with 0
    error     a Python exception; it must name the kernel and a line of the script
              (`file:line` or `line N`), or, for an argument error at the launch or at
              kiln.compile, the kernel and the argument (else it is counted as `unlocated`)
    signal    killed by a signal (a bug)
    hang      ran past the timeout (a bug)
    internal  an internal error: a C++ assertion or LLVM error text, an MLIR op verifier
              message, a RuntimeError without the kernel's name, or a Python error (KeyError,
              AttributeError, ...) raised inside the kiln package

Mutants are deterministic: mutant i of random seed S is the same on every run and machine, so
`--seed S --start K --count N` selects mutants K..K+N-1 and a long run can be split in slices.
The exit status is 1 when a mutant is bad (`is_bad`): signal, hang, internal, or an error that
does not name the kernel and a line (or argument).

    PYTHONPATH=build/python .venv/bin/python test/fuzz/fuzz_kernels.py --count 200
    ... --seed 3 --start 1000 --count 500 --jobs 2 --out runs.jsonl --keep bad/
"""
import argparse
import ast
import concurrent.futures
import dataclasses
import io
import json
import keyword
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tokenize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from seeds import SEEDS  # noqa: E402

OUTCOMES = ("ok", "error", "signal", "hang", "internal")

# ---------------------------------------------------------------- scripts

PRELUDE = '''\
# Kiln front-end fuzz mutant {mid} of seed kernel '{seed}'
# mutation: {desc}
import numpy as np
import ml_dtypes
import kiln
import kiln.language as tl

DEBUG = {debug}
CHECK = {check}


def _fuzz_grid(grid, mul=1, add=0):
    """The seed's grid with every dimension times mul, plus add."""
    def scaled(meta):
        g = grid(meta) if callable(grid) else grid
        return tuple(mul * d + add for d in g)
    return scaled

'''
KERNEL_LINE0 = PRELUDE.count("\n") + 1  # script line of the kernel text's first line


@dataclasses.dataclass
class Mutant:
    """A script under construction: the seed's parts as the mutators leave them."""
    mid: str
    seed: str
    kernel: str
    consts: list          # [name, value source]
    setup: str
    launch: str
    compile: str
    check: str
    arrays: tuple
    debug: bool = False
    desc: str = "none"
    run_check: bool = False

    def render(self):
        """(script text, {line numbers of its parts})."""
        head = PRELUDE.format(mid=self.mid, seed=self.seed, desc=self.desc.replace("\n", " "),
                              debug=self.debug, check=self.run_check)
        parts = [head, self.kernel.rstrip("\n") + "\n\n\n"]
        host_first = "".join(parts).count("\n") + 1
        parts += [f"{k} = {v}\n" for k, v in self.consts]
        parts += ["rng = np.random.default_rng(0)\n", self.setup.strip("\n") + "\n"]
        launch_line = "".join(parts).count("\n") + 1
        parts += [self.launch + "\n", self.compile + "\n"]
        check_first = launch_line + 2
        parts.append("if CHECK:\n")
        for line in (self.check.strip("\n") or "pass").splitlines():
            parts.append(f"    {line}\n")
        info = {"kernel_first": KERNEL_LINE0, "host_first": host_first,
                "launch": launch_line, "compile": launch_line + 1, "check_first": check_first}
        return "".join(parts), info


def base_mutant(seed, mid="seed", run_check=False):
    return Mutant(mid=mid, seed=seed.name, kernel=seed.kernel.lstrip("\n"),
                  consts=[[k, repr(v)] for k, v in seed.consts.items()], setup=seed.setup,
                  launch=seed.launch, compile=seed.compile, check=seed.check,
                  arrays=tuple(seed.arrays), run_check=run_check)


# ---------------------------------------------------------------- text helpers

def _offset(text, lineno, col):
    """Absolute offset of (1-based line, 0-based column) in text."""
    lines = text.splitlines(keepends=True)
    return sum(len(line) for line in lines[:lineno - 1]) + col


def _span(text, node):
    return (_offset(text, node.lineno, node.col_offset),
            _offset(text, node.end_lineno, node.end_col_offset))


def _splice(text, start, end, new):
    return text[:start] + new + text[end:]


def _header_lines(kernel):
    """Lines of decorators and `def` headers (never mutated line-wise)."""
    lines = set()
    for node in ast.parse(kernel).body:
        if isinstance(node, ast.FunctionDef):
            first = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines.update(range(first, node.body[0].lineno))
    return lines


def _tokens(text):
    return list(tokenize.generate_tokens(io.StringIO(text).readline))


def _script_line(k):
    return KERNEL_LINE0 + k - 1


def _kernel_params(kernel):
    """Parameter names of the last function (the launched kernel) and of all functions."""
    funcs = [n for n in ast.parse(kernel).body if isinstance(n, ast.FunctionDef)]
    return [a.arg for a in funcs[-1].args.args], {a.arg for f in funcs for a in f.args.args}


def _constexpr_params(kernel):
    funcs = [n for n in ast.parse(kernel).body if isinstance(n, ast.FunctionDef)]
    return [a.arg for a in funcs[-1].args.args
            if a.annotation is not None and "constexpr" in ast.unparse(a.annotation)]


# ---------------------------------------------------------------- mutators
# Each takes (mutant, rng), changes the mutant and returns a description, or returns None
# when it does not apply (the mutant is then drawn again).

BINOPS = ["+", "-", "*", "/", "//", "%", "<<", ">>", "&", "|", "^", "<", "<=", ">", ">=",
          "==", "!="]
AUGOPS = ["+=", "-=", "*=", "//=", "%=", "<<=", ">>=", "&=", "|="]
TL_DTYPES = ["int1", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
             "float16", "bfloat16", "float32", "float64", "float8e4nv", "float8e5"]
HOST_DTYPES = ["np.float16", "np.float32", "np.float64", "np.int8", "np.int16", "np.int32",
               "np.int64", "np.uint8", "np.uint16", "np.uint32", "np.uint64", "np.bool_",
               "ml_dtypes.bfloat16", "ml_dtypes.float8_e4m3fn", "np.complex64"]
INT_CONSTS = ["0", "1", "2", "3", "5", "8", "12", "16", "17", "24", "32", "48", "63", "96",
              "128", "256", "1000", "1024", "4096", "65536", "2 ** 21", "-1", "-16", "2.5",
              "None", "True", "'16'"]
BOOL_CONSTS = ["True", "False", "1", "0", "None", "'yes'"]
STR_CONSTS = ["'sigmoid'", "'none'", "'relu'", "''", "1", "None"]
MEM_FUNCS = {"load", "store", "atomic_add", "atomic_max", "atomic_min", "atomic_cas"}
MASK_VALUES = ["None", "True", "1", "~({m})", "({m}) == 0", "({m}).to(tl.int32)",
               "({m}).to(tl.float32)", "tl.arange(0, 2) < 1", "({m})[None, :]",
               "tl.program_id(0) > 0"]
OTHER_VALUES = ["0", "0.0", "float('nan')", "1 << 40", "tl.arange(0, 4)", "None", "True",
                "-float('inf')"]
SHIFTS = ["+ 1", "- 1", "- {c}", "+ {c}", "* 2", "+ 1000000", "- 1000000", "// 2", "+ 0.5",
          "+ 2 ** 31"]
ARRAY_ARGS = ["1.5", "7", "None", "True", "{a}.tolist()", "{a}[None]", "{a}[::2]", "{a}[::-1]",
              "{a}[:0]", "{a}[0]", "'{a}'", "({a}, {a})", "{a}.astype(np.float64)",
              "memoryview({a})", "np.asfortranarray({a}[None].repeat(3, 0))"]
SCALAR_ARGS = ["1.5", "None", "True", "{a}", "2 ** 40", "-1", "0", "2 ** 64", "'7'", "[1]",
               "np.float32(3)", "np.int64(5)", "1j"]
GRIDS = ["(0,)", "(1,)", "()", "(-1,)", "(1, 1, 1, 1)", "(2.5,)", "3", "[2]", "(1, 0)",
         "lambda meta: (0,)", "lambda meta: None", "lambda meta: (1, 2, 3)", "lambda: (1,)",
         "(4096,)", "None", "'1'", "_fuzz_grid(grid, 4)", "_fuzz_grid(grid, 1, 1)",
         "_fuzz_grid(grid, 1, -1)", "(2 ** 16,)", "(1, 70000)"]
SIG_TYPES = ["*fp16", "*bf16", "*i8", "*i64", "*u8", "*fp64", "*i1", "*fp8e4nv", "i32", "i64",
             "u64", "fp32", "fp16", "i1", "*fp32:16", "i32:16", "*foo", "", "fp32:16", "*fp32:8",
             "tensordesc<fp16[16, 16]>", 1, None]
TARGETS = ["sm_80", "sm_70", "sm_100", "sm_90a", "cpu", "gfx90a", "", "sm_9O"]
LAUNCH_OPTS = ["num_warps=0", "num_warps=1", "num_warps=3", "num_warps=8", "num_warps=64",
               "num_stages=0", "num_stages=1", "num_stages=7", "maxnreg=8", "maxnreg=300",
               "maxnreg='a'", "device='gpu'", "device='tpu'", "stream=1", "debug='yes'",
               "num_ctas=2"]


def mut_binop(m, rng):
    header = _header_lines(m.kernel)
    toks = [t for t in _tokens(m.kernel) if t.type == tokenize.OP and t.start[0] not in header
            and t.string in BINOPS + AUGOPS]
    if not toks:
        return None
    t = rng.choice(toks)
    pool = AUGOPS if t.string in AUGOPS else BINOPS
    new = rng.choice([o for o in pool if o != t.string])
    start = _offset(m.kernel, *t.start)
    m.kernel = _splice(m.kernel, start, start + len(t.string), new)
    return f"L{_script_line(t.start[0])} '{t.string}' -> '{new}'"


def mut_const(m, rng):
    i = rng.randrange(len(m.consts))
    name, old = m.consts[i]
    value = ast.literal_eval(old)
    pool = BOOL_CONSTS if isinstance(value, bool) else \
        STR_CONSTS if isinstance(value, str) else INT_CONSTS
    new = rng.choice([v for v in pool if v != old])
    m.consts[i] = [name, new]
    return f"{name} = {old} -> {new}"


def mut_in_dtype(m, rng):
    hits = list(re.finditer(r"\b(np|ml_dtypes)\.(float\w*|u?int\d+|bool_|bfloat16|complex\d+)\b",
                            m.setup))
    if not hits:
        return None
    h = rng.choice(hits)
    new = rng.choice([d for d in HOST_DTYPES if d != h.group(0)])
    line = m.setup[:h.start()].rsplit("\n", 1)[-1] + m.setup[h.start():].split("\n", 1)[0]
    var = line.split("=")[0].strip()
    m.setup = _splice(m.setup, h.start(), h.end(), new)
    return f"dtype of '{var}' {h.group(0)} -> {new}"


def mut_cast(m, rng):
    hits = list(re.finditer(r"\btl\.(" + "|".join(TL_DTYPES) + r")\b", m.kernel))
    if not hits:
        return None
    h = rng.choice(hits)
    k = m.kernel[:h.start()].count("\n") + 1
    after = m.kernel[h.end():]
    if m.kernel[:h.start()].endswith(".to(") and after.startswith(")") and rng.random() < 0.25:
        new = h.group(0) + ", bitcast=True"
    else:
        new = "tl." + rng.choice([d for d in TL_DTYPES if d != h.group(1)])
    m.kernel = _splice(m.kernel, h.start(), h.end(), new)
    return f"L{_script_line(k)} {h.group(0)} -> {new}"


def _mem_calls(kernel):
    calls = []
    for node in ast.walk(ast.parse(kernel)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in MEM_FUNCS):
            calls.append(node)
    return sorted(calls, key=lambda c: (c.lineno, c.col_offset))


def _drop_keyword(text, call, kw):
    items = sorted(call.args + call.keywords, key=lambda n: (n.lineno, n.col_offset))
    i = items.index(kw)
    start, end = _span(text, kw)
    if i > 0:
        start = _span(text, items[i - 1])[1]
    elif i + 1 < len(items):
        end = _span(text, items[i + 1])[0]
    return _splice(text, start, end, "")


def mut_mask(m, rng):
    calls = _mem_calls(m.kernel)
    if not calls:
        return None
    call = rng.choice(calls)
    name = f"tl.{call.func.attr}"
    k = call.lineno
    kws = {kw.arg: kw for kw in call.keywords}
    choices = ["add_mask"] if "mask" not in kws else ["drop_mask", "mask"]
    if "other" in kws:
        choices += ["drop_other", "other"]
    what = rng.choice(choices)
    if what == "add_mask":
        end = _span(m.kernel, call)[1] - 1  # before ')'
        m.kernel = _splice(m.kernel, end, end, ", mask=tl.program_id(0) > 0")
        return f"L{_script_line(k)} {name}: add mask=tl.program_id(0) > 0"
    kw = kws["mask" if what in ("drop_mask", "mask") else "other"]
    old = ast.unparse(kw.value)
    if what.startswith("drop"):
        m.kernel = _drop_keyword(m.kernel, call, kw)
        return f"L{_script_line(k)} {name}: drop {kw.arg}={old}"
    pool = MASK_VALUES if kw.arg == "mask" else OTHER_VALUES
    new = rng.choice(pool).format(m=old)
    start, end = _span(m.kernel, kw.value)
    m.kernel = _splice(m.kernel, start, end, new)
    return f"L{_script_line(k)} {name}: {kw.arg}={old} -> {kw.arg}={new}"


def mut_offset(m, rng):
    tree = ast.parse(m.kernel)
    targets = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            src = ast.unparse(node.value)
            if "arange" in src or "program_id" in src:
                targets.append(node.value)
    targets += [c.args[0] for c in _mem_calls(m.kernel) if c.args]
    if not targets:
        return None
    node = rng.choice(targets)
    consts = _constexpr_params(m.kernel) or ["1"]
    shift = rng.choice(SHIFTS).format(c=rng.choice(consts))
    start, end = _span(m.kernel, node)
    old = m.kernel[start:end]
    m.kernel = _splice(m.kernel, start, end, f"{old} {shift}")
    return f"L{_script_line(node.lineno)} '{old}' -> '{old} {shift}'"


def _body_lines(kernel):
    header = _header_lines(kernel)
    return [k for k, line in enumerate(kernel.splitlines(), 1)
            if k not in header and line.strip()]


def mut_drop_line(m, rng):
    k = rng.choice(_body_lines(m.kernel))
    lines = m.kernel.splitlines(keepends=True)
    text = lines[k - 1].strip()
    del lines[k - 1]
    m.kernel = "".join(lines)
    return f"L{_script_line(k)} drop '{text}'"


def mut_dup_line(m, rng):
    k = rng.choice(_body_lines(m.kernel))
    lines = m.kernel.splitlines(keepends=True)
    lines.insert(k, lines[k - 1])
    m.kernel = "".join(lines)
    return f"L{_script_line(k)} duplicate '{lines[k - 1].strip()}'"


_NOT_RENAMED = {"tl", "kiln", "range", "float", "int", "min", "max", "len", "abs", "print", "True",
                "False", "None"}


def mut_rename(m, rng):
    header = _header_lines(m.kernel)
    toks = _tokens(m.kernel)
    names, cands = set(), []
    for i, t in enumerate(toks):
        if t.type != tokenize.NAME or keyword.iskeyword(t.string) or t.string in _NOT_RENAMED:
            continue
        if i > 0 and toks[i - 1].string == ".":
            continue
        if i + 1 < len(toks) and toks[i + 1].string == "=" and toks[i - 1].string in ("(", ","):
            continue  # a keyword argument's name
        names.add(t.string)
        if t.start[0] not in header:
            cands.append(t)
    names -= {f.name for f in ast.parse(m.kernel).body if isinstance(f, ast.FunctionDef)}
    cands = [t for t in cands if t.string in names]
    if not cands or len(names) < 2:
        return None
    t = rng.choice(cands)
    new = rng.choice(sorted(names - {t.string}))
    start = _offset(m.kernel, *t.start)
    m.kernel = _splice(m.kernel, start, start + len(t.string), new)
    return f"L{_script_line(t.start[0])} name '{t.string}' -> '{new}'"


def _launch_call(m):
    tree = ast.parse(m.launch)
    return tree, tree.body[0].value


def _expr(src):
    return ast.parse(src, mode="eval").body


def mut_arg_count(m, rng):
    tree, call = _launch_call(m)
    consts = [kw for kw in call.keywords if kw.arg not in ("device", "debug")]
    what = rng.choice(["drop", "extra", "extra", "drop_const", "bogus_kw", "const_positional",
                       "swap"])
    if what == "drop":
        i = rng.randrange(len(call.args))
        desc = f"drop argument {i} ({ast.unparse(call.args.pop(i))})"
    elif what == "extra":
        new = rng.choice(["0", "1.0", rng.choice(m.arrays)])
        call.args.append(_expr(new))
        desc = f"extra argument {new}"
    elif what == "drop_const" and consts:
        kw = rng.choice(consts)
        call.keywords.remove(kw)
        desc = f"drop {kw.arg}="
    elif what == "const_positional" and consts:
        kw = rng.choice(consts)
        call.keywords.remove(kw)
        call.args.append(kw.value)
        desc = f"{kw.arg} passed positionally"
    elif what == "swap" and len(call.args) > 1:
        i, j = rng.sample(range(len(call.args)), 2)
        call.args[i], call.args[j] = call.args[j], call.args[i]
        desc = f"swap arguments {i} and {j}"
    else:
        call.keywords.insert(0, ast.keyword(arg="BOGUS", value=_expr("1")))
        desc = "unknown keyword BOGUS=1"
    m.launch = ast.unparse(tree)
    return desc


def mut_arg_type(m, rng):
    tree, call = _launch_call(m)
    i = rng.randrange(len(call.args))
    old = ast.unparse(call.args[i])
    pool = ARRAY_ARGS if old in m.arrays else SCALAR_ARGS
    new = rng.choice(pool).format(a=old if old in m.arrays else rng.choice(m.arrays))
    call.args[i] = _expr(new)
    m.launch = ast.unparse(tree)
    return f"argument {i}: {old} -> {new}"


def mut_grid(m, rng):
    tree, call = _launch_call(m)
    new = rng.choice(GRIDS)
    call.func.slice = _expr(new)
    m.launch = ast.unparse(tree)
    return f"grid -> {new}"


def mut_signature(m, rng):
    tree = ast.parse(m.compile)
    call = tree.body[0].value
    kws = {kw.arg: kw for kw in call.keywords}
    sig, cx = kws["signature"].value, kws["constexprs"].value
    what = rng.choice(["type", "type", "type", "drop", "add", "const_in_sig", "drop_const",
                       "bogus_const", "target", "num_warps"])
    if what == "type":
        i = rng.randrange(len(sig.keys))
        new = rng.choice([t for t in SIG_TYPES if t != sig.values[i].value])
        desc = f"signature {sig.keys[i].value}: {sig.values[i].value!r} -> {new!r}"
        sig.values[i] = ast.Constant(new)
    elif what == "drop":
        i = rng.randrange(len(sig.keys))
        desc = f"signature: drop {sig.keys[i].value}"
        del sig.keys[i], sig.values[i]
    elif what == "add":
        sig.keys.append(ast.Constant("bogus"))
        sig.values.append(ast.Constant("i32"))
        desc = "signature: add bogus: i32"
    elif what == "const_in_sig" and cx.keys:
        name = rng.choice(cx.keys).value
        sig.keys.append(ast.Constant(name))
        sig.values.append(ast.Constant("i32"))
        desc = f"signature: add constexpr {name}: i32"
    elif what == "drop_const" and cx.keys:
        i = rng.randrange(len(cx.keys))
        desc = f"constexprs: drop {cx.keys[i].value}"
        del cx.keys[i], cx.values[i]
    elif what == "bogus_const":
        cx.keys.append(ast.Constant("BOGUS"))
        cx.values.append(ast.Constant(4))
        desc = "constexprs: add BOGUS=4"
    elif what == "num_warps":
        w = rng.choice([0, 1, 2, 3, 8, 64])
        call.keywords.append(ast.keyword(arg="num_warps", value=ast.Constant(w)))
        desc = f"compile num_warps={w}"
    else:
        new = rng.choice(TARGETS)
        kws["target"].value = ast.Constant(new)
        desc = f"target -> {new!r}"
    m.compile = ast.unparse(tree)
    return desc


def mut_launch_opt(m, rng):
    tree, call = _launch_call(m)
    opt = rng.choice(LAUNCH_OPTS)
    name, value = opt.split("=", 1)
    call.keywords = [kw for kw in call.keywords if kw.arg != name]
    call.keywords.append(ast.keyword(arg=name, value=_expr(value)))
    m.launch = ast.unparse(tree)
    return f"launch option {opt}"


MUTATORS = {
    "binop": (mut_binop, 4), "const": (mut_const, 3), "in_dtype": (mut_in_dtype, 2),
    "cast": (mut_cast, 2), "mask": (mut_mask, 3), "offset": (mut_offset, 2),
    "drop_line": (mut_drop_line, 3), "dup_line": (mut_dup_line, 2), "rename": (mut_rename, 2),
    "arg_count": (mut_arg_count, 2), "arg_type": (mut_arg_type, 2), "grid": (mut_grid, 2),
    "signature": (mut_signature, 2), "launch_opt": (mut_launch_opt, 1),
}


# ---------------------------------------------------------------- mutant generation

def select_seeds(kernels=None):
    if not kernels:
        return list(SEEDS)
    names = {s.name for s in SEEDS}
    unknown = set(kernels) - names
    if unknown:
        raise ValueError(f"unknown seed kernels {sorted(unknown)}; known: {sorted(names)}")
    return [s for s in SEEDS if s.name in kernels]


def make_mutant(rand_seed, index, seeds=None, kinds=None):
    """Mutant `index` of random seed `rand_seed`: a seed kernel (round robin over `seeds`) with
    one mutation (two in a fifth of the mutants), a quarter of them launched in debug mode.
    Only mutants that are valid Python and differ from the seed are returned."""
    seeds = seeds or list(SEEDS)
    seed = seeds[index % len(seeds)]
    kinds = list(kinds or MUTATORS)
    weights = [MUTATORS[k][1] for k in kinds]
    rng = random.Random(f"kiln-fuzz/{rand_seed}/{index}")
    base = base_mutant(seed)
    for _ in range(100):
        m = base_mutant(seed, mid=f"{rand_seed}:{index}")
        m.debug = rng.random() < 0.25
        descs = []
        for _ in range(2 if rng.random() < 0.2 else 1):
            kind = rng.choices(kinds, weights)[0]
            try:
                desc = MUTATORS[kind][0](m, rng)
            except (SyntaxError, ValueError, IndexError):
                desc = None  # the previous mutation left text this one cannot parse
            if desc is None:
                break
            descs.append(f"{kind}: {desc}")
        else:
            m.desc = ("[debug] " if m.debug else "") + "; ".join(descs)
            if _parts(m) == _parts(base):
                continue
            text, _ = m.render()
            try:
                compile(text, "mutant.py", "exec")
            except (SyntaxError, ValueError):
                continue
            return m
    raise RuntimeError(f"no valid mutant {index} of seed {rand_seed} ({seed.name})")


def _parts(m):
    return m.kernel, m.consts, m.setup, m.launch, m.compile


def generate(rand_seed=0, start=0, count=60, kernels=None, kinds=None):
    seeds = select_seeds(kernels)
    return [make_mutant(rand_seed, i, seeds, kinds) for i in range(start, start + count)]


def seed_scripts(kernels=None):
    """The unmutated seeds, with their numpy checks on."""
    return [base_mutant(s, mid=f"seed:{s.name}", run_check=True) for s in select_seeds(kernels)]


# ---------------------------------------------------------------- classification

INTERNAL_RE = re.compile(
    r"Assertion [`'].*' failed|assertion failed|[Ii]nternal (compiler )?error|LLVM ERROR|"
    r"UNREACHABLE|Stack dump|terminate called|PLEASE submit a bug report|failed to legalize|"
    r"error: '[a-z_]+\.[a-z_.]+' op |did not verify|Segmentation fault|JIT session error|"
    r"Failed to materialize|Symbols not found")
PY_BUG_TYPES = {"AttributeError", "KeyError", "IndexError", "NameError", "UnboundLocalError",
                "AssertionError", "RecursionError", "ZeroDivisionError", "SystemError",
                "NotImplementedError", "StopIteration", "UnicodeDecodeError"}
FRAME_RE = re.compile(r'^\s*File "(.*)", line (\d+),? in (.*)$')
INTRODUCED_NAMES = {"BOGUS", "bogus"}  # argument names the mutators make up
LAUNCH_WORDS = ("grid", "num_warps", "num_stages", "maxnreg", "device", "stream", "debug",
                "num_ctas")


@dataclasses.dataclass
class Result:
    id: str
    seed: str
    mutation: str
    outcome: str
    detail: str = ""
    exc_type: str = ""
    phase: str = ""
    source: str = ""        # where an error was raised: kiln, or script (the host code)
    located: bool = None    # errors: names the kernel and a line (or an argument)
    bad: bool = False
    returncode: int = None
    seconds: float = 0.0
    rerun: str = ""         # bad mutants: the outcome of a second run
    triage: str = ""        # signals: the outcome of a run in debug mode
    message: str = ""


def parse_traceback(stderr):
    """(frames [(file, line, function)], exception type, message) of the last traceback."""
    lines = stderr.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback (most recent")]
    if not starts:
        return [], "", ""
    i, frames = starts[-1] + 1, []
    while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
        f = FRAME_RE.match(lines[i])
        if f:
            frames.append((f.group(1), int(f.group(2)), f.group(3)))
        i += 1
    if i >= len(lines):
        return frames, "", ""
    head, _, rest = lines[i].partition(":")
    if not re.fullmatch(r"[\w.]+", head):
        return frames, "", "\n".join(lines[i:])
    message = "\n".join([rest.strip()] + lines[i + 1:]).strip()
    return frames, head.rsplit(".", 1)[-1], message


def phase_of(frames, script, info):
    """Where in the script the failure happened: import (the prelude), kernel (the
    decorators), setup, launch, compile or check."""
    lines = [ln for f, ln, _ in frames if os.path.basename(f) == os.path.basename(script)]
    if not lines:
        return "unknown"
    outer = lines[0]
    if outer < info["kernel_first"]:
        return "import"
    if outer == info["launch"]:
        return "launch"
    if outer == info["compile"]:
        return "compile"
    if outer >= info["check_first"]:
        return "check"
    if outer >= info["host_first"]:
        return "setup"
    return "kernel"


def error_is_located(message, kernel, script, phase="", exc_type="", params=()):
    """The criterion for an error message: it names the kernel (`kernel`, as a word) and a
    line of the mutant script (`script.py:N` or `line N`); an error about the arguments of
    the launch or of kiln.compile (phase launch/compile, not a CompilationError) may name one
    of `params` (the kernel's parameters, quoted, or a launch option such as grid) instead of
    a line. So may a memory fault outside debug mode (a KilnError at the launch naming the
    kernel, the program and the argument nearest to the address: there is no line to name)."""
    if not re.search(rf"(?<![\w.]){re.escape(kernel)}(?!\w)", message):
        return False
    name = re.escape(os.path.basename(script))
    if re.search(rf"{name}:\d+", message) or re.search(r"\bline \d+", message):
        return True
    if phase in ("launch", "compile") and exc_type != "CompilationError":
        words = list(params) + list(LAUNCH_WORDS)
        return any(re.search(rf"'{re.escape(p)}'|\b{re.escape(p)}\b", message) for p in words)
    return False


def classify(returncode, stdout, stderr, timed_out, kernel, script, info, params=()):
    """A Result's outcome fields from a finished (or timed-out) mutant run."""
    r = Result(id="", seed="", mutation="", outcome="ok", returncode=returncode)
    text = (stderr or "") + (stdout or "")
    first = next((ln.strip() for ln in (stderr or stdout or "").splitlines() if ln.strip()), "")
    frames, exc_type, message = parse_traceback(stderr or "")
    r.phase = phase_of(frames, script, info) if frames else "unknown"
    if not frames:
        fh = [int(x) for x in re.findall(rf'File "[^"]*{re.escape(os.path.basename(script))}", '
                                         r'line (\d+)', stderr or "")]
        if fh:
            r.phase = phase_of([(script, fh[-1], "")], script, info)
    if timed_out:
        r.outcome, r.detail, r.bad = "hang", f"timed out ({first})" if first else "timed out", True
        return r
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        r.outcome, r.detail, r.bad = "signal", f"{name}: {first}", True
        return r
    if returncode == 0:
        return r
    r.exc_type, r.message = exc_type, message
    r.detail = f"{exc_type}: {message.splitlines()[0] if message else ''}" if exc_type else first
    base = os.path.basename(script)
    script_frames = [ln for f, ln, _ in frames if os.path.basename(f) == base]
    in_host = any(info["host_first"] <= ln < info["launch"] for ln in script_frames)
    # the innermost frame: in the kiln package, or the launch or kiln.compile line itself (an
    # exception raised by the C++ extension)
    raised_in_kiln = False
    if frames:
        path, line, _ = frames[-1]
        raised_in_kiln = ("/kiln/" in path if os.path.basename(path) != base
                          else line in (info["launch"], info["compile"]))
    if not exc_type or r.phase == "import":
        r.outcome, r.bad = "internal", True
    elif INTERNAL_RE.search(text):
        r.outcome, r.bad = "internal", True
    elif in_host or r.phase in ("setup", "check"):
        r.outcome, r.source = "error", "script"
    elif raised_in_kiln and exc_type in PY_BUG_TYPES:
        r.outcome, r.source, r.bad = "internal", "kiln", True
    elif exc_type in ("RuntimeError", "KilnError") and not re.search(
            rf"(?<![\w.]){re.escape(kernel)}(?!\w)", message):
        r.outcome, r.source, r.bad = "internal", "kiln", True
    else:
        r.outcome, r.source = "error", "kiln"
        r.located = error_is_located(message, kernel, script, r.phase, exc_type, params)
        r.bad = not r.located
    return r


def is_bad(result):
    """A mutant that fails the fuzzer: killed by a signal, hung, an internal error, or an
    error from Kiln that does not name the kernel and a line (or argument)."""
    if result.outcome in ("signal", "hang", "internal"):
        return True
    return result.outcome == "error" and result.source == "kiln" and not result.located


# ---------------------------------------------------------------- running

def _no_core_dumps():
    soft, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if soft != 0:
        resource.setrlimit(resource.RLIMIT_CORE, (0, hard))


def run_mutant(m, workdir, cache_dir, timeout=60.0, keep=None, triage=True):
    """Writes `m` to a script in workdir, runs it with a timeout and classifies the result.
    With `triage`, a bad mutant (but a hung one) runs once more (`Result.rerun`: whether it
    reproduces), and one killed by a signal also runs in debug mode (checked accesses):
    `Result.triage` says what that gave (an out-of-bounds access named there means that the
    crash was the mutant kernel's unchecked access)."""
    name = f"mutant_{m.mid.replace(':', '_')}_{m.seed}.py"
    rundir = tempfile.mkdtemp(dir=workdir)
    path = os.path.join(rundir, name)
    text, info = m.render()
    with open(path, "w") as f:
        f.write(text)
    env = dict(os.environ, KILN_CACHE_DIR=cache_dir, PYTHONFAULTHANDLER="1",
               PYTHONDONTWRITEBYTECODE="1")
    for var in ("KILN_DEBUG", "KILN_BACKEND", "KILN_LOG_COMPILES", "KILN_ARCH"):
        env.pop(var, None)
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, path], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=env, cwd=rundir, text=True,
                            errors="replace", start_new_session=True)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = proc.communicate()
    seconds = time.monotonic() - t0
    params = _kernel_params(m.kernel)[1] | INTRODUCED_NAMES
    r = classify(proc.returncode, out[-20000:], err[-20000:], timed_out, m.seed, path, info,
                 params)
    r.id, r.seed, r.mutation, r.seconds = m.mid, m.seed, m.desc, round(seconds, 2)
    if triage and r.bad and r.outcome != "hang":
        again = run_mutant(dataclasses.replace(m, mid=m.mid + ":again"), workdir, cache_dir,
                           timeout, None, triage=False)
        r.rerun = f"{again.outcome}: {again.detail}"
    if triage and r.outcome == "signal" and not m.debug:
        d = run_mutant(dataclasses.replace(m, debug=True, mid=m.mid + ":debug"), workdir,
                       cache_dir, timeout, None, triage=False)
        r.triage = f"in debug mode: {d.outcome}: {d.detail}"
    if keep and r.bad:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(path, os.path.join(keep, name))
        with open(os.path.join(keep, name[:-3] + ".out"), "w") as f:
            f.write(f"returncode {proc.returncode}, {seconds:.1f} s\n--- stderr\n{err}\n"
                    f"--- stdout\n{out}\n")
    shutil.rmtree(rundir, ignore_errors=True)
    return r


def run_mutants(mutants, jobs=2, timeout=60.0, cache_dir=None, keep=None, out=None,
                progress=None, triage=True):
    """Runs the mutants, `jobs` subprocesses at a time, all with one KILN_CACHE_DIR (a new
    temporary directory unless given). Writes one JSON line per mutant to `out` (a file
    object) as they finish; `progress(done, total, result)` is called after each. Returns the
    results in the mutants' order."""
    _no_core_dumps()
    workdir = tempfile.mkdtemp(prefix="kiln-fuzz-")
    cache_dir = cache_dir or os.path.join(workdir, "cache")
    os.makedirs(cache_dir, exist_ok=True)
    results = [None] * len(mutants)
    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {pool.submit(run_mutant, m, workdir, cache_dir, timeout, keep, triage): i
                       for i, m in enumerate(mutants)}
            for done, fut in enumerate(concurrent.futures.as_completed(futures), 1):
                r = fut.result()
                results[futures[fut]] = r
                if out is not None:
                    row = dataclasses.asdict(r)
                    row.pop("message")
                    out.write(json.dumps(row) + "\n")
                    out.flush()
                if progress:
                    progress(done, len(mutants), r)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return results


# ---------------------------------------------------------------- reporting

def summarize(results, seconds=None):
    """The summary table (outcomes per seed kernel) and the list of bad mutants."""
    seeds = sorted({r.seed for r in results}, key=[s.name for s in SEEDS].index)
    cols = list(OUTCOMES) + ["unlocated", "bad", "total"]
    rows = []
    for name in seeds + ["total"]:
        rs = [r for r in results if name in ("total", r.seed)]
        row = [sum(r.outcome == o for r in rs) for o in OUTCOMES]
        row += [sum(r.outcome == "error" and r.source == "kiln" and not r.located for r in rs),
                sum(is_bad(r) for r in rs), len(rs)]
        rows.append((name, row))
    width = max(len(n) for n, _ in rows) + 2
    lines = ["seed kernel".ljust(width) + "".join(c.rjust(10) for c in cols)]
    for name, row in rows:
        lines.append(name.ljust(width) + "".join(str(v).rjust(10) for v in row))
    if seconds is not None:
        lines.append(f"{len(results)} mutants in {seconds:.1f} s")
    bad = [r for r in results if is_bad(r)]
    if bad:
        lines.append(f"\nbad mutants ({len(bad)}):")
        for r in bad:
            kind = "unlocated error" if r.outcome == "error" else r.outcome
            lines.append(f"  {r.id} {r.seed} [{kind}, {r.phase}] {r.mutation}\n"
                         f"      {r.detail[:300]}")
            if r.rerun:
                lines.append(f"      run again: {r.rerun[:300]}")
            if r.triage:
                lines.append(f"      {r.triage[:300]}")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seed", type=int, default=0, help="random seed of the mutants (0)")
    p.add_argument("--count", type=int, default=200, help="number of mutants (200)")
    p.add_argument("--start", type=int, default=0, help="index of the first mutant (0)")
    p.add_argument("--jobs", type=int, default=2, help="parallel subprocesses (2)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant (60)")
    p.add_argument("--out", help="write one JSON line per mutant to this file")
    p.add_argument("--keep", help="copy the scripts (and output) of bad mutants here")
    p.add_argument("--kernels", help="comma-separated seed kernels (default: all)")
    p.add_argument("--kinds", help=f"comma-separated mutations (default: all of "
                                   f"{','.join(MUTATORS)})")
    p.add_argument("--cache-dir", help="KILN_CACHE_DIR of the mutants (default: a new "
                                       "temporary directory)")
    p.add_argument("--check-seeds", action="store_true",
                   help="first run the unmutated seeds with their numpy checks")
    p.add_argument("--list", action="store_true", help="print the mutations, run nothing")
    p.add_argument("--no-triage", action="store_true",
                   help="do not run bad mutants again (nor in debug mode after a signal)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    args = p.parse_args(argv)
    kernels = args.kernels.split(",") if args.kernels else None
    kinds = args.kinds.split(",") if args.kinds else None
    if kinds and set(kinds) - set(MUTATORS):
        p.error(f"unknown mutations {sorted(set(kinds) - set(MUTATORS))}")
    mutants = generate(args.seed, args.start, args.count, kernels, kinds)
    if args.list:
        for m in mutants:
            print(f"{m.mid} {m.seed}: {m.desc}")
        return 0
    if args.check_seeds:
        seeds = run_mutants(seed_scripts(kernels), args.jobs, args.timeout, args.cache_dir)
        failed = [r for r in seeds if r.outcome != "ok"]
        for r in failed:
            print(f"seed {r.seed} fails unmutated: {r.outcome}: {r.detail}", file=sys.stderr)
        if failed:
            return 1
    out = open(args.out, "w") if args.out else None

    def progress(done, total, r):
        if args.quiet:
            return
        if is_bad(r) or done % 50 == 0 or done == total:
            mark = f"BAD {r.outcome}: {r.id} {r.seed} {r.mutation} :: {r.detail[:160]}" \
                if is_bad(r) else ""
            print(f"[{done}/{total}] {mark}", file=sys.stderr, flush=True)

    t0 = time.monotonic()
    try:
        results = run_mutants(mutants, args.jobs, args.timeout, args.cache_dir, args.keep, out,
                              progress, not args.no_triage)
    finally:
        if out:
            out.close()
    print(summarize(results, time.monotonic() - t0))
    return 1 if any(is_bad(r) for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
