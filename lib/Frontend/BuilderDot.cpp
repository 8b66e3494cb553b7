//===- BuilderDot.cpp - tl.dot in the Kiln Builder ------------------------===//
//
// This file implements Builder::dot with the rules of triton.language.dot (semantic.dot,
// Triton 3.6): two 2-D tiles (or two 3-D tiles with one batch dimension in front) whose K
// dimensions match, every matrix dimension a power of two of at least 16, operands of one
// dtype with a fixed set of accumulator dtypes, and an accumulator that is either given (same
// shape and dtype as the result) or zeros. A 2-D dot is one kiln.dot. A batched dot is one
// 2-D kiln.dot per batch element, each on the tensor-core path of any 2-D dot: the operands
// of element i are taken out of the batch dimension bit for bit (pickAlong) and the products
// put back with selects, so that no backend lowers a 3-D dot.
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/Builder.h"

#include "BuilderSupport.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;

namespace {

/// The smallest tile dimension of a dot (Triton's min_dot_size on NVIDIA GPUs).
constexpr int64_t kMinDotDim = 16;

} // namespace

Tile kiln::Builder::dot(const Tile &a, const Tile &bb, std::optional<Tile> acc,
                        StringRef inputPrecision, DType outDType, int32_t maxNumImpreciseAcc) {
  requireKernel("dot");
  // Shapes: 2-D tiles with matching K, or 3-D tiles [B, M, K] x [B, K, N] with one B.
  size_t rank = a.isTile() ? a.getShape().size() : 0;
  if (!a.isTile() || !bb.isTile() || rank != bb.getShape().size() || (rank != 2 && rank != 3))
    error("expected two 2-D tiles, or two 3-D tiles (a batched dot), for dot, found " +
          describe(a) + " and " + describe(bb));
  bool batched = rank == 3;
  int64_t batch = batched ? a.getShape()[0] : 1;
  if (batched && bb.getShape()[0] != batch)
    error("expected the batch dimensions of dot to match (a is B x M x K, b is B x K x N), "
          "found a " +
          describe(a) + " (B = " + Twine(batch) + ") and b " + describe(bb) +
          " (B = " + Twine(bb.getShape()[0]) + ")");
  ArrayRef<int64_t> aMat = a.getShape().take_back(2), bMat = bb.getShape().take_back(2);
  int64_t m = aMat[0], k = aMat[1], kb = bMat[0], n = bMat[1];
  if (k != kb)
    error("expected the K dimensions of dot to match (a is " + Twine(batched ? "B x " : "") +
          "M x K, b is " + Twine(batched ? "B x " : "") + "K x N), found a " + describe(a) +
          " (K = " + Twine(k) + ") and b " + describe(bb) + " (K = " + Twine(kb) + ")");
  // Triton on NVIDIA GPUs: M and N from 1, K from 16 (tile dimensions are powers of two).
  for (auto [name, d] : {std::pair<const char *, int64_t>{"M", m}, {"N", n}, {"K", k}})
    if ((name[0] == 'K' && d < kMinDotDim) || !llvm::isPowerOf2_64(d))
      error("expected dot dimensions that are powers of two, K >= " + Twine(kMinDotDim) +
            ", found " + name + " = " + Twine(d) + " (a " + describe(a) + ", b " + describe(bb) +
            ")");

  // Dtypes: one input dtype (fp8 formats in any pairing, as Triton: e4m3 x e5m2 products of
  // FP8 training's backward); the result dtype follows from it and out_dtype.
  if (a.dtype != bb.dtype && !(a.dtype.isFp8() && bb.dtype.isFp8()))
    error("expected a and b of one dtype for dot, found " + a.dtype.str() + " and " +
          bb.dtype.str());
  DType in = a.dtype, result;
  if (in == DType::int8()) {
    // Triton: int8 products accumulate in int32 whatever out_dtype says (its test_dot3d passes
    // out_dtype=tl.int8 and reads int32).
    result = DType::int32();
  } else if (in == DType::fp16()) {
    if (outDType != DType::fp32() && outDType != DType::fp16())
      error("expected out_dtype fp32 or fp16 for dot of fp16 tiles, found " + outDType.str());
    result = outDType;
  } else if (in == DType::bf16() || in == DType::fp32() || in.isFp8()) {
    if (outDType != DType::fp32())
      error("expected out_dtype fp32 for dot of " + in.str() + " tiles, found " + outDType.str() +
            (outDType == DType::bf16() ? " (cast the fp32 result with .to(tl.bfloat16))" : ""));
    result = DType::fp32();
  } else {
    error("expected dot operands of dtype fp16, bf16, fp32, fp8e4nv, fp8e5 or int8, found " +
          in.str());
  }

  // Precision of fp32 inputs (Triton lower-cases the name).
  std::string prec = inputPrecision.lower();
  std::optional<InputPrecision> precision =
      prec.empty() ? std::optional<InputPrecision>(InputPrecision::tf32)
                   : symbolizeInputPrecision(prec);
  if (!precision)
    error("expected input_precision 'tf32', 'tf32x3' or 'ieee' for dot, found '" + inputPrecision +
          "'");
  // Only fp32 inputs have a precision to choose; Triton ignores it for the others.
  if (in != DType::fp32())
    precision = InputPrecision::tf32;
  if (maxNumImpreciseAcc < 0)
    error("expected max_num_imprecise_acc >= 0 for dot, found " + Twine(maxNumImpreciseAcc));

  // The accumulator: given (same shape and dtype as the result), or zeros.
  SmallVector<int64_t, 3> shape{m, n};
  if (batched)
    shape.insert(shape.begin(), batch);
  if (acc &&
      (!acc->isTile() || acc->getShape() != ArrayRef<int64_t>(shape) || acc->dtype != result))
    error("expected the dot accumulator to be " + result.str() + fmtShape(shape) + ", found " +
          describe(*acc));
  // An fp16 result (out_dtype=tl.float16) accumulates in fp32 and is rounded once a dot:
  // the tensor cores' fp32 accumulators (wgmma, mma.sync) take it, where an fp16 accumulator
  // left the dot to scalar FMAs (0 mma and 128 fma.rn.f16 for 128x128x64 on sm_90a). Triton
  // accumulates in fp16; the fp32 sum is at least as accurate.
  DType accDType = result == DType::fp16() ? DType::fp32() : result;
  auto dot2d = [&](const Tile &x, const Tile &y, std::optional<Tile> c) {
    Tile init = c ? materialize(*c) : zeros({m, n}, accDType);
    if (init.dtype != accDType)
      init = materialize(cast(init, accDType));
    Tile r;
    if (m < kMinDotDim || n < kMinDotDim) {
      // M or N under the tensor cores' 16 (a decode step's one query row, Triton's test_dot
      // at M = 1 or N = 2): the products summed over K in the accumulator's dtype, on the
      // CUDA cores (Triton pads such a dot onto the tensor cores; fp32 inputs are then exact
      // here where Triton rounds them to TF32 by default).
      Tile x3 = broadcastTo(expandDims(cast(x, accDType), 2), {m, k, n});
      Tile y3 = broadcastTo(expandDims(cast(y, accDType), 0), {m, k, n});
      r = add(sumInDType(mul(x3, y3), 1), init);
    } else if (*precision == InputPrecision::tf32x3) {
      // Triton's three TF32 passes: each fp32 operand is big + small, big its value with the
      // 13 mantissa bits TF32 drops cleared (exact in TF32), small = x - big (exact in fp32);
      // a @ b ~ a_small @ b_big + a_big @ b_small + a_big @ b_big, each a TF32 dot on the
      // tensor cores (computed as exact fp32 before: scalar FMAs, 128 fma.rn.f32 for
      // 128x128x64 on sm_90a). The dropped a_small @ b_small is ~2^-22 of the product.
      auto split = [&](const Tile &v) {
        Tile big =
            bitcast(bitAnd(bitcast(v, DType::int32()), intConst(int64_t(int32_t(0xFFFFE000)))),
                    DType::fp32());
        return std::pair<Tile, Tile>{materialize(big), materialize(sub(v, big))};
      };
      auto [xBig, xSmall] = split(x);
      auto [yBig, ySmall] = split(y);
      Value acc3 = init.value;
      for (auto [p, q] : {std::pair{xSmall, yBig}, {xBig, ySmall}, {xBig, yBig}})
        acc3 = DotOp::create(b, loc, p.value, q.value, acc3, InputPrecision::tf32,
                             uint32_t(maxNumImpreciseAcc))
                   .getResult();
      r = Tile{acc3, accDType, std::nullopt};
    } else {
      auto op = DotOp::create(b, loc, x.value, y.value, init.value, *precision,
                              uint32_t(maxNumImpreciseAcc));
      r = Tile{op.getResult(), accDType, std::nullopt};
    }
    return accDType == result ? r : materialize(cast(r, result));
  };
  if (!batched)
    return dot2d(a, bb, acc);
  if (batch == 1) {
    std::optional<Tile> c;
    if (acc)
      c = reshape(*acc, {m, n});
    return reshape(dot2d(reshape(a, {m, k}), reshape(bb, {k, n}), c), shape);
  }

  // Batched: out[i] = a[i] @ b[i] + acc[i], one 2-D dot per batch element i.
  checkShape(shape, "dot");
  auto element = [&](const Tile &x, int64_t i) {
    Tile chosen = eq(indexAlong(*this, batch, x.getShape(), 0), intConst(i));
    return pickAlong(x, chosen, 0).first;
  };
  Tile batchIndex = indexAlong(*this, batch, shape, 0);
  Tile out;
  for (int64_t i = 0; i < batch; ++i) {
    std::optional<Tile> c;
    if (acc)
      c = element(materialize(*acc), i);
    Tile d = broadcastTo(expandDims(dot2d(element(a, i), element(bb, i), c), 0), shape);
    out = i == 0 ? d : selectBits(b, loc, eq(batchIndex, intConst(i)), d, out);
  }
  return out;
}
