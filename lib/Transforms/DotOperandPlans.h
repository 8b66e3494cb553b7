//===- DotOperandPlans.h - Planning a loop's dot operand rings --*- C++ -*-===//
//
// This file declares the planning half of -kiln-pipeline-dot-operands (lib/Transforms/
// PipelineDotOperands.cpp does the rewriting): which loads of a loop can be copied ahead
// (cp.async or the TMA) and how to recompute their addresses for another iteration, where each
// dot reads A from, which accumulators may stay in flight across iterations, and where dots
// left running are waited for. Internal to lib/Transforms.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_TRANSFORMS_DOTOPERANDPLANS_H
#define KILN_LIB_TRANSFORMS_DOTOPERANDPLANS_H

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Dialect/KilnGPU/IR/Dialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <optional>

namespace kiln::pipeline {

using namespace mlir;
namespace kgpu = kiln::gpu;

/// How to compute a copied load's operands for another iteration: the ops of the body that
/// compute them (cloned, in body order), and the pointer inductions among the iteration
/// arguments they read (`p` yielded as `addptr(p, inc)` with a loop-invariant `inc`, as in
/// Triton's `a_ptrs += BLOCK_K * stride_ak`), whose value n iterations later is p + n * inc.
struct CopyPlan {
  LoadOp load;
  /// Set instead of `load` for a tensor descriptor load: copied by the TMA (kiln_gpu.tma_copy
  /// completing on the slot's barrier) rather than by every thread with cp.async.
  DescriptorLoadOp desc;
  SmallVector<Operation *> slice;
  /// (iteration argument index, increment)
  SmallVector<std::pair<unsigned, Value>> inductions;
  /// Ops of `slice` that compute increments (they depend on loop invariants only).
  llvm::SmallPtrSet<Operation *, 8> incrementOps;
  /// The 2-D transpose (kiln.trans) between the load and the dot, when the operand is the
  /// transpose of a loaded block (Triton's `tl.dot(a, b.T)` with B loaded N x K): the copy
  /// fills the ring with the block as loaded, which is then the other major-ness of the dot
  /// operand (B contiguous along K, or A along M).
  TransOp trans;
  /// The reshape of `desc`'s block to its last two dimensions (the others 1), when it has
  /// more than two: the ring holds the 2-D block.
  ReshapeOp reshape;
};

/// Where one dot of the loop reads its A operand from.
enum class ASource {
  Ring,      ///< a load in the loop: copied ahead into a ring like B
  Once,      ///< a load before the loop: copied once into a one-slot buffer
  Registers, ///< computed in the loop (flash attention's p): wgmma reads the registers
};

/// One dot of the loop and how its operands reach shared memory.
struct DotPlan {
  DotOp dot;
  ASource aSource;
  std::optional<CopyPlan> a; ///< ASource::Ring
  LoadOp aOnce;              ///< ASource::Once
  CopyPlan b;
  /// Set by shareBRings: the earlier plan whose B ring this dot reads (its copy is that
  /// plan's), as it is or transposed (bTransposedView: shared_dot's b_transposed).
  std::optional<unsigned> bSharedWith;
  bool bTransposedView = false;
};

/// A descriptor load the TMA can copy into a ring: read by dots of the loop only (as planCopy's
/// loads; shareBRings lets a later dot read the first one's ring), 16-bit floats, a 2-D
/// block TMA boxes cover (nvidia::getTensorMapBox), offsets computable for any iteration from the
/// induction variable and loop invariants.
FailureOr<CopyPlan> planTmaCopy(DescriptorLoadOp desc, Value operand, scf::ForOp loop);

/// Whether a load's `other` is a float or integer zero.
bool isZeroOther(Value other);

/// A load the pipeline can turn into async copies: read by dots of the loop only (each
/// directly or through a 2-D transpose whose one use is the dot; each dot gets a copy of its
/// own unless shareBRings lets it read another's ring), not volatile, zero where masked off, 16-bit
/// floats or 8-bit types, its operands computable for any iteration.
FailureOr<CopyPlan> planCopy(Value operand, scf::ForOp loop);

/// `x * n` for an integer or integer tile `x` and a constant `n`.
Value scaleBy(OpBuilder &b, Location loc, Value x, int64_t n);

/// Issues `plan`'s copy for the iteration `ahead` iterations after the one whose induction
/// value is `iv` and whose iteration arguments are `args`, into `slot` of `ring`, masked by
/// `inRange` too. `loopIv` is the induction variable the slice reads. Values `seed` maps are
/// taken as they are, and the slice's ops in `skip` (which computed them) are not cloned.
void emitCopy(OpBuilder &b, const CopyPlan &plan, Value loopIv, Value iv, ValueRange loopArgs,
              ValueRange args, int64_t ahead, Value inRange, Value ring, Value slot, Value barriers,
              const IRMapping *seed = nullptr,
              const llvm::SmallPtrSetImpl<Operation *> *skip = nullptr);

/// lb + n * step in the induction variable's type.
Value ivAfter(OpBuilder &b, Location loc, scf::ForOp loop, Value from, int64_t n);

/// The i32 constant `v`.
Value i32Constant(OpBuilder &b, Location loc, int64_t v);

/// Whether `dot` can read rings (f16/bf16 inputs of one type with f32 accumulators and K a
/// multiple of 16, or fp8 (wgmma only) with f32 and int8 with int32 and K a multiple of 32; a
/// warpgroup accumulator layout, or without wgmma the mma.sync one) and how its operands get
/// there; B must be a copyable load of the loop. 8-bit operands are read K-major from rings
/// only (-kiln-assign-layouts makes their rings K-major). mma.sync reads both from rings.
FailureOr<DotPlan> planDot(DotOp dot, scf::ForOp loop, unsigned numWarps, bool wgmma);

/// With wgmma, a dot whose B is the block an earlier plan's B copies (the same 16-bit load,
/// as it is or transposed: tutorial 06's backward reads qT for k @ qT and its transpose for
/// ds @ qT^T) reads that plan's ring instead of a copy of its own (DotPlan::bSharedWith).
void shareBRings(MutableArrayRef<DotPlan> plans, bool wgmma);

/// The iteration argument `dot`'s result becomes when its only use is `loop`'s yield.
std::optional<unsigned> getYieldedIterArg(scf::ForOp loop, DotOp dot);

/// The select that restarts `dot`'s accumulator at zero now and then, C = select(cond, 0, x)
/// with x read by nothing else (a flattened persistent matmul at each new tile), or null.
arith::SelectOp getAccumulatorReset(DotOp dot);

/// The accumulator iteration argument of a loop's only dot when the accumulator only goes
/// from one iteration's dot to the next (so the dot may run on into the next iteration),
/// through a reset to zero (getAccumulatorReset) or not; besides the yield the result may be
/// read inside scf.if ops of the body (a flattened loop's epilogue, which waits for it).
std::optional<unsigned> getChainedAccumulator(scf::ForOp loop, DotOp dot);

/// Puts a dot_wait at the start of each block of an scf.if that reads `result` (a dot left
/// running), for the reads in it.
void waitInsideIfs(IRRewriter &rewriter, Value result);

/// In a loop whose dots all read rings, the iteration argument through which the last dot's
/// result reaches the next iteration when that dot may be left running across the back edge:
/// its result only goes to the yield, and an A it reads from registers is computed from an
/// earlier dot of the body. The next iteration's first dot then waits for it (wgmma groups
/// complete in order) before A's registers are written again; the accumulator itself is read
/// after a dot_wait placed before its first use.
std::optional<unsigned> getDeferredAccumulator(scf::ForOp loop, ArrayRef<DotPlan> plans);

/// The op of `body` at or around the first use of `v` in it (its terminator when `v` has
/// none before).
Operation *firstUseIn(Block *body, Value v);

/// In a loop whose dots are waited for where they are read, the iteration argument through
/// which the last dot's result reaches the next iteration when that dot may run on across the
/// back edge (its result only goes to the yield, and the body first reads the argument after
/// its first dot, before which the next iteration waits for it).
std::optional<unsigned> getCarriedAccumulator(scf::ForOp loop, ArrayRef<DotPlan> plans);

/// Whether some dot of the body is first read after a later dot was issued: flash attention
/// rotated so that iteration j multiplies q by block j's keys and then adds block j - 1's
/// p @ v, with the softmax of block j after both. Each dot is then waited for only where its
/// result is first read (see waitAtFirstUses), and the dots issued between run on.
bool hasDotReadAfterLaterDot(ArrayRef<DotPlan> plans);

/// Puts a dot_wait before the first read of each of `dots` (shared_dots of one block, in
/// block order, issued without waiting for themselves) that lets the dots issued in between
/// keep running; a dot read by nothing but the yield is waited for before it, so that every
/// dot of an iteration is done when the next begins.
void waitAtFirstUses(IRRewriter &rewriter, ArrayRef<kgpu::SharedDotOp> dots);

/// waitAtFirstUses for dots[index] alone.
void waitAtFirstUse(IRRewriter &rewriter, ArrayRef<kgpu::SharedDotOp> dots, size_t index);

/// The descriptor load `operand` reads through 2-D transposes and reshapes (a dot's
/// `tl.reshape(desc.load(...), (BN, BK)).T`), or none.
DescriptorLoadOp loadBehindViews(Value operand);

/// Replaces `desc` by its masked load (lowerDescriptorLoad); a reshape of its block back to
/// the tile the load reads (a block's unit dimensions reshaped away) reads the load directly.
void lowerDescriptorLoadForDot(DescriptorLoadOp desc);

/// Whether some of `plans`' copies go through the TMA and others through cp.async.
bool mixesCopyEngines(ArrayRef<DotPlan> plans);

/// Lets `dot`, the last dot of its loop body, run on while the body finishes: the ops before
/// it that it does not read and that have no memory effects move after it, and it is waited
/// for before the yield (when the yield is its only reader and something moved).
void overlapLastDot(IRRewriter &rewriter, kgpu::SharedDotOp dot);

/// Notes for each tensor map a loop's TMA copies read the rows of its boxes (noteTmaBoxRows):
/// the whole block, up to 256 rows (the TMA's limit). False when a descriptor is not a kernel
/// argument.
bool recordTmaBoxRows(scf::ForOp loop, ArrayRef<DotPlan> plans);

} // namespace kiln::pipeline

#endif // KILN_LIB_TRANSFORMS_DOTOPERANDPLANS_H
