#!/usr/bin/env python3
"""Deterministic mutation fuzzer for kilnc.

This file implements a small mutation fuzzer: it derives mutants from the kernels in a
directory (byte flips, line deletions and duplications, token swaps, truncations, number and
type changes, SSA-name and op-name swaps), runs kilnc on each with a timeout, and fails when a
run crashes. A crash is any of:
  - an exit by a signal (negative return code) or a status other than 0 and 1;
  - a timeout;
  - a crash that MLIR's crash recovery turned into an ordinary failure: kilnc runs its pass
    pipeline with a reproducer, which catches a crashing pass and reports only "Failures have
    been detected while processing an MLIR pass pipeline" with no diagnostic of its own, or a
    stack dump on stderr.
It prints how many mutants compiled (exit 0) and how many were rejected (exit 1). The seed is
fixed so a failure reproduces; --keep saves every crashing mutant for a bug report.
Standard library only.
"""

import argparse
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

# Numbers that probe edges: zero, non powers of two, sign and width limits.
INTERESTING_NUMBERS = ["0", "1", "-1", "3", "1000", "17", "2048", "65536", "2147483647",
                       "2147483648", "-2147483648", "4294967296", "9223372036854775807"]
# Scalar types a kernel mentions; swapping them breaks (or changes) type agreement.
TYPES = ["f32", "f16", "bf16", "f64", "i1", "i8", "i16", "i32", "i64", "index"]
# What a type may become: another scalar, or a pointer (which nests the kernel's pointers).
NEW_TYPES = TYPES + ["!kiln.ptr<f32>", "!kiln.ptr<i8>"]
# Ops that take similar operands, so a swap often still parses.
OP_GROUPS = [
    ["arith.addf", "arith.subf", "arith.mulf", "arith.divf", "arith.maximumf", "arith.addi"],
    ["arith.addi", "arith.subi", "arith.muli", "arith.divsi", "arith.remui", "arith.andi",
     "arith.addf"],
    ["kiln.splat", "kiln.make_range", "kiln.broadcast", "kiln.load", "kiln.expand_dims"],
    ["kiln.load", "kiln.store", "kiln.atomic_rmw", "kiln.addptr"],
    ["kiln.program_id", "kiln.num_programs"],
    ["math.log", "math.exp", "math.sqrt", "math.absf", "math.sin"],
    ["arith.cmpi", "arith.cmpf"],
]
TOKEN_RE = re.compile(rb"%[A-Za-z0-9_]+|![A-Za-z0-9_.]+|[A-Za-z_][A-Za-z0-9_.]*|-?\d+|\S")
NUMBER_RE = re.compile(rb"(?<![A-Za-z0-9_%.])-?\d+(?![A-Za-z0-9_.])")
SSA_RE = re.compile(rb"%[A-Za-z0-9_]+")
TYPE_RE = re.compile(rb"(?<![A-Za-z0-9_])(?:" + b"|".join(t.encode() for t in TYPES) +
                     rb")(?![A-Za-z0-9_])")


def pick_line(rng, lines):
    """Index of a random line that is neither blank nor a comment, or None."""
    candidates = [i for i, l in enumerate(lines) if l.strip() and not l.lstrip().startswith(b"//")]
    return rng.choice(candidates) if candidates else None


def byte_flips(rng, data):
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(buf))
        buf[i] ^= 1 << rng.randrange(8)
    return bytes(buf), "flip bits"


def delete_line(rng, data):
    lines = data.split(b"\n")
    i = pick_line(rng, lines)
    if i is None:
        return data, "delete nothing"
    del lines[i]
    return b"\n".join(lines), f"delete line {i + 1}"


def duplicate_line(rng, data):
    lines = data.split(b"\n")
    i = pick_line(rng, lines)
    if i is None:
        return data, "duplicate nothing"
    j = rng.randrange(len(lines) + 1)
    lines.insert(j, lines[i])
    return b"\n".join(lines), f"copy line {i + 1} to {j + 1}"


