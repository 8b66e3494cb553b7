//===- LoopSlices.h - What loop pipelining clones -------------*- C++ -*-===//
//
// Internal to the loop pipelining passes (-kiln-pipeline-loads, -kiln-pipeline-dot-operands):
// the ops that compute a load's operands from the induction variable, and the masks that keep
// prefetches of iterations past the end from touching memory; and the note of a tensor map's
// TMA box rows that the pipelining and -kiln-lower-descriptors leave for the host.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_LOOPSLICES_H
#define KILN_LIB_TRANSFORMS_LOOPSLICES_H

#include "kiln/Dialect/Kiln/IR/Dialect.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {

/// The ops of `loop`'s body that compute `op`'s operands from the induction variable and loop
/// invariants, in body order; failure if an operand depends on another load, on an op with
/// memory effects or regions, or on an iteration argument that `acceptIterArg` (when given) does
/// not accept (it may record what it needs to compute the argument for another iteration).
mlir::FailureOr<llvm::SmallVector<mlir::Operation *>>
getAddressSlice(mlir::Operation *op, mlir::scf::ForOp loop,
                llvm::function_ref<bool(mlir::BlockArgument)> acceptIterArg = nullptr);
/// Collects into `ops` the body ops computing `v` from loop invariants only; false if `v`
/// depends on the induction variable, an iteration argument or an impure op.
bool collectInvariantChain(mlir::Value v, mlir::scf::ForOp loop,
                           llvm::SetVector<mlir::Operation *> &ops);
/// The increment of iteration argument `arg` of `loop` when it is an induction: yielded as
/// `addptr(arg, inc)` (Triton's `a_ptrs += BLOCK_K * stride_ak`) or an integer `arg + inc`
/// (either side), `inc` computed from loop invariants, its ops in the body added to `incOps`;
/// null otherwise.
mlir::Value getInductionIncrement(mlir::BlockArgument arg, mlir::scf::ForOp loop,
                                  llvm::SetVector<mlir::Operation *> &incOps);
/// `base` advanced by `step`: `addptr(base, step)` for pointers, `base + step` for integers
/// (an induction of getInductionIncrement moved on by its increment, or a multiple of it).
mlir::Value emitInductionStep(mlir::OpBuilder &b, mlir::Location loc, mlir::Value base,
                              mlir::Value step);
/// `cond` (i1) in the shape of `like` (a splat for tiles).
mlir::Value splatMaskLike(mlir::OpBuilder &b, mlir::Location loc, mlir::Value cond,
                          mlir::Type like);
/// iv < ub in the loop's signedness.
mlir::Value emitInRange(mlir::OpBuilder &b, mlir::Location loc, mlir::scf::ForOp loop,
                        mlir::Value iv);

/// Notes on the module (kTmaBoxRowsAttr) that tensor map argument `arg` of `func` is copied
/// in boxes of `rows` rows; a map noted twice keeps the fewer rows (any block splits into
/// them).
void noteTmaBoxRows(mlir::func::FuncOp func, unsigned arg, int32_t rows);

} // namespace kiln

#endif // KILN_LIB_TRANSFORMS_LOOPSLICES_H
