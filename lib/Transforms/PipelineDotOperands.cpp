//===- PipelineDotOperands.cpp - Dot operands through cp.async/TMA rings --===//
//
// This file implements -kiln-pipeline-dot-operands (see Passes.td): the loads feeding a loop's
// dots become cp.async copies into shared rings issued num-stages - 1 iterations ahead, and the
// dots read their operands from the rings (kiln_gpu.shared_dot, lowered to wgmma on sm_90a,
// else to ldmatrix and mma.sync: then both operands are loads, every dot is done within its
// iteration and the copies run S - 1 ahead from the top of the body).
//
// Each dot of the body is planned on its own: B must be a load of the loop; A is one too (a
// ring), or a load before the loop (copied once, with the first group, into a one-slot
// buffer: flash attention's q, also through a descriptor), or a tile the body computes (flash
// attention's p, which wgmma reads from registers). The dots of one loop share its slot argument
// and its copy groups: each iteration commits one group holding every ring's copy for one later
// iteration.
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
// In a loop with several dots only the last may run on (4 or more slots, S - 2 ahead), when
// its result only reaches the next iteration and a register A comes from an earlier dot: the
// next iteration's first dot waits for every earlier wgmma group (they complete in order)
// before the body writes A's registers again, and a dot_wait guards the accumulator's first
// use. On the H100 this took flash attention from 0.86-0.87x to 0.89-0.90x Triton.
// When a dot's result is first read after a later dot of the body was issued (flash attention
// rotated so that q @ k_j and p_{j-1} @ v_{j-1} go out together and the softmax of block j
// follows), every dot is issued without waiting for itself and a dot_wait before each
// result's first read lets the dots issued in between run on: the softmax overlaps the
// second dot (FlashAttention-3's intra-warpgroup overlap). Every dot is still done within
// its iteration, so the copies still run S - 1 iterations ahead; with cp.async (3 or more
// slots) they complete on barriers instead of a wait and a CTA barrier (one arrival per
// thread, cp.async.mbarrier.arrive), and go at the end of the iteration, after each warp has
// arrived on the slot's empty barrier and every thread has waited on the empty barrier of
// the slot they overwrite (the one iteration i - 1 read).
//
// Tensor descriptor loads (kiln.descriptor_load) are copied by the TMA on the same schedule:
// the group of iteration j is one mbarrier_expect of all its bytes on barrier j mod S, then the
// tma_copy ops, all predicated on iteration j existing (no copy is in flight after the loop).
// Instead of async_wait, an iteration waits on its slot's barrier at the phase parity the slot
// is at (an iteration argument beside the slot, flipped at each wrap), then a barrier plays
// the part of the wait's own: every warp is done with the slots the next copies overwrite.
// With S >= 4 the copies of a loop whose only dot runs on go after that dot, into the slot
// read two iterations back, and the iteration has no CTA barrier at all: a second set of
// barriers (mbarrier_alloc with one arrival per warp) says when every warp is done with a
// slot. After its dot, whose wgmma wait covers the previous iteration's, each warp arrives on
// the previous slot's (mbarrier_arrive); thread 0 waits on the slot it is about to overwrite
// (mbarrier_wait with a predicate), at the parity of that slot's last use. On the H100 the
// barrier was worth 0-3% of the TMA matmul.
// Each block is copied in boxes of up to 256 rows (the wgmma accumulator layout reads A's rows
// in their natural order); the rows per map go to the module (kTmaBoxRowsAttr) for the host's
// encoding.
//
//===----------------------------------------------------------------------===//

#include "DotOperandPlans.h"
#include "LoopSlices.h"
#include "kiln/Dialect/KilnGPU/IR/DotLayouts.h"
#include "kiln/Passes.h"
#include "kiln/Target/NVIDIA/TensorMap.h"
#include "kiln/Transforms/DescriptorAccess.h"

#include "mlir/IR/Dominance.h"
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

using namespace kiln::pipeline;

