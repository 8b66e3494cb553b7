"""8- and 16-bit atomics: tl.atomic_add / max / min / and / or / xor / xchg on int8, uint8,
int16, uint16, fp16 and bf16, and tl.atomic_cas on 16-bit elements.

- contention on neighbouring elements of one 32-bit word (8 addresses, hundreds of updates
  each, several programs), on the CPU backend against numpy, and marked `gpu` on the device:
  final values, and old values that chain (every update saw the one before it);
- compiled without a GPU: compare-and-swap loops on the 32-bit word where PTX has no
  8/16-bit form, atom.add.noftz.f16 (and .bf16 on sm_90), fences giving the op's semantics,
  atom.cas.b16;
- errors: 8-bit atomic_cas at the line.
"""
import re

import numpy as np
import pytest

import kiln
import kiln.language as tl
from error_markers import marker_line

CPU = dict(device="cpu")
NADDR = 8
BLOCK = 128
GRID = 4


def bf16():
    return pytest.importorskip("ml_dtypes").bfloat16


DTYPES = {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16, "fp16": np.float16,
          "bf16": "bf16"}
INT_OPS = ["add", "max", "min", "and", "or", "xor", "xchg"]
FLOAT_OPS = ["add", "max", "min", "xchg"]


@kiln.jit
def rmw_kernel(P, V, OLD, OP: tl.constexpr, SEM: tl.constexpr, BLOCK: tl.constexpr,
               NADDR: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(V + offs)
    ptr = P + offs % NADDR
    mask = offs % 5 != 3  # some lanes do nothing
    if OP == "add":
        old = tl.atomic_add(ptr, v, mask=mask, sem=SEM)
    elif OP == "max":
        old = tl.atomic_max(ptr, v, mask=mask, sem=SEM)
    elif OP == "min":
        old = tl.atomic_min(ptr, v, mask=mask, sem=SEM)
    elif OP == "and":
        old = tl.atomic_and(ptr, v, mask=mask, sem=SEM)
    elif OP == "or":
        old = tl.atomic_or(ptr, v, mask=mask, sem=SEM)
    elif OP == "xor":
        old = tl.atomic_xor(ptr, v, mask=mask, sem=SEM)
    else:
        old = tl.atomic_xchg(ptr, v, mask=mask, sem=SEM)
    tl.store(OLD + offs, old, mask=mask)


def values(name, op, n, seed):
    rng = np.random.default_rng(seed)
    dt = bf16() if DTYPES[name] == "bf16" else DTYPES[name]
    if name in ("fp16", "bf16"):
        # Small integers: every partial sum is exact, so the final sum has one answer.
        lo, hi = (-3, 4) if op != "add" else (0, 3)
        return rng.integers(lo, hi, n).astype(np.float32).astype(dt)
    info = np.iinfo(dt)
    if op == "add":  # wraps around in the element's width
        return rng.integers(info.min, info.max, n, endpoint=True).astype(dt)
    if op in ("and", "or", "xor"):
        return rng.integers(0, 1 << (8 * np.dtype(dt).itemsize), n, dtype=np.uint64).astype(dt)
    return rng.integers(info.min, info.max, n, endpoint=True).astype(dt)


def init(name, op):
    dt = bf16() if DTYPES[name] == "bf16" else DTYPES[name]
    if op == "and":
        return np.full(NADDR, -1 if np.dtype(dt).kind == "i" else np.iinfo(dt).max, dt)
    return (np.arange(NADDR) * 3 % 7).astype(np.float32).astype(dt)


def apply(op, old, v, dt):
    """The value each update leaves: op(old, v) in the element's dtype."""
    if op == "xchg":
        return v.copy()
    if op == "add":
        if np.dtype(dt).kind == "f" or dt == bf16_or_none():
            return (old.astype(np.float64) + v.astype(np.float64)).astype(dt)
        return (old.astype(np.int64) + v.astype(np.int64)).astype(dt)
    if op in ("max", "min"):
        return (np.maximum if op == "max" else np.minimum)(old, v)
    f = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    return f(old, v)


def bf16_or_none():
    try:
        import ml_dtypes
        return ml_dtypes.bfloat16
    except ImportError:
        return None


def key(a):
    """Bits of each element (sortable, exact)."""
    return sorted(np.ascontiguousarray(a).view(np.uint8 if a.dtype.itemsize == 1
                                               else np.uint16).tolist())


def check(name, op, p0, v, mask, p, old):
    addr = np.arange(v.size) % NADDR
    dt = p0.dtype
    for a in range(NADDR):
        sel = (addr == a) & mask
        va, oa = v[sel], old[sel]
        # Every update saw the value the one before it left: {init} + {op(old, v)} is
        # {old} + {final} (a chain through all updates, in some order).
        left = np.append(apply(op, oa, va, dt), p0[a:a + 1]).astype(dt)
        right = np.append(oa, p[a:a + 1]).astype(dt)
        assert key(left) == key(right), (a, op)
        if op != "xchg":  # one final answer (sums are exact, integers wrap)
            acc = p0[a:a + 1]
            for x in va:
                acc = apply(op, acc, np.array([x], dt), dt)
            assert key(acc) == key(p[a:a + 1]), (a, acc, p[a])


def run(name, op, sem, launch, to_dev, to_host):
    n = GRID * BLOCK
    v = values(name, op, n, seed=hash((name, op)) % 1000)
    p0 = init(name, op)
    p, old = to_dev(p0.copy()), to_dev(np.zeros(n, p0.dtype))
    launch(rmw_kernel, (GRID,), p, to_dev(v), old, OP=op, SEM=sem, BLOCK=BLOCK, NADDR=NADDR)
    mask = np.arange(n) % 5 != 3
    check(name, op, p0, v, mask, to_host(p), to_host(old))


CASES = [(n, op) for n in DTYPES for op in (FLOAT_OPS if n in ("fp16", "bf16") else INT_OPS)]


@pytest.mark.parametrize("name,op", CASES)
def test_narrow_atomics_cpu(name, op):
    run(name, op, "acq_rel", lambda k, g, *a, **kw: k[g](*a, **kw, **CPU), lambda x: x,
        lambda x: x)


def _torch():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch


@pytest.mark.gpu
@pytest.mark.parametrize("sem", ["acq_rel", "relaxed"])
@pytest.mark.parametrize("name,op", CASES)
def test_narrow_atomics_gpu(name, op, sem):
    torch = _torch()
    ml = bf16() if name == "bf16" else None

    def to_dev(x):
        if ml is not None and x.dtype == ml:
            return torch.from_numpy(x.view(np.int16)).cuda().view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(x)).cuda()

    def to_host(t):
        torch.cuda.synchronize()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).cpu().numpy().view(ml)
        return t.cpu().numpy()
    run(name, op, sem, lambda k, g, *a, **kw: k[g](*a, **kw), to_dev, to_host)


