//===- PipelineLoads.cpp - Prefetch the next loop iteration's loads -------===//
//
// This file implements -kiln-pipeline-loads: software pipelining of scf.for loops with a
// prefetch distance of one iteration. A load whose operands are computed, inside the body,
// only from the induction variable, inductions (values the loop advances by an invariant
// step) and loop invariants (its "address slice") is cloned before the loop for the first
// iteration and at the top of the body for the next one, masked so that no iteration past the
// end touches memory; its value travels in a new iteration argument. Which loads: num-stages
// 1 (the default) takes dot operands and, in a loop of dots, other small loads while the
// registers allow (else such a load moves to the top of the body); 0 any load within a
// register budget; 2 every load.
//
//===----------------------------------------------------------------------===//

#include "LoopSlices.h"
#include "kiln/Dialect/KilnGPU/IR/Dialect.h"
#include "kiln/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#define DEBUG_TYPE "kiln-pipeline-loads"

namespace kiln {
#define GEN_PASS_DEF_KILNPIPELINELOADS
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// Clones `load` and its address slice with the induction variable mapped to `iv` (and
/// what `inductions` maps: the loop's inductions at that iteration), the load masked by
/// `inRange`.
Value cloneLoadFor(OpBuilder &b, LoadOp load, ArrayRef<Operation *> slice, Value loopIv, Value iv,
                   Value inRange, const IRMapping &inductions) {
  IRMapping map = inductions;
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
/// Most extra registers per thread that num-stages = 1 spends on a dot loop's other loads...
constexpr int64_t kSmallLoadRegisterBudget = 8;
/// ...and only while the loop's dot results and those loads take at most this many registers
/// per thread (a small load's value is often held by every lane of a row: 4x the estimate).
/// Measured on tutorial 06's backward (H200): its dK/dV loop at D 128 on 8 warps holds 160
/// registers of dot results and gained 0.916 -> 0.976x Triton from prefetching the row
/// statistics; at D 64 on 4 warps (192) the prefetched rows spilled (10 -> 59 local memory
/// instructions) and lost 0.92 -> 0.90x.
constexpr int64_t kDotLoopRegisterBudget = 176;

/// Registers per thread the results of `loop`'s dots take.
int64_t dotResultRegisters(scf::ForOp loop, unsigned numWarps) {
  int64_t bits = 0;
  for (Operation &op : loop.getBody()->without_terminator())
    if (isa<DotOp, kiln::gpu::SharedDotOp>(op)) {
      auto type = cast<RankedTensorType>(op.getResult(0).getType());
      bits += type.getNumElements() * std::max(32u, type.getElementTypeBitWidth());
    }
  return bits / 32 / (int64_t(numWarps) * 32);
}

/// True when `load`'s value goes only into dots, as an operand A or B.
bool feedsOnlyDots(LoadOp load) {
  return !load->use_empty() && llvm::all_of(load->getUsers(), [&](Operation *user) {
    auto dot = dyn_cast<DotOp>(user);
    return dot && dot.getC() != load.getResult();
  });
}

/// Whether `op` touches no global memory a load may read: pure ops, loads, and the ops that
/// move tiles into or through shared memory (ring copies, waits, barriers, fences, dots
/// reading rings).
bool leavesGlobalMemory(Operation *op) {
  return isPure(op) ||
         isa<LoadOp, kiln::gpu::AsyncCopyOp, kiln::gpu::AsyncCommitOp, kiln::gpu::AsyncWaitOp,
             kiln::gpu::BarrierOp, kiln::gpu::ProxyFenceOp, kiln::gpu::SharedDotOp,
             kiln::gpu::DotWaitOp, kiln::gpu::LocalAllocOp, DotOp>(op);
}

/// The small loads a loop of dots cannot afford to carry across iterations still go first:
/// each moves (with its address slice) to the top of the body, ahead of the rings' waits and
/// barriers, so that its latency runs under them rather than after (tutorial 06's backward at
/// D 64 on 4 warps). Only past ops that write no global memory.
void hoistToTop(scf::ForOp loop, ArrayRef<std::pair<LoadOp, SmallVector<Operation *>>> loads) {
  Block *body = loop.getBody();
  for (auto &[load, slice] : loads) {
    Operation *loadOp = LoadOp(load).getOperation();
    bool safe = true;
    for (Operation &op : *body) {
      if (&op == loadOp)
        break;
      if (!llvm::is_contained(slice, &op) && !leavesGlobalMemory(&op)) {
        safe = false;
        break;
      }
    }
    if (!safe)
      continue;
    // The slice in body order, then the load, each placed after what was hoisted before it.
    Operation *anchor = nullptr;
    auto place = [&](Operation *op) {
      if (anchor)
        op->moveAfter(anchor);
      else
        op->moveBefore(&body->front());
      anchor = op;
    };
    for (Operation *op : slice)
      place(op);
    place(loadOp);
  }
}

LogicalResult pipeline(scf::ForOp loop, bool automatic, bool dotOperandsOnly, unsigned numWarps) {
  // Only integer induction variables (Kiln's loops are i32/i64).
  if (!isa<IntegerType>(loop.getInductionVar().getType()))
    return failure();
  // In a loop of dots, the other loads (a row's statistics beside a tile of attention, a
  // scale beside a quantized operand) come too when they are small: the dots wait on them as
  // they would on their operands. Triton's pipeliner streams every load of such a loop.
  bool hasDot = llvm::any_of(loop.getBody()->without_terminator(),
                             [](Operation &op) { return isa<DotOp, kiln::gpu::SharedDotOp>(op); });
  // Iteration arguments the addresses may read: inductions (pointers and offsets advanced by
  // a loop-invariant step), whose value at any iteration is known at its start.
  llvm::SetVector<Operation *> incOps;
  llvm::MapVector<BlockArgument, Value> inductions; // argument -> increment
  auto acceptInduction = [&](BlockArgument arg) {
    if (inductions.count(arg))
      return true;
    Value inc = getInductionIncrement(arg, loop, incOps);
    if (inc)
      inductions[arg] = inc;
    return bool(inc);
  };
  SmallVector<std::pair<LoadOp, SmallVector<Operation *>>> candidates, small;
  for (Operation &op : loop.getBody()->without_terminator())
    if (auto load = dyn_cast<LoadOp>(op); load && !load.getIsVolatile())
      if (FailureOr<SmallVector<Operation *>> slice = getAddressSlice(load, loop, acceptInduction);
          succeeded(slice)) {
        if (!dotOperandsOnly || feedsOnlyDots(load))
          candidates.push_back({load, *slice});
        else if (hasDot)
          small.push_back({load, *slice});
      }
  if (!small.empty()) {
    int64_t regs = prefetchRegisters(small, numWarps);
    if (regs <= kSmallLoadRegisterBudget &&
        dotResultRegisters(loop, numWarps) + 4 * regs <= kDotLoopRegisterBudget)
      candidates.append(small.begin(), small.end());
    else if (regs <= kSmallLoadRegisterBudget)
      hoistToTop(loop, small);
  }
  if (candidates.empty())
    return failure();
  if (automatic && prefetchRegisters(candidates, numWarps) > kAutoRegisterBudget)
    return failure();

  // First iteration's loads, before the loop.
  IRRewriter rewriter(loop.getContext());
  rewriter.setInsertionPoint(loop);
  Location loc = loop.getLoc();
  Value first = emitInRange(rewriter, loc, loop, loop.getLowerBound());
  IRMapping atFirst; // the inductions at the first iteration: their initial values
  for (auto &[arg, inc] : inductions)
    atFirst.map(arg, loop.getInitArgs()[arg.getArgNumber() - 1]);
  SmallVector<Value> inits;
  for (auto &[load, slice] : candidates)
    inits.push_back(cloneLoadFor(rewriter, load, slice, loop.getInductionVar(),
                                 loop.getLowerBound(), first, atFirst));

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
                // The inductions at the next iteration: one step on (their increments'
                // ops cloned here, ahead of where the body computes them).
                IRMapping atNext, incMap;
                SmallVector<Operation *> incInOrder(incOps.begin(), incOps.end());
                llvm::sort(incInOrder,
                           [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
                for (Operation *op : incInOrder)
                  b.clone(*op, incMap);
                for (auto &[arg, inc] : inductions) {
                  Value arg2 = body->getArgument(arg.getArgNumber());
                  atNext.map(arg2,
                             emitInductionStep(b, yieldLoc, arg2, incMap.lookupOrDefault(inc)));
                }
                SmallVector<Value> out;
                for (auto &[load, slice] : candidates)
                  out.push_back(cloneLoadFor(b, load, slice, iv, next, nextInRange, atNext));
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
  // The original address computations may now be dead (their clones took over). Loads' slices
  // can share ops (a mask or an `other` constant CSE merged): each op is listed once and
  // erased once nothing uses it, users first (a pass to a fixed point), never touched after.
  llvm::SetVector<Operation *> shared;
  for (auto &c : candidates)
    shared.insert(c.second.begin(), c.second.end());
  SmallVector<Operation *> dead = shared.takeVector();
  for (bool erased = true; erased;) {
    erased = false;
    for (Operation *&op : llvm::reverse(dead))
      if (op && op->use_empty()) {
        rewriter.eraseOp(op);
        op = nullptr;
        erased = true;
      }
  }
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
