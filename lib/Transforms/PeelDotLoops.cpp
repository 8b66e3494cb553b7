//===- PeelDotLoops.cpp - A rotated dot loop's first and last iterations --===//
//
// This file implements -kiln-peel-dot-loops (see Passes.td): a loop of shared_dots (after
// the rings, and after -kiln-warp-specialize: its consumers' loop) gets its first and its last
// iteration peeled off, each under an scf.if that says it runs, wherever that lets a dot go:
//
//   for i in [lb, ub):  x = B(i, x)     =>   if lb < ub:        x = B(lb, x)
//                                            for i in [lb + s, last):  x = B(i, x)
//                                            if lb + s < ub:    x = B(last, x)
//
// with last = lb + ((ub - lb - 1) / s) * s, the last index (where lb + s < ub). The peeled
// copies are canonicalized with the values they start from: what the loop carries in is
// often a constant there, and the last index often decides a condition.
//
// Why. FlashAttention-3's order (kiln_kernels' _attn_fwd_inner_desc_fa3, and the rotated
// loops of its other paths) issues q @ k_j and
// p_(j-1) @ v_(j-1) together, so the loop runs one iteration more than there are key
// blocks: its first p @ v multiplies the zeros p starts as, and its last q @ k is thrown
// away (the row statistics keep their values where the block index says there are no more
// keys). Each is a full 128 x 128 x 128 wgmma: at 32 key blocks (S 4096, BLOCK_N 128) the
// wasted two are 3% of the tensor cores' work. Peeled, the first iteration's p @ v has a
// zero A and becomes its C, and the last iteration's q @ k has no reader left.
//
// Dots removed, and the waits after them. A shared_dot whose register A is a constant zero
// (and that accumulates) is replaced by its C; one read only by dot_waits whose results are
// unused goes with them. wgmma groups complete in order, and every wait (a shared_dot's
// `pending` after its issue, a dot_wait's) counts the most recent groups it lets run: where
// the removed dot was one of those, the count drops by one, so that each wait still retires
// what it retired before (the q @ k the softmax reads waited with one group, p @ v, still
// running; without that p @ v it waits with none).
//
// Peeling is kept only where a dot went: other loops are left as they were. The copies are
// the loop's body under uniform branches, beside the loop ptxas schedules as before (its
// copies of a ring's thread-0 branches and barriers run as they would in the loop).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Dialect/KilnGPU/IR/Dialect.h"
#include "kiln/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNPEELDOTLOOPS
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
namespace kgpu = kiln::gpu;

