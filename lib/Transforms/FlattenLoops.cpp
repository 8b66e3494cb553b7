//===- FlattenLoops.cpp - One loop for `tl.range(..., flatten=True)` ------===//
//
// This file implements -kiln-flatten-loops (see Passes.td): an scf.for marked kiln.flatten
// whose body is a prologue P, one inner scf.for, and an epilogue E becomes a single loop over
// every (outer, inner) pair, so that the pipelining passes, which work on one loop, issue the
// next outer iteration's first copies while the current one's last inner iterations and its
// epilogue run (Triton's persistent matmul: the next tile's operands stream in while this
// tile is finished and stored).
//
//   for t in outer:                        if inner trips n > 0:
//     P(t)                                   for i in [0, outer trips * n), iter (c = 0, ..):
//     r = for k in inner, iter (x = x0(t)):    t = lb + (i / n) * step, k = klb + (i % n) * kstep
//       x = B(k, x)                            P(t)
//     E(t, r)                                  x = B(k, select(c == 0, x0(t), x))
//                                              if c == n - 1: E(t, x)
//                                              c = c == n - 1 ? 0 : c + 1
//                                          else:
//                                            for t in outer: P(t); E(t, x0(t))
//
// P is recomputed every iteration, so it must be free of memory effects; the inner bounds
// must not change with the outer loop, whose iteration arguments must be none. Loops that do
// not fit stay as they are (flatten is a hint). The carried values start as the prologue's
// values for the first outer iteration (cloned before the loop). The counter c (= i % n)
// gives the restart and epilogue conditions without a division: the pipeliner computes the
// copies' addresses from the closed forms, and nothing else needs i / n or i % n every
// iteration.
//
//===----------------------------------------------------------------------===//

#include "kiln/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace kiln {
#define GEN_PASS_DEF_KILNFLATTENLOOPS
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// Trip count of a loop with a positive step, as the bounds' type: max(ceil((ub - lb) / step), 0).
Value emitTripCount(OpBuilder &b, Location loc, Value lb, Value ub, Value step) {
  Type t = lb.getType();
  Value zero = arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, 0));
  Value one = arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, 1));
  Value diff = arith::SubIOp::create(b, loc, ub, lb);
  Value up = arith::AddIOp::create(b, loc, diff, arith::SubIOp::create(b, loc, step, one));
  Value trips = arith::DivSIOp::create(b, loc, up, step);
  return arith::MaxSIOp::create(b, loc, trips, zero);
}

/// The inner loop of a flattenable `outer`, or null (see the file comment).
scf::ForOp getFlattenableInner(scf::ForOp outer) {
  if (outer.getNumRegionIterArgs() != 0 || outer.getUnsignedCmp() ||
      !isa<IntegerType>(outer.getInductionVar().getType()))
    return {};
  scf::ForOp inner;
  for (Operation &op : outer.getBody()->without_terminator()) {
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      if (inner)
        return {}; // two inner loops
      inner = loop;
      continue;
    }
    bool nestedLoop = false;
    op.walk([&](Operation *nested) {
      if (isa<LoopLikeOpInterface>(nested))
        nestedLoop = true;
    });
    if (nestedLoop)
      return {};
    // The prologue runs once per flattened iteration instead of once per outer one.
    if (!inner && !isMemoryEffectFree(&op))
      return {};
  }
  if (!inner || inner.getUnsignedCmp() ||
      inner.getInductionVar().getType() != outer.getInductionVar().getType())
    return {};
  for (Value bound : {inner.getLowerBound(), inner.getUpperBound(), inner.getStep()})
    if (!outer.isDefinedOutsideOfLoop(bound))
      return {};
  return inner;
}

/// Clones the ops of `outer`'s body before `inner` (the prologue) with `map`.
void clonePrologue(OpBuilder &b, scf::ForOp outer, scf::ForOp inner, IRMapping &map) {
  for (Operation &op : outer.getBody()->without_terminator()) {
    if (&op == inner.getOperation())
      break;
    b.clone(op, map);
  }
}

/// Clones the ops of `outer`'s body after `inner` (the epilogue) with `map`.
void cloneEpilogue(OpBuilder &b, scf::ForOp outer, scf::ForOp inner, IRMapping &map) {
  for (Operation *op = inner->getNextNode(); op != outer.getBody()->getTerminator();
       op = op->getNextNode())
    b.clone(*op, map);
}