def swap_tokens(rng, data):
    """Swaps two tokens, within one line or across two lines."""
    lines = data.split(b"\n")
    a, b = pick_line(rng, lines), pick_line(rng, lines)
    if a is None:
        return data, "swap nothing"
    if rng.random() < 0.5:
        b = a
    ta = list(TOKEN_RE.finditer(lines[a]))
    tb = list(TOKEN_RE.finditer(lines[b]))
    if not ta or not tb:
        return data, "swap nothing"
    ma, mb = rng.choice(ta), rng.choice(tb)
    if a == b:
        if ma.start() == mb.start():
            return data, "swap nothing"
        first, second = sorted((ma, mb), key=lambda m: m.start())
        l = lines[a]
        lines[a] = (l[:first.start()] + second.group() + l[first.end():second.start()] +
                    first.group() + l[second.end():])
    else:
        la, lb = lines[a], lines[b]
        lines[a] = la[:ma.start()] + mb.group() + la[ma.end():]
        lines[b] = lb[:mb.start()] + ma.group() + lb[mb.end():]
    return b"\n".join(lines), f"swap '{ma.group().decode(errors='replace')}' (line {a + 1}) " \
                             f"with '{mb.group().decode(errors='replace')}' (line {b + 1})"


def truncate(rng, data):
    n = rng.randrange(len(data))
    return data[:n], f"truncate at byte {n}"


