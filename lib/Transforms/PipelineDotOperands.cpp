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
// buffer: flash attention's q), or a tile the body computes (flash attention's p, which wgmma
// reads from registers). The dots of one loop share its slot argument and its copy groups:
// each iteration commits one group holding every ring's copy for one later iteration.
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

#include "LoopSlices.h"
#include "kiln/Conversion/KilnToLLVM.h"
#include "kiln/Passes.h"
#include "kiln/Runtime.h"

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

namespace {

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

/// A descriptor load the TMA can copy into a ring: one use (the dot), 16-bit floats, a 2-D
/// block TMA boxes cover (rt::getTensorMapBox), offsets computable for any iteration from the
/// induction variable and loop invariants.
FailureOr<CopyPlan> planTmaCopy(DescriptorLoadOp desc, Value operand, scf::ForOp loop) {
  RankedTensorType type = desc.getType();
  Type elem = type.getElementType();
  if (desc->getBlock() != loop.getBody() || !operand.hasOneUse() || type.getRank() != 2 ||
      (!elem.isF16() && !elem.isBF16()) ||
      !rt::getTensorMapBox(std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
                           elem.getIntOrFloatBitWidth() / 8))
    return failure();
  FailureOr<SmallVector<Operation *>> slice = getAddressSlice(desc, loop);
  if (failed(slice))
    return failure();
  CopyPlan plan;
  plan.desc = desc;
  plan.slice = *slice;
  return plan;
}

/// Whether a load's `other` is a float or integer zero.
bool isZeroOther(Value other) {
  return matchPattern(other, m_AnyZeroFloat()) || matchPattern(other, m_Zero());
}

/// A load the pipeline can turn into async copies: one use (the dot), not volatile, zero
/// where masked off, 16-bit floats or 8-bit types, its operands computable for any
/// iteration.
FailureOr<CopyPlan> planCopy(Value operand, scf::ForOp loop) {
  if (auto desc = operand.getDefiningOp<DescriptorLoadOp>())
    return planTmaCopy(desc, operand, loop);
  auto load = operand.getDefiningOp<LoadOp>();
  if (!load || load->getBlock() != loop.getBody() || !operand.hasOneUse() ||
      load.getIsVolatile())
    return failure();
  Type elem = getElementTypeOrSelf(load.getType());
  if (!elem.isF16() && !elem.isBF16() && !elem.isInteger(8) && !isFp8Type(elem))
    return failure();
  if (Value other = load.getOther())
    if (!isZeroOther(other))
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
/// `inRange` too. `loopIv` is the induction variable the slice reads. Values `seed` maps are
/// taken as they are, and the slice's ops in `skip` (which computed them) are not cloned.
void emitCopy(OpBuilder &b, const CopyPlan &plan, Value loopIv, Value iv, ValueRange loopArgs,
              ValueRange args, int64_t ahead, Value inRange, Value ring, Value slot,
              Value barriers, const IRMapping *seed = nullptr,
              const llvm::SmallPtrSetImpl<Operation *> *skip = nullptr) {
  IRMapping map;
  if (seed)
    map = *seed;
  map.map(loopIv, iv);
  if (DescriptorLoadOp desc = plan.desc) {
    for (Operation *op : plan.slice)
      b.clone(*op, map);
    SmallVector<Value> coords =
        llvm::map_to_vector(desc.getOffsets(), [&](Value v) { return map.lookupOrDefault(v); });
    kgpu::TmaCopyOp::create(b, desc.getLoc(), desc.getDesc(), coords, ring, slot, barriers,
                            inRange);
    return;
  }
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
    if (!plan.incrementOps.contains(op) && !(skip && skip->contains(op)))
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
};

/// Whether `dot` can read rings (f16/bf16 inputs of one type with f32 accumulators and K a
/// multiple of 16, or fp8 (wgmma only) with f32 and int8 with int32 and K a multiple of 32; a
/// warpgroup accumulator layout, or without wgmma the mma.sync one) and how its operands get
/// there; B must be a copyable load of the loop. 8-bit operands are read K-major from rings
/// only (-kiln-assign-layouts makes their rings K-major). mma.sync reads both from rings.
FailureOr<DotPlan> planDot(DotOp dot, scf::ForOp loop, unsigned numWarps, bool wgmma) {
  MLIRContext *ctx = loop.getContext();
  RankedTensorType aTy = dot.getA().getType(), bTy = dot.getB().getType();
  auto cTy = cast<RankedTensorType>(dot.getC().getType());
  Type in = aTy.getElementType();
  bool eightBit = in.getIntOrFloatBitWidth() == 8;
  if (in != bTy.getElementType() ||
      !wgmmaTypes(in, cTy.getElementType(), aTy.getDimSize(1)) ||
      (wgmma ? !getWgmmaAccumulatorLayout(ctx, cTy.getShape(), numWarps)
             : isFp8Type(in) || !getMmaAccumulatorLayout(ctx, cTy.getShape(), numWarps)))
    return failure();
  FailureOr<CopyPlan> b = planCopy(dot.getB(), loop);
  if (failed(b) || (!wgmma && b->desc))
    return failure();
  DotPlan plan{dot, ASource::Ring, std::nullopt, LoadOp(), *b};
  Value a = dot.getA();
  if (FailureOr<CopyPlan> ring = planCopy(a, loop); succeeded(ring)) {
    if (!wgmma && ring->desc)
      return failure();
    plan.a = *ring;
    return plan;
  }
  if (auto load = a.getDefiningOp<LoadOp>(); load && !loop->isAncestor(load)) {
    Value other = load.getOther();
    if (load.getIsVolatile() || (other && !isZeroOther(other)))
      return failure();
    plan.aSource = ASource::Once;
    plan.aOnce = load;
    return plan;
  }
  // Computed in the body: the registers must be wgmma's A fragments, which the accumulator
  // layout of an M x K dot is (-kiln-assign-layouts gives A that layout).
  // A load with other uses stays where it is (its layout is the load's to choose).
  bool inBody = isa<BlockArgument>(a) ? cast<BlockArgument>(a).getOwner() == loop.getBody()
                                      : loop->isAncestor(a.getDefiningOp());
  if (!wgmma || eightBit || !inBody || a.getDefiningOp<LoadOp>() ||
      !getWgmmaAccumulatorLayout(ctx, aTy.getShape(), numWarps))
    return failure();
  plan.aSource = ASource::Registers;
  return plan;
}

/// The iteration argument `dot`'s result becomes when its only use is `loop`'s yield.
std::optional<unsigned> getYieldedIterArg(scf::ForOp loop, DotOp dot) {
  if (!dot->hasOneUse() || dot->getUses().begin()->getOwner() != loop.getBody()->getTerminator())
    return std::nullopt;
  return dot->getUses().begin()->getOperandNumber();
}

/// The select that restarts `dot`'s accumulator at zero now and then, C = select(cond, 0, x)
/// with x read by nothing else (a flattened persistent matmul at each new tile), or null.
arith::SelectOp getAccumulatorReset(DotOp dot) {
  auto select = dot.getC().getDefiningOp<arith::SelectOp>();
  if (!select || !select->hasOneUse() || !select.getCondition().getType().isInteger(1) ||
      !isZeroOther(select.getTrueValue()) || !select.getFalseValue().hasOneUse())
    return {};
  return select;
}

/// The accumulator iteration argument of a loop's only dot when the accumulator only goes
/// from one iteration's dot to the next (so the dot may run on into the next iteration),
/// through a reset to zero (getAccumulatorReset) or not; besides the yield the result may be
/// read inside scf.if ops of the body (a flattened loop's epilogue, which waits for it).
std::optional<unsigned> getChainedAccumulator(scf::ForOp loop, DotOp dot) {
  Block *body = loop.getBody();
  std::optional<unsigned> idx;
  for (OpOperand &use : dot->getUses()) {
    Operation *owner = use.getOwner();
    if (owner == body->getTerminator()) {
      if (idx)
        return std::nullopt;
      idx = use.getOperandNumber();
      continue;
    }
    Operation *at = body->findAncestorOpInBlock(*owner);
    if (!at || at == owner || !isa<scf::IfOp>(at))
      return std::nullopt;
  }
  Value c = dot.getC();
  if (arith::SelectOp reset = getAccumulatorReset(dot))
    c = reset.getFalseValue();
  if (!idx || c != loop.getRegionIterArgs()[*idx] || !c.hasOneUse())
    return std::nullopt;
  return idx;
}

/// Puts a dot_wait at the start of each block of an scf.if that reads `result` (a dot left
/// running), for the reads in it.
void waitInsideIfs(IRRewriter &rewriter, Value result) {
  llvm::MapVector<Block *, SmallVector<OpOperand *>> uses;
  for (OpOperand &use : result.getUses()) {
    Operation *owner = use.getOwner();
    auto ifOp = dyn_cast_or_null<scf::IfOp>(
        result.getParentBlock()->findAncestorOpInBlock(*owner));
    if (!ifOp || ifOp == owner)
      continue;
    for (Region *region : {&ifOp.getThenRegion(), &ifOp.getElseRegion()})
      if (Block *block = region->findAncestorBlockInRegion(*owner->getBlock()))
        uses[block].push_back(&use);
  }
  for (auto &[block, list] : uses) {
    rewriter.setInsertionPointToStart(block);
    auto wait = kgpu::DotWaitOp::create(rewriter, result.getLoc(), result.getType(), result);
    for (OpOperand *use : list)
      use->set(wait.getResult());
  }
}

/// In a loop whose dots all read rings, the iteration argument through which the last dot's
/// result reaches the next iteration when that dot may be left running across the back edge:
/// its result only goes to the yield, and an A it reads from registers is computed from an
/// earlier dot of the body. The next iteration's first dot then waits for it (wgmma groups
/// complete in order) before A's registers are written again; the accumulator itself is read
/// after a dot_wait placed before its first use.
std::optional<unsigned> getDeferredAccumulator(scf::ForOp loop, ArrayRef<DotPlan> plans) {
  if (plans.size() < 2)
    return std::nullopt;
  DotOp last = plans.back().dot;
  std::optional<unsigned> idx = getYieldedIterArg(loop, last);
  if (!idx || plans.back().aSource != ASource::Registers)
    return idx;
  // Does A depend on an earlier dot of the body?
  llvm::SmallPtrSet<Operation *, 4> earlier;
  for (const DotPlan &plan : plans.drop_back())
    earlier.insert(plan.dot);
  llvm::SmallPtrSet<Operation *, 32> seen;
  SmallVector<Value> worklist{last.getA()};
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || def->getBlock() != loop.getBody() || !seen.insert(def).second)
      continue;
    if (earlier.contains(def))
      return idx;
    llvm::append_range(worklist, def->getOperands());
  }
  return std::nullopt;
}

