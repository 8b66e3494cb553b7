//===- PointerTiles.h - Pointer tiles as blocks of a tensor ----*- C++ -*-===//
//
// Internal to -kiln-pointer-tiles-to-descriptors: what a pointer tile, its indices and its
// mask are, read from the IR (`splat(base) + idx0[:, None] * s0 + idx1[None, :]`, indices
// `start + arange` or `(start + arange) % M`, masks conjunctions of `idx_d < bound_d`), and
// the recipe fields the launcher encodes a tensor map from.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_POINTERTILES_H
#define KILN_LIB_TRANSFORMS_POINTERTILES_H

#include "kiln/Dialect/Kiln/IR/Dialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <array>
#include <limits>
#include <optional>

namespace kiln::pointer_tiles {

using namespace mlir;

constexpr int64_t kUnbounded = std::numeric_limits<int32_t>::max(); // an unmasked extent

/// The integer constant `v` is, scalar or splat (arith.constant, kiln.splat of one).
std::optional<int64_t> constInt(Value v);

/// A scalar or a constant.
struct Scalar {
  Value value; // null: `constant`
  int64_t constant = 0;
  static Scalar of(Value v) {
    if (auto c = constInt(v))
      return {Value(), *c};
    return {v, 0};
  }
  bool isConst() const { return !value; }
};

/// One dimension of a pointer tile: idx[i] = start + i (mod wrap), times stride.
struct Dim {
  Value index; // the 1-D index tile (i32)
  Scalar stride{Value(), 1};
  Scalar start;             // first index
  Value wrap;               // M when the index is taken % M, else null
  bool wrapDropped = false; // the wrapped slices are never stored (SliceFlow.h)
  bool startFromIv = false; // start = iv + ivPlus (the loop's induction variable; in the loop)
  Value ivPlus;             // loop invariant, or null: start = iv
  int64_t step = 0;         // coordinates advanced per iteration
  Scalar extent{Value(), kUnbounded};
  bool present = false;
};

/// A load or store the pass rewrites: its block type, its pointer tile's base and dimensions.
struct Plan {
  Operation *op = nullptr;
  RankedTensorType type;
  BlockArgument base; // pointer argument of the function
  std::array<Dim, 2> dims;
  int rowDim = 0;   // the dimension of the map's rows (the other is contiguous): 1 for a tile
                    // read as the transpose of its block (attention-tiles)
  Value baseOffset; // elements the program moves the base by (attention-tiles), else null
};

/// A bound of the mask: idx_dim < bound.
struct Bound {
  Value index;
  Value bound;
  int dim = -1;
};

/// The scalar a tile splats (kiln.splat's operand), else null.
Value splatScalar(Value v);

/// Looks through sign extension.
Value stripExt(Value v);

/// idx = start + arange(n), or (start + arange(n)) % M.
bool decomposeIndex(Dim &d, int64_t n);

/// The bounds of a rank-2 mask: a conjunction of per-dimension compares.
bool decomposeMask(Value mask, SmallVectorImpl<Bound> &bounds);

/// The bound of each dimension in `mask` (null: none): idx_d < bound_d on the pointer tile's
/// own index tiles, one per dimension at most, i32; failure for any other mask.
LogicalResult maskBounds(Value mask, const std::array<Dim, 2> &dims, std::array<Value, 2> &out);

/// What the host encodes a map field from: argument number, or -1 - constant.
std::optional<int64_t> recipeSource(const Scalar &s, func::FuncOp func, bool stride);

/// The base, strides and index forms of the pointer tile `ptrs` into `plan` (`plan.type` its
/// block), or failure: a pointer argument specialized 16-byte aligned, contiguous columns, a
/// row stride of a multiple of 16 bytes, indices start + arange (% M). With `attentionTiles`
/// the rows may be the contiguous dimension instead (plan.rowDim 1) and the base moved by a
/// scalar (plan.baseOffset).
LogicalResult planPointers(Value ptrs, func::FuncOp func, Plan &plan, bool attentionTiles);

/// Whether `v` is computed from a kiln.dot's result (through the ops of its function, and
/// through the results of loops and ifs to what they yield): a matmul's epilogue, whose
/// store the TMA takes from the dot's fragments. Other stores (of elementwise kernels) keep
/// their coalesced pointer stores.
bool fedByDot(Value v);

} // namespace kiln::pointer_tiles

#endif // KILN_LIB_TRANSFORMS_POINTERTILES_H