def change_number(rng, data):
    """Changes one number, or every occurrence of it (which keeps the shapes consistent)."""
    matches = list(NUMBER_RE.finditer(data))
    if not matches:
        return data, "change nothing"
    m = rng.choice(matches)
    old = m.group()
    new = rng.choice(INTERESTING_NUMBERS + [str(int(old) // 2), str(int(old) * 2)]).encode()
    if rng.random() < 0.4:
        return NUMBER_RE.sub(lambda x: new if x.group() == old else x.group(), data), \
            f"all {old.decode()} -> {new.decode()}"
    return data[:m.start()] + new + data[m.end():], \
        f"{old.decode()} -> {new.decode()} at byte {m.start()}"


def change_type(rng, data):
    """Changes one scalar type, or every occurrence of it."""
    matches = list(TYPE_RE.finditer(data))
    if not matches:
        return data, "change nothing"
    m = rng.choice(matches)
    old = m.group()
    new = rng.choice([t for t in NEW_TYPES if t != old.decode()]).encode()
    if rng.random() < 0.4:
        return TYPE_RE.sub(lambda x: new if x.group() == old else x.group(), data), \
            f"all {old.decode()} -> {new.decode()}"
    return data[:m.start()] + new + data[m.end():], \
        f"{old.decode()} -> {new.decode()} at byte {m.start()}"


def swap_ssa(rng, data):
    """Replaces one use of an SSA value with another value of the kernel."""
    matches = list(SSA_RE.finditer(data))
    names = sorted({m.group() for m in matches})
    if len(names) < 2:
        return data, "rename nothing"
    m = rng.choice(matches)
    new = rng.choice([n for n in names if n != m.group()])
    return data[:m.start()] + new + data[m.end():], \
        f"{m.group().decode()} -> {new.decode()} at byte {m.start()}"


def swap_op(rng, data):
    present = [(g, op) for g in OP_GROUPS for op in g if op.encode() + b" " in data]
    if not present:
        return data, "swap no op"
    group, old = rng.choice(present)
    new = rng.choice([op for op in group if op != old])
    starts = [m.start() for m in re.finditer(re.escape(old.encode() + b" "), data)]
    i = rng.choice(starts)
    return data[:i] + new.encode() + data[i + len(old):], f"{old} -> {new} at byte {i}"


def splice(rng, data, others):
    """Inserts a line of another kernel (its SSA names are mostly undefined here)."""
    donor = rng.choice(others).split(b"\n")
    i = pick_line(rng, donor)
    lines = data.split(b"\n")
    j = rng.randrange(len(lines) + 1)
    if i is None:
        return data, "splice nothing"
    lines.insert(j, donor[i])
    return b"\n".join(lines), f"splice donor line {i + 1} at {j + 1}"


MUTATORS = [byte_flips, delete_line, duplicate_line, swap_tokens, truncate, change_number,
            change_type, swap_ssa, swap_op]


def make_mutants(kernels, count, seed):
    """Yields (name, data, description): `count` mutants, spread evenly over the kernels."""
    rng = random.Random(seed)
    names = sorted(kernels)
    for n in range(count):
        name = names[n % len(names)]
        data = kernels[name]
        steps = []
        # Mostly one mutation, sometimes stacked ones (which get further from valid input).
        for _ in range(rng.choice([1, 1, 1, 2, 3])):
            if rng.random() < 0.08 and len(names) > 1:
                data, what = splice(rng, data, [kernels[k] for k in names if k != name])
            else:
                data, what = rng.choice(MUTATORS)(rng, data)
            steps.append(what)
            if not data:
                break
        yield f"{n:04d}-{os.path.splitext(name)[0]}", data, "; ".join(steps)


def classify(returncode, stderr, timed_out):
    """Returns None for an acceptable outcome, else why the run counts as a crash."""
    if timed_out:
        return "timeout"
    if returncode < 0:
        return f"killed by signal {-returncode}"
    if returncode not in (0, 1):
        return f"exit status {returncode}"
    text = stderr.decode(errors="replace")
    if "Stack dump" in text or "PLEASE submit a bug report" in text:
        return "stack dump"
    if returncode == 1:
        errors = [l for l in text.splitlines() if "error:" in l and
                  "Failures have been detected while processing an MLIR pass pipeline" not in l]
        if not errors:
            if "Failures have been detected while processing an MLIR pass pipeline" in text:
                return "pipeline failed without a diagnostic (a crash caught by crash recovery)"
            return "exit 1 without a diagnostic"
    return None


def run_one(kilnc, workdir, timeout, item):
    name, data, what = item
    path = os.path.join(workdir, name + ".mlir")
    with open(path, "wb") as f:
        f.write(data)
    cmd = [kilnc, path, "-o", os.devnull, "--reproducer=" + os.path.join(workdir, name + ".repro")]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, timeout=timeout)
        return name, what, path, proc.returncode, proc.stderr, False
    except subprocess.TimeoutExpired as e:
        return name, what, path, None, e.stderr or b"", True


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kilnc", required=True, help="the kilnc to run")
    parser.add_argument("--kernels", required=True, help="directory of seed .mlir kernels")
    parser.add_argument("--count", type=int, default=300, help="number of mutants")
    parser.add_argument("--seed", type=int, default=20251122, help="random seed")
    parser.add_argument("--timeout", type=float, default=30.0, help="seconds per kilnc run")
    parser.add_argument("--jobs", type=int, default=2, help="kilnc processes at a time")
    parser.add_argument("--keep", help="directory to copy crashing mutants into")
    args = parser.parse_args()

    kilnc = shutil.which(args.kilnc) or args.kilnc
    kernels = {}
    for name in sorted(os.listdir(args.kernels)):
        if name.endswith(".mlir"):
            with open(os.path.join(args.kernels, name), "rb") as f:
                kernels[name] = f.read()
    if not kernels:
        print(f"error: no .mlir kernels in {args.kernels}", file=sys.stderr)
        return 2

    counts = {0: 0, 1: 0}
    crashes = []
    workdir = tempfile.mkdtemp(prefix="kilnc-fuzz-")
    try:
        mutants = list(make_mutants(kernels, args.count, args.seed))
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            for name, what, path, rc, stderr, timed_out in pool.map(
                    lambda item: run_one(kilnc, workdir, args.timeout, item), mutants):
                why = classify(rc, stderr, timed_out)
                if why is None:
                    counts[rc] += 1
                    continue
                crashes.append((name, what, why, stderr))
                if args.keep:
                    os.makedirs(args.keep, exist_ok=True)
                    shutil.copy(path, args.keep)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"kernels: {', '.join(sorted(kernels))}")
    print(f"mutants: {len(mutants)}")
    print(f"exit 0: {counts[0]}")
    print(f"exit 1: {counts[1]}")
    print(f"crashes: {len(crashes)}")
    for name, what, why, stderr in crashes:
        print(f"CRASH {name} ({what}): {why}")
        tail = stderr.decode(errors="replace").strip().splitlines()[-8:]
        for line in tail:
            print(f"    {line}")
    return 1 if crashes else 0


if __name__ == "__main__":
    sys.exit(main())