/// The op of `body` at or around the first use of `v` in it (its terminator when `v` has
/// none before).
Operation *firstUseIn(Block *body, Value v) {
  Operation *first = body->getTerminator();
  for (Operation *user : v.getUsers())
    if (Operation *at = body->findAncestorOpInBlock(*user); at && at->isBeforeInBlock(first))
      first = at;
  return first;
}

/// Whether some dot of the body is first read after a later dot was issued: flash attention
/// rotated so that iteration j multiplies q by block j's keys and then adds block j - 1's
/// p @ v, with the softmax of block j after both. Each dot is then waited for only where its
/// result is first read (see waitAtFirstUses), and the dots issued between run on.
bool hasDotReadAfterLaterDot(ArrayRef<DotPlan> plans) {
  if (plans.size() < 2)
    return false;
  Block *body = plans.front().dot->getBlock();
  for (size_t i = 0; i + 1 < plans.size(); ++i) {
    DotOp dot = plans[i].dot, next = plans[i + 1].dot;
    if (next->isBeforeInBlock(firstUseIn(body, dot.getResult())))
      return true;
  }
  return false;
}

/// Puts a dot_wait before the first read of each of `dots` (shared_dots of one block, in
/// block order, issued without waiting for themselves) that lets the dots issued in between
/// keep running; a dot read by nothing but the yield is waited for before it, so that every
/// dot of an iteration is done when the next begins.
void waitAtFirstUses(IRRewriter &rewriter, ArrayRef<kgpu::SharedDotOp> dots) {
  for (size_t i = 0; i < dots.size(); ++i) {
    kgpu::SharedDotOp dot = dots[i];
    Value result = dot.getResult();
    Operation *first = firstUseIn(dot->getBlock(), result);
    auto later = llvm::count_if(dots.drop_front(i + 1), [&](kgpu::SharedDotOp d) {
      return d.getOperation()->isBeforeInBlock(first);
    });
    rewriter.setInsertionPoint(first);
    auto wait = kgpu::DotWaitOp::create(rewriter, dot.getLoc(), result.getType(), result,
                                        rewriter.getI32IntegerAttr(int32_t(later)));
    result.replaceAllUsesExcept(wait.getResult(), wait);
  }
}

