//===- AxisInfo.h - Contiguity, divisibility and constancy ------*- C++ -*-===//
//
// This file declares the axis analysis: for every integer or pointer value (scalar or tile)
// and every dimension, what is known about runs of elements along that dimension. It is what
// lets loads and stores become 128-bit vector accesses.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_ANALYSIS_AXISINFO_H
#define KILN_ANALYSIS_AXISINFO_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace kiln {

/// Per dimension `d` of a value (a scalar counts as one dimension of size 1):
/// - contiguity[d]: the value increases by 1 along `d` in runs of this many elements, each run
///   starting at an index that is a multiple of it;
/// - divisibility[d]: the first element of every such run is a multiple of it (for pointers:
///   the address in bytes); a power of two;
/// - constancy[d]: the value is constant along `d` in aligned runs of this many elements.
struct AxisInfo {
  llvm::SmallVector<int64_t, 4> contiguity, divisibility, constancy;

  /// Nothing known: runs of one element, divisible by 1.
  static AxisInfo unknown(unsigned rank);
  /// A value constant over `shape` (splat), each element divisible by `divisibility`.
  static AxisInfo constant(llvm::ArrayRef<int64_t> shape, int64_t divisibility);
  unsigned getRank() const { return contiguity.size(); }
  bool operator==(const AxisInfo &o) const {
    return contiguity == o.contiguity && divisibility == o.divisibility && constancy == o.constancy;
  }
};

/// Attributes the frontend puts on the op computing a value the user gave hints for
/// (tl.multiple_of, tl.max_contiguous, tl.max_constancy): one integer per dimension, taken by
/// the analysis instead of what it derives.
inline constexpr llvm::StringLiteral kMultipleOfAttr = "kiln.multiple_of";
inline constexpr llvm::StringLiteral kMaxContiguousAttr = "kiln.max_contiguous";
inline constexpr llvm::StringLiteral kMaxConstancyAttr = "kiln.max_constancy";

/// The largest power of two dividing `v` (capped at 2^30; 0 counts as divisible by the cap).
int64_t highestPowerOf2Divisor(int64_t v);

/// Runs the analysis over every function of `module` at construction.
class AxisInfoAnalysis {
public:
  /// `trustHints`: take the user's tl.multiple_of / max_contiguous / max_constancy as facts
  /// (the GPU, as Triton: they only widen vector accesses there). The CPU backend passes
  /// false: a hint that lies (kernl's and Triton's old matmul's `max_contiguous(offs % N)`
  /// wrapping rows back into the matrix) would otherwise make one access of a whole run that
  /// is not one, reading and writing past the array.
  explicit AxisInfoAnalysis(mlir::Operation *root, bool trustHints = true);
  /// The facts for `value`; `unknown` for values the analysis does not cover.
  const AxisInfo &get(mlir::Value value) const;

  /// Elements of a pointer tile along its fastest dimension `dim` that may be accessed as one
  /// vector of at most `maxBits` bits: bounded by contiguity and by the alignment in elements.
  unsigned getPtrVectorWidth(mlir::Value ptr, unsigned dim, unsigned maxBits) const;
  /// Elements along `dim` over which a mask is known constant.
  int64_t getMaskConstancy(mlir::Value mask, unsigned dim) const;

private:
  void visit(mlir::Operation *op);
  void visitRegion(mlir::Region &region);
  /// Scalar block arguments of CFG loops (after scf-to-cf): an induction variable
  /// `i = phi(lb, i + step)` is divisible by what divides lb and step.
  void visitBlockArguments(mlir::Block &block);
  /// A tile induction `p = phi(init, p + inc)` (Triton's `ptrs += BLOCK * stride`, as an
  /// scf.for iteration argument or a CFG block argument): every value is an init plus a sum
  /// of increments, so it keeps what the inits and increments share.
  AxisInfo getInductionInfo(mlir::Value arg, llvm::ArrayRef<mlir::Value> incoming);
  /// Computes `v`'s info now if it has not been (an increment defined later in the loop body).
  void ensure(mlir::Value v);
  llvm::DenseMap<mlir::Value, AxisInfo> infos;
  bool trustHints;
  mutable llvm::DenseMap<unsigned, AxisInfo> unknowns;
};

} // namespace kiln

#endif // KILN_ANALYSIS_AXISINFO_H
