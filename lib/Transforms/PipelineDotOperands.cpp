//===- PipelineDotOperands.cpp - Dot operands through cp.async rings ------===//
//
// This file implements -kiln-pipeline-dot-operands (see Passes.td): the loads feeding a loop's
// dot become cp.async copies into shared rings issued num-stages - 1 iterations ahead, and the
// dot reads its operands from the rings (kiln_gpu.shared_dot, lowered to wgmma).
//
// Group accounting, for copies running D iterations ahead: the prologue commits D groups
// (iterations 0 .. D-1); iteration i commits one more (iteration i + D). When iteration i
// waits, D + i groups are committed and group i must be complete, so D - 1 may stay in
// flight. With D = S - 1 the slot iteration i + S - 1 writes is the one iteration i - 1 read:
//  - a dot that completes in its iteration (shared_dot pending = 0) is done with it by then,
//    and the barrier of iteration i's wait orders every warp's reads before the new copies,
//    which go at the top of the body;
//  - a dot that runs on into the next iteration (pending = 1: its accumulator only goes to the
//    next iteration's dot) may still read that slot at the top of iteration i. With S >= 4
//    the copies stay at the top and run S - 2 iterations ahead instead, into the slot the dot
//    before the previous one read. With S = 3 that would be one iteration only, so the
//    copies run S - 1 = 2 ahead and go right after iteration i's dot, which has waited for
//    all dots but itself, behind a second wait whose barrier orders every warpgroup's wait
//    before them (the group it asks for is complete already). On the H100 (tutorial matmul,
//    128x256x64, 8192^3 fp16) the late copies took S = 3 from 494 to 567-641 TFLOP/s, but
//    S = 4 from 606-646 down to 560-591: the extra barrier costs more than a third iteration
//    of prefetch gains, so they are used only where they buy the second.
//
//===----------------------------------------------------------------------===//

#include "LoopSlices.h"
#include "kiln/Conversion/KilnToLLVM.h"
#include "kiln/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallPtrSet.h"

#define DEBUG_TYPE "kiln-pipeline-dot-operands"