@kiln.jit
def cas16_kernel(P, OLD, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    p = tl.load(P + offs)
    # Where offs is even the compared value is the stored one: the swap happens.
    cmp = tl.where(offs % 2 == 0, p, p + 1)
    old = tl.atomic_cas(P + offs, cmp, p * 2 + 1)
    tl.store(OLD + offs, old)


@pytest.mark.parametrize("name", ["i16", "u16", "fp16", "bf16"])
def test_cas_16_bit_cpu(name):
    dt = bf16() if name == "bf16" else DTYPES[name]
    p0 = (np.arange(64) % 17).astype(np.float32).astype(dt)
    p, old = p0.copy(), np.zeros(64, dt)
    cas16_kernel[(1,)](p, old, BLOCK=64, **CPU)
    even = np.arange(64) % 2 == 0
    np.testing.assert_array_equal(old, p0)
    np.testing.assert_array_equal(p[even], (p0[even].astype(np.float32) * 2 + 1).astype(dt))
    np.testing.assert_array_equal(p[~even], p0[~even])


# ---------------------------------------------------------------- PTX (no GPU needed)

def ptx(name, op, sem="acq_rel", arch="sm_90"):
    sig = dict(P=f"*{name}", V=f"*{name}", OLD=f"*{name}")
    return kiln.compile(rmw_kernel, signature=sig, target=arch,
                        constexprs=dict(OP=op, SEM=sem, BLOCK=BLOCK, NADDR=NADDR)).asm["ptx"]


def atoms(text):
    return sorted(set(re.findall(r"\b((?:atom|fence)\.[\w.]+)", text)))


@pytest.mark.parametrize("name", ["i8", "u16"])
@pytest.mark.parametrize("op", ["add", "max", "min", "xchg"])
def test_integer_updates_are_cas_loops_on_the_word(name, op):
    text = ptx(name, op)
    assert "atom.relaxed.gpu.global.cas.b32" in atoms(text), atoms(text)
    assert "fence.acq_rel.gpu" in atoms(text)


def test_half_adds_are_native_where_ptx_has_them():
    assert "atom.global.add.noftz.f16" in atoms(ptx("fp16", "add", arch="sm_80"))
    assert "atom.global.add.noftz.bf16" in atoms(ptx("bf16", "add", arch="sm_90"))
    # bf16 atom.add needs sm_90: a compare-and-swap loop before.
    assert "atom.relaxed.gpu.global.cas.b32" in atoms(ptx("bf16", "add", arch="sm_80"))
    assert "atom.relaxed.gpu.global.cas.b32" in atoms(ptx("fp16", "max"))


@pytest.mark.parametrize("sem,fences", [("relaxed", 0), ("acquire", 1), ("release", 1),
                                        ("acq_rel", 2)])
def test_fences_give_the_semantics(sem, fences):
    assert ptx("i8", "xor", sem).count("fence.acq_rel.gpu") == fences


def test_cas_16_bit_in_ptx():
    for name in ("i16", "fp16", "bf16"):
        text = kiln.compile(cas16_kernel, signature=dict(P=f"*{name}", OLD=f"*{name}"),
                            target="sm_80", constexprs=dict(BLOCK=64)).asm["ptx"]
        assert "atom.acq_rel.gpu.global.cas.b16" in text


@kiln.jit
def cas8_kernel(P):
    tl.atomic_cas(P, 1, 2)  # ERR


def test_cas_8_bit_is_an_error():
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(cas8_kernel, signature=dict(P="*i8"))
    assert info.value.line == marker_line(cas8_kernel)
    assert ("expected a pointer to 16-, 32- or 64-bit elements for atomic_cas (as in Triton), "
            "found pointer<int8>") in info.value.message