/// Notes for each tensor map a loop's TMA copies read the rows of its boxes (noteTmaBoxRows):
/// the whole block, up to 256 rows (the TMA's limit). False when a descriptor is not a kernel
/// argument.
bool recordTmaBoxRows(scf::ForOp loop, ArrayRef<DotPlan> plans) {
  auto func = loop->getParentOfType<func::FuncOp>();
  if (!func)
    return false;
  for (const DotPlan &plan : plans)
    for (const CopyPlan *copy : {plan.a ? &*plan.a : nullptr, &plan.b}) {
      if (!copy || !copy->desc)
        continue;
      auto arg = dyn_cast<BlockArgument>(DescriptorLoadOp(copy->desc).getDesc());
      if (!arg || arg.getOwner() != &func.getBody().front())
        return false;
    }
  for (const DotPlan &plan : plans)
    for (const CopyPlan *copy : {plan.a ? &*plan.a : nullptr, &plan.b}) {
      if (!copy || !copy->desc)
        continue;
      DescriptorLoadOp desc(copy->desc);
      noteTmaBoxRows(func, cast<BlockArgument>(desc.getDesc()).getArgNumber(),
                     int32_t(std::min<int64_t>(256, desc.getType().getDimSize(0))));
    }
  return true;
}

/// One-slot buffers already filled from a load before a loop, by load: a later loop that
/// the buffer's allocation dominates reads it as it is (the two loops of causal attention
/// share q).
using OnceBuffers = llvm::DenseMap<Operation *, Value>;

