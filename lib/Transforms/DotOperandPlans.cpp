//===- DotOperandPlans.cpp - Planning a loop's dot operand rings ----------===//
//
// This file implements the planning half of -kiln-pipeline-dot-operands (DotOperandPlans.h):
// copy plans for the loads feeding a loop's dots, dot plans, and the accumulator and wait
// analyses the rewrite in PipelineDotOperands.cpp follows.
//
//===----------------------------------------------------------------------===//

#include "DotOperandPlans.h"
#include "LoopSlices.h"
#include "kiln/Dialect/KilnGPU/IR/DotLayouts.h"
#include "kiln/Target/NVIDIA/TensorMap.h"
#include "kiln/Transforms/DescriptorAccess.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include "llvm/ADT/SmallPtrSet.h"
#include <functional>

#define DEBUG_TYPE "kiln-pipeline-dot-operands"

using namespace mlir;
using namespace kiln;

namespace kiln::pipeline {

/// Accepts, for getAddressSlice, the iteration arguments that are inductions: `p` yielded as
/// `addptr(p, inc)` (Triton's `a_ptrs += BLOCK_K * stride_ak`) or an integer `x` yielded as
/// `x + inc` (a block pointer's offset moved by `tl.advance`), `inc` loop-invariant; records
/// them and the ops computing their increments in `plan`.
std::function<bool(BlockArgument)> inductionAcceptor(CopyPlan &plan, scf::ForOp loop,
                                                     llvm::SetVector<Operation *> &increments) {
  return [&plan, loop, &increments](BlockArgument arg) mutable {
    unsigned idx = arg.getArgNumber() - 1;
    Value inc = getInductionIncrement(arg, loop, increments);
    if (!inc)
      return false; // not an induction: the next value is not known yet
    if (!llvm::is_contained(llvm::make_first_range(plan.inductions), idx))
      plan.inductions.push_back({idx, inc});
    return true;
  };
}

/// The slice of `op` with inductions accepted, the increments' ops added, in body order.
LogicalResult sliceWithInductions(CopyPlan &plan, Operation *op, scf::ForOp loop) {
  llvm::SetVector<Operation *> increments;
  FailureOr<SmallVector<Operation *>> slice =
      getAddressSlice(op, loop, inductionAcceptor(plan, loop, increments));
  if (failed(slice))
    return failure();
  llvm::SetVector<Operation *> all(slice->begin(), slice->end());
  for (Operation *inc : increments) {
    all.insert(inc);
    plan.incrementOps.insert(inc);
  }
  plan.slice.assign(all.begin(), all.end());
  llvm::sort(plan.slice, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return success();
}

/// Whether every use of `v` is an operand of a dot of `loop`'s body, directly or through a
/// 2-D transpose read by that dot only (tutorial 06's backward multiplies by a loaded qT and
/// by its transpose).
static bool onlyDotsRead(Value v, scf::ForOp loop) {
  for (Operation *user : v.getUsers()) {
    if (auto trans = dyn_cast<TransOp>(user)) {
      if (!trans->hasOneUse() || trans->getBlock() != loop.getBody())
        return false;
      user = *trans->getUsers().begin();
    }
    auto dot = dyn_cast<DotOp>(user);
    if (!dot || dot->getBlock() != loop.getBody())
      return false;
  }
  return true;
}

/// The reshape of a descriptor's block to its last two dimensions, the others being 1 (an
/// expert's [1, N, K] block of a [E, N, K] tensor read as N x K), or null.
static ReshapeOp dropUnitBlockDims(DescriptorLoadOp desc) {
  RankedTensorType type = desc.getType();
  if (type.getRank() <= 2 || !desc->hasOneUse())
    return {};
  auto reshape = dyn_cast<ReshapeOp>(*desc->getUsers().begin());
  if (!reshape || reshape.getAllowReorder() ||
      reshape.getType().getShape() != type.getShape().take_back(2))
    return {};
  return reshape;
}

/// A descriptor load the TMA can copy into a ring: read by dots only (onlyDotsRead; each gets
/// a ring of its own unless shareBRings lets it read another's), 16-bit floats or 8-bit
/// elements (fp8, int8) read K-major (getDotReductionDim: the TMA copies blocks as they are,
/// and wgmma reads 8-bit operands K-major only; others stay element loads), a 2-D block
/// TMA boxes cover (nvidia::getTensorMapBox) or one of more dimensions whose outer ones are 1,
/// reshaped to its last two (dropUnitBlockDims), offsets computable for any iteration from the
/// induction variable, inductions and loop invariants.
FailureOr<CopyPlan> planTmaCopy(DescriptorLoadOp desc, Value operand, scf::ForOp loop) {
  RankedTensorType type = desc.getType();
  Type elem = type.getElementType();
  ReshapeOp reshape = dropUnitBlockDims(desc);
  if (desc->getBlock() != loop.getBody() || (type.getRank() != 2 && !reshape) ||
      (reshape && reshape->getBlock() != loop.getBody()) ||
      !onlyDotsRead(reshape ? reshape.getResult() : desc.getResult(), loop) ||
      (!elem.isF16() && !elem.isBF16() && !isFp8Type(elem) && !elem.isInteger(8)) ||
      (elem.getIntOrFloatBitWidth() == 8 &&
       getDotReductionDim(reshape ? reshape.getResult() : desc.getResult()) != 1) ||
      !nvidia::getTensorMapBox(std::vector<int64_t>(type.getShape().begin(), type.getShape().end()),
                               elem.getIntOrFloatBitWidth() / 8))
    return failure();
  CopyPlan plan;
  plan.desc = desc;
  plan.reshape = reshape;
  if (failed(sliceWithInductions(plan, desc, loop)))
    return failure();
  return plan;
}

/// Whether a load's `other` is a float or integer zero.
bool isZeroOther(Value other) {
  return matchPattern(other, m_AnyZeroFloat()) || matchPattern(other, m_Zero());
}

/// A load the pipeline can turn into async copies: read by dots only (onlyDotsRead; the dot,
/// or a 2-D transpose whose one use is the dot), not volatile, zero where masked off, 16-bit
/// floats or 8-bit types, its operands computable for any iteration.
FailureOr<CopyPlan> planCopy(Value operand, scf::ForOp loop) {
  if (auto trans = operand.getDefiningOp<TransOp>()) {
    // B.T of a block loaded N x K (or A.T of one loaded K x M): the ring holds the block as
    // loaded, contiguous along the other dimension of the dot operand.
    if (!operand.hasOneUse() || trans->getBlock() != loop.getBody() ||
        trans.getType().getRank() != 2)
      return failure();
    FailureOr<CopyPlan> plan = planCopy(trans.getSrc(), loop);
    if (succeeded(plan))
      plan->trans = trans;
    return plan;
  }
  if (auto desc = operand.getDefiningOp<DescriptorLoadOp>())
    return planTmaCopy(desc, operand, loop);
  if (auto reshape = operand.getDefiningOp<ReshapeOp>())
    if (auto desc = reshape.getSrc().getDefiningOp<DescriptorLoadOp>();
        desc && dropUnitBlockDims(desc) == reshape)
      return planTmaCopy(desc, operand, loop);
  auto load = operand.getDefiningOp<LoadOp>();
  // Each dot reading the load gets a ring and a copy of its own, or with wgmma reads an
  // earlier dot's ring (shareBRings); the load goes once no dot reads it any more.
  if (!load || load->getBlock() != loop.getBody() || !onlyDotsRead(load.getResult(), loop) ||
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
  if (failed(sliceWithInductions(plan, load, loop)))
    return failure();
  return plan;
}

DescriptorLoadOp loadBehindViews(Value operand) {
  while (Operation *def = operand.getDefiningOp()) {
    if (auto desc = dyn_cast<DescriptorLoadOp>(def))
      return desc;
    if (auto trans = dyn_cast<TransOp>(def); trans && trans.getType().getRank() == 2)
      operand = trans.getSrc();
    else if (auto reshape = dyn_cast<ReshapeOp>(def); reshape && !reshape.getAllowReorder())
      operand = reshape.getSrc();
    else
      break;
  }
  return {};
}

void lowerDescriptorLoadForDot(DescriptorLoadOp desc) {
  Value v = lowerDescriptorLoad(desc);
  auto up = v.getDefiningOp<ReshapeOp>(); // the tile reshaped to the block, when they differ
  if (!up)
    return;
  Value tile = up.getSrc();
  for (Operation *user : llvm::make_early_inc_range(up->getUsers()))
    if (auto down = dyn_cast<ReshapeOp>(user);
        down && !down.getAllowReorder() && down.getType() == tile.getType()) {
      down.getResult().replaceAllUsesWith(tile);
      down->erase();
    }
  if (up->use_empty())
    up->erase();
}

bool mixesCopyEngines(ArrayRef<DotPlan> plans) {
  bool tma = false, cpAsync = false;
  for (const DotPlan &plan : plans)
    for (const CopyPlan *copy : {plan.a ? &*plan.a : nullptr, &plan.b})
      if (copy && !(copy == &plan.b && plan.bSharedWith))
        (copy->desc ? tma : cpAsync) = true;
  return tma && cpAsync;
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
              ValueRange args, int64_t ahead, Value inRange, Value ring, Value slot, Value barriers,
              const IRMapping *seed, const llvm::SmallPtrSetImpl<Operation *> *skip) {
  IRMapping map;
  if (seed)
    map = *seed;
  map.map(loopIv, iv);
  Location loc = plan.desc ? plan.desc->getLoc() : plan.load->getLoc();
  // Increments first (they read invariants only), then the inductions' values, then the rest.
  for (Operation *op : plan.slice)
    if (plan.incrementOps.contains(op))
      b.clone(*op, map);
  for (auto [idx, inc] : plan.inductions) {
    Value base = args[idx];
    Value at = ahead == 0 ? base
                          : emitInductionStep(b, loc, base,
                                              scaleBy(b, loc, map.lookupOrDefault(inc), ahead));
    map.map(loopArgs[idx], at);
  }
  for (Operation *op : plan.slice)
    if (!plan.incrementOps.contains(op) && !(skip && skip->contains(op)))
      b.clone(*op, map);
  if (DescriptorLoadOp desc = plan.desc) {
    SmallVector<Value> coords =
        llvm::map_to_vector(desc.getOffsets(), [&](Value v) { return map.lookupOrDefault(v); });
    kgpu::TmaCopyOp::create(b, loc, desc.getDesc(), coords, ring, slot, barriers, inRange);
    return;
  }
  LoadOp load = plan.load;
  Value ptr = map.lookupOrDefault(load.getPtr());
  Value mask = splatMaskLike(b, loc, inRange, ptr.getType());
  if (load.getMask())
    mask = arith::AndIOp::create(b, loc, map.lookupOrDefault(load.getMask()), mask);
  kgpu::AsyncCopyOp::create(b, loc, ring, slot, ptr, mask, /*transposed=*/bool(plan.trans));
}

/// lb + n * step in the induction variable's type.
Value ivAfter(OpBuilder &b, Location loc, scf::ForOp loop, Value from, int64_t n) {
  Type t = loop.getInductionVar().getType();
  Value count = arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, n));
  return arith::AddIOp::create(b, loc, from, arith::MulIOp::create(b, loc, count, loop.getStep()));
}

/// The i32 constant `v`.
Value i32Constant(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32Type(), b.getI32IntegerAttr(v));
}

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
  if (in != bTy.getElementType() || !wgmmaSupports(in, cTy.getElementType(), aTy.getDimSize(1)) ||
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

void shareBRings(MutableArrayRef<DotPlan> plans, bool wgmma) {
  if (!wgmma)
    return;
  for (unsigned i = 0; i < plans.size(); ++i) {
    CopyPlan &b = plans[i].b;
    Value block = b.load ? b.load.getResult() : b.desc ? b.desc.getResult() : Value();
    if (!block || getElementTypeOrSelf(block.getType()).getIntOrFloatBitWidth() != 16)
      continue;
    for (unsigned j = 0; j < i; ++j) {
      const CopyPlan &owner = plans[j].b;
      if (plans[j].bSharedWith || owner.load != b.load || owner.desc != b.desc)
        continue;
      plans[i].bSharedWith = j;
      plans[i].bTransposedView = bool(owner.trans) != bool(b.trans);
      break;
    }
  }
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
    auto ifOp = dyn_cast_or_null<scf::IfOp>(result.getParentBlock()->findAncestorOpInBlock(*owner));
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

/// In a loop whose dots are waited for where they are read, the iteration argument through
/// which the last dot's result reaches the next iteration when that dot may run on across the
/// back edge: its result only goes to the yield, and the body first reads the argument after
/// its first dot, before which the next iteration waits for it.
std::optional<unsigned> getCarriedAccumulator(scf::ForOp loop, ArrayRef<DotPlan> plans) {
  if (plans.size() < 2)
    return std::nullopt;
  std::optional<unsigned> idx = getYieldedIterArg(loop, plans.back().dot);
  if (!idx)
    return std::nullopt;
  Block *body = loop.getBody();
  Operation *first = firstUseIn(body, loop.getRegionIterArgs()[*idx]);
  if (first == body->getTerminator() || !plans.front().dot->isBeforeInBlock(first))
    return std::nullopt;
  return idx;
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
  for (size_t i = 0; i < dots.size(); ++i)
    waitAtFirstUse(rewriter, dots, i);
}

void waitAtFirstUse(IRRewriter &rewriter, ArrayRef<kgpu::SharedDotOp> dots, size_t index) {
  kgpu::SharedDotOp dot = dots[index];
  Value result = dot.getResult();
  Operation *first = firstUseIn(dot->getBlock(), result);
  auto later = llvm::count_if(dots.drop_front(index + 1), [&](kgpu::SharedDotOp d) {
    return d.getOperation()->isBeforeInBlock(first);
  });
  rewriter.setInsertionPoint(first);
  auto wait = kgpu::DotWaitOp::create(rewriter, dot.getLoc(), result.getType(), result,
                                      rewriter.getI32IntegerAttr(int32_t(later)));
  result.replaceAllUsesExcept(wait.getResult(), wait);
}

/// Lets `dot`, the last dot of its loop body, run on while the body finishes: the ops before
/// it that it does not read (directly, through other ops or in their regions), free of memory
/// effects, whose users all come after it, move right after it (in their order); it is issued
/// without waiting for itself and waited for before the yield. Nothing moves, and the dot
/// waits for itself, when its result is read by anything but the yield or nothing would run
/// beside it. (Tutorial 06's forward: the row sum of p and its shuffles run under p @ v.)
void overlapLastDot(IRRewriter &rewriter, kgpu::SharedDotOp dot) {
  Block *body = dot->getBlock();
  Operation *yield = body->getTerminator();
  Value result = dot.getResult();
  if (!llvm::all_of(result.getUsers(), [&](Operation *user) { return user == yield; }))
    return;
  // What the dot reads, in the body.
  llvm::SmallPtrSet<Operation *, 32> feeds;
  SmallVector<Value> worklist(dot->getOperands());
  while (!worklist.empty()) {
    Operation *def = worklist.pop_back_val().getDefiningOp();
    if (!def || def->getBlock() != body || !feeds.insert(def).second)
      continue;
    llvm::append_range(worklist, def->getOperands());
    llvm::SetVector<Value> captured;
    getUsedValuesDefinedAbove(def->getRegions(), captured);
    llvm::append_range(worklist, captured);
  }
  SmallVector<Operation *> before;
  for (Operation &op : *body) {
    if (&op == dot.getOperation())
      break;
    before.push_back(&op);
  }
  // (constants and other ops without operands give the dot nothing to run beside)
  bool work = false;
  for (Operation *op : llvm::reverse(before)) {
    if (feeds.contains(op) || !isMemoryEffectFree(op))
      continue;
    // (users moved already are after the dot too)
    bool usersAfter = llvm::all_of(op->getUsers(), [&](Operation *user) {
      Operation *at = body->findAncestorOpInBlock(*user);
      return at && dot->isBeforeInBlock(at);
    });
    if (!usersAfter)
      continue;
    op->moveAfter(dot);
    work |= op->getNumOperands() > 0;
  }
  if (!work)
    return;
  dot.setPending(1);
  waitAtFirstUses(rewriter, dot); // (the yield)
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
      RankedTensorType type = desc.getType(); // (rows: the block's next-to-last dimension)
      noteTmaBoxRows(func, cast<BlockArgument>(desc.getDesc()).getArgNumber(),
                     int32_t(std::min<int64_t>(256, type.getDimSize(type.getRank() - 2))));
    }
  return true;
}

/// One-slot buffers already filled from a load before a loop, by load: a later loop that
/// the buffer's allocation dominates reads it as it is (the two loops of causal attention
/// share q).

} // namespace kiln::pipeline