namespace {

using OnceBuffers = llvm::DenseMap<Operation *, Value>;

/// The slots-deep shared buffer type of a ring for `tile`.
kgpu::SharedBufferType ringBufferType(MLIRContext *ctx, RankedTensorType tile, unsigned slots) {
  return kgpu::SharedBufferType::get(ctx, {slots, tile.getDimSize(0), tile.getDimSize(1)},
                                     tile.getElementType());
}

/// How a loop is pipelined: decided before anything is rewritten.
struct LoopSchedule {
  unsigned stages; ///< ring slots: as many as asked for that fit the budget
  bool tma;        ///< descriptor loads copied by the TMA (else cp.async groups)
  /// (TMA) the other loads copied by cp.async in the same groups: every thread's copies arrive
  /// on the slot's barrier too, which expects the TMA's bytes without an arrival of its own
  bool mixed;
  int64_t groupBytes;                  ///< TMA bytes one slot's copies bring
  std::optional<unsigned> accArg;      ///< the only dot's accumulator runs on (chained)
  std::optional<unsigned> deferredArg; ///< the last of several dots runs on (deferred)
  bool overlap;                        ///< the only dot runs on into the next iteration (3+ slots)
  bool waitAtUses;                     ///< dots are waited for where their results are read
  bool lateCopies;                     ///< copies issued after the running dot (3 slots)
  unsigned distance;                   ///< how many iterations ahead copies run
  /// (TMA, dots waited for where read) the last dot runs on across the back edge: its
  /// accumulator argument, waited for before the next iteration's first dot
  std::optional<unsigned> carriedArg;
};

/// Step 1 of pipelineLoop: the schedule of `loop` with `plans` for `stages` slots asked for
/// within `budget` bytes of shared memory; failure when the loop cannot be pipelined (TMA and
/// cp.async copies mixed without wgmma, rings that do not fit, boxes TMA cannot copy). Records the
/// TMA box rows of the loop's tensor maps (kTmaBoxRowsAttr) when it uses the TMA.
FailureOr<LoopSchedule> scheduleLoop(scf::ForOp loop, MutableArrayRef<DotPlan> plans, bool allDots,
                                     unsigned stages, bool wgmma, int64_t budget) {
  MLIRContext *ctx = loop.getContext();
  auto bufferType = [&](RankedTensorType tile, unsigned slots) {
    return ringBufferType(ctx, tile, slots);
  };
  // As many stages as asked for that fit, next to the one-slot buffers.
  int64_t perStage = 0, once = 0;
  for (DotPlan &plan : plans) {
    RankedTensorType aTy = plan.dot.getA().getType(), bTy = plan.dot.getB().getType();
    if (!plan.bSharedWith) // (a B read from another plan's ring takes no bytes of its own)
      perStage += getSharedSlotBytes(bufferType(bTy, 1));
    if (plan.aSource == ASource::Ring)
      perStage += getSharedSlotBytes(bufferType(aTy, 1));
    else if (plan.aSource == ASource::Once)
      once += getSharedSlotBytes(bufferType(aTy, 1)); // counted even when shared
  }
  // `budget` (the ring-budget option) is the target's shared memory per block less 3 KiB for
  // barriers and small scratch: 224 KiB on the H100 (-kiln-convert-to-llvm fails, naming the
  // kernel, when rings and static buffers together do not fit). Flash attention at D = 128
  // takes q and three 128x128 K and V stages (224 KiB): 0-4% faster than two on the H100.
  while (stages > 2 && once + stages * perStage > budget)
    --stages;
  if (once + stages * perStage > budget)
    return failure();

  // Tensor descriptor loads are copied by the TMA, completing on one transaction barrier per
  // slot; the other loads by cp.async groups. A wgmma loop may mix them (an MoE layer's
  // expert weights through a descriptor, its tokens gathered by pointers): every thread's
  // cp.async copies of a group then arrive on the slot's barrier, which expects the TMA's
  // bytes besides.
  int64_t tmaCopies = 0, cpAsyncCopies = 0, groupBytes = 0;
  for (DotPlan &plan : plans) {
    for (const CopyPlan *copy : {plan.a ? &*plan.a : nullptr, &plan.b}) {
      if (!copy || (copy == &plan.b && plan.bSharedWith)) // (another plan's copy)
        continue;
      if (copy->desc) {
        ++tmaCopies;
        RankedTensorType t = DescriptorLoadOp(copy->desc).getType();
        groupBytes += t.getNumElements() * t.getElementTypeBitWidth() / 8;
      } else {
        ++cpAsyncCopies;
      }
    }
  }
  // (A loaded once before the loop is copied by cp.async either way: with TMA rings it is
  // waited for before the loop.)
  bool tma = tmaCopies > 0, mixed = tma && cpAsyncCopies;
  if (mixed && !wgmma)
    return failure();
  if (tma && !recordTmaBoxRows(loop, plans))
    return failure();

  // The dot may run on while the next iteration starts when it is the loop's only one, reads
  // no registers, and its accumulator only goes from one iteration's dot to the next; see the
  // file comment for how far ahead copies run and where they are issued.
  // In a loop with several dots, the last may run on into the next iteration (deferred) when
  // there are 4 or more slots: copies then run S - 2 ahead, into the slots the dots before
  // the previous iteration's read.
  std::optional<unsigned> accArg, deferredArg;
  if (wgmma && allDots && plans.size() == 1 && plans[0].aSource != ASource::Registers)
    accArg = getChainedAccumulator(loop, plans[0].dot);
  else if (wgmma && allDots && stages >= 4)
    deferredArg = getDeferredAccumulator(loop, plans);
  bool overlap = stages >= 3 && accArg;
  // Dots read after a later dot was issued are waited for where they are read instead.
  bool waitAtUses = wgmma && allDots && !deferredArg && hasDotReadAfterLaterDot(plans);
  bool lateCopies = overlap && stages == 3;
  unsigned distance = (overlap && !lateCopies) || deferredArg ? stages - 2 : stages - 1;
  // With TMA rings and dots waited for where they are read, the last dot runs on across the
  // back edge when its result only goes to the next iteration, which first reads it after
  // issuing a dot of its own (FlashAttention-3's order: q @ k_j issued, acc rescaled, then
  // p @ v). ptxas moves a wait for it within its iteration up to the top of the softmax;
  // across the back edge, before the next iteration's first dot, it stays there.
  std::optional<unsigned> carriedArg;
  if (waitAtUses && tma && !mixed && stages >= 3)
    carriedArg = getCarriedAccumulator(loop, plans);
  return LoopSchedule{stages,  tma,        mixed,      groupBytes, accArg,    deferredArg,
                      overlap, waitAtUses, lateCopies, distance,   carriedArg};
}

/// Step 4 of pipelineLoop: the copies replace the loads of `plans` (the last ones were issued
/// from them; a load several dots read goes with the last); the original address computations
/// may now be dead (their clones took over), an op in several slices erased once; a load
/// before the loop goes when nothing else reads it, else its one-slot buffer is noted in
/// `onceBuffers` for later loops.
void eraseReplacedLoads(IRRewriter &rewriter, MutableArrayRef<DotPlan> plans, ArrayRef<Value> aBufs,
                        OnceBuffers &onceBuffers) {
  // A load several dots read goes with the last of them.
  llvm::SmallPtrSet<Operation *, 32> erased;
  for (DotPlan &plan : plans)
    for (const CopyPlan *copy : {plan.a ? &*plan.a : nullptr, &plan.b})
      if (copy) {
        if (copy->trans)
          rewriter.eraseOp(copy->trans);
        if (copy->reshape && copy->reshape->use_empty() && erased.insert(copy->reshape).second)
          rewriter.eraseOp(copy->reshape);
        Operation *load = copy->desc ? DescriptorLoadOp(copy->desc).getOperation()
                                     : LoadOp(copy->load).getOperation();
        if (load->use_empty() && erased.insert(load).second)
          rewriter.eraseOp(load);
      }
  for (DotPlan &plan : plans) {
    for (const CopyPlan *copy : {plan.a ? &*plan.a : nullptr, &plan.b})
      if (copy)
        for (Operation *op : llvm::reverse(copy->slice))
          if (!erased.contains(op) && op->use_empty()) {
            erased.insert(op);
            rewriter.eraseOp(op);
          }
  }
  for (auto [plan, aBuf] : llvm::zip(plans, aBufs))
    if (plan.aSource == ASource::Once) {
      onceBuffers[plan.aOnce] = aBuf;
      if (plan.aOnce->use_empty() && erased.insert(plan.aOnce).second) {
        onceBuffers.erase(plan.aOnce); // no dot reads it any more
        rewriter.eraseOp(plan.aOnce);
      }
    }
}

/// Step 5 of pipelineLoop: nothing may still be multiplying, or copying, when the kernel goes on
/// after `forOp` (or ends); the wait's barrier also orders every warp's last reads before
/// whatever reuses the rings' shared memory next.
void drainAfterLoop(IRRewriter &rewriter, scf::ForOp forOp, const LoopSchedule &schedule) {
  Location loc = forOp.getLoc();
  rewriter.setInsertionPointAfter(forOp);
  if (schedule.overlap || schedule.deferredArg || schedule.carriedArg) {
    Value result = forOp.getResult(schedule.overlap       ? *schedule.accArg
                                   : schedule.deferredArg ? *schedule.deferredArg
                                                          : *schedule.carriedArg);
    auto done = kgpu::DotWaitOp::create(rewriter, loc, result.getType(), result);
    result.replaceAllUsesExcept(done.getResult(), done);
  }
  // (TMA copies past the last iteration were never issued: their predicate was false.)
  if (schedule.tma && !schedule.mixed)
    kgpu::BarrierOp::create(rewriter, loc);
  else
    kgpu::AsyncWaitOp::create(rewriter, loc, rewriter.getI32IntegerAttr(0));
}

/// Pipelines the loads of `loop` that feed `plans` (the loop's dots that can read rings; see
/// the file comment). `allDots` is true when these are all the dots of the body. Without
/// `wgmma` (mma.sync) every dot completes in its iteration. Steps: 1 scheduleLoop (slots,
/// copy engine, which dot runs on, how far ahead), 2 the rings and the prologue's copies,
/// 3 the loop rewritten (slot waits, copies ahead, dots on the rings, carried frontier),
/// 4 eraseReplacedLoads, 5 drainAfterLoop.
LogicalResult pipelineLoop(scf::ForOp loop, MutableArrayRef<DotPlan> plans, bool allDots,
                           unsigned askedStages, unsigned numWarps, bool wgmma, int64_t budget,
                           OnceBuffers &onceBuffers) {
  if (!isa<IntegerType>(loop.getInductionVar().getType()) || plans.empty())
    return failure();
  MLIRContext *ctx = loop.getContext();
  auto bufferType = [&](RankedTensorType tile, unsigned slots) {
    return ringBufferType(ctx, tile, slots);
  };
  shareBRings(plans, wgmma);
  FailureOr<LoopSchedule> schedule = scheduleLoop(loop, plans, allDots, askedStages, wgmma, budget);
  if (failed(schedule))
    return failure();
  const unsigned stages = schedule->stages, distance = schedule->distance;
  const bool tma = schedule->tma, mixed = schedule->mixed, overlap = schedule->overlap;
  const bool waitAtUses = schedule->waitAtUses, lateCopies = schedule->lateCopies;
  const int64_t groupBytes = schedule->groupBytes;
  const std::optional<unsigned> accArg = schedule->accArg, deferredArg = schedule->deferredArg;
  const std::optional<unsigned> carriedArg = schedule->carriedArg;

  // Step 2: rings and the prologue: iterations 0 .. distance - 1, one group each; the one-slot
  // buffers join the first.
  IRRewriter rewriter(ctx);
  rewriter.setInsertionPoint(loop);
  Location loc = loop.getLoc();
  SmallVector<Value> aBufs, bBufs;
  SmallVector<bool> aFilled; // a one-slot buffer an earlier loop filled
  for (DotPlan &plan : plans) {
    RankedTensorType aTy = plan.dot.getA().getType(), bTy = plan.dot.getB().getType();
    Value aBuf;
    if (plan.aSource == ASource::Once)
      if (Value done = onceBuffers.lookup(plan.aOnce);
          done && DominanceInfo().properlyDominates(done, loop))
        aBuf = done;
    aFilled.push_back(bool(aBuf));
    // A TMA copy writes its rows contiguous along the block's last dimension: K for A, N
    // for B, the other way round for an operand that is the transpose of its block. A
    // cp.async ring of the same loop (a descriptor load the TMA cannot take, copied as its
    // masked load) is ordered by -kiln-assign-layouts from its copies.
    auto tmaMajor = [&](bool isA, const CopyPlan *copy) {
      return tma && (!copy || copy->desc) ? rewriter.getBoolAttr(isA != (copy && copy->trans))
                                          : BoolAttr();
    };
    if (!aBuf && plan.aSource != ASource::Registers)
      aBuf = kgpu::LocalAllocOp::create(
          rewriter, loc, bufferType(aTy, plan.aSource == ASource::Ring ? stages : 1),
          rewriter.getI32IntegerAttr(0), tmaMajor(true, plan.a ? &*plan.a : nullptr));
    aBufs.push_back(aBuf);
    if (plan.bSharedWith) {
      bBufs.push_back(bBufs[*plan.bSharedWith]);
      continue;
    }
    bBufs.push_back(kgpu::LocalAllocOp::create(rewriter, loc, bufferType(bTy, stages),
                                               rewriter.getI32IntegerAttr(1),
                                               tmaMajor(false, &plan.b)));
  }
  // With TMA copies after a running-on dot (4 or more slots), each slot also gets a barrier
  // every warp arrives on once its reads of the slot are done; thread 0 waits on it before
  // overwriting the slot, instead of a CTA barrier every iteration.
  // TMA rings of a loop whose dots are all done within their iteration (3 or more slots):
  // the same empty barriers, every warp arriving at the end of the body (its dots done), and
  // the copies stay at the top, S - 1 ahead, thread 0 waiting on the empty barrier of the
  // slot they overwrite (the previous iteration's) instead of a CTA barrier: only its
  // warpgroup waits for the other's previous iteration. Tutorial 06's forward through
  // descriptors on the H100 (where that barrier cost 2.7 stalls per issue): +5-11% at D 128,
  // +0-5% at D 64; copies at the end of the body instead (as cp.async's on barriers, below)
  // lost 6-7% at D 64, the next iteration's copies then starting an iteration later.
  // (Not with cp.async copies in the groups: every thread copies, so every thread would wait
  // for the slot; the barrier at the top of the iteration orders the reads before them.)
  bool endEmpties = tma && !mixed && !overlap && !deferredArg && stages >= 3;
  bool emptyBarriers = (tma && !mixed && overlap && !lateCopies) || endEmpties;
  // cp.async rings of a loop whose dots are waited for where they are read (3 or more slots)
  // complete on barriers too, with no CTA barrier in the loop: each thread arrives on the
  // slot's barrier once its copies have landed (one arrival per thread) and every thread
  // waits for it; after the last dot each warp arrives on the slot's empty barrier, then
  // every thread waits until every warp is done with the slot iteration i - 1 read and
  // copies iteration i + S - 1 into it. So a warpgroup may run up to an iteration ahead of
  // the other instead of meeting it at a barrier every iteration.
  bool copyBarriers = !tma && waitAtUses && stages >= 3;
  Value barriers, empties;
  if (tma || copyBarriers)
    barriers = kgpu::MBarrierAllocOp::create(
        rewriter, loc, kgpu::MBarriersType::get(ctx, stages),
        rewriter.getI32IntegerAttr(copyBarriers || mixed ? int32_t(numWarps * kgpu::kWarpSize)
                                                         : 1));
  if (emptyBarriers || copyBarriers)
    empties = kgpu::MBarrierAllocOp::create(rewriter, loc, kgpu::MBarriersType::get(ctx, stages),
                                            rewriter.getI32IntegerAttr(int32_t(numWarps)));
  // Integer divisions in the copies' scalar address work (a flattened persistent loop's tile
  // index from the induction variable) are done a stage early: their results (the frontier)
  // are computed for iteration i + D + 1 at the end of iteration i and carried, so the copies
  // at the top of the body start without a chain of divisions ahead of them (on the H100 that
  // chain delayed the copies enough to cost 20%). The cheap scalar ops after them are still
  // recomputed at the top, so the axis analysis keeps seeing `k * 64` as a multiple of 64.
  llvm::SetVector<Operation *> scalarSlice;
  llvm::SmallPtrSet<Operation *, 16> divisions;
  SmallVector<Operation *> scalarOps; // body order
  SmallVector<Value> frontier;
  if (!tma && !copyBarriers) {
    for (DotPlan &plan : plans)
      for (const CopyPlan *copy : {plan.a ? &*plan.a : nullptr, &plan.b}) {
        if (!copy)
          continue;
        for (Operation *op : copy->slice) {
          if (copy->incrementOps.contains(op) ||
              llvm::any_of(op->getResultTypes(), [](Type t) { return isa<ShapedType>(t); }))
            continue;
          scalarSlice.insert(op);
          if (isa<arith::DivSIOp, arith::DivUIOp, arith::RemSIOp, arith::RemUIOp,
                  arith::FloorDivSIOp, arith::CeilDivSIOp, arith::CeilDivUIOp>(op))
            divisions.insert(op);
        }
      }
    scalarOps = scalarSlice.takeVector();
    llvm::sort(scalarOps, [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
    for (Operation *op : scalarOps)
      if (divisions.contains(op))
        frontier.push_back(op->getResult(0));
  }
  // The frontier's values for iteration `at` (the scalar ops cloned there).
  auto emitFrontier = [&](Value sliceIv, Value at) {
    IRMapping map;
    map.map(sliceIv, at);
    for (Operation *op : scalarOps)
      rewriter.clone(*op, map);
    return llvm::map_to_vector(frontier, [&](Value v) { return map.lookup(v); });
  };
  // The frontier for iteration `at` = i + D + 1 at the end of iteration i, `current` being
  // iteration i + D's. A flattened loop's indices o = iv / n and j = iv % n (a unit step, n
  // invariant) step by one without dividing: j + 1, wrapping to 0 and moving o on; the other
  // divisions, when they read o but neither iv nor j (a persistent kernel's tile math), are
  // redone only where o moved, once per tile. Anything else is recomputed from `at`.
  auto emitNextFrontier = [&](scf::ForOp forOp, ArrayRef<Value> current, Value at) {
    Value iv = forOp.getInductionVar();
    int outerIdx = -1, innerIdx = -1;
    Value n;
    if (matchPattern(forOp.getStep(), m_One()))
      for (auto [k, v] : llvm::enumerate(frontier)) {
        Operation *op = v.getDefiningOp();
        if (op->getOperand(0) != iv || !forOp.isDefinedOutsideOfLoop(op->getOperand(1)) ||
            (n && n != op->getOperand(1)))
          continue;
        if (isa<arith::DivUIOp>(op) && outerIdx < 0)
          outerIdx = int(k), n = op->getOperand(1);
        else if (isa<arith::RemUIOp>(op) && innerIdx < 0)
          innerIdx = int(k), n = op->getOperand(1);
      }
    if (outerIdx < 0 || innerIdx < 0)
      return emitFrontier(iv, at);
    Operation *outerOp = frontier[outerIdx].getDefiningOp();
    Operation *innerOp = frontier[innerIdx].getDefiningOp();
    // The scalar ops that read iv or j, directly or through the slice (o reads iv, but it
    // steps on by itself).
    llvm::SmallPtrSet<Operation *, 16> readsInner;
    for (Operation *op : scalarOps)
      if (op == innerOp || (op != outerOp && llvm::any_of(op->getOperands(), [&](Value x) {
                              Operation *def = x.getDefiningOp();
                              return x == iv || (def && readsInner.contains(def));
                            })))
        readsInner.insert(op);
    for (auto [k, v] : llvm::enumerate(frontier))
      if (int(k) != outerIdx && int(k) != innerIdx && readsInner.contains(v.getDefiningOp()))
        return emitFrontier(iv, at);
    Location l = forOp.getLoc();
    Type t = n.getType();
    Value one = arith::ConstantOp::create(rewriter, l, t, rewriter.getIntegerAttr(t, 1));
    Value zero = arith::ConstantOp::create(rewriter, l, t, rewriter.getIntegerAttr(t, 0));
    Value j1 = arith::AddIOp::create(rewriter, l, current[innerIdx], one);
    Value wrap = arith::CmpIOp::create(rewriter, l, arith::CmpIPredicate::eq, j1, n);
    Value newJ = arith::SelectOp::create(rewriter, l, wrap, zero, j1);
    Value newO = arith::AddIOp::create(rewriter, l, current[outerIdx],
                                       arith::ExtUIOp::create(rewriter, l, t, wrap));
    SmallVector<Value> next(current.begin(), current.end());
    next[outerIdx] = newO;
    next[innerIdx] = newJ;
    SmallVector<unsigned> others;
    for (unsigned k = 0; k < frontier.size(); ++k)
      if (int(k) != outerIdx && int(k) != innerIdx)
        others.push_back(k);
    if (others.empty())
      return next;
    SmallVector<Type> types =
        llvm::map_to_vector(others, [&](unsigned k) { return current[k].getType(); });
    auto moved = scf::IfOp::create(rewriter, l, types, wrap, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(moved.thenBlock());
      IRMapping map;
      map.map(iv, at);
      map.map(frontier[outerIdx], newO);
      map.map(frontier[innerIdx], newJ);
      for (Operation *op : scalarOps)
        if (op != outerOp && !readsInner.contains(op))
          rewriter.clone(*op, map);
      scf::YieldOp::create(rewriter, l, llvm::map_to_vector(others, [&](unsigned k) {
                             return map.lookup(frontier[k]);
                           }));
      rewriter.setInsertionPointToStart(moved.elseBlock());
      scf::YieldOp::create(rewriter, l,
                           llvm::map_to_vector(others, [&](unsigned k) { return current[k]; }));
    }
    for (auto [k, r] : llvm::zip(others, moved.getResults()))
      next[k] = r;
    return next;
  };
  // The start of a copy group for slot `slot`: one arrival expecting all its TMA bytes (mixed
  // with cp.async copies, the expectation alone: every thread arrives at the end).
  auto startGroup = [&](Value slot, Value inRange) {
    if (tma)
      kgpu::MBarrierExpectOp::create(rewriter, loc, barriers, slot, inRange,
                                     rewriter.getI32IntegerAttr(int32_t(groupBytes)),
                                     mixed ? rewriter.getUnitAttr() : UnitAttr());
  };
  auto endGroup = [&](Value slot) {
    if (!tma || mixed)
      kgpu::AsyncCommitOp::create(rewriter, loc);
    if (copyBarriers || mixed)
      kgpu::AsyncArriveOp::create(rewriter, loc, barriers, slot);
  };
  Value loopIv = loop.getInductionVar();
  ValueRange loopArgs = loop.getRegionIterArgs();
  for (unsigned s = 0; s < distance; ++s) {
    Value iv =
        s == 0 ? loop.getLowerBound() : ivAfter(rewriter, loc, loop, loop.getLowerBound(), s);
    Value inRange = emitInRange(rewriter, loc, loop, iv);
    Value slot = i32Constant(rewriter, loc, s);
    startGroup(slot, inRange);
    for (auto [plan, aBuf, bBuf, filled] : llvm::zip(plans, aBufs, bBufs, aFilled)) {
      if (s == 0 && plan.aSource == ASource::Once && !filled)
        kgpu::AsyncCopyOp::create(rewriter, plan.aOnce.getLoc(), aBuf, slot, plan.aOnce.getPtr(),
                                  plan.aOnce.getMask());
      if (plan.aSource == ASource::Ring)
        emitCopy(rewriter, *plan.a, loopIv, iv, loopArgs, loop.getInitArgs(), s, inRange, aBuf,
                 slot, barriers);
      if (!plan.bSharedWith)
        emitCopy(rewriter, plan.b, loopIv, iv, loopArgs, loop.getInitArgs(), s, inRange, bBuf, slot,
                 barriers);
    }
    endGroup(slot);
  }
  // With TMA rings the one-slot buffers' cp.async copies are not in any barrier's count:
  // they complete, and every warp sees them, before the loop (the rings' copies run on).
  if (tma && llvm::any_of(llvm::zip(plans, aFilled), [](auto planFilled) {
        return std::get<0>(planFilled).aSource == ASource::Once && !std::get<1>(planFilled);
      })) {
    kgpu::AsyncCommitOp::create(rewriter, loc);
    kgpu::AsyncWaitOp::create(rewriter, loc, rewriter.getI32IntegerAttr(0));
    kgpu::BarrierOp::create(rewriter, loc);
  }

  // Step 3: the loop, rewritten. The current slot travels in a new iteration argument: 0, 1, ...,
  // S-1, 0, ...; with TMA copies so does the parity of the barrier phase the slot is at (it flips
  // at each wrap).
  Value zero = i32Constant(rewriter, loc, 0);
  // The carried frontier (iteration `distance`'s first), then the slot.
  SmallVector<Value> inits;
  if (!frontier.empty())
    inits = emitFrontier(loopIv, ivAfter(rewriter, loc, loop, loop.getLowerBound(), distance));
  size_t carried = inits.size();
  inits.push_back(zero);
  if (tma || copyBarriers)
    inits.push_back(zero);
  auto newLoop =
      cast<LoopLikeOpInterface>(loop.getOperation())
          .replaceWithAdditionalYields(
              rewriter, inits, /*replaceInitOperandUsesInLoop=*/false,
              [&](OpBuilder &yb, Location yloc, ArrayRef<BlockArgument> args) {
                // The frontier's next values are set at the end of the body.
                SmallVector<Value> yields(args.take_front(carried));
                ArrayRef<BlockArgument> own = args.drop_front(carried);
                Value next = arith::AddIOp::create(yb, yloc, own[0], i32Constant(yb, yloc, 1));
                Value wrap = arith::CmpIOp::create(yb, yloc, arith::CmpIPredicate::eq, next,
                                                   i32Constant(yb, yloc, stages));
                yields.push_back(
                    arith::SelectOp::create(yb, yloc, wrap, i32Constant(yb, yloc, 0), next));
                if (tma || copyBarriers)
                  yields.push_back(arith::XOrIOp::create(
                      yb, yloc, own[1], arith::ExtUIOp::create(yb, yloc, yb.getI32Type(), wrap)));
                return yields;
              });
  if (failed(newLoop))
    return failure();
  auto forOp = cast<scf::ForOp>(newLoop->getOperation());
  unsigned firstNew = forOp.getNumRegionIterArgs() - inits.size();
  Value slot = forOp.getRegionIterArgs()[firstNew + carried];
  Value iv = forOp.getInductionVar();
  ValueRange carriedArgs = forOp.getRegionIterArgs().slice(firstNew, carried);
  IRMapping frontierArgs;
  frontierArgs.map(frontier, carriedArgs);

  // Top of the body: this iteration's slots are ready. With TMA copies every thread waits on
  // the slot's barrier; the barrier of async_wait (no cp.async group is in flight) then
  // orders every warp's reads of earlier slots before the copies issued next.
  rewriter.setInsertionPointToStart(forOp.getBody());
  // Waits for this iteration's slot, then (TMA) a barrier or (cp.async) the wait's own;
  // cp.async copies completing on barriers need a proxy fence instead.
  auto waitForSlot = [&] {
    if (!barriers)
      return (void)kgpu::AsyncWaitOp::create(rewriter, loc,
                                             rewriter.getI32IntegerAttr(distance - 1));
    kgpu::MBarrierWaitOp::create(rewriter, loc, barriers, slot, forOp.getRegionIterArgs().back(),
                                 Value());
    if (copyBarriers || mixed)
      kgpu::ProxyFenceOp::create(rewriter, loc);
    if (!copyBarriers && !emptyBarriers)
      kgpu::BarrierOp::create(rewriter, loc);
  };
  waitForSlot();
  ValueRange args = forOp.getRegionIterArgs();
  // The slot `n` iterations after this one's (0 < n < S), modulo the ring. Without a power-of-
  // two ring the remainder is a compare and a select (the slot is below S): an unsigned
  // remainder by 3 or 5 was a multiply-high chain on the uniform datapath every iteration,
  // among the dispatch stalls ncu sampled in tutorial 06's backward (the change itself timed
  // within noise: bench/results/2026-11-27-h100-h200-session26.md).
  auto slotAfter = [&](int64_t n) -> Value {
    Value sum = arith::AddIOp::create(rewriter, loc, slot, i32Constant(rewriter, loc, n));
    Value ring = i32Constant(rewriter, loc, stages);
    if (llvm::isPowerOf2_64(stages))
      return arith::RemUIOp::create(rewriter, loc, sum, ring);
    Value wraps = arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::uge, sum, ring);
    return arith::SelectOp::create(rewriter, loc, wraps,
                                   arith::SubIOp::create(rewriter, loc, sum, ring), sum);
  };
  // Whether this is iteration `n` or a later one.
  auto fromIteration = [&](int64_t n) {
    auto pred = forOp.getUnsignedCmp() ? arith::CmpIPredicate::uge : arith::CmpIPredicate::sge;
    return arith::CmpIOp::create(rewriter, loc, pred, iv,
                                 ivAfter(rewriter, loc, forOp, forOp.getLowerBound(), n));
  };
  // Starts iteration i + distance in the slots iteration i - 1 read.
  auto issueCopies = [&] {
    Value ahead = ivAfter(rewriter, loc, forOp, iv, distance);
    Value inRange = emitInRange(rewriter, loc, forOp, ahead);
    Value writeSlot = slotAfter(distance);
    if (emptyBarriers || copyBarriers) {
      // The slot was iteration i - back's (back = S - distance: 2 for TMA, 1 for cp.async):
      // thread 0 (TMA) or every thread (cp.async) waits until every warp is done with it, at
      // the phase parity of that use (this iteration's, flipped where the slot index wrapped
      // in between). Before that use (the first iterations) the parity is the one before the
      // barrier's first phase, which try_wait takes as complete.
      int64_t back = stages - distance;
      Value wrapped =
          arith::ExtUIOp::create(rewriter, loc, rewriter.getI32Type(),
                                 arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult,
                                                       slot, i32Constant(rewriter, loc, back)));
      Value phase = arith::XOrIOp::create(rewriter, loc, forOp.getRegionIterArgs().back(), wrapped);
      auto wait = kgpu::MBarrierWaitOp::create(rewriter, loc, empties, writeSlot, phase,
                                               copyBarriers ? Value() : fromIteration(back));
      // (A carried last dot: warp 0 waits, behind a warp-uniform branch; see below.)
      if (carriedArg)
        wait.setWholeWarp(true);
    }
    startGroup(writeSlot, inRange);
    for (auto [plan, aBuf, bBuf] : llvm::zip(plans, aBufs, bBufs)) {
      if (plan.aSource == ASource::Ring)
        emitCopy(rewriter, *plan.a, iv, ahead, args, args, distance, inRange, aBuf, writeSlot,
                 barriers, &frontierArgs, &divisions);
      if (!plan.bSharedWith)
        emitCopy(rewriter, plan.b, iv, ahead, args, args, distance, inRange, bBuf, writeSlot,
                 barriers, &frontierArgs, &divisions);
    }
    endGroup(writeSlot);
  };
  // TMA copies of a loop whose only dot runs on (S >= 4, S - 2 ahead) go right after the
  // dot: the slot they overwrite was read two iterations back, and thread 0 waits on that
  // slot's barrier of every warp being done with it (no CTA barrier), so its warpgroup issues
  // its wgmma before the copies instead of after them.
  bool copiesAfterDot = lateCopies || (tma && overlap);
  // (A carried last dot: the copies go at the end of the body, see below.)
  if (!copiesAfterDot && !copyBarriers && !carriedArg)
    issueCopies();

  // The dots read the rings.
  SmallVector<kgpu::SharedDotOp> sharedDots;
  for (auto [i, plan, aBuf, bBuf] : llvm::enumerate(plans, aBufs, bBufs)) {
    DotOp dot = plan.dot;
    bool deferred = deferredArg && i + 1 == plans.size();
    rewriter.setInsertionPoint(dot);
    Value a = plan.aSource == ASource::Registers ? dot.getA() : aBuf;
    Value aSlot = plan.aSource == ASource::Ring   ? slot
                  : plan.aSource == ASource::Once ? i32Constant(rewriter, loc, 0)
                                                  : Value();
    // An accumulator restarted at zero by a select feeds the dot as it is, the select's
    // condition saying when not to add it (wgmma's scale-d), so the registers stay chained.
    Value c = dot.getC(), accumulate;
    arith::SelectOp reset = accArg ? getAccumulatorReset(dot) : arith::SelectOp();
    if (reset) {
      c = reset.getFalseValue();
      Value yes = arith::ConstantOp::create(rewriter, loc, rewriter.getBoolAttr(true));
      accumulate = arith::XOrIOp::create(rewriter, loc, reset.getCondition(), yes);
    }
    auto shared =
        kgpu::SharedDotOp::create(rewriter, dot.getLoc(), dot.getType(), a, aSlot, bBuf, slot, c,
                                  accumulate, overlap || deferred || waitAtUses ? 1 : 0);
    if (plan.bTransposedView)
      shared.setBTransposed(true);
    sharedDots.push_back(shared);
    if (copiesAfterDot) {
      rewriter.setInsertionPointAfter(shared);
      if (emptyBarriers) {
        // The dot waited for the previous iteration's: every warp is done with its slot.
        Value previous = slotAfter(stages - 1);
        kgpu::MBarrierArriveOp::create(rewriter, loc, empties, previous, fromIteration(1));
      }
      // Every warp is past its wait for the previous iteration's dot, so the slot it read
      // may be overwritten: a barrier is all the copies need. (With cp.async an async_wait of
      // distance - 1 groups here waited for nothing, the top of the iteration having waited
      // already, and its lowering added a second proxy fence an iteration.)
      if (lateCopies)
        kgpu::BarrierOp::create(rewriter, loc);
      issueCopies();
    }
    rewriter.replaceOp(dot, shared.getResult());
    if (reset)
      rewriter.eraseOp(reset);
    // A dot left running is waited for where an scf.if of the body reads it.
    if (overlap)
      waitInsideIfs(rewriter, shared.getResult());
  }
  if (carriedArg) {
    // Every dot but the last is waited for where it is read. The last runs on across the back
    // edge, beside the rest of its iteration (the softmax): the next iteration waits for it
    // before its first dot (ptxas cannot tell which group a wait_group 1 leaves running across
    // the back edge, and then serializes every wgmma), then each warp is done with the slot
    // the previous iteration read. The copies go at the end of the body, S - 1 ahead, into
    // that slot: warp 0 waits until every warp has arrived on it (this iteration), behind a
    // branch ptxas knows to be warp-uniform (whole_warp: thread 0's spin loop there made ptxas
    // build the loop's wgmma descriptors in vector registers), then thread 0 copies.
    for (size_t i = 0; i + 1 < sharedDots.size(); ++i)
      waitAtFirstUse(rewriter, sharedDots, i);
    BlockArgument acc = forOp.getRegionIterArgs()[*carriedArg];
    rewriter.setInsertionPoint(sharedDots.front());
    auto done = kgpu::DotWaitOp::create(rewriter, loc, acc.getType(), acc);
    acc.replaceAllUsesExcept(done.getResult(), done);
    rewriter.setInsertionPointAfter(done);
    Value previous = slotAfter(stages - 1);
    Value second = fromIteration(1);
    kgpu::MBarrierArriveOp::create(rewriter, loc, empties, previous, second);
    rewriter.setInsertionPoint(forOp.getBody()->getTerminator());
    issueCopies();
  } else if (waitAtUses) {
    waitAtFirstUses(rewriter, sharedDots);
  } else if (wgmma && !overlap && !deferredArg) {
    overlapLastDot(rewriter, sharedDots.back()); // (in block order, as the plans)
  }
  if (copyBarriers || (endEmpties && !carriedArg)) {
    // Every dot of the iteration is done: each warp says so for this slot, then (cp.async)
    // the copies go into the slot of the iteration before. (Issued right after the dots instead,
    // their address registers made ptxas wait for p @ v before the softmax rather than after it:
    // 244 registers against 227, and no faster on the H100; at the top of the iteration,
    // 0.95-0.99x Triton against 1.03-1.09x here.)
    rewriter.setInsertionPoint(forOp.getBody()->getTerminator());
    Value yes = arith::ConstantOp::create(rewriter, loc, rewriter.getBoolAttr(true));
    kgpu::MBarrierArriveOp::create(rewriter, loc, empties, slot, yes);
    if (copyBarriers)
      issueCopies();
  }
  // The frontier for the copies of the next iteration, i + D + 1, off the copies' path, in a
  // branch of its own (taken while that iteration exists): in the same block as the dots,
  // ptxas spread the divisions between the wgmmas of the iteration, and the tensor cores
  // waited for them.
  if (!frontier.empty()) {
    Operation *yield = forOp.getBody()->getTerminator();
    rewriter.setInsertionPoint(yield);
    Value nextIv = ivAfter(rewriter, loc, forOp, iv, distance + 1);
    SmallVector<Value> current(carriedArgs);
    auto ifOp = scf::IfOp::create(rewriter, loc, TypeRange(ValueRange(current)),
                                  emitInRange(rewriter, loc, forOp, nextIv),
                                  /*withElseRegion=*/true);
    rewriter.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(rewriter, loc, emitNextFrontier(forOp, current, nextIv));
    rewriter.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(rewriter, loc, current);
    for (auto [k, v] : llvm::enumerate(ifOp.getResults()))
      yield->setOperand(firstNew + k, v);
  }
  eraseReplacedLoads(rewriter, plans, aBufs, onceBuffers);

  if (deferredArg) {
    // The deferred dot's accumulator is waited for before its first use in the body.
    BlockArgument acc = forOp.getRegionIterArgs()[*deferredArg];
    rewriter.setInsertionPoint(firstUseIn(forOp.getBody(), acc));
    auto done = kgpu::DotWaitOp::create(rewriter, loc, acc.getType(), acc);
    acc.replaceAllUsesExcept(done.getResult(), done);
  }
  drainAfterLoop(rewriter, forOp, *schedule);
  return success();
}

struct KilnPipelineDotOperandsPass final
    : kiln::impl::KilnPipelineDotOperandsBase<KilnPipelineDotOperandsPass> {
  using Base::Base;
  void runOnOperation() override {
    unsigned stages = numStages >= 2 ? numStages : 4;
    // The dots directly in a loop's body share its slot argument and copy groups.
    llvm::MapVector<Operation *, SmallVector<DotOp>> dots;
    getOperation()->walk([&](DotOp dot) {
      if (auto loop = dyn_cast<scf::ForOp>(dot->getParentOp()))
        dots[loop].push_back(dot);
    });
    OnceBuffers onceBuffers;
    for (auto &[op, list] : dots) {
      auto loop = cast<scf::ForOp>(op);
      // A read through a descriptor before the loop (tutorial 06's q = desc_q.load(...)) is
      // copied once like a pointer load: its masked load now, which -kiln-lower-descriptors
      // would make of it anyway (the TMA takes only loads of a loop).
      if (wgmma)
        for (DotOp dot : list)
          if (auto desc = dot.getA().getDefiningOp<DescriptorLoadOp>();
              desc && !loop->isAncestor(desc))
            (void)lowerDescriptorLoad(desc);
      // A descriptor load in the loop that the TMA cannot copy (a block of more than two
      // dimensions not 1 along the outer ones, a row under 32 bytes) is its masked load now,
      // so that the rings copy it with cp.async instead of the loop loading it where it is
      // read.
      for (DotOp dot : list)
        for (Value operand : {dot.getA(), dot.getB()})
          if (DescriptorLoadOp desc = loadBehindViews(operand);
              desc && desc->getBlock() == loop.getBody() &&
              failed(planTmaCopy(desc, desc.getResult(), loop)))
            lowerDescriptorLoadForDot(desc);
      auto planAll = [&] {
        SmallVector<DotPlan, 2> plans;
        for (DotOp dot : list)
          if (FailureOr<DotPlan> plan = planDot(dot, loop, numWarps, wgmma); succeeded(plan))
            plans.push_back(*plan);
        return plans;
      };
      SmallVector<DotPlan, 2> plans = planAll();
      // Without wgmma a loop copies by the TMA or by cp.async, not both: where its operands
      // would mix them (a TMA-able descriptor beside a masked load), the descriptor loads
      // become masked loads too, so that every operand is copied ahead rather than none.
      if (!wgmma && mixesCopyEngines(plans)) {
        llvm::SetVector<Operation *> descs; // (one load several dots read, once)
        for (DotPlan &plan : plans)
          for (CopyPlan *copy : {plan.a ? &*plan.a : nullptr, &plan.b})
            if (copy && copy->desc)
              descs.insert(copy->desc);
        for (Operation *desc : descs)
          lowerDescriptorLoadForDot(cast<DescriptorLoadOp>(desc));
        plans = planAll();
      }
      (void)pipelineLoop(loop, plans, plans.size() == list.size(), stages, numWarps, wgmma,
                         ringBudget, onceBuffers);
    }
  }
};

} // namespace
