//===- SliceFlow.h - Where a tile's rows or columns go ---------*- C++ -*-===//
//
// Internal to -kiln-pointer-tiles-to-descriptors: whether the slices of a tile along one
// dimension stay apart in everything computed from them and reach memory only through stores
// that mask them out. A load of rows `(start + arange(B)) % M` may then read rows past M as
// zeros (a TMA box past the tensor's end) instead of rows wrapped to the front: the rows that
// differ are never stored (Triton's tutorial matmul wraps its edge tiles' rows and columns
// and masks C's store with `offs_cm < M`, `offs_cn < N`).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_SLICEFLOW_H
#define KILN_LIB_TRANSFORMS_SLICEFLOW_H

#include "kiln/Dialect/Kiln/IR/Dialect.h"

namespace kiln {

/// Whether slice i of the rank-2 tile `v` along `dim` (row i for 0, column i for 1) flows
/// only into slice i of the tiles computed from it, along one dimension each, and out only
/// through stores of such a tile that `storeDrops(store, d)` accepts (their mask drops the
/// slices in question along `d`). It follows kiln.dot (A's rows to the result's rows, B's
/// columns to its columns, C to the result), kiln.trans, element-wise arith/math ops and
/// pure kiln.extern_elementwise, values carried by scf.for and yielded by scf.if; any other
/// use (a reduction, a broadcast, a pointer or mask, an atomic, a call) answers false.
bool slicesOnlyReachDroppingStores(mlir::Value v, int dim,
                                   llvm::function_ref<bool(StoreOp, int)> storeDrops);

/// Whether `a` and `b` are one value, or computed alike by pure ops (same op, attributes
/// and result type, operands alike in turn; a few levels deep): a store's `pid_m * BM`
/// recomputed where its mask is built.
bool computedAlike(mlir::Value a, mlir::Value b);

} // namespace kiln

#endif // KILN_LIB_TRANSFORMS_SLICEFLOW_H