namespace kiln {
#define GEN_PASS_DEF_KILNPIPELINEDOTOPERANDS
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

/// Shared memory the rings of one loop may take (the H100 gives a block up to 227 KiB; the
/// rest stays for reductions and layout conversions).
constexpr int64_t kRingBudget = 192 * 1024;

/// How to compute a copied load's operands for another iteration: the ops of the body that
/// compute them (cloned, in body order), and the pointer inductions among the iteration
/// arguments they read (`p` yielded as `addptr(p, inc)` with a loop-invariant `inc`, as in
/// Triton's `a_ptrs += BLOCK_K * stride_ak`), whose value n iterations later is p + n * inc.
struct CopyPlan {
  LoadOp load;
  SmallVector<Operation *> slice;
  /// (iteration argument index, increment)
  SmallVector<std::pair<unsigned, Value>> inductions;
  /// Ops of `slice` that compute increments (they depend on loop invariants only).
  llvm::SmallPtrSet<Operation *, 8> incrementOps;
};

/// Collects into `ops` the body ops computing `v` from loop invariants only; false if `v`
/// depends on the induction variable, an iteration argument or an impure op.
bool collectInvariantChain(Value v, scf::ForOp loop, llvm::SetVector<Operation *> &ops) {
  if (isa<BlockArgument>(v))
    return cast<BlockArgument>(v).getOwner() != loop.getBody();
  Operation *def = v.getDefiningOp();
  if (!loop->isProperAncestor(def))
    return true;
  if (def->getBlock() != loop.getBody() || def->getNumRegions() || !isPure(def))
    return false;
  if (!ops.insert(def))
    return true;
  return llvm::all_of(def->getOperands(),
                      [&](Value o) { return collectInvariantChain(o, loop, ops); });
}

/// A load the pipeline can turn into async copies: one use (the dot), not volatile, zero
/// where masked off, 16-bit floats, its operands computable for any iteration.
FailureOr<CopyPlan> planCopy(Value operand, scf::ForOp loop) {
  auto load = operand.getDefiningOp<LoadOp>();
  if (!load || load->getBlock() != loop.getBody() || !operand.hasOneUse() ||
      load.getIsVolatile())
    return failure();
  Type elem = getElementTypeOrSelf(load.getType());
  if (!elem.isF16() && !elem.isBF16())
    return failure();
  if (Value other = load.getOther())
    if (!matchPattern(other, m_AnyZeroFloat()))
      return failure();
  CopyPlan plan;
  plan.load = load;
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  llvm::SetVector<Operation *> increments;
  auto acceptInduction = [&](BlockArgument arg) {
    unsigned idx = arg.getArgNumber() - 1;
    auto add = yield.getOperand(idx).getDefiningOp<AddPtrOp>();
    if (!add || add.getPtr() != arg || !collectInvariantChain(add.getOffset(), loop, increments))
      return false; // not a pointer induction: the next value is not known yet
    if (!llvm::is_contained(llvm::make_first_range(plan.inductions), idx))
      plan.inductions.push_back({idx, add.getOffset()});
    return true;
  };
  FailureOr<SmallVector<Operation *>> slice = getAddressSlice(load, loop, acceptInduction);
  if (failed(slice))
    return failure();
  llvm::SetVector<Operation *> all(slice->begin(), slice->end());
  for (Operation *op : increments) {
    all.insert(op);
    plan.incrementOps.insert(op);
  }
  plan.slice.assign(all.begin(), all.end());
  llvm::sort(plan.slice, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return plan;
}

/// `x * n` for an integer or integer tile `x` and a constant `n`.
Value scaleBy(OpBuilder &b, Location loc, Value x, int64_t n) {
  Type t = x.getType();
  Type elem = getElementTypeOrSelf(t);
  TypedAttr attr = b.getIntegerAttr(elem, n);
  if (auto tile = dyn_cast<RankedTensorType>(t))
    attr = DenseElementsAttr::get(tile, attr);
  return arith::MulIOp::create(b, loc, x, arith::ConstantOp::create(b, loc, attr));
}

/// Issues `plan`'s copy for the iteration `ahead` iterations after the one whose induction
/// value is `iv` and whose iteration arguments are `args`, into `slot` of `ring`, masked by
/// `inRange` too. `loopIv` is the induction variable the slice reads.
void emitCopy(OpBuilder &b, const CopyPlan &plan, Value loopIv, Value iv, ValueRange loopArgs,
              ValueRange args, int64_t ahead, Value inRange, Value ring, Value slot) {
  IRMapping map;
  map.map(loopIv, iv);
  LoadOp load = plan.load;
  Location loc = load.getLoc();
  // Increments first (they read invariants only), then the inductions' values, then the rest.
  for (Operation *op : plan.slice)
    if (plan.incrementOps.contains(op))
      b.clone(*op, map);
  for (auto [idx, inc] : plan.inductions) {
    Value base = args[idx];
    Value at = ahead == 0 ? base
                          : AddPtrOp::create(b, loc, base.getType(), base,
                                             scaleBy(b, loc, map.lookupOrDefault(inc), ahead))
                                .getResult();
    map.map(loopArgs[idx], at);
  }
  for (Operation *op : plan.slice)
    if (!plan.incrementOps.contains(op))
      b.clone(*op, map);
  Value ptr = map.lookupOrDefault(load.getPtr());
  Value mask = splatMaskLike(b, loc, inRange, ptr.getType());
  if (load.getMask())
    mask = arith::AndIOp::create(b, loc, map.lookupOrDefault(load.getMask()), mask);
  kgpu::AsyncCopyOp::create(b, loc, ring, slot, ptr, mask);
}

/// lb + n * step in the induction variable's type.
Value ivAfter(OpBuilder &b, Location loc, scf::ForOp loop, Value from, int64_t n) {
  Type t = loop.getInductionVar().getType();
  Value count = arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, n));
  return arith::AddIOp::create(b, loc, from,
                               arith::MulIOp::create(b, loc, count, loop.getStep()));
}

Value i32Constant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32Type(), b.getI32IntegerAttr(v));
}