namespace {

/// The wait count of `op` (a shared_dot or a dot_wait), or none.
std::optional<int32_t> pendingOf(Operation *op) {
  if (auto dot = dyn_cast<kgpu::SharedDotOp>(op))
    return dot.getPending();
  if (auto wait = dyn_cast<kgpu::DotWaitOp>(op))
    return wait.getPending();
  return std::nullopt;
}

void setPending(Operation *op, int32_t n) {
  if (auto dot = dyn_cast<kgpu::SharedDotOp>(op))
    dot.setPending(n);
  else
    cast<kgpu::DotWaitOp>(op).setPending(n);
}

/// Before `dot` is erased from its block: the waits after it that counted its group among
/// the ones they let run wait for one fewer (see the file comment).
void retireGroup(kgpu::SharedDotOp dot) {
  int32_t issued = 0; // groups issued after `dot`, up to and including the op at hand
  for (Operation *op = dot->getNextNode(); op; op = op->getNextNode()) {
    if (isa<kgpu::SharedDotOp>(op))
      ++issued;
    std::optional<int32_t> pending = pendingOf(op);
    if (pending && *pending > issued)
      setPending(op, *pending - 1);
    // (removeIdleDots keeps a dot with waits in regions after it); a wait that covers
    // everything ends the walk.
    if (pending && *pending == 0)
      return;
  }
}

/// True when `v` is a constant tile of zeros.
bool isZeros(Value v) {
  DenseElementsAttr attr;
  if (!matchPattern(v, m_Constant(&attr)) || !attr.isSplat())
    return false;
  if (auto f = dyn_cast<FloatType>(attr.getElementType()))
    return attr.getSplatValue<APFloat>().isZero();
  return false;
}

/// Removes the dots of `block` (not of nested regions) that do no work; returns how many.
unsigned removeIdleDots(Block &block) {
  unsigned removed = 0;
  for (auto dot : llvm::make_early_inc_range(block.getOps<kgpu::SharedDotOp>())) {
    bool zeroA =
        isa<RankedTensorType>(dot.getA().getType()) && isZeros(dot.getA()) && !dot.getAccumulate();
    bool unread = llvm::all_of(dot->getUsers(), [](Operation *user) {
      return isa<kgpu::DotWaitOp>(user) && user->use_empty();
    });
    if (!zeroA && !unread)
      continue;
    // retireGroup recounts the waits of this block only: a dot or wait in a region after the
    // dot (none in the loops the pipeliner makes) keeps the dot.
    bool nested = false;
    for (Operation *op = dot->getNextNode(); op && !nested; op = op->getNextNode())
      for (Region &r : op->getRegions())
        r.walk([&](Operation *in) { nested |= isa<kgpu::SharedDotOp, kgpu::DotWaitOp>(in); });
    if (nested)
      continue;
    retireGroup(dot);
    if (zeroA) {
      dot.getResult().replaceAllUsesWith(dot.getC());
    } else {
      for (Operation *wait : llvm::make_early_inc_range(dot->getUsers()))
        wait->erase();
    }
    dot->erase();
    ++removed;
  }
  return removed;
}

/// In the peeled first iteration: a dot_wait on a constant (the wait for the previous
/// iteration's dot, which the first iteration does not have) goes, where no shared_dot comes
/// before it in the function (no group it could still retire). Kept, it ties the constant's
/// registers to a wgmma wait, and ptxas then serializes every wgmma of the function (C7515:
/// "non wgmma instructions defining accumulator registers of a wgmma between start and end
/// of the pipeline stage"; the C++ kernel library's attentionFa3, session 33).
void dropWaitsOnConstants(Block &block) {
  for (auto wait : llvm::make_early_inc_range(block.getOps<kgpu::DotWaitOp>())) {
    if (!matchPattern(wait.getSrc(), m_Constant()))
      continue;
    bool dotBefore = false;
    wait->getParentOfType<func::FuncOp>().walk([&](Operation *op) {
      if (op == wait.getOperation())
        return WalkResult::interrupt();
      dotBefore |= isa<kgpu::SharedDotOp>(op);
      return WalkResult::advance();
    });
    if (dotBefore)
      continue;
    wait.getResult().replaceAllUsesWith(wait.getSrc());
    wait->erase();
  }
}

/// Clones `loop`'s body for index `iv` and carried values `args` into the then-block of a
/// new scf.if on `cond` (else: `args`) at `b`; returns the if.
scf::IfOp peelIteration(OpBuilder &b, scf::ForOp loop, Value cond, Value iv, ValueRange args) {
  Location loc = loop.getLoc();
  auto ifOp = scf::IfOp::create(b, loc, loop.getResultTypes(), cond, /*withElseRegion=*/true);
  IRMapping map;
  map.map(loop.getInductionVar(), iv);
  map.map(loop.getRegionIterArgs(), args);
  OpBuilder then = ifOp.getThenBodyBuilder();
  for (Operation &op : loop.getBody()->without_terminator())
    then.clone(op, map);
  SmallVector<Value> yielded;
  for (Value v : loop.getBody()->getTerminator()->getOperands())
    yielded.push_back(map.lookupOrDefault(v));
  scf::YieldOp::create(then, loc, yielded);
  OpBuilder otherwise = ifOp.getElseBodyBuilder();
  scf::YieldOp::create(otherwise, loc, args);
  return ifOp;
}

/// Canonicalizes `ops` and the ops in the then-blocks of `ifs` (not the ifs, which later
/// steps hold) with `frozen` (every op's canonicalization patterns), then removes the idle
/// dots of those blocks; returns how many went.
unsigned simplify(ArrayRef<Operation *> bounds, ArrayRef<scf::IfOp> ifs,
                  const FrozenRewritePatternSet &frozen) {
  // A result nobody reads yields what the if started from: its computation is dead then.
  for (scf::IfOp ifOp : ifs)
    for (OpResult r : ifOp->getResults())
      if (r.use_empty())
        ifOp.thenYield()->setOperand(r.getResultNumber(),
                                     ifOp.elseYield()->getOperand(r.getResultNumber()));
  SmallVector<Operation *> ops(bounds);
  for (scf::IfOp ifOp : ifs)
    ifOp.thenBlock()->walk([&](Operation *op) { ops.push_back(op); });
  GreedyRewriteConfig config;
  config.setStrictness(GreedyRewriteStrictness::ExistingAndNewOps);
  (void)applyOpPatternsGreedily(ops, frozen, config);
  unsigned removed = 0;
  for (scf::IfOp ifOp : ifs)
    removed += removeIdleDots(*ifOp.thenBlock());
  if (removed)
    dropWaitsOnConstants(*scf::IfOp(ifs.front()).thenBlock());
  // What the removed dots read is dead now, and the ifs may drop results nobody reads.
  ops.clear();
  for (scf::IfOp ifOp : ifs)
    ifOp->walk([&](Operation *op) { ops.push_back(op); });
  (void)applyOpPatternsGreedily(ops, frozen, config);
  return removed;
}

/// Peels `loop`'s first and last iterations (see the file comment); returns the number of
/// dots that went.
unsigned peel(scf::ForOp loop, const FrozenRewritePatternSet &frozen) {
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  Value lb = loop.getLowerBound(), ub = loop.getUpperBound(), step = loop.getStep();
  Type t = lb.getType();
  // The bounds: whether there is an iteration, the second index, the last, and whether
  // there are two iterations or more.
  auto any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lb, ub);
  auto second = arith::AddIOp::create(b, loc, lb, step);
  auto one = arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, 1));
  auto span = arith::SubIOp::create(b, loc, arith::SubIOp::create(b, loc, ub, lb), one);
  auto quotient = arith::DivSIOp::create(b, loc, span, step);
  auto last = arith::AddIOp::create(b, loc, lb, arith::MulIOp::create(b, loc, quotient, step));
  auto two = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, second, ub);
  SmallVector<Operation *> bounds = {any,  second,   span.getLhs().getDefiningOp(),
                                     span, quotient, last.getRhs().getDefiningOp(),
                                     last, two};

  scf::IfOp first = peelIteration(b, loop, any, lb, loop.getInitArgs());
  loop.getLowerBoundMutable().assign(second);
  loop.getUpperBoundMutable().assign(last);
  loop.getInitArgsMutable().assign(first.getResults());
  OpBuilder after(loop->getContext());
  after.setInsertionPointAfter(loop);
  scf::IfOp final = peelIteration(after, loop, two, last, loop.getResults());
  loop.getResults().replaceUsesWithIf(
      final.getResults(), [&](OpOperand &use) { return !final->isAncestor(use.getOwner()); });
  return simplify(bounds, {first, final}, frozen);
}

