//===- BuilderScan.cpp - Scans in the Kiln Builder ------------------------===//
//
// This file implements the Builder's scans with Triton's semantics: tl.associative_scan with
// a user combine function over several inputs (one kiln.scan whose region holds the combine
// function, checked like a reduction's), and tl.cumsum / tl.cumprod built on it with the
// dtype rules of triton.language.standard: both compute bf16 in fp32, and cumsum widens
// integers narrower than 32 bits to int32 (signed) or uint32 (unsigned, int1 included).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Frontend/Builder.h"

using namespace mlir;
using namespace kiln;

std::vector<Tile> kiln::Builder::scan(ArrayRef<Tile> inputsIn, int axis, const CombineBody &combine,
                                      bool reverse) {
  std::vector<Tile> widened = widenFp8(inputsIn);
  ArrayRef<Tile> inputs = widened;
  axis = combineInputs(inputs, axis, "scan", "scan");
  SmallVector<Value> srcs;
  SmallVector<Type> resultTypes;
  for (const Tile &t : inputs) {
    srcs.push_back(materialize(t).value);
    resultTypes.push_back(t.value.getType());
  }
  auto op = ScanOp::create(b, loc, resultTypes, srcs, uint32_t(axis), reverse);
  buildCombiner(op.getCombineOp(), inputs, combine,
                [&](ValueRange yielded) { ScanReturnOp::create(b, loc, yielded); });
  std::vector<Tile> results;
  for (auto [i, t] : llvm::enumerate(inputs))
    results.push_back(Tile{op->getResult(i), t.dtype, std::nullopt});
  return results;
}

/// Triton's _promote_bfloat16_to_float32, and the check that a scan input is a tile of
/// numbers.
static DType scanInputDType(const kiln::Builder &builder, const Tile &x, StringRef what) {
  if (!x.isTile())
    builder.error("expected a tile for " + what + ", found a scalar of " + x.dtype.str());
  if (x.dtype.isPointer())
    builder.error("expected a tile of numbers for " + what + ", found " + x.dtype.str());
  return x.dtype == DType::bf16() || x.dtype.isFp8() ? DType::fp32() : x.dtype;
}

Tile kiln::Builder::cumsum(const Tile &x, int axis, bool reverse, std::optional<DType> dtype) {
  requireKernel("cumsum");
  DType in = scanInputDType(*this, x, "cumsum");
  // Triton's _pick_sum_dtype: the requested dtype, else (u)int32 for narrow integers.
  DType acc = in;
  if (dtype)
    acc = *dtype;
  else if (in.isInt() && in.getBitWidth() < 32)
    acc = in.isSigned() ? DType::int32() : DType::uint32();
  if (acc.isPointer())
    error("expected a number dtype for cumsum, found " + acc.str());
  Tile t = cast(x, acc);
  return scan(
      {t}, axis,
      [&](ArrayRef<Tile> a, ArrayRef<Tile> n) { return std::vector<Tile>{add(a[0], n[0])}; },
      reverse)[0];
}

Tile kiln::Builder::cumprod(const Tile &x, int axis, bool reverse) {
  requireKernel("cumprod");
  Tile t = cast(x, scanInputDType(*this, x, "cumprod"));
  return scan(
      {t}, axis,
      [&](ArrayRef<Tile> a, ArrayRef<Tile> n) { return std::vector<Tile>{mul(a[0], n[0])}; },
      reverse)[0];
}