LogicalResult pipelineDot(scf::ForOp loop, DotOp dot, unsigned stages, unsigned numWarps) {
  if (!isa<IntegerType>(loop.getInductionVar().getType()) || dot->getBlock() != loop.getBody())
    return failure();
  RankedTensorType aTy = dot.getA().getType(), bTy = dot.getB().getType();
  auto cTy = cast<RankedTensorType>(dot.getC().getType());
  if (aTy.getElementType() != bTy.getElementType() || !cTy.getElementType().isF32() ||
      aTy.getDimSize(1) % 16 != 0 ||
      !getWgmmaAccumulatorLayout(loop.getContext(), cTy.getShape(), numWarps))
    return failure();
  FailureOr<CopyPlan> aPlan = planCopy(dot.getA(), loop);
  FailureOr<CopyPlan> bPlan = planCopy(dot.getB(), loop);
  if (failed(aPlan) || failed(bPlan))
    return failure();

  // As many stages as asked for that fit.
  Type elem = aTy.getElementType();
  auto ring = [&](RankedTensorType tile, unsigned slots) {
    return kgpu::SharedBufferType::get(loop.getContext(),
                                       {slots, tile.getDimSize(0), tile.getDimSize(1)}, elem);
  };
  int64_t perStage = getSharedSlotBytes(ring(aTy, 1)) + getSharedSlotBytes(ring(bTy, 1));
  while (stages > 2 && stages * perStage > kRingBudget)
    --stages;
  if (stages * perStage > kRingBudget)
    return failure();
  kgpu::SharedBufferType ringA = ring(aTy, stages), ringB = ring(bTy, stages);

  // The dot may run on while the next iteration starts when its accumulator only goes from
  // one iteration's dot to the next; see the file comment for how far ahead copies run and
  // where they are issued.
  int accArg = -1;
  if (auto arg = dyn_cast<BlockArgument>(dot.getC()); arg && arg.getOwner() == loop.getBody() &&
                                                       arg.getArgNumber() > 0 && arg.hasOneUse() &&
                                                       dot->hasOneUse()) {
    unsigned idx = arg.getArgNumber() - 1;
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    if (*dot->getUsers().begin() == yield.getOperation() &&
        yield.getOperand(idx) == dot.getResult())
      accArg = int(idx);
  }
  bool overlap = stages >= 3 && accArg >= 0;
  bool lateCopies = overlap && stages == 3;
  unsigned distance = overlap && !lateCopies ? stages - 2 : stages - 1;

  // Rings and the prologue: iterations 0 .. distance - 1, one group each.
  IRRewriter rewriter(loop.getContext());
  rewriter.setInsertionPoint(loop);
  Location loc = loop.getLoc();
  Value a = kgpu::LocalAllocOp::create(rewriter, loc, ringA, rewriter.getI32IntegerAttr(0),
                                       BoolAttr());
  Value b = kgpu::LocalAllocOp::create(rewriter, loc, ringB, rewriter.getI32IntegerAttr(1),
                                       BoolAttr());
  Value loopIv = loop.getInductionVar();
  ValueRange loopArgs = loop.getRegionIterArgs();
  for (unsigned s = 0; s < distance; ++s) {
    Value iv = s == 0 ? loop.getLowerBound() : ivAfter(rewriter, loc, loop, loop.getLowerBound(), s);
    Value inRange = emitInRange(rewriter, loc, loop, iv);
    Value slot = i32Constant(rewriter, loc, s);
    emitCopy(rewriter, *aPlan, loopIv, iv, loopArgs, loop.getInitArgs(), s, inRange, a, slot);
    emitCopy(rewriter, *bPlan, loopIv, iv, loopArgs, loop.getInitArgs(), s, inRange, b, slot);
    kgpu::AsyncCommitOp::create(rewriter, loc);
  }

  // The current slot travels in a new iteration argument: 0, 1, ..., S-1, 0, ...
  Value zero = i32Constant(rewriter, loc, 0);
  auto newLoop = cast<LoopLikeOpInterface>(loop.getOperation())
                     .replaceWithAdditionalYields(
                         rewriter, ValueRange{zero}, /*replaceInitOperandUsesInLoop=*/false,
                         [&](OpBuilder &yb, Location yloc, ArrayRef<BlockArgument> args) {
                           Value next = arith::AddIOp::create(yb, yloc, args[0],
                                                              i32Constant(yb, yloc, 1));
                           Value wrap = arith::CmpIOp::create(yb, yloc, arith::CmpIPredicate::eq,
                                                              next, i32Constant(yb, yloc, stages));
                           return SmallVector<Value>{arith::SelectOp::create(
                               yb, yloc, wrap, i32Constant(yb, yloc, 0), next)};
                         });
  if (failed(newLoop))
    return failure();
  auto forOp = cast<scf::ForOp>(newLoop->getOperation());
  Value slot = forOp.getRegionIterArgs().back();
  Value iv = forOp.getInductionVar();

  // Top of the body: this iteration's slot is ready.
  rewriter.setInsertionPointToStart(forOp.getBody());
  kgpu::AsyncWaitOp::create(rewriter, loc, rewriter.getI32IntegerAttr(distance - 1));
  ValueRange args = forOp.getRegionIterArgs();
  // Starts iteration i + distance in the slot iteration i - 1 read.
  auto issueCopies = [&] {
    Value ahead = ivAfter(rewriter, loc, forOp, iv, distance);
    Value inRange = emitInRange(rewriter, loc, forOp, ahead);
    Value writeSlot = arith::RemUIOp::create(
        rewriter, loc,
        arith::AddIOp::create(rewriter, loc, slot, i32Constant(rewriter, loc, distance)),
        i32Constant(rewriter, loc, stages));
    emitCopy(rewriter, *aPlan, iv, ahead, args, args, distance, inRange, a, writeSlot);
    emitCopy(rewriter, *bPlan, iv, ahead, args, args, distance, inRange, b, writeSlot);
    kgpu::AsyncCommitOp::create(rewriter, loc);
  };
  if (!lateCopies)
    issueCopies();

  // The dot reads the rings.
  rewriter.setInsertionPoint(dot);
  auto shared = kgpu::SharedDotOp::create(rewriter, dot.getLoc(), dot.getType(), a, slot, b, slot,
                                          dot.getC(), overlap ? 1 : 0);
  if (lateCopies) {
    rewriter.setInsertionPointAfter(shared);
    kgpu::AsyncWaitOp::create(rewriter, loc, rewriter.getI32IntegerAttr(distance - 1));
    issueCopies();
  }
  rewriter.replaceOp(dot, shared.getResult());
  rewriter.eraseOp(aPlan->load);
  rewriter.eraseOp(bPlan->load);
  // The original address computations may now be dead (their clones took over); an op in
  // both slices is erased once.
  llvm::SmallPtrSet<Operation *, 32> erased;
  for (const CopyPlan *plan : {&*aPlan, &*bPlan})
    for (Operation *op : llvm::reverse(plan->slice))
      if (!erased.contains(op) && op->use_empty()) {
        erased.insert(op);
        rewriter.eraseOp(op);
      }

  // Nothing may still be copying, or multiplying, when the kernel goes on (or ends).
  rewriter.setInsertionPointAfter(forOp);
  kgpu::AsyncWaitOp::create(rewriter, loc, rewriter.getI32IntegerAttr(0));
  if (overlap) {
    Value result = forOp.getResult(accArg);
    auto done = kgpu::DotWaitOp::create(rewriter, loc, result.getType(), result);
    result.replaceAllUsesExcept(done.getResult(), done);
  }
  return success();
}

struct KilnPipelineDotOperandsPass final
    : kiln::impl::KilnPipelineDotOperandsBase<KilnPipelineDotOperandsPass> {
  using Base::Base;
  void runOnOperation() override {
    unsigned stages = numStages >= 2 ? numStages : 4;
    // Loops with exactly one dot directly in their body (the slot argument is per loop).
    llvm::MapVector<Operation *, SmallVector<DotOp>> dots;
    getOperation()->walk([&](DotOp dot) {
      if (auto loop = dyn_cast<scf::ForOp>(dot->getParentOp()))
        dots[loop].push_back(dot);
    });
    for (auto &[loop, list] : dots)
      if (list.size() == 1)
        (void)pipelineDot(cast<scf::ForOp>(loop), list.front(), stages, numWarps);
  }
};

} // namespace