void flatten(scf::ForOp outer, scf::ForOp inner) {
  OpBuilder b(outer);
  Location loc = outer.getLoc();
  Type t = outer.getInductionVar().getType();
  auto c = [&](int64_t v) { return arith::ConstantOp::create(b, loc, t, b.getIntegerAttr(t, v)); };
  Value outerTrips =
      emitTripCount(b, loc, outer.getLowerBound(), outer.getUpperBound(), outer.getStep());
  Value innerTrips =
      emitTripCount(b, loc, inner.getLowerBound(), inner.getUpperBound(), inner.getStep());
  Value hasInner = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, innerTrips, c(0));
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, hasInner, /*withElseRegion=*/true);

  // Without inner iterations: the outer loop with the inner one's results replaced by its
  // initial values.
  b.setInsertionPointToStart(ifOp.elseBlock());
  {
    IRMapping map;
    auto plain = cast<scf::ForOp>(b.clone(*outer, map));
    plain->removeAttr(kiln::kFlattenAttr);
    auto plainInner = cast<scf::ForOp>(map.lookup(inner.getOperation()));
    plainInner.replaceAllUsesWith(plainInner.getInitArgs());
    plainInner.erase();
  }

  // With them: one loop over every (outer, inner) pair.
  b.setInsertionPointToStart(ifOp.thenBlock());
  Value total = arith::MulIOp::create(b, loc, outerTrips, innerTrips);
  // The carried values start as the first outer iteration's initial values (the first
  // flattened iteration replaces them with the same anyway).
  SmallVector<Value> carriedInits;
  {
    IRMapping map;
    map.map(outer.getInductionVar(), outer.getLowerBound());
    clonePrologue(b, outer, inner, map);
    for (Value init : inner.getInitArgs())
      carriedInits.push_back(map.lookupOrDefault(init));
  }
  // The inner index also travels as a counter (0, 1, .., n - 1, 0, ..), which says without a
  // division where the carried values restart and where the epilogue runs.
  carriedInits.push_back(c(0));
  scf::ForOp::create(
      b, loc, c(0), total, c(1), carriedInits,
      [&](OpBuilder &bb, Location l, Value i, ValueRange carriedAndCounter) {
        ValueRange carried = carriedAndCounter.drop_back();
        Value counter = carriedAndCounter.back();
        auto cc = [&](int64_t v) {
          return arith::ConstantOp::create(bb, l, t, bb.getIntegerAttr(t, v));
        };
        // i >= 0 and n > 0: unsigned division is the shorter sequence.
        Value o = arith::DivUIOp::create(bb, l, i, innerTrips);
        Value j = arith::RemUIOp::create(bb, l, i, innerTrips);
        Value tileIv = arith::AddIOp::create(bb, l, outer.getLowerBound(),
                                             arith::MulIOp::create(bb, l, o, outer.getStep()));
        Value innerIv = arith::AddIOp::create(bb, l, inner.getLowerBound(),
                                              arith::MulIOp::create(bb, l, j, inner.getStep()));
        IRMapping map;
        map.map(outer.getInductionVar(), tileIv);
        clonePrologue(bb, outer, inner, map);
        Value first = arith::CmpIOp::create(bb, l, arith::CmpIPredicate::eq, counter, cc(0));
        for (auto [arg, init, cur] :
             llvm::zip(inner.getRegionIterArgs(), inner.getInitArgs(), carried))
          map.map(arg, arith::SelectOp::create(bb, l, first, map.lookupOrDefault(init), cur));
        map.map(inner.getInductionVar(), innerIv);
        for (Operation &op : inner.getBody()->without_terminator())
          bb.clone(op, map);
        SmallVector<Value> next =
            llvm::map_to_vector(inner.getBody()->getTerminator()->getOperands(),
                                [&](Value v) { return map.lookupOrDefault(v); });
        Value last = arith::CmpIOp::create(bb, l, arith::CmpIPredicate::eq, counter,
                                           arith::SubIOp::create(bb, l, innerTrips, cc(1)));
        auto epilogue = scf::IfOp::create(bb, l, TypeRange{}, last, /*withElseRegion=*/false);
        {
          OpBuilder eb = OpBuilder::atBlockBegin(epilogue.thenBlock());
          for (auto [result, value] : llvm::zip(inner.getResults(), next))
            map.map(result, value);
          cloneEpilogue(eb, outer, inner, map);
        }
        next.push_back(arith::SelectOp::create(bb, l, last, cc(0),
                                               arith::AddIOp::create(bb, l, counter, cc(1))));
        scf::YieldOp::create(bb, l, next);
      });
  outer.erase();
}

struct KilnFlattenLoopsPass final : kiln::impl::KilnFlattenLoopsBase<KilnFlattenLoopsPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<scf::ForOp> marked;
    getOperation()->walk([&](scf::ForOp loop) {
      if (loop->hasAttr(kiln::kFlattenAttr))
        marked.push_back(loop);
    });
    for (scf::ForOp outer : marked) {
      if (scf::ForOp inner = getFlattenableInner(outer))
        flatten(outer, inner);
      else
        outer->removeAttr(kiln::kFlattenAttr);
    }
  }
};

} // namespace
