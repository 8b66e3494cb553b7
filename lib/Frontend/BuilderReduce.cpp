//===- BuilderReduce.cpp - Reductions in the Kiln Builder -----------------===//
//
// This file implements the Builder's reductions with Triton's semantics: tl.reduce with a
// user combine function over several inputs, and sum / max / min / argmax / argmin / xor_sum
// built on it. Each becomes one kiln.reduce whose region holds the combine function.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Frontend/Builder.h"

using namespace mlir;
using namespace kiln;

int kiln::Builder::combineInputs(ArrayRef<Tile> inputs, int axis, StringRef noun, StringRef verb) {
  requireKernel(noun == "scan" ? "a scan" : "a reduction");
  if (inputs.empty())
    error("expected at least one tile to " + verb);
  for (const Tile &t : inputs)
    if (!t.isTile())
      error("expected a tile to " + verb + ", found a scalar of " + t.dtype.str());
  auto fmt = [](ArrayRef<int64_t> s) {
    return "[" + llvm::join(llvm::map_range(s, [](int64_t d) { return std::to_string(d); }), ", ") +
           "]";
  };
  ArrayRef<int64_t> shape = inputs[0].getShape();
  for (const Tile &t : inputs)
    if (t.getShape() != shape)
      error("expected the tiles of a " + noun + " to share one shape, found " + fmt(shape) +
            " and " + fmt(t.getShape()));
  int rank = shape.size();
  if (axis < -rank || axis >= rank)
    error("expected a " + noun + " axis in [" + Twine(-rank) + ", " + Twine(rank) + "), found " +
          Twine(axis));
  return axis < 0 ? axis + rank : axis;
}

void kiln::Builder::buildCombiner(Region &region, ArrayRef<Tile> inputs, const CombineBody &combine,
                                  llvm::function_ref<void(ValueRange)> terminate) {
  OpBuilder::InsertionGuard guard(b);
  Block *block = b.createBlock(&region);
  SmallVector<Tile> acc, next;
  for (unsigned half = 0; half < 2; ++half)
    for (const Tile &t : inputs) {
      Type elem = llvm::cast<RankedTensorType>(t.value.getType()).getElementType();
      Tile arg{block->addArgument(elem, loc), t.dtype, std::nullopt};
      (half ? next : acc).push_back(arg);
    }
  std::vector<Tile> out = combine(acc, next);
  if (out.size() != inputs.size())
    error("expected the combine function to return " + Twine(inputs.size()) + " values, found " +
          Twine(out.size()));
  SmallVector<Value> yielded;
  for (auto [i, t] : llvm::enumerate(out)) {
    if (t.isTile())
      error("expected the combine function to return scalars, found a tile");
    Tile v = t.isWeak() ? cast(t, inputs[i].dtype) : t;
    if (v.dtype != inputs[i].dtype)
      error("expected combine result " + Twine(i) + " of dtype " + inputs[i].dtype.str() +
            ", found " + v.dtype.str());
    yielded.push_back(v.value);
  }
  terminate(yielded);
}

std::vector<Tile> kiln::Builder::reduce(ArrayRef<Tile> inputsIn, int axis,
                                        const CombineBody &combine, bool keepDims) {
  std::vector<Tile> widened = widenFp8(inputsIn);
  ArrayRef<Tile> inputs = widened;
  axis = combineInputs(inputs, axis, "reduction", "reduce");
  SmallVector<Value> srcs;
  SmallVector<Type> resultTypes;
  SmallVector<int64_t> resultShape(inputs[0].getShape());
  resultShape.erase(resultShape.begin() + axis);
  for (const Tile &t : inputs) {
    srcs.push_back(materialize(t).value);
    Type elem = llvm::cast<RankedTensorType>(t.value.getType()).getElementType();
    resultTypes.push_back(resultShape.empty() ? elem
                                              : Type(RankedTensorType::get(resultShape, elem)));
  }
  auto op = ReduceOp::create(b, loc, resultTypes, srcs, uint32_t(axis));
  buildCombiner(op.getCombineOp(), inputs, combine,
                [&](ValueRange yielded) { ReduceReturnOp::create(b, loc, yielded); });
  std::vector<Tile> results;
  for (auto [i, t] : llvm::enumerate(inputs)) {
    Tile r{op->getResult(i), t.dtype, std::nullopt};
    results.push_back(keepDims ? expandDims(r, axis) : r);
  }
  return results;
}

