//===- BuilderPermute.cpp - Joins, splits and permutations ----------------===//
//
// This file implements kiln::Builder's join, split, interleave, cat, flip and gather with the
// semantics of Triton 3.6. None of them is a dialect op: each is composed of ops that both
// backends already lower (make_range, expand_dims, broadcast, reshape, arith.select and
// kiln.reduce), and each moves the bits of its values without computing on them, so -0.0 and
// NaN payloads come out as they went in. A value is taken out of a dimension by a reduction
// whose combine function selects (pickAlong), or by the xor of a pair (pairPartner), never by
// a sum.
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/Builder.h"

#include "BuilderSupport.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;

void kiln::Builder::requireNumberTile(const Tile &x, StringRef what) {
  requireKernel(what);
  if (!x.isTile())
    error("expected a tile for " + what + ", found " + describe(x));
  if (x.dtype.isPointer())
    error("expected a tile of numbers for " + what + ", found " + describe(x));
}

std::pair<Tile, Tile> kiln::Builder::pickAlong(const Tile &x, const Tile &chosen, int axis) {
  // Combine (v, c) pairs as (c_acc ? v_acc : v_new, c_acc | c_new): with at most one chosen
  // element this is associative and commutative, so any reduction tree returns that element.
  Tile bits = x.dtype.isFloat() ? bitcast(x, bitsOf(x.dtype)) : materialize(x);
  std::vector<Tile> r = reduce({bits, chosen}, axis, [&](ArrayRef<Tile> acc, ArrayRef<Tile> next) {
    return std::vector<Tile>{selectBits(b, loc, acc[1], acc[0], next[0]), bitOr(acc[1], next[1])};
  });
  Tile value = x.dtype.isFloat() ? bitcast(r[0], x.dtype) : r[0];
  return {value, r[1]};
}

Tile kiln::Builder::pairPartner(const Tile &x, int axis) {
  // a ^ (a ^ b) = b: the xor of each pair, broadcast back over it, swaps the pair's bits.
  Tile bits = x.dtype.isFloat() ? bitcast(x, bitsOf(x.dtype)) : materialize(x);
  Tile both = xorSum(bits, axis, /*keepDims=*/true);
  Tile partner = bitXor(bits, both);
  return x.dtype.isFloat() ? bitcast(partner, x.dtype) : partner;
}

//===----------------------------------------------------------------------===//
// join, split, interleave, cat
//===----------------------------------------------------------------------===//

Tile kiln::Builder::join(const Tile &a, const Tile &bb) {
  requireKernel("join");
  Tile x = a, y = bb;
  // A weak literal takes the other operand's dtype, as it would in `a + 1`.
  if (x.isWeak() && !y.isWeak())
    x = cast(x, y.dtype);
  else if (y.isWeak() && !x.isWeak())
    y = cast(y, x.dtype);
  x = materialize(x);
  y = materialize(y);
  if (x.dtype != y.dtype)
    error("expected join operands of one dtype, found " + describe(x) + " and " + describe(y));
  std::tie(x, y) = broadcast(x, y);
  bool scalars = !x.isTile();
  if (scalars) {
    x = expandDims(x, 0);
    y = expandDims(y, 0);
  }
  SmallVector<int64_t> shape(x.getShape());
  shape.push_back(2);
  checkShape(shape, "join");
  int last = shape.size() - 1;
  Tile second = eq(indexAlong(*this, 2, shape, last), intConst(1));
  Tile out = selectBits(b, loc, second, broadcastTo(expandDims(y, last), shape),
                        broadcastTo(expandDims(x, last), shape));
  return scalars ? reshape(out, {2}) : out;
}

std::pair<Tile, Tile> kiln::Builder::split(const Tile &a) {
  requireKernel("split");
  if (!a.isTile() || a.getShape().back() != 2)
    error("expected a tile whose last dimension is 2 for split, found " + describe(a));
  requireNumberTile(a, "split");
  int last = a.getShape().size() - 1;
  Tile idx = indexAlong(*this, 2, a.getShape(), last);
  Tile first = pickAlong(a, eq(idx, intConst(0)), last).first;
  Tile second = pickAlong(a, eq(idx, intConst(1)), last).first;
  return {first, second};
}

Tile kiln::Builder::interleave(const Tile &a, const Tile &bb) {
  requireKernel("interleave");
  Tile c = join(a, bb);
  ArrayRef<int64_t> shape = c.getShape();
  if (shape.size() == 1)
    return c;
  SmallVector<int64_t> merged(shape.drop_back(2));
  merged.push_back(2 * shape[shape.size() - 2]);
  return reshape(c, merged);
}

