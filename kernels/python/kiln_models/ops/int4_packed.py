"""The int4 CUDA-core kernels with packed 16-bit math (GPU, bf16/fp16 x) of quant.py's
one-row plans (see quant's docstring for the weight layout and the plans): a word's codes
unpacked into 16-bit pairs and multiplied with bf16x2/f16x2 FMAs by inline PTX.

- `gemv_int4_packed_kernel`: [R, C] words a step (4-byte loads), any M <= 4.
- `gemv_int4_wide_kernel`: 16-byte loads (4 words of a row a thread).
- `gemv_int4_persist_kernel`: a persistent grid over row tiles of all of K, x made once a
  program, two words a 16-bit accumulator (the wide layers at one row).

Also the step loaders `_first_words` / `_next_words` that quant's fp32-field kernel shares."""
import kiln
import kiln.language as tl

from .linear import _gemv_finish, _gemv_resid, _gemv_rows, _gemv_store, _rstd, _tile_rows



@kiln.jit
def _first_words(p_ptrs, s_ptrs, wmask, EVEN: tl.constexpr):
    """The first step's int4 words [R, C] and their group scales (EVEN: no mask)."""
    if EVEN:
        words = tl.load(p_ptrs, eviction_policy="evict_first")
        scale = tl.load(s_ptrs)
    else:
        words = tl.load(p_ptrs, mask=wmask[None, :], other=0, eviction_policy="evict_first")
        scale = tl.load(s_ptrs, mask=wmask[None, :], other=0.0)
    return words, scale.to(tl.float32)