Tile kiln::Builder::sum(const Tile &x, int axis, bool keepDims) {
  Tile in = x;
  if (x.dtype.isInt() && !x.dtype.isBool() && x.dtype.getBitWidth() < 32)
    in = cast(x, x.dtype.isSigned() ? DType::int32() : DType::uint32());
  else if (x.dtype.isBool())
    in = cast(x, DType::int32());
  return sumInDType(in, axis, keepDims);
}

Tile kiln::Builder::sumInDType(const Tile &x, int axis, bool keepDims) {
  if (x.dtype.isPointer())
    error("expected a tile of numbers to sum, found " + x.dtype.str());
  if (x.dtype.isBool()) // (modulo 2, as Triton's sum with dtype=int1)
    return reduce(
        {x}, axis,
        [&](ArrayRef<Tile> a, ArrayRef<Tile> n) { return std::vector<Tile>{bitXor(a[0], n[0])}; },
        keepDims)[0];
  return reduce(
      {x}, axis,
      [&](ArrayRef<Tile> a, ArrayRef<Tile> n) { return std::vector<Tile>{add(a[0], n[0])}; },
      keepDims)[0];
}

Tile kiln::Builder::max(const Tile &x, int axis, bool keepDims) {
  return reduce(
      {x}, axis,
      [&](ArrayRef<Tile> a, ArrayRef<Tile> n) { return std::vector<Tile>{maximum(a[0], n[0])}; },
      keepDims)[0];
}

Tile kiln::Builder::min(const Tile &x, int axis, bool keepDims) {
  return reduce(
      {x}, axis,
      [&](ArrayRef<Tile> a, ArrayRef<Tile> n) { return std::vector<Tile>{minimum(a[0], n[0])}; },
      keepDims)[0];
}

Tile kiln::Builder::xorSum(const Tile &x, int axis, bool keepDims) {
  if (!x.dtype.isInt())
    error("expected an integer tile for xor_sum, found " + x.dtype.str());
  return reduce(
      {x}, axis,
      [&](ArrayRef<Tile> a, ArrayRef<Tile> n) { return std::vector<Tile>{bitXor(a[0], n[0])}; },
      keepDims)[0];
}

Tile kiln::Builder::argExtreme(const Tile &x, int axis, bool keepDims, bool greater) {
  if (!x.isTile())
    error("expected a tile for argmax/argmin, found a scalar of " + x.dtype.str());
  int rank = x.getShape().size();
  int ax = axis < 0 ? axis + rank : axis;
  if (ax < 0 || ax >= rank)
    error("expected a reduction axis in [" + Twine(-rank) + ", " + Twine(rank) + "), found " +
          Twine(axis));
  // The index along `axis` of every element.
  Tile idx = arange(0, x.getShape()[ax]);
  for (int d = 0; d < rank; ++d)
    if (d != ax)
      idx = expandDims(idx, d);
  idx = broadcastTo(idx, x.getShape());
  return reduce(
      {x, idx}, ax,
      [&](ArrayRef<Tile> a, ArrayRef<Tile> n) {
        // Keep the accumulator when it is strictly better, or equal with a lower
        // index (the first occurrence wins, as in Triton).
        Tile better = greater ? gt(a[0], n[0]) : lt(a[0], n[0]);
        Tile tie = logicalAnd(eq(a[0], n[0]), lt(a[1], n[1]));
        Tile keep = logicalOr(better, tie);
        return std::vector<Tile>{where(keep, a[0], n[0]), where(keep, a[1], n[1])};
      },
      keepDims)[1];
}

Tile kiln::Builder::argmax(const Tile &x, int axis, bool keepDims) {
  return argExtreme(x, axis, keepDims, /*greater=*/true);
}

Tile kiln::Builder::argmin(const Tile &x, int axis, bool keepDims) {
  return argExtreme(x, axis, keepDims, /*greater=*/false);
}