/// The loops the pass may peel, in walk order: their bodies issue several shared_dots, one
/// with A in registers (a rotated attention loop's p @ v; a matmul's loop has neither).
SmallVector<scf::ForOp> candidates(Operation *root) {
  SmallVector<scf::ForOp> loops;
  root->walk([&](scf::ForOp loop) {
    auto dots = loop.getBody()->getOps<kgpu::SharedDotOp>();
    if (!loop.getUnsignedCmp() && std::distance(dots.begin(), dots.end()) >= 2 &&
        llvm::any_of(dots,
                     [](kgpu::SharedDotOp d) { return isa<RankedTensorType>(d.getA().getType()); }))
      loops.push_back(loop);
  });
  return loops;
}

struct PeelDotLoops : kiln::impl::KilnPeelDotLoopsBase<PeelDotLoops> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::optional<FrozenRewritePatternSet> frozen; // made once, where a loop is tried
    const StringRef mark = "kiln.peel_trial";
    for (auto func : module.getOps<func::FuncOp>()) {
      for (scf::ForOp loop : candidates(func)) {
        if (!frozen) {
          MLIRContext *ctx = &getContext();
          RewritePatternSet patterns(ctx);
          for (RegisteredOperationName name : ctx->getRegisteredOperations())
            name.getCanonicalizationPatterns(patterns, ctx);
          frozen.emplace(std::move(patterns));
        }
        // Tried on a copy first (the loop found there by a mark): a peel that removes no dot
        // only makes code.
        loop->setAttr(mark, UnitAttr::get(&getContext()));
        auto trial = cast<func::FuncOp>(func->clone());
        loop->removeAttr(mark);
        scf::ForOp copy;
        trial.walk([&](scf::ForOp l) {
          if (l->hasAttr(mark))
            copy = l;
        });
        unsigned removed = peel(copy, *frozen);
        trial->erase();
        if (removed)
          peel(loop, *frozen);
      }
    }
  }
};

} // namespace