Tile kiln::Builder::cat(const Tile &a, const Tile &bb, bool canReorder) {
  requireKernel("cat");
  if (!canReorder)
    error("expected can_reorder=True for cat: as in Triton, cat may reorder the elements and "
          "requires it (reshape and join keep the order)");
  if (!a.isTile() || !bb.isTile() || a.getShape().size() != 1 || bb.getShape().size() != 1)
    error("expected two 1-D tiles for cat, found " + describe(a) + " and " + describe(bb));
  if (a.dtype != bb.dtype || a.getShape() != bb.getShape())
    error("expected cat operands of one dtype and shape (the result's size must be a power of "
          "two), found " +
          describe(a) + " and " + describe(bb));
  int64_t n = a.getShape()[0];
  SmallVector<int64_t> shape{2, n};
  checkShape(shape, "cat");
  Tile second = eq(indexAlong(*this, 2, shape, 0), intConst(1));
  Tile rows = selectBits(b, loc, second, broadcastTo(expandDims(bb, 0), shape),
                         broadcastTo(expandDims(a, 0), shape));
  return reshape(rows, {2 * n});
}

//===----------------------------------------------------------------------===//
// flip, gather
//===----------------------------------------------------------------------===//

Tile kiln::Builder::flip(const Tile &x, std::optional<int> dim) {
  requireNumberTile(x, "flip");
  ArrayRef<int64_t> shape = x.getShape();
  int rank = shape.size();
  int d = dim.value_or(rank - 1);
  if (d < -rank || d >= rank)
    error("expected a flip dim in [" + Twine(-rank) + ", " + Twine(rank) + ") for " + describe(x) +
          ", found " + Twine(d));
  if (d < 0)
    d += rank;
  // Reversing an index of n = 2^k flips its k bits. In the view [P, 2, ..., 2, Q] of x (k
  // dimensions of 2 for `d`), swapping the pairs along each of them flips each bit.
  int64_t n = shape[d];
  if (n == 1)
    return x;
  int k = llvm::Log2_64(n);
  SmallVector<int64_t> cube{numElements(shape.take_front(d))};
  cube.append(k, 2);
  cube.push_back(numElements(shape.drop_front(d + 1)));
  Tile y = reshape(x, cube);
  for (int axis = 1; axis <= k; ++axis)
    y = pairPartner(y, axis);
  return reshape(y, shape);
}

Tile kiln::Builder::gather(const Tile &src, const Tile &index, int axis) {
  requireNumberTile(src, "gather's src");
  if (!index.isTile() || !index.dtype.isInt())
    error("expected an integer tile as gather's index, found " + describe(index));
  ArrayRef<int64_t> srcShape = src.getShape(), idxShape = index.getShape();
  int rank = srcShape.size();
  if (int(idxShape.size()) != rank)
    error("expected gather's index to have the rank of src " + describe(src) + ", found " +
          describe(index));
  if (axis < -rank || axis >= rank)
    error("expected a gather axis in [" + Twine(-rank) + ", " + Twine(rank) + "), found " +
          Twine(axis));
  if (axis < 0)
    axis += rank;
  for (int d = 0; d < rank; ++d)
    if (d != axis && idxShape[d] != srcShape[d])
      error("expected gather's index to match src in every dimension but axis " + Twine(axis) +
            ", found " + describe(index) + " and " + describe(src) + " (dimension " + Twine(d) +
            ")");
  // One-hot along a new axis after `axis`: [..., I, S, ...], chosen where index == position.
  int64_t size = srcShape[axis];
  SmallVector<int64_t> full(idxShape);
  full.insert(full.begin() + axis + 1, size);
  if (numElements(full) > kMaxTileElements && idxShape[axis] > 1) {
    // Too large at once (Triton's test_gather: 256 indices into 128 rows of 64): each half
    // of the index along `axis` gathered on its own, the halves joined back in place.
    SmallVector<int64_t> halves(idxShape);
    halves[axis] /= 2;
    halves.insert(halves.begin() + axis, 2);
    SmallVector<int32_t> toLast;
    for (int d = 0; d <= rank; ++d)
      if (d != axis)
        toLast.push_back(d);
    toLast.push_back(axis);
    auto [lo, hi] = split(trans(reshape(index, halves), toLast));
    Tile joined = join(gather(src, lo, axis), gather(src, hi, axis));
    SmallVector<int32_t> back(rank + 1);
    for (int i = 0; i <= rank; ++i)
      back[toLast[i]] = i;
    return reshape(trans(joined, back), idxShape);
  }
  checkShape(full, "gather's one-hot comparison of index and src positions");
  Tile values = broadcastTo(expandDims(src, axis), full);
  Tile positions = indexAlong(*this, size, full, axis + 1);
  Tile chosen = eq(broadcastTo(expandDims(index, axis + 1), full), positions);
  auto [value, found] = pickAlong(values, chosen, axis + 1);
  return selectBits(b, loc, found, value, zeros(idxShape, src.dtype));
}