@kiln.jit
def _next_words(p_ptrs, s_ptrs, s_rows, rc, w0, KW, GROUP_WORDS: tl.constexpr,
                EVEN: tl.constexpr):
    """The words and scales of the step at word w0 (past KW: masked off). EVEN: C is a
    multiple of GROUP_WORDS, so the groups advance by C / GROUP_WORDS."""
    if EVEN:
        words = tl.load(p_ptrs + w0, mask=w0 < KW, eviction_policy="evict_first")
        scale = tl.load(s_ptrs + w0 // GROUP_WORDS, mask=w0 < KW)
    else:
        wmask = (w0 + rc) < KW
        words = tl.load(p_ptrs + w0, mask=wmask[None, :], other=0,
                        eviction_policy="evict_first")
        scale = tl.load(s_rows + ((w0 + rc) // GROUP_WORDS)[None, :], mask=wmask[None, :],
                        other=0.0)
    return words, scale.to(tl.float32)


# Packed 16-bit math (GPU, bf16/fp16 x): a word's 8 int4 codes become 4 pairs of 16-bit
# floats with one LOP3 each: (w >> 4i) & 0x000F000F | M puts codes i and i + 4 in the low
# mantissa bits of M's two halves (M: bf16 128.0 = 0x4300, fp16 1024.0 = 0x6400), so the
# pair is (M + q_i, M + q_{i+4}); one packed FMA subtracts M + 8 (exact: small integers), and
# four packed FMAs multiply by the x pairs (x_i, x_{i+4}) and sum the word in 16-bit precision
# (a relative rounding of 2^-9 (bf16) per product and sum, far below int4's own error); the two
# halves are then added in fp32, scaled by the group's scale and accumulated in fp32. About
# 19 instructions per word and row of x, against ~43 for the fp32 fields above.
_PAIRS_ASM = """{
    prmt.b32 $0, $4, $6, 0x5410;
    prmt.b32 $1, $4, $6, 0x7632;
    prmt.b32 $2, $5, $7, 0x5410;
    prmt.b32 $3, $5, $7, 0x7632;
}"""

def _asm(lines):
    """A PTX block of `lines`, one an indented line."""
    return "{\n" + "".join(f"    {line}\n" for line in lines) + "}"


def _codes(src, d):
    """Lines putting word `src`'s code pairs (i, i + 4) for i = 0..3 in d0..d3 as M + q."""
    lines = [f"lop3.b32 {d}0, {src}, 0x000F000F, MAGIC, 0xEA;"]
    for i in (1, 2, 3):
        lines += [f"shr.u32 s, {src}, {4 * i};", f"lop3.b32 {d}{i}, s, 0x000F000F, MAGIC, 0xEA;"]
    return lines


def _unbias(d):
    """Lines turning d0..d3 from M + q into q - 8 (exact)."""
    return [f"fma.rn.T {d}{i}, {d}{i}, one, bias;" for i in range(4)]


def _products(pairs):
    """Lines summing the products of (code register, x pair operand) `pairs` into acc."""
    (c, x), rest = pairs[0], pairs[1:]
    return [f"mul.rn.T acc, {c}, {x};"] + [f"fma.rn.T acc, {c}, {x}, acc;" for c, x in rest]


_WORD_ASM = _asm([".reg .b32 t0, t1, t2, t3, s, one, bias, acc, lo, hi;", ".reg .f32 flo, fhi;",
                  "mov.b32 one, ONE;", "mov.b32 bias, BIAS;"] + _codes("$1", "t") +
                 _unbias("t") + _products([("t0", "$2"), ("t1", "$3"), ("t2", "$4"),
                                           ("t3", "$5")]) + ["TOF32", "add.f32 $0, flo, fhi;"])

_BF16_TO_F32 = """shl.b32 lo, acc, 16;
    and.b32 hi, acc, 0xFFFF0000;
    mov.b32 flo, lo;
    mov.b32 fhi, hi;"""

_F16_TO_F32 = """{
    .reg .f16 h0, h1;
    mov.b32 {h0, h1}, acc;
    cvt.f32.f16 flo, h0;
    cvt.f32.f16 fhi, h1;
    }"""


# Two words a call (pack=2, the persistent kernel's 4- or 8-word pieces): their 16 products
# with x's pairs summed in one 16-bit accumulator (8 products a half instead of 4: a relative
# rounding of 2^-9 (bf16) per product and sum, still far below int4's own error), its two
# halves returned as two fp32 values that the piece's sum adds: 2 instructions for the two
# words' conversion instead of 6 (3 a word).
_WORD2_ASM = _asm([".reg .b32 t0, t1, t2, t3, u0, u1, u2, u3, s, one, bias, acc, lo, hi;",
                   ".reg .f32 flo, fhi;", "mov.b32 one, ONE;", "mov.b32 bias, BIAS;"] +
                  _codes("$2", "t") + _codes("$3", "u") + _unbias("t") + _unbias("u") +
                  _products([("t0", "$4"), ("t1", "$6"), ("t2", "$8"), ("t3", "$10"),
                             ("u0", "$5"), ("u1", "$7"), ("u2", "$9"), ("u3", "$11")]) +
                  ["TOF32", "mov.b32 $0, flo;", "mov.b32 $1, fhi;"])


# The persistent kernel's math for fp16 x (X16): x's pairs scaled once a program by a power
# of two (_x16_pairs), so that a 2-word accumulator cannot overflow fp16 whatever x's range
# (unscaled, |x| near 1000 would reach 65504). fp16's 10 mantissa bits hold a code shifted by
# 4 too, so a word's odd codes need no shift (0x00F000F0 | 1024 is 1024 + 16 q, and q - 8 =
# that / 16 - 72, exact): 1 shift a word instead of 3. For bf16 x (converted the same way) it
# measured no faster in the 1B model (2040 against 2036-2056 tok/s), so bf16 keeps bf16 math.
_WORD2_X16_ASM = """{
    .reg .b32 t0, t1, t2, t3, u0, u1, u2, u3, s, one, bias, sixteenth, bias16, acc;
    .reg .f16 h0, h1;
    .reg .f32 flo, fhi;
    mov.b32 one, 0x3C003C00;
    mov.b32 bias, 0xE408E408;
    mov.b32 sixteenth, 0x2C002C00;
    mov.b32 bias16, 0xD480D480;
    lop3.b32 t0, $2, 0x000F000F, 0x64006400, 0xEA;
    lop3.b32 t1, $2, 0x00F000F0, 0x64006400, 0xEA;
    shr.u32 s, $2, 8;
    lop3.b32 t2, s, 0x000F000F, 0x64006400, 0xEA;
    lop3.b32 t3, s, 0x00F000F0, 0x64006400, 0xEA;
    lop3.b32 u0, $3, 0x000F000F, 0x64006400, 0xEA;
    lop3.b32 u1, $3, 0x00F000F0, 0x64006400, 0xEA;
    shr.u32 s, $3, 8;
    lop3.b32 u2, s, 0x000F000F, 0x64006400, 0xEA;
    lop3.b32 u3, s, 0x00F000F0, 0x64006400, 0xEA;
    fma.rn.f16x2 t0, t0, one, bias;
    fma.rn.f16x2 t1, t1, sixteenth, bias16;
    fma.rn.f16x2 t2, t2, one, bias;
    fma.rn.f16x2 t3, t3, sixteenth, bias16;
    fma.rn.f16x2 u0, u0, one, bias;
    fma.rn.f16x2 u1, u1, sixteenth, bias16;
    fma.rn.f16x2 u2, u2, one, bias;
    fma.rn.f16x2 u3, u3, sixteenth, bias16;
    mul.rn.f16x2 acc, t0, $4;
    fma.rn.f16x2 acc, t1, $6, acc;
    fma.rn.f16x2 acc, t2, $8, acc;
    fma.rn.f16x2 acc, t3, $10, acc;
    fma.rn.f16x2 acc, u0, $5, acc;
    fma.rn.f16x2 acc, u1, $7, acc;
    fma.rn.f16x2 acc, u2, $9, acc;
    fma.rn.f16x2 acc, u3, $11, acc;
    mov.b32 {h0, h1}, acc;
    cvt.f32.f16 flo, h0;
    cvt.f32.f16 fhi, h1;
    mov.b32 $0, flo;
    mov.b32 $1, fhi;
}"""

# A pair word of x (bf16x2 or f16x2) times a power of two, as f16x2 (_x16_pairs), and the
# larger magnitude of its two elements.
_X16_ASM = """{
    .reg .b32 lo, hi;
    .reg .f32 flo, fhi;
    UNPACK
    mul.f32 flo, flo, $2;
    mul.f32 fhi, fhi, $2;
    cvt.rn.f16x2.f32 $0, fhi, flo;
}"""
_ABSMAX_ASM = """{
    .reg .b32 lo, hi;
    .reg .f32 flo, fhi;
    UNPACK
    abs.f32 flo, flo;
    abs.f32 fhi, fhi;
    max.f32 $0, flo, fhi;
}"""
_UNPACK_BF16 = """shl.b32 lo, $1, 16;
    and.b32 hi, $1, 0xFFFF0000;
    mov.b32 flo, lo;
    mov.b32 fhi, hi;"""
_UNPACK_F16 = """{
    .reg .f16 h0, h1;
    mov.b32 {h0, h1}, $1;
    cvt.f32.f16 flo, h0;
    cvt.f32.f16 fhi, h1;
    }"""


def _word_asm(kind, text=None):
    if kind == "bf16":
        sub = dict(ONE="0x3F803F80", BIAS="0xC308C308", MAGIC="0x43004300", T="bf16x2",
                   TOF32=_BF16_TO_F32)
    else:  # fp16: 1.0, -(1024 + 8), 1024
        sub = dict(ONE="0x3C003C00", BIAS="0xE408E408", MAGIC="0x64006400", T="f16x2",
                   TOF32=_F16_TO_F32)
    text = text or _WORD_ASM
    for k in ("ONE", "BIAS", "MAGIC", "TOF32", "T"):
        text = text.replace(k, sub[k])
    return text


# NORM (the fused RMSNorm): x's word times the norm weight's (a packed 16-bit product, rounded
# as torch's `w * normed` is) and the word's two squares summed in fp32 for the row's rstd.
_NORM_ASM = """{
    .reg .b32 lo, hi;
    .reg .f32 flo, fhi;
    mul.rn.T $0, $2, $3;
    TOF32
    mul.f32 $1, flo, flo;
    fma.rn.f32 $1, fhi, fhi, $1;
}"""


def _norm_asm(kind):
    t, tof32 = ("bf16x2", _BF16_TO_F32) if kind == "bf16" else ("f16x2", _F16_TO_F32)
    return _NORM_ASM.replace("TOF32", tof32.replace("acc", "$2")).replace("T", t)


NORM_ASM_BF16 = tl.constexpr(_norm_asm("bf16"))
NORM_ASM_F16 = tl.constexpr(_norm_asm("fp16"))
WORD_ASM_BF16 = tl.constexpr(_word_asm("bf16"))
WORD_ASM_F16 = tl.constexpr(_word_asm("fp16"))
WORD2_X16_ASM = tl.constexpr(_WORD2_X16_ASM)
X16_ASM_BF16 = tl.constexpr(_X16_ASM.replace("UNPACK", _UNPACK_BF16))
X16_ASM_F16 = tl.constexpr(_X16_ASM.replace("UNPACK", _UNPACK_F16))
ABSMAX_ASM_BF16 = tl.constexpr(_ABSMAX_ASM.replace("UNPACK", _UNPACK_BF16))
ABSMAX_ASM_F16 = tl.constexpr(_ABSMAX_ASM.replace("UNPACK", _UNPACK_F16))
WORD2_ASM_BF16 = tl.constexpr(_word_asm("bf16", _WORD2_ASM))
WORD2_ASM_F16 = tl.constexpr(_word_asm("fp16", _WORD2_ASM))
PAIRS_ASM = tl.constexpr(_PAIRS_ASM)


@kiln.jit
def _pairs(x0, x1, x2, x3):
    """x's words 0..3 of each 8-element piece (element pairs (0, 1) .. (6, 7)) permuted into
    the pairs (x_i, x_{i+4}) the int4 codes unpack to (_PAIRS_ASM)."""
    return tl.inline_asm_elementwise(
        PAIRS_ASM, "=r,=r,=r,=r,r,r,r,r", [x0, x1, x2, x3],
        dtype=(tl.int32, tl.int32, tl.int32, tl.int32), is_pure=True, pack=1)


@kiln.jit
def _sums_of_words(words, pa, pb, pc, pd, F16: tl.constexpr):
    """Each word's sum of its 8 products with x's pairs (_pairs), fp32; the operands
    broadcast against each other (_WORD_ASM)."""
    return tl.inline_asm_elementwise(
        WORD_ASM_F16 if F16 else WORD_ASM_BF16, "=r,r,r,r,r,r", [words, pa, pb, pc, pd],
        dtype=tl.float32, is_pure=True, pack=1)


@kiln.jit
def _half_sums_of_word_pairs(words, pa, pb, pc, pd, F16: tl.constexpr, X16: tl.constexpr):
    """_sums_of_words two words at a time along the last axis (in-thread, even length):
    elements 2i and 2i + 1 hold two fp32 halves of words 2i and 2i + 1's 16 products,
    whose sum is theirs (_WORD2_ASM; X16: fp16 pairs of _x16_pairs, _WORD2_X16_ASM)."""
    if X16:
        asm = WORD2_X16_ASM
    elif F16:
        asm = WORD2_ASM_F16
    else:
        asm = WORD2_ASM_BF16
    return tl.inline_asm_elementwise(asm, "=r,=r,r,r,r,r,r,r,r,r,r,r", [words, pa, pb, pc, pd],
                                     dtype=tl.float32, is_pure=True, pack=2)


@kiln.jit
def _x16_pairs(pa, pb, pc, pd, F16: tl.constexpr):
    """x's pairs ([BM, 1, C, V] words of bf16 or fp16 pairs) as fp16 pairs scaled by 2^-e per
    row of x, e such that the row's largest magnitude lands in [0.5, 1) (no fp16 overflow:
    a 2-word accumulator sums 8 products of at most 8 each), and 2^e per row ([BM], fp32) to
    scale the results back: powers of two, so nothing rounds but the fp16 conversion."""
    top = tl.maximum(tl.maximum(_absmax(pa, F16), _absmax(pb, F16)),
                     tl.maximum(_absmax(pc, F16), _absmax(pd, F16)))
    ex = (top.to(tl.int32, bitcast=True) >> 23) & 255
    ex = tl.minimum(tl.maximum(ex, 1), 252)
    down = ((253 - ex) << 23).to(tl.float32, bitcast=True)[:, None, None, None]
    back = ((ex + 1) << 23).to(tl.float32, bitcast=True)
    return (_x16(pa, down, F16), _x16(pb, down, F16), _x16(pc, down, F16),
            _x16(pd, down, F16), back)


@kiln.jit
def _absmax(p, F16: tl.constexpr):
    """[BM]: the largest magnitude in x's pair words p [BM, 1, C, V]."""
    if F16:
        asm = ABSMAX_ASM_F16
    else:
        asm = ABSMAX_ASM_BF16
    m = tl.inline_asm_elementwise(asm, "=f,r", [p], dtype=tl.float32, is_pure=True, pack=1)
    return tl.max(tl.max(tl.max(m, axis=3), axis=2), axis=1)


@kiln.jit
def _x16(p, down, F16: tl.constexpr):
    """Pair words p times `down`, as fp16 pairs (_X16_ASM)."""
    if F16:
        asm = X16_ASM_F16
    else:
        asm = X16_ASM_BF16
    return tl.inline_asm_elementwise(asm, "=r,r,f", [p, down], dtype=tl.int32, is_pure=True,
                                     pack=1)


@kiln.jit
def _word_sums(words, x0, x1, x2, x3, F16: tl.constexpr):
    """[BM, R, C] sums of each word's 8 products with x, given as its [BM, C] 32-bit words
    x0..x3 (element pairs (0, 1) .. (6, 7) of each 8-element piece)."""
    pa, pb, pc, pd = _pairs(x0, x1, x2, x3)
    return _sums_of_words(words[None, :, :], pa[:, None, :], pb[:, None, :], pc[:, None, :],
                          pd[:, None, :], F16)


@kiln.jit
def _g_words(gw_ptrs, gmask, NORM: tl.constexpr):
    """NORM: the norm weight's words 0..3 of each piece ([1, C], as _x_words); else zeros
    ([1, 1] tensors: loops carry them)."""
    if NORM:
        return _x_words(gw_ptrs, gmask)
    z = tl.zeros((1, 1), dtype=tl.int32)
    return z, z, z, z


@kiln.jit
def _norm_words(x0, x1, x2, x3, g0, g1, g2, g3, ss, F16: tl.constexpr, NORM: tl.constexpr):
    """NORM: x's words times the norm weight's words (_g_words), and ss [BM, C] plus x's
    squares; otherwise x's words and ss as given."""
    if NORM:
        asm = NORM_ASM_F16 if F16 else NORM_ASM_BF16
        x0, s0 = tl.inline_asm_elementwise(asm, "=r,=f,r,r", [x0, g0],
                                           dtype=(tl.int32, tl.float32), is_pure=True, pack=1)
        x1, s1 = tl.inline_asm_elementwise(asm, "=r,=f,r,r", [x1, g1],
                                           dtype=(tl.int32, tl.float32), is_pure=True, pack=1)
        x2, s2 = tl.inline_asm_elementwise(asm, "=r,=f,r,r", [x2, g2],
                                           dtype=(tl.int32, tl.float32), is_pure=True, pack=1)
        x3, s3 = tl.inline_asm_elementwise(asm, "=r,=f,r,r", [x3, g3],
                                           dtype=(tl.int32, tl.float32), is_pure=True, pack=1)
        ss += (s0 + s1) + (s2 + s3)
    return x0, x1, x2, x3, ss


@kiln.jit
def _x_words(xw_ptrs, mask):
    """The 32-bit words 0..3 (element pairs) of each 8-element piece of x at xw_ptrs ([BM, C]
    pointers to each piece's first word); `mask` None or [BM, C] (masked off: 0)."""
    if mask is None:
        return tl.load(xw_ptrs), tl.load(xw_ptrs + 1), tl.load(xw_ptrs + 2), \
            tl.load(xw_ptrs + 3)
    return (tl.load(xw_ptrs, mask=mask, other=0), tl.load(xw_ptrs + 1, mask=mask, other=0),
            tl.load(xw_ptrs + 2, mask=mask, other=0), tl.load(xw_ptrs + 3, mask=mask, other=0))


@kiln.jit
def gemv_int4_packed_kernel(x_ptr, p_ptr, s_ptr, out_ptr, g_ptr, eps, M, N, K, KW, N_GROUPS,
                            GROUP_WORDS: tl.constexpr, BM: tl.constexpr, R: tl.constexpr,
                            C: tl.constexpr, EVEN: tl.constexpr, F16: tl.constexpr,
                            TWO: tl.constexpr = False, SWIGLU: tl.constexpr = False,
                            NORM: tl.constexpr = False, RESID: tl.constexpr = False):
    """gemv_int4_kernel with packed 16-bit math (GPU; bf16 x, or fp16 with F16): x read as 32-bit
    words of two elements ([BM, C] tiles of words 0..3 of each 8-element piece), permuted once
    per step into the pairs (x_i, x_{i+4}) the codes unpack to, and each (row of x, weight
    row, word) summed by _WORD_ASM. TWO (KW exactly two steps, EVEN): both steps' words and
    scales are loaded before gdc_wait, as linear's gemv_kernel does. SWIGLU, NORM (x's words
    times g's in 16 bits, _NORM_ASM) and RESID as in gemv_kernel."""
    rm, rn = _gemv_rows(M, N, BM, R, SWIGLU)
    rc = tl.arange(0, C)
    p_ptrs = p_ptr.to(tl.pointer_type(tl.int32)) + (rn % N)[:, None] * KW + rc[None, :]
    s_rows = s_ptr + (rn % N)[:, None] * N_GROUPS
    xw_ptrs = x_ptr.to(tl.pointer_type(tl.int32)) + (rm % M)[:, None] * (K // 2) + \
        rc[None, :] * 4
    gw_ptrs = g_ptr.to(tl.pointer_type(tl.int32)) + rc[None, :] * 4
    acc = tl.zeros((BM, R, C), dtype=tl.float32)
    ss = tl.zeros((BM, C), dtype=tl.float32)
    s_ptrs = s_rows + (rc // GROUP_WORDS)[None, :]
    wmask = rc < KW
    if TWO:
        words0 = tl.load(p_ptrs, eviction_policy="evict_first")
        words1 = tl.load(p_ptrs + C, eviction_policy="evict_first")
        scale0 = tl.load(s_ptrs).to(tl.float32)
        scale1 = tl.load(s_ptrs + C // GROUP_WORDS).to(tl.float32)
        tl.extra.cuda.gdc_wait()  # PDL: the weights above are in flight meanwhile
        tl.extra.cuda.gdc_launch_dependents()
        x0, x1, x2, x3 = _x_words(xw_ptrs, None)
        resid = _gemv_resid(out_ptr, rm, rn, M, N, RESID)
        g0, g1, g2, g3 = _g_words(gw_ptrs, None, NORM)
        x0, x1, x2, x3, ss = _norm_words(x0, x1, x2, x3, g0, g1, g2, g3, ss, F16, NORM)
        acc += _word_sums(words0, x0, x1, x2, x3, F16) * scale0[None, :, :]
        x0, x1, x2, x3 = _x_words(xw_ptrs + 4 * C, None)
        g0, g1, g2, g3 = _g_words(gw_ptrs + 4 * C, None, NORM)
        x0, x1, x2, x3, ss = _norm_words(x0, x1, x2, x3, g0, g1, g2, g3, ss, F16, NORM)
        acc += _word_sums(words1, x0, x1, x2, x3, F16) * scale1[None, :, :]
    else:
        words, scale = _first_words(p_ptrs, s_ptrs, wmask, EVEN)
        tl.extra.cuda.gdc_wait()  # PDL: the weights above are in flight meanwhile (linear.py)
        tl.extra.cuda.gdc_launch_dependents()
        x0, x1, x2, x3 = _x_words(xw_ptrs, wmask[None, :])
        g0, g1, g2, g3 = _g_words(gw_ptrs, wmask[None, :], NORM)
        resid = _gemv_resid(out_ptr, rm, rn, M, N, RESID)
        for w0 in range(C, KW + C, C):
            words_next, scale_next = _next_words(p_ptrs, s_ptrs, s_rows, rc, w0, KW,
                                                 GROUP_WORDS, EVEN)
            x0n, x1n, x2n, x3n = _x_words(xw_ptrs + 4 * w0, ((w0 + rc) < KW)[None, :])
            g0n, g1n, g2n, g3n = _g_words(gw_ptrs + 4 * w0, ((w0 + rc) < KW)[None, :], NORM)
            xa0, xa1, xa2, xa3, ss = _norm_words(x0, x1, x2, x3, g0, g1, g2, g3, ss, F16, NORM)
            acc += _word_sums(words, xa0, xa1, xa2, xa3, F16) * scale[None, :, :]
            g0, g1, g2, g3 = g0n, g1n, g2n, g3n
            words = words_next
            scale = scale_next
            x0, x1, x2, x3 = x0n, x1n, x2n, x3n
    _gemv_finish(tl.sum(acc, axis=2), out_ptr, rm, rn, M, N, ss[:, None, :], K, eps, resid,
                 SWIGLU, NORM)


@kiln.jit
def gemv_int4_wide_kernel(x_ptr, p_ptr, s_ptr, out_ptr, g_ptr, eps, M, N, K, KW, N_GROUPS,
                          GROUP_WORDS: tl.constexpr, BM: tl.constexpr, R: tl.constexpr,
                          C: tl.constexpr, F16: tl.constexpr, SWIGLU: tl.constexpr = False,
                          NORM: tl.constexpr = False):
    """gemv_int4_packed_kernel with 16-byte weight loads: a thread reads 4 consecutive words
    (32 codes) of each of its rows a step (C pieces of 4 words along K: 4C words a step),
    which share one group scale (GROUP_WORDS a multiple of 4); KW a multiple of 4C. The words
    are loaded as a 4-D [1, R, C, 4] tile, which anchors the layout of the [BM, R, C, 4]
    products (its last dimension in-thread); x's words 0..3 of each word's 8 elements are
    [BM, 1, C, 4] tiles. SWIGLU and NORM as in gemv_int4_packed_kernel."""
    rm, rn = _gemv_rows(M, N, BM, R, SWIGLU)
    rc = tl.arange(0, C)
    wcol = rc[:, None] * 4 + tl.arange(0, 4)[None, :]  # [C, 4] words of a step
    p_ptrs = p_ptr.to(tl.pointer_type(tl.int32)) + (rn % N)[None, :, None, None] * KW + \
        wcol[None, None, :, :]
    s_ptrs = s_ptr + (rn % N)[:, None] * N_GROUPS + (rc * 4 // GROUP_WORDS)[None, :]
    xw_ptrs = x_ptr.to(tl.pointer_type(tl.int32)) + (rm % M)[:, None, None, None] * (K // 2) + \
        wcol[None, None, :, :] * 4
    gw_ptrs = g_ptr.to(tl.pointer_type(tl.int32)) + wcol[None, None, :, :] * 4
    acc = tl.zeros((BM, R, C), dtype=tl.float32)
    ss = tl.zeros((BM, 1, C, 4), dtype=tl.float32)
    words = tl.load(p_ptrs, eviction_policy="evict_first")
    scale = tl.load(s_ptrs).to(tl.float32)
    tl.extra.cuda.gdc_wait()  # PDL: the weights above are in flight meanwhile (linear.py)
    tl.extra.cuda.gdc_launch_dependents()
    x0, x1, x2, x3 = _x_words(xw_ptrs, None)
    g0, g1, g2, g3 = _g_words(gw_ptrs, None, NORM)
    for w0 in range(4 * C, KW + 4 * C, 4 * C):
        words_next = tl.load(p_ptrs + w0, mask=w0 < KW, eviction_policy="evict_first")
        scale_next = tl.load(s_ptrs + w0 // GROUP_WORDS, mask=w0 < KW).to(tl.float32)
        x0n = tl.load(xw_ptrs + 4 * w0, mask=w0 < KW)
        x1n = tl.load(xw_ptrs + 4 * w0 + 1, mask=w0 < KW)
        x2n = tl.load(xw_ptrs + 4 * w0 + 2, mask=w0 < KW)
        x3n = tl.load(xw_ptrs + 4 * w0 + 3, mask=w0 < KW)
        g0n, g1n, g2n, g3n = _g_words(gw_ptrs + 4 * w0, None, NORM)
        x0, x1, x2, x3, ss = _norm_words(x0, x1, x2, x3, g0, g1, g2, g3, ss, F16, NORM)
        pa, pb, pc, pd = _pairs(x0, x1, x2, x3)
        acc += tl.sum(_sums_of_words(words, pa, pb, pc, pd, F16), axis=3) * scale[None, :, :]
        words = words_next
        scale = scale_next
        x0, x1, x2, x3 = x0n, x1n, x2n, x3n
        g0, g1, g2, g3 = g0n, g1n, g2n, g3n
    _gemv_finish(tl.sum(acc, axis=2), out_ptr, rm, rn, M, N, tl.sum(ss, axis=3), K, eps, None,
                 SWIGLU, NORM)


@kiln.jit
def gemv_int4_persist_kernel(x_ptr, p_ptr, s_ptr, out_ptr, g_ptr, eps, M, N, K, KW, N_GROUPS,
                             GROUP_WORDS: tl.constexpr, BM: tl.constexpr, R: tl.constexpr,
                             C: tl.constexpr, F16: tl.constexpr, DEPTH: tl.constexpr = 1,
                             V: tl.constexpr = 4,
                             X16: tl.constexpr = False,
                             SWIGLU: tl.constexpr = False, NORM: tl.constexpr = False,
                             RESID: tl.constexpr = False):
    """gemv_int4_wide_kernel as a persistent kernel, for M <= BM and a row of KW = 4C words
    (all of K a tile, C pieces of V words): program p takes row tiles p, p + G, ... (G
    programs, R rows a tile).
    x's words, their pairs and (NORM) its rstd are made once per program, not per tile: a
    thread keeps the same K columns for every tile. The words and scales of the DEPTH (1 or
    2) tiles after the current one are in flight during its math (the first DEPTH tiles'
    are loaded before gdc_wait, while the kernel before finishes), so the weights stream
    with no gap between tiles, no program launches and no x reloads between them. RESID:
    the next tile's residual rows are loaded with its words (the first tile's beside x's).
    A tile's epilogue follows the next tile's math. Two words a 16-bit accumulator (_WORD2_ASM); X16 (fp16 x): x's pairs scaled by a power
    of two and the fp16 math of _WORD2_X16_ASM. SWIGLU, NORM and RESID as in
    gemv_int4_packed_kernel."""
    pid = tl.program_id(0)
    n_prog = tl.num_programs(0)
    n_tiles = tl.cdiv(N, R)
    rm = tl.arange(0, BM)
    rc = tl.arange(0, C)
    wcol = rc[:, None] * V + tl.arange(0, V)[None, :]  # [C, V]: the row's words
    p_base = p_ptr.to(tl.pointer_type(tl.int32)) + wcol[None, None, :, :]
    s_cols = (rc * V // GROUP_WORDS)[None, :]
    rn = _tile_rows(pid, N, R, SWIGLU)
    words, scale = _persist_tile(p_base, s_ptr, s_cols, rn, N, KW, N_GROUPS, pid < n_tiles)
    rn1 = rn
    words1 = words
    scale1 = scale
    if DEPTH == 2:
        rn1 = _tile_rows(pid + n_prog, N, R, SWIGLU)
        words1, scale1 = _persist_tile(p_base, s_ptr, s_cols, rn1, N, KW, N_GROUPS,
                                       pid + n_prog < n_tiles)
    tl.extra.cuda.gdc_wait()  # PDL: the first tiles' weights are in flight meanwhile
    tl.extra.cuda.gdc_launch_dependents()
    resid = _gemv_resid(out_ptr, rm, rn, M, N, True)  # (unused without RESID)
    xw_ptrs = x_ptr.to(tl.pointer_type(tl.int32)) + (rm % M)[:, None, None, None] * (K // 2) + \
        wcol[None, None, :, :] * 4
    gw_ptrs = g_ptr.to(tl.pointer_type(tl.int32)) + wcol[None, None, :, :] * 4
    x0, x1, x2, x3 = _x_words(xw_ptrs, None)
    g0, g1, g2, g3 = _g_words(gw_ptrs, None, NORM)
    ss = tl.zeros((BM, 1, C, V), dtype=tl.float32)
    x0, x1, x2, x3, ss = _norm_words(x0, x1, x2, x3, g0, g1, g2, g3, ss, F16, NORM)
    pa, pb, pc, pd = _pairs(x0, x1, x2, x3)
    rstd = None
    if NORM:
        rstd = _rstd(tl.sum(ss, axis=3), K, eps)
    if X16:  # fp16 pairs scaled by 2^-e; 2^e back with rstd
        pa, pb, pc, pd, back = _x16_pairs(pa, pb, pc, pd, F16)
        if NORM:
            rstd = rstd * back
        else:
            rstd = back
    # A tile's epilogue (the sum across the row's pieces, SWIGLU, the store) comes after the
    # next tile's math, which does not wait for it: the cross-lane sums' shared-memory waits
    # were the kernel's top stall (ncu in bench/results/2026-11-26-h100-llama-session19.md).
    # The first iteration stores nothing (rows past N); the last tile's follows the loop.
    acc_prev = tl.zeros((BM, R, C), dtype=tl.float32)
    rn_prev = rn + 2 * N
    resid_prev = resid
    for t in range(pid, n_tiles, n_prog):
        tn = t + DEPTH * n_prog
        rn_n = _tile_rows(tn, N, R, SWIGLU)
        words_n, scale_n = _persist_tile(p_base, s_ptr, s_cols, rn_n, N, KW, N_GROUPS,
                                         tn < n_tiles)
        if RESID:  # tile t + G's residual rows (rows past N: masked off)
            if DEPTH == 2:
                resid_n = _gemv_resid(out_ptr, rm, rn1, M, N, True)
            else:
                resid_n = _gemv_resid(out_ptr, rm, rn_n, M, N, True)
        else:
            resid_n = resid
        sums = _half_sums_of_word_pairs(words, pa, pb, pc, pd, F16, X16)
        acc = tl.sum(sums, axis=3) * scale[None, :, :]
        _gemv_store(tl.sum(acc_prev, axis=2), out_ptr, rm, rn_prev, M, N, SWIGLU, rstd,
                    _if(resid_prev, RESID))
        acc_prev = acc
        rn_prev = rn
        resid_prev = resid
        if DEPTH == 2:
            rn, words, scale = rn1, words1, scale1
            rn1, words1, scale1 = rn_n, words_n, scale_n
        else:
            rn, words, scale = rn_n, words_n, scale_n
        resid = resid_n
    _gemv_store(tl.sum(acc_prev, axis=2), out_ptr, rm, rn_prev, M, N, SWIGLU, rstd,
                _if(resid_prev, RESID))


@kiln.jit
def _if(value, ON: tl.constexpr):
    """value, or None where ON is false."""
    if ON:
        return value
    return None


@kiln.jit
def _persist_tile(p_base, s_ptr, s_cols, rn, N, KW, N_GROUPS, ok):
    """The int4 words [1, R, C, V] and group scales [R, C] of weight rows rn (ok: a scalar,
    false past the last tile; rows past N read row N - 1, never stored: a min, not the
    remainder's dozen instructions a row and tile)."""
    rows = tl.minimum(rn, N - 1)
    words = tl.load(p_base + rows[None, :, None, None] * KW, mask=ok,
                    eviction_policy="evict_first")
    scale = tl.load(s_ptr + rows[:, None] * N_GROUPS + s_cols, mask=ok).to(tl.float32)
    return words, scale
