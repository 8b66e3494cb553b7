//===- BuilderSort.cpp - Sorting and counting in the Kiln Builder ---------===//
//
// This file implements kiln::Builder's sort, topk and histogram with the semantics of Triton
// 3.6, composed of ops that both backends already lower. sort is a bitonic sorting network
// over the last dimension, run on the rows viewed as hypercubes [R, 2, ..., 2] (one reshape in,
// one out): each compare-exchange step finds every element's partner by the xor of its pair
// along one dimension and keeps or swaps by a comparison, so the result is always a
// permutation of each row, bit for bit.
// topk is the bitonic top-k of Triton (and of Shanbhag et al., "Efficient Top-K Query
// Processing on Massively Parallel Hardware"): runs of k sorted in alternating orders, then
// halving merges that keep the larger of two opposite runs elementwise. histogram compares
// the values with the bins and counts the matches.
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/Builder.h"

#include "BuilderSupport.h"

#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;

Tile kiln::Builder::bitonicMerge(const Tile &cube, int bits, int runBits, bool descending) {
  SmallVector<int64_t> shape(cube.getShape());
  Tile y = cube;
  for (int bit = runBits - 1; bit >= 0; --bit) {
    // Partners differ in bit `bit` of their position: they face each other along `axis`.
    int axis = bits - bit;
    Tile partner = pairPartner(y, axis);
    Tile isRight = eq(indexAlong(*this, 2, shape, axis), intConst(1));
    Tile left = selectBits(b, loc, isRight, partner, y);
    Tile right = selectBits(b, loc, isRight, y, partner);
    // Swap when the pair is out of order: left > right in an ascending run. A NaN compares
    // false and stays where it is; no value of a pair is ever lost or duplicated.
    Tile swap = gt(left, right);
    if (runBits < bits) {
      // The run holding a position descends when bit runBits of the position is set.
      Tile down = eq(indexAlong(*this, 2, shape, bits - runBits), intConst(1));
      swap = bitXor(swap, descending ? logicalNot(down) : down);
    } else if (descending) {
      swap = logicalNot(swap);
    }
    y = selectBits(b, loc, swap, partner, y);
  }
  return y;
}

/// `x` viewed as [rows, 2, ..., 2]: its rows of 2^bits elements (the last dimension) as a
/// hypercube, so that every step of a network is a reduction along one dimension.
static Tile toCube(kiln::Builder &bld, const Tile &x, int bits) {
  SmallVector<int64_t> cube{numElements(x.getShape()) >> bits};
  cube.append(bits, 2);
  return bld.reshape(x, cube);
}

/// The last dimension of `x`, the only one Triton 3.6 sorts along: `dim` must be absent,
/// rank - 1 or -1 (`what` names the op in the error).
static void checkLastDim(kiln::Builder &bld, const Tile &x, std::optional<int> dim,
                         StringRef what) {
  int rank = x.getShape().size();
  if (dim && *dim != rank - 1 && *dim != -1)
    bld.error("expected " + what + " along the last dimension of " + describe(x) + " (dim None, " +
              Twine(rank - 1) + " or -1, as Triton supports), found dim " + Twine(*dim));
}

Tile kiln::Builder::sort(const Tile &x, std::optional<int> dim, bool descending) {
  requireNumberTile(x, "sort");
  checkLastDim(*this, x, dim, "sort");
  int bits = llvm::Log2_64(x.getShape().back());
  Tile cube = toCube(*this, materialize(x), bits);
  for (int run = 1; run <= bits; ++run)
    cube = bitonicMerge(cube, bits, run, descending);
  return reshape(cube, x.getShape());
}

Tile kiln::Builder::topk(const Tile &x, int64_t k, std::optional<int> dim) {
  requireNumberTile(x, "topk");
  checkLastDim(*this, x, dim, "topk");
  SmallVector<int64_t> shape(x.getShape());
  int64_t n = shape.back();
  if (k < 1 || k > n || !llvm::isPowerOf2_64(k))
    error("expected topk's k to be a power of two in [1, " + Twine(n) + "] for " + describe(x) +
          ", found " + Twine(k));
  // Runs of k sorted in alternating orders (descending ones when k == n).
  int bits = llvm::Log2_64(n), kBits = llvm::Log2_64(k);
  Tile cube = toCube(*this, materialize(x), bits);
  for (int run = 1; run <= kBits; ++run)
    cube = bitonicMerge(cube, bits, run, /*descending=*/true);
  // Each halving keeps, elementwise, the larger of two neighbouring runs of opposite orders
  // (the dimension of bit kBits): a bitonic run holding the k largest of both, which the
  // merge sorts.
  for (; bits > kBits; --bits) {
    Tile halves = max(cube, bits - kBits);
    cube = halves.dtype == x.dtype ? halves : cast(halves, x.dtype);
    cube = bitonicMerge(cube, bits - 1, kBits, /*descending=*/true);
  }
  shape.back() = k;
  return reshape(cube, shape);
}

Tile kiln::Builder::histogram(const Tile &x, int64_t numBins, std::optional<Tile> mask) {
  requireKernel("histogram");
  if (!x.isTile() || x.getShape().size() != 1 || !x.dtype.isInt())
    error("expected a 1-D integer tile for histogram (as Triton), found " + describe(x));
  if (numBins < 1 || !llvm::isPowerOf2_64(numBins))
    error("expected histogram's num_bins to be a power of two, found " + Twine(numBins));
  int64_t n = x.getShape()[0];
  checkShape({n, numBins}, "histogram's comparison of values and bins");
  // hit[i, j] = (x[i] == j): a value outside [0, num_bins) matches no bin.
  Tile hit = eq(expandDims(x, 1), expandDims(arange(0, numBins), 0));
  if (mask) {
    if (mask->dtype != DType::int1())
      error("expected an int1 mask for histogram, found " + describe(*mask));
    hit = bitAnd(hit, expandDims(broadcastTo(*mask, {n}), 1));
  }
  return sum(hit, 0);
}
