//===- PipelineDotOperands.cpp - Dot operands through cp.async rings ------===//
//
// This file implements -kiln-pipeline-dot-operands (see Passes.td): the loads feeding a loop's
// dot become cp.async copies into shared rings issued num-stages - 1 iterations ahead, and the
// dot reads its operands from the rings (kiln_gpu.shared_dot, lowered to wgmma).
//
// Group accounting: the prologue commits num-stages - 1 groups (iterations 0 .. S-2); iteration
// i commits one more (iteration i + S - 1) after waiting. When iteration i waits, S - 1 + i
// groups are committed and group i must be complete, so S - 2 may stay in flight. The slot
// iteration i + S - 1 writes is the one iteration i - 1 read; its dot waited for its wgmmas and
// the barrier of this iteration's wait orders every warp's reads before the new copies.
//
//===----------------------------------------------------------------------===//

#include "LoopSlices.h"
#include "kiln/Conversion/KilnToLLVM.h"
#include "kiln/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/MapVector.h"

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

/// A load the pipeline can turn into async copies: one use (the dot), not volatile, zero
/// where masked off, 16-bit floats, address from the induction variable and invariants.
FailureOr<SmallVector<Operation *>> copyableLoad(Value operand, scf::ForOp loop, DotOp dot) {
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
  return getAddressSlice(load, loop);
}

/// Clones `load`'s address slice for induction value `iv` and issues its copy into `slot` of
/// `ring`, masked by `inRange` too.
void emitCopy(OpBuilder &b, LoadOp load, ArrayRef<Operation *> slice, Value loopIv, Value iv,
              Value inRange, Value ring, Value slot) {
  IRMapping map;
  map.map(loopIv, iv);
  for (Operation *op : slice)
    b.clone(*op, map);
  Location loc = load.getLoc();
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
  FailureOr<SmallVector<Operation *>> aSlice = copyableLoad(dot.getA(), loop, dot);
  FailureOr<SmallVector<Operation *>> bSlice = copyableLoad(dot.getB(), loop, dot);
  if (failed(aSlice) || failed(bSlice))
    return failure();
  auto aLoad = dot.getA().getDefiningOp<LoadOp>(), bLoad = dot.getB().getDefiningOp<LoadOp>();

  // As many stages as asked for that fit.
  Type elem = aTy.getElementType();
  auto ringA = kgpu::SharedBufferType::get(loop.getContext(),
                                           {stages, aTy.getDimSize(0), aTy.getDimSize(1)}, elem);
  auto ringB = kgpu::SharedBufferType::get(loop.getContext(),
                                           {stages, bTy.getDimSize(0), bTy.getDimSize(1)}, elem);
  int64_t perStage = getSharedSlotBytes(ringA) + getSharedSlotBytes(ringB);
  while (stages > 2 && stages * perStage > kRingBudget)
    --stages;
  if (stages * perStage > kRingBudget)
    return failure();
  ringA = kgpu::SharedBufferType::get(loop.getContext(),
                                      {stages, aTy.getDimSize(0), aTy.getDimSize(1)}, elem);
  ringB = kgpu::SharedBufferType::get(loop.getContext(),
                                      {stages, bTy.getDimSize(0), bTy.getDimSize(1)}, elem);

  // The dot may run on while the next iteration starts when its accumulator only goes from
  // one iteration's dot to the next: then copies run S - 2 iterations ahead (the slot being
  // refilled is the one the dot before the previous one read), else S - 1.
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
  unsigned distance = overlap ? stages - 2 : stages - 1;

  // Rings and the prologue: iterations 0 .. distance - 1, one group each.
  IRRewriter rewriter(loop.getContext());
  rewriter.setInsertionPoint(loop);
  Location loc = loop.getLoc();
  Value a = kgpu::LocalAllocOp::create(rewriter, loc, ringA, rewriter.getI32IntegerAttr(0),
                                       BoolAttr());
  Value b = kgpu::LocalAllocOp::create(rewriter, loc, ringB, rewriter.getI32IntegerAttr(1),
                                       BoolAttr());
  Value loopIv = loop.getInductionVar();
  for (unsigned s = 0; s < distance; ++s) {
    Value iv = s == 0 ? loop.getLowerBound() : ivAfter(rewriter, loc, loop, loop.getLowerBound(), s);
    Value inRange = emitInRange(rewriter, loc, loop, iv);
    Value slot = i32Constant(rewriter, loc, s);
    emitCopy(rewriter, aLoad, *aSlice, loopIv, iv, inRange, a, slot);
    emitCopy(rewriter, bLoad, *bSlice, loopIv, iv, inRange, b, slot);
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

  // Top of the body: this iteration's slot is ready; start iteration i + distance.
  rewriter.setInsertionPointToStart(forOp.getBody());
  kgpu::AsyncWaitOp::create(rewriter, loc, rewriter.getI32IntegerAttr(distance - 1));
  Value ahead = ivAfter(rewriter, loc, forOp, iv, distance);
  Value inRange = emitInRange(rewriter, loc, forOp, ahead);
  Value writeSlot = arith::RemUIOp::create(
      rewriter, loc,
      arith::AddIOp::create(rewriter, loc, slot, i32Constant(rewriter, loc, distance)),
      i32Constant(rewriter, loc, stages));
  emitCopy(rewriter, aLoad, *aSlice, iv, ahead, inRange, a, writeSlot);
  emitCopy(rewriter, bLoad, *bSlice, iv, ahead, inRange, b, writeSlot);
  kgpu::AsyncCommitOp::create(rewriter, loc);

  // The dot reads the rings.
  rewriter.setInsertionPoint(dot);
  auto shared = kgpu::SharedDotOp::create(rewriter, dot.getLoc(), dot.getType(), a, slot, b, slot,
                                          dot.getC(), overlap ? 1 : 0);
  rewriter.replaceOp(dot, shared.getResult());
  rewriter.eraseOp(aLoad);
  rewriter.eraseOp(bLoad);
  for (ArrayRef<Operation *> slice : {ArrayRef<Operation *>(*aSlice), ArrayRef<Operation *>(*bSlice)})
    for (Operation *op : llvm::reverse(slice))
      if (op->use_empty() && op->getBlock())
        rewriter.eraseOp(op);

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
    unsigned stages = numStages >= 2 ? numStages : 3;
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
