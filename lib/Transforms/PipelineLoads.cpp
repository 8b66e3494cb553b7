//===- PipelineLoads.cpp - Prefetch the next loop iteration's loads -------===//
//
// This file implements -kiln-pipeline-loads: software pipelining of scf.for loops with a
// prefetch distance of one iteration. A load whose operands are computed, inside the body,
// only from the induction variable and loop invariants (its "address slice") is cloned before
// the loop for the first iteration and at the top of the body for the next one, masked so that
// no iteration past the end touches memory; its value travels in a new iteration argument.
//
//===----------------------------------------------------------------------===//

#include "LoopSlices.h"
#include "kiln/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "kiln-pipeline-loads"

namespace kiln {
#define GEN_PASS_DEF_KILNPIPELINELOADS
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// Clones `load` and its address slice with the induction variable mapped to `iv`, the load
/// masked by `inRange`.
Value cloneLoadFor(OpBuilder &b, LoadOp load, ArrayRef<Operation *> slice, Value loopIv, Value iv,
                   Value inRange) {
  IRMapping map;
  map.map(loopIv, iv);
  for (Operation *op : slice)
    b.clone(*op, map);
  Location loc = load.getLoc();
  Value ptr = map.lookupOrDefault(load.getPtr());
  Value mask = splatMaskLike(b, loc, inRange, ptr.getType());
  if (load.getMask())
    mask = arith::AndIOp::create(b, loc, map.lookupOrDefault(load.getMask()), mask);
  Value other = load.getOther() ? map.lookupOrDefault(load.getOther()) : Value();
  auto clone = LoadOp::create(b, loc, load.getType(), ptr, mask, other, load.getCacheAttr(),
                              load.getEvictAttr(), load.getIsVolatileAttr());
  return clone.getResult();
}

/// Extra 32-bit registers per thread that holding the prefetched values of `loads` costs.
int64_t prefetchRegisters(ArrayRef<std::pair<LoadOp, SmallVector<Operation *>>> loads,
                          unsigned numWarps) {
  int64_t bits = 0;
  for (auto &entry : loads) {
    Type t = LoadOp(entry.first).getType();
    int64_t n = 1;
    if (auto tile = dyn_cast<RankedTensorType>(t))
      n = tile.getNumElements();
    bits += n * std::max(8u, getElementTypeOrSelf(t).getIntOrFloatBitWidth());
  }
  int64_t threads = int64_t(numWarps) * 32;
  return (bits / 32 + threads - 1) / threads;
}

/// Most extra registers per thread that num-stages = 0 spends on prefetching.
constexpr int64_t kAutoRegisterBudget = 32;

/// True when `load`'s value goes only into dots, as an operand A or B.
bool feedsOnlyDots(LoadOp load) {
  return !load->use_empty() && llvm::all_of(load->getUsers(), [&](Operation *user) {
    auto dot = dyn_cast<DotOp>(user);
    return dot && dot.getC() != load.getResult();
  });
}

LogicalResult pipeline(scf::ForOp loop, bool automatic, bool dotOperandsOnly, unsigned numWarps) {
  // Only integer induction variables (Kiln's loops are i32/i64).
  if (!isa<IntegerType>(loop.getInductionVar().getType()))
    return failure();
  SmallVector<std::pair<LoadOp, SmallVector<Operation *>>> candidates;
  for (Operation &op : loop.getBody()->without_terminator())
    if (auto load = dyn_cast<LoadOp>(op);
        load && !load.getIsVolatile() && (!dotOperandsOnly || feedsOnlyDots(load)))
      if (FailureOr<SmallVector<Operation *>> slice = getAddressSlice(load, loop); succeeded(slice))
        candidates.push_back({load, *slice});
  if (candidates.empty())
    return failure();
  if (automatic && prefetchRegisters(candidates, numWarps) > kAutoRegisterBudget)
    return failure();

  // First iteration's loads, before the loop.
  IRRewriter rewriter(loop.getContext());
  rewriter.setInsertionPoint(loop);
  Location loc = loop.getLoc();
  Value first = emitInRange(rewriter, loc, loop, loop.getLowerBound());
  SmallVector<Value> inits;
  for (auto &[load, slice] : candidates)
    inits.push_back(
        cloneLoadFor(rewriter, load, slice, loop.getInductionVar(), loop.getLowerBound(), first));

  // The next iteration's loads, at the top of the body; their values feed the next iteration.
  auto newLoop =
      cast<LoopLikeOpInterface>(loop.getOperation())
          .replaceWithAdditionalYields(
              rewriter, inits, /*replaceInitOperandUsesInLoop=*/false,
              [&](OpBuilder &b, Location yieldLoc, ArrayRef<BlockArgument>) {
                OpBuilder::InsertionGuard guard(b);
                b.setInsertionPointToStart(&b.getInsertionBlock()->getParent()->front());
                Block *body = b.getInsertionBlock();
                Value iv = body->getArgument(0);
                Value next = arith::AddIOp::create(b, yieldLoc, iv,
                                                   cast<scf::ForOp>(body->getParentOp()).getStep());
                Value nextInRange =
                    emitInRange(b, yieldLoc, cast<scf::ForOp>(body->getParentOp()), next);
                SmallVector<Value> out;
                for (auto &[load, slice] : candidates)
                  out.push_back(cloneLoadFor(b, load, slice, iv, next, nextInRange));
                return out;
              });
  if (failed(newLoop))
    return failure();
  auto forOp = cast<scf::ForOp>(newLoop->getOperation());
  // This iteration's values arrive in the new iteration arguments.
  unsigned base = forOp.getNumRegionIterArgs() - candidates.size();
  for (auto [i, c] : llvm::enumerate(candidates)) {
    rewriter.replaceAllUsesWith(c.first.getResult(), forOp.getRegionIterArgs()[base + i]);
    rewriter.eraseOp(c.first);
  }
  // The original address computations may now be dead (their clones took over).
  for (auto &c : llvm::reverse(candidates))
    for (Operation *op : llvm::reverse(c.second))
      if (op->use_empty())
        rewriter.eraseOp(op);
  return success();
}

struct KilnPipelineLoadsPass final : kiln::impl::KilnPipelineLoadsBase<KilnPipelineLoadsPass> {
  using Base::Base;
  void runOnOperation() override {
    // num-stages = 1 still prefetches the operands of dots (their loads are long and the dot
    // waits for them), as Triton's pipeliner does whatever the loop's other loads.
    SmallVector<scf::ForOp> loops;
    getOperation()->walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops)
      (void)pipeline(loop, /*automatic=*/numStages == 0, /*dotOperandsOnly=*/numStages == 1,
                     numWarps);
  }
};

} // namespace
