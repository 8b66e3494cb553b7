//===- SharedScratch.h - Shared-memory scratch plan and barriers -*- C++ -*-===//
//
// This file declares kiln::SharedScratch, the analysis that plans the static shared memory
// ops use only while they run (cross-warp reductions, scans, layout conversions, scalar
// atomics, mma.sync dots) in one reused pool, and where barriers must separate their uses
// (lib/Analysis/SharedScratch.cpp). The GPU lowering reads the plan.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_ANALYSIS_SHAREDSCRATCH_H
#define KILN_ANALYSIS_SHAREDSCRATCH_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace kiln {

/// Byte sizes of the shared-memory scratch parts `op` uses while it runs, written before and
/// read after a barrier of its own (empty when it uses none): a cross-warp reduction's
/// partials (one part per operand), a scan's and a layout conversion's tile, a scalar atomic's
/// old value, an mma.sync dot's A and B.
llvm::SmallVector<int64_t> getScratchParts(mlir::Operation *op);

/// Bytes of the scratch a layout conversion from `src` to `dst` passes through: one band of
/// columns at a time where kiln::gpu::planColumnBands plans bands, else the whole tile (its
/// part of getScratchParts; -kiln-assign-layouts weighs it before making the conversion).
int64_t getConversionScratchBytes(mlir::RankedTensorType src, mlir::RankedTensorType dst);

/// The static shared memory of ops' scratch: one pool (`__kiln_scratch`) reused by every op,
/// since none is live after its op, and the barriers that reuse needs, from a data-flow
/// analysis (SharedScratch.cpp). Built before the conversion, on the module in CFG form.
class SharedScratch {
public:
  explicit SharedScratch(mlir::ModuleOp module);
  /// Whether `op` must start with a barrier: threads may still read its bytes for an earlier
  /// op (or its own previous run, in a loop).
  bool needsBarrierBefore(mlir::Operation *op) const;
  /// The address (address space 3) of part `part` of `op`'s scratch.
  mlir::Value getPart(mlir::OpBuilder &b, mlir::Location loc, mlir::Operation *op,
                      unsigned part) const;

private:
  struct Plan {
    llvm::SmallVector<int64_t> partOffsets;
    unsigned slot = 0;
    bool barrier = false;
  };
  llvm::DenseMap<mlir::Operation *, Plan> plans;
};

} // namespace kiln

#endif // KILN_ANALYSIS_SHAREDSCRATCH_H