/// Pipelines the loads of `loop` that feed `plans` (the loop's dots that can read rings; see
/// the file comment). `allDots` is true when these are all the dots of the body. Without
/// `wgmma` (mma.sync) every dot completes in its iteration.
LogicalResult pipelineLoop(scf::ForOp loop, MutableArrayRef<DotPlan> plans, bool allDots,
                           unsigned stages, unsigned numWarps, bool wgmma, int64_t budget,
                           OnceBuffers &onceBuffers) {
  if (!isa<IntegerType>(loop.getInductionVar().getType()) || plans.empty())
    return failure();
  MLIRContext *ctx = loop.getContext();
  auto bufferType = [&](RankedTensorType tile, unsigned slots) {
    return kgpu::SharedBufferType::get(ctx, {slots, tile.getDimSize(0), tile.getDimSize(1)},
                                       tile.getElementType());
  };
  // As many stages as asked for that fit, next to the one-slot buffers.
  int64_t perStage = 0, once = 0;
  for (DotPlan &plan : plans) {
    RankedTensorType aTy = plan.dot.getA().getType(), bTy = plan.dot.getB().getType();
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
  // slot; the other loads by cp.async groups. A loop uses one or the other.
  int64_t tmaCopies = 0, cpAsyncCopies = 0, groupBytes = 0;
  for (DotPlan &plan : plans) {
    for (const CopyPlan *copy : {plan.a ? &*plan.a : nullptr, &plan.b}) {
      if (!copy)
        continue;
      if (copy->desc) {
        ++tmaCopies;
        RankedTensorType t = DescriptorLoadOp(copy->desc).getType();
        groupBytes += t.getNumElements() * t.getElementTypeBitWidth() / 8;
      } else {
        ++cpAsyncCopies;
      }
    }
    if (plan.aSource == ASource::Once)
      ++cpAsyncCopies;
  }
  bool tma = tmaCopies > 0;
  if (tma && cpAsyncCopies)
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

  // Rings and the prologue: iterations 0 .. distance - 1, one group each; the one-slot
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
    // for B.
    if (!aBuf && plan.aSource != ASource::Registers)
      aBuf = kgpu::LocalAllocOp::create(
          rewriter, loc, bufferType(aTy, plan.aSource == ASource::Ring ? stages : 1),
          rewriter.getI32IntegerAttr(0), tma ? rewriter.getBoolAttr(true) : BoolAttr());
    aBufs.push_back(aBuf);
    bBufs.push_back(kgpu::LocalAllocOp::create(rewriter, loc, bufferType(bTy, stages),
                                               rewriter.getI32IntegerAttr(1),
                                               tma ? rewriter.getBoolAttr(false) : BoolAttr()));
  }
  // With TMA copies after a running-on dot (4 or more slots), each slot also gets a barrier
  // every warp arrives on once its reads of the slot are done; thread 0 waits on it before
  // overwriting the slot, instead of a CTA barrier every iteration.
  bool emptyBarriers = tma && overlap && !lateCopies;
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
        rewriter.getI32IntegerAttr(copyBarriers ? int32_t(numWarps * kgpu::kWarpSize) : 1));
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
      if (op == innerOp ||
          (op != outerOp && llvm::any_of(op->getOperands(), [&](Value x) {
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
    SmallVector<Type> types = llvm::map_to_vector(others, [&](unsigned k) {
      return current[k].getType();
    });
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
      scf::YieldOp::create(rewriter, l, llvm::map_to_vector(others, [&](unsigned k) {
        return current[k];
      }));
    }
    for (auto [k, r] : llvm::zip(others, moved.getResults()))
      next[k] = r;
    return next;
  };
  // The start of a copy group for slot `slot`: one arrival expecting all its TMA bytes.
  auto startGroup = [&](Value slot, Value inRange) {
    if (tma)
      kgpu::MBarrierExpectOp::create(rewriter, loc, barriers, slot, inRange,
                                     rewriter.getI32IntegerAttr(int32_t(groupBytes)));
  };
  auto endGroup = [&](Value slot) {
    if (!tma)
      kgpu::AsyncCommitOp::create(rewriter, loc);
    if (copyBarriers)
      kgpu::AsyncArriveOp::create(rewriter, loc, barriers, slot);
  };
  Value loopIv = loop.getInductionVar();
  ValueRange loopArgs = loop.getRegionIterArgs();
  for (unsigned s = 0; s < distance; ++s) {
    Value iv = s == 0 ? loop.getLowerBound() : ivAfter(rewriter, loc, loop, loop.getLowerBound(), s);
    Value inRange = emitInRange(rewriter, loc, loop, iv);
    Value slot = i32Constant(rewriter, loc, s);
    startGroup(slot, inRange);
    for (auto [plan, aBuf, bBuf, filled] : llvm::zip(plans, aBufs, bBufs, aFilled)) {
      if (s == 0 && plan.aSource == ASource::Once && !filled)
        kgpu::AsyncCopyOp::create(rewriter, plan.aOnce.getLoc(), aBuf, slot,
                                  plan.aOnce.getPtr(), plan.aOnce.getMask());
      if (plan.aSource == ASource::Ring)
        emitCopy(rewriter, *plan.a, loopIv, iv, loopArgs, loop.getInitArgs(), s, inRange, aBuf,
                 slot, barriers);
      emitCopy(rewriter, plan.b, loopIv, iv, loopArgs, loop.getInitArgs(), s, inRange, bBuf,
               slot, barriers);
    }
    endGroup(slot);
  }

  // The current slot travels in a new iteration argument: 0, 1, ..., S-1, 0, ...; with TMA
  // copies so does the parity of the barrier phase the slot is at (it flips at each wrap).
  Value zero = i32Constant(rewriter, loc, 0);
  // The carried frontier (iteration `distance`'s first), then the slot.
  SmallVector<Value> inits;
  if (!frontier.empty())
    inits = emitFrontier(loopIv, ivAfter(rewriter, loc, loop, loop.getLowerBound(), distance));
  size_t carried = inits.size();
  inits.push_back(zero);
  if (tma || copyBarriers)
    inits.push_back(zero);
  auto newLoop = cast<LoopLikeOpInterface>(loop.getOperation())
                     .replaceWithAdditionalYields(
                         rewriter, inits, /*replaceInitOperandUsesInLoop=*/false,
                         [&](OpBuilder &yb, Location yloc, ArrayRef<BlockArgument> args) {
                           // The frontier's next values are set at the end of the body.
                           SmallVector<Value> yields(args.take_front(carried));
                           ArrayRef<BlockArgument> own = args.drop_front(carried);
                           Value next = arith::AddIOp::create(yb, yloc, own[0],
                                                              i32Constant(yb, yloc, 1));
                           Value wrap = arith::CmpIOp::create(yb, yloc, arith::CmpIPredicate::eq,
                                                              next, i32Constant(yb, yloc, stages));
                           yields.push_back(arith::SelectOp::create(
                               yb, yloc, wrap, i32Constant(yb, yloc, 0), next));
                           if (tma || copyBarriers)
                             yields.push_back(arith::XOrIOp::create(
                                 yb, yloc, own[1],
                                 arith::ExtUIOp::create(yb, yloc, yb.getI32Type(), wrap)));
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
    kgpu::MBarrierWaitOp::create(rewriter, loc, barriers, slot,
                                 forOp.getRegionIterArgs().back(), Value());
    if (copyBarriers)
      kgpu::ProxyFenceOp::create(rewriter, loc);
    else if (!emptyBarriers)
      kgpu::BarrierOp::create(rewriter, loc);
  };
  waitForSlot();
  ValueRange args = forOp.getRegionIterArgs();
  // The slot `n` iterations after this one's, modulo the ring.
  auto slotAfter = [&](int64_t n) -> Value {
    return arith::RemUIOp::create(
        rewriter, loc, arith::AddIOp::create(rewriter, loc, slot, i32Constant(rewriter, loc, n)),
        i32Constant(rewriter, loc, stages));
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
      Value wrapped = arith::ExtUIOp::create(
          rewriter, loc, rewriter.getI32Type(),
          arith::CmpIOp::create(rewriter, loc, arith::CmpIPredicate::ult, slot,
                                i32Constant(rewriter, loc, back)));
      Value phase = arith::XOrIOp::create(rewriter, loc, forOp.getRegionIterArgs().back(),
                                          wrapped);
      kgpu::MBarrierWaitOp::create(rewriter, loc, empties, writeSlot, phase,
                                   copyBarriers ? Value() : fromIteration(back));
    }
    startGroup(writeSlot, inRange);
    for (auto [plan, aBuf, bBuf] : llvm::zip(plans, aBufs, bBufs)) {
      if (plan.aSource == ASource::Ring)
        emitCopy(rewriter, *plan.a, iv, ahead, args, args, distance, inRange, aBuf, writeSlot,
                 barriers, &frontierArgs, &divisions);
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
  if (!copiesAfterDot && !copyBarriers)
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
    auto shared = kgpu::SharedDotOp::create(rewriter, dot.getLoc(), dot.getType(), a, aSlot, bBuf,
                                            slot, c, accumulate,
                                            overlap || deferred || waitAtUses ? 1 : 0);
    sharedDots.push_back(shared);
    if (copiesAfterDot) {
      rewriter.setInsertionPointAfter(shared);
      if (emptyBarriers) {
        // The dot waited for the previous iteration's: every warp is done with its slot.
        Value previous = slotAfter(stages - 1);
        kgpu::MBarrierArriveOp::create(rewriter, loc, empties, previous, fromIteration(1));
      }
      if (lateCopies && tma)
        kgpu::BarrierOp::create(rewriter, loc);
      else if (lateCopies)
        kgpu::AsyncWaitOp::create(rewriter, loc, rewriter.getI32IntegerAttr(distance - 1));
      issueCopies();
    }
    rewriter.replaceOp(dot, shared.getResult());
    if (reset)
      rewriter.eraseOp(reset);
    // A dot left running is waited for where an scf.if of the body reads it.
    if (overlap)
      waitInsideIfs(rewriter, shared.getResult());
  }
  if (waitAtUses)
    waitAtFirstUses(rewriter, sharedDots);
  if (copyBarriers) {
    // Every dot of the iteration is done: each warp says so for this slot, then the copies
    // go into the slot of the iteration before. (Issued right after the dots instead, their
    // address registers made ptxas wait for p @ v before the softmax rather than after it:
    // 244 registers against 227, and no faster on the H100; at the top of the iteration,
    // 0.95-0.99x Triton against 1.03-1.09x here.)
    rewriter.setInsertionPoint(forOp.getBody()->getTerminator());
    Value yes = arith::ConstantOp::create(rewriter, loc, rewriter.getBoolAttr(true));
    kgpu::MBarrierArriveOp::create(rewriter, loc, empties, slot, yes);
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
  // The copies replace the loads (the last ones were issued from them just above).
  for (DotPlan &plan : plans)
    for (const CopyPlan *copy : {plan.a ? &*plan.a : nullptr, &plan.b})
      if (copy)
        rewriter.eraseOp(copy->desc ? DescriptorLoadOp(copy->desc).getOperation()
                                    : LoadOp(copy->load).getOperation());
  // The original address computations may now be dead (their clones took over); an op in
  // several slices is erased once. A load before the loop goes when nothing else reads it.
  llvm::SmallPtrSet<Operation *, 32> erased;
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

  if (deferredArg) {
    // The deferred dot's accumulator is waited for before its first use in the body.
    BlockArgument acc = forOp.getRegionIterArgs()[*deferredArg];
    rewriter.setInsertionPoint(firstUseIn(forOp.getBody(), acc));
    auto done = kgpu::DotWaitOp::create(rewriter, loc, acc.getType(), acc);
    acc.replaceAllUsesExcept(done.getResult(), done);
  }
  // Nothing may still be multiplying, or copying, when the kernel goes on (or ends); the
  // wait's barrier also orders every warp's last reads before whatever reuses the rings'
  // shared memory next.
  rewriter.setInsertionPointAfter(forOp);
  if (overlap || deferredArg) {
    Value result = forOp.getResult(overlap ? *accArg : *deferredArg);
    auto done = kgpu::DotWaitOp::create(rewriter, loc, result.getType(), result);
    result.replaceAllUsesExcept(done.getResult(), done);
  }
  // (TMA copies past the last iteration were never issued: their predicate was false.)
  if (tma)
    kgpu::BarrierOp::create(rewriter, loc);
  else
    kgpu::AsyncWaitOp::create(rewriter, loc, rewriter.getI32IntegerAttr(0));
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
      SmallVector<DotPlan, 2> plans;
      for (DotOp dot : list)
        if (FailureOr<DotPlan> plan = planDot(dot, loop, numWarps, wgmma); succeeded(plan))
          plans.push_back(*plan);
      (void)pipelineLoop(loop, plans, plans.size() == list.size(), stages, numWarps, wgmma,
                         ringBudget, onceBuffers);
    }
  }
};

} // namespace
