//===- BuilderDot.cpp - tl.dot in the Kiln Builder ------------------------===//
//
// This file implements Builder::dot with the rules of triton.language.dot (semantic.dot,
// Triton 3.x): two 2-D tiles whose K dimensions match, every dimension a power of two of at
// least 16, operands of one dtype with a fixed set of accumulator dtypes, and an accumulator
// that is either given (same shape and dtype as the result) or zeros. It creates one kiln.dot.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Frontend/Builder.h"

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
  // Shapes: 2-D tiles with matching K.
  if (!a.isTile() || !bb.isTile() || a.getShape().size() != 2 || bb.getShape().size() != 2) {
    bool batched =
        a.isTile() && bb.isTile() && a.getShape().size() == 3 && bb.getShape().size() == 3;
    error("expected two 2-D tiles for dot" +
          Twine(batched ? " (batched 3-D dot is not supported by Kiln yet)" : "") + ", found " +
          describe(a) + " and " + describe(bb));
  }
  int64_t m = a.getShape()[0], k = a.getShape()[1], kb = bb.getShape()[0], n = bb.getShape()[1];
  if (k != kb)
    error("expected the K dimensions of dot to match (a is M x K, b is K x N), found a " +
          describe(a) + " (K = " + Twine(k) + ") and b " + describe(bb) + " (K = " + Twine(kb) +
          ")");
  for (auto [name, d] : {std::pair<const char *, int64_t>{"M", m}, {"N", n}, {"K", k}})
    if (d < kMinDotDim || !llvm::isPowerOf2_64(d))
      error("expected every dot dimension to be a power of two >= " + Twine(kMinDotDim) +
            ", found " + name + " = " + Twine(d) + " (a " + describe(a) + ", b " + describe(bb) +
            ")");

  // Dtypes: one input dtype; the result dtype follows from it and out_dtype.
  if (a.dtype != bb.dtype)
    error("expected a and b of one dtype for dot, found " + a.dtype.str() + " and " +
          bb.dtype.str());
  DType in = a.dtype, result;
  if (in == DType::int8()) {
    // Triton: int8 products accumulate in int32 whatever out_dtype says (fp32 by default).
    if (outDType != DType::int32() && outDType != DType::fp32())
      error("expected out_dtype int32 for dot of int8 tiles, found " + outDType.str());
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
  SmallVector<int64_t, 2> shape{m, n};
  Tile c;
  if (acc) {
    if (!acc->isTile() || acc->getShape() != ArrayRef<int64_t>(shape) || acc->dtype != result)
      error("expected the dot accumulator to be " + result.str() + fmtShape(shape) + ", found " +
            describe(*acc));
    c = materialize(*acc);
  } else {
    c = zeros(shape, result);
  }
  auto op =
      DotOp::create(b, loc, a.value, bb.value, c.value, *precision, uint32_t(maxNumImpreciseAcc));
  return Tile{op.getResult(), result, std::nullopt};
}
