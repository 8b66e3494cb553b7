//===- BuilderSort.cpp - Sorting and counting in the Kiln Builder ---------===//
//
// This file implements kiln::Builder's sort, topk and histogram with the semantics of Triton
// 3.6, composed of ops that both backends already lower. sort is a bitonic sorting network
// over the last dimension: each compare-exchange step views the tile as [A, 2, B] (B the
// distance between partners), finds each element's partner by the xor of its pair, and keeps
// or swaps by a comparison, so the result is always a permutation of each row, bit for bit.
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

Tile kiln::Builder::bitonicMerge(const Tile &x, int64_t n, int64_t size, bool descending) {
  SmallVector<int64_t> shape(x.getShape());
  int64_t total = numElements(shape);
  Tile y = x;
  for (int64_t dist = size / 2; dist >= 1; dist /= 2) {
    // Element (a, t, c) of the view is row position i = (a * 2 dist) mod n + t * dist + c;
    // its partner is i ^ dist, at (a, 1 - t, c).
    int64_t pairs = total / (2 * dist);
    SmallVector<int64_t> view{pairs, 2, dist};
    y = reshape(y, view);
    Tile partner = pairPartner(y);
    Tile isRight = eq(indexAlong(*this, 2, view, 1), intConst(1));
    Tile left = selectBits(b, loc, isRight, partner, y);
    Tile right = selectBits(b, loc, isRight, y, partner);
    // Swap when the pair is out of order: left > right for an ascending run. A NaN compares
    // false and stays where it is; the pair is never duplicated.
    Tile swap = gt(left, right);
    if (size < n) {
      // The run of `size` holding position i descends when bit `size` of i is set, that is
      // bit size / (2 dist) of a (2 dist divides size, and size < n keeps it inside a row).
      Tile run = indexAlong(*this, pairs, {pairs, 1, 1}, 0);
      Tile down = ne(bitAnd(run, intConst(size / (2 * dist))), intConst(0));
      swap = bitXor(swap, descending ? logicalNot(down) : down);
    } else if (descending) {
      swap = logicalNot(swap);
    }
    y = selectBits(b, loc, swap, partner, y);
  }
  return reshape(y, shape);
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
  int64_t n = x.getShape().back();
  Tile y = materialize(x);
  for (int64_t size = 2; size <= n; size *= 2)
    y = bitonicMerge(y, n, size, descending);
  return y;
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
  Tile y = materialize(x);
  for (int64_t size = 2; size <= k; size *= 2)
    y = bitonicMerge(y, n, size, /*descending=*/true);
  // Each halving keeps, elementwise, the larger of two neighbouring runs of opposite orders: a
  // bitonic run holding the k largest of both, which the merge sorts.
  int64_t rows = numElements(shape) / n;
  for (int64_t m = n; m > k; m /= 2) {
    Tile halves = max(reshape(y, {rows * m / (2 * k), 2, k}), 1);
    y = halves.dtype == x.dtype ? halves : cast(halves, x.dtype);
    y = bitonicMerge(y, m / 2, k, /*descending=*/true);
  }
  shape.back() = k;
  return reshape(y, shape);
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
