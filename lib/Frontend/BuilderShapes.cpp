//===- BuilderShapes.cpp - Broadcasting and shape ops ------------------===//
//
// This file implements kiln::Builder's numpy broadcasting and its shape ops: expand_dims,
// broadcast_to, reshape, trans, and the splats and stretches the other ops use.
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/Builder.h"

#include "BuilderSupport.h"
#include "kiln/Analysis/AxisInfo.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/APSInt.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace kiln;

//===----------------------------------------------------------------------===//
// Broadcasting and shapes
//===----------------------------------------------------------------------===//

Tile kiln::Builder::splatTo(const Tile &x, ArrayRef<int64_t> shape) {
  Type type = typeOf(x.dtype, shape, true);
  return Tile{SplatOp::create(b, loc, type, x.value), x.dtype, std::nullopt};
}

Tile kiln::Builder::stretchTo(const Tile &x, ArrayRef<int64_t> shape) {
  if (!x.isTile())
    return splatTo(x, shape);
  Tile t = materialize(x);
  // Prepend unit dimensions (numpy rule 1), then stretch the size-1 ones (rule 2).
  while (t.getShape().size() < shape.size()) {
    SmallVector<int64_t> s(t.getShape());
    s.insert(s.begin(), 1);
    t.value = ExpandDimsOp::create(b, loc, typeOf(t.dtype, s, true), t.value, uint32_t(0));
  }
  if (t.getShape() != shape)
    t.value = BroadcastOp::create(b, loc, typeOf(t.dtype, shape, true), t.value);
  return t;
}

std::pair<Tile, Tile> kiln::Builder::broadcast(const Tile &a, const Tile &bb) {
  requireKernel("broadcast");
  Tile x = materialize(a), y = materialize(bb);
  if (!x.isTile() && !y.isTile())
    return {x, y};
  if (!y.isTile())
    return {x, splatTo(y, x.getShape())};
  if (!x.isTile())
    return {splatTo(x, y.getShape()), y};
  int64_t bad = 0;
  auto shape = broadcastShapes(x.getShape(), y.getShape(), bad);
  if (!shape)
    error("cannot broadcast shapes " + fmtShape(x.getShape()) + " and " + fmtShape(y.getShape()) +
          ": expected equal sizes or 1 in dimension " + Twine(bad) + " of the broadcast result");
  return {stretchTo(x, *shape), stretchTo(y, *shape)};
}

Tile kiln::Builder::expandDims(const Tile &x, int axis) {
  requireKernel("expand_dims");
  int rank = x.getShape().size() + 1;
  if (axis < -rank || axis >= rank)
    error("expected expand_dims axis in [" + Twine(-rank) + ", " + Twine(rank) +
          ") for a value of shape " + fmtShape(x.getShape()) + ", found " + Twine(axis));
  if (axis < 0)
    axis += rank;
  if (!x.isTile())
    return splatTo(materialize(x), {1});
  SmallVector<int64_t> shape(x.getShape());
  shape.insert(shape.begin() + axis, 1);
  return Tile{ExpandDimsOp::create(b, loc, typeOf(x.dtype, shape, true), x.value, uint32_t(axis)),
              x.dtype, std::nullopt};
}

Tile kiln::Builder::broadcastTo(const Tile &x, ArrayRef<int64_t> shape) {
  requireKernel("broadcast_to");
  checkShape(shape, "broadcast_to");
  if (!x.isTile())
    return shape.empty() ? materialize(x) : splatTo(materialize(x), shape);
  ArrayRef<int64_t> src = x.getShape();
  if (src.size() != shape.size())
    error("cannot broadcast shape " + fmtShape(src) + " to " + fmtShape(shape) +
          ": expected rank " + Twine(shape.size()) + ", found " + Twine(src.size()));
  for (auto [i, s] : llvm::enumerate(src))
    if (s != shape[i] && s != 1)
      error("cannot broadcast shape " + fmtShape(src) + " to " + fmtShape(shape) +
            ": expected dimension " + Twine(i) + " to be 1 or " + Twine(shape[i]) + ", found " +
            Twine(s));
  return stretchTo(x, shape);
}

Tile kiln::Builder::reshape(const Tile &x, ArrayRef<int64_t> shape, bool canReorder) {
  requireKernel("reshape");
  if (shape.empty())
    error("expected a non-empty shape for reshape, found []");
  checkShape(shape, "reshape");
  int64_t numel = 1, srcNumel = 1;
  for (int64_t d : shape)
    numel *= d;
  for (int64_t d : x.getShape())
    srcNumel *= d;
  if (numel != srcNumel)
    error("cannot reshape " + fmtShape(x.getShape()) + " (" + Twine(srcNumel) + " elements) to " +
          fmtShape(shape) + " (" + Twine(numel) +
          " elements): expected the same number of elements");
  if (!x.isTile())
    return splatTo(materialize(x), shape);
  return Tile{ReshapeOp::create(b, loc, typeOf(x.dtype, shape, true), x.value, canReorder), x.dtype,
              std::nullopt};
}

Tile kiln::Builder::trans(const Tile &x, ArrayRef<int32_t> order) {
  requireKernel("trans");
  SmallVector<int32_t> perm(order);
  if (perm.empty())
    perm = {1, 0};
  ArrayRef<int64_t> src = x.getShape();
  auto fmtOrder = [&] {
    std::string s = "(";
    for (auto [i, d] : llvm::enumerate(perm))
      s += (i ? ", " : "") + std::to_string(d);
    return s + ")";
  };
  if (!x.isTile() || perm.size() != src.size())
    error("expected trans order " + fmtOrder() + " to list the " + Twine(src.size()) +
          " dimensions of shape " + fmtShape(src));
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int32_t d : perm) {
    if (d < 0 || d >= int32_t(perm.size()) || seen[d])
      error("expected trans order to be a permutation of 0.." + Twine(perm.size() - 1) +
            ", found " + fmtOrder());
    seen[d] = true;
    shape.push_back(src[d]);
  }
  return Tile{TransOp::create(b, loc, typeOf(x.dtype, shape, true), x.value, perm), x.dtype,
              std::nullopt};
}
