//===- BuilderControlFlow.cpp - Structured control flow ----------------===//
//
// This file implements kiln::Builder's for, if and while: loop-carried values keep their dtypes
// (weak literals adopt the dtype of what they meet), and a value that changes dtype or shape
// across an iteration is an error at the user's line.
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/Builder.h"

#include "BuilderSupport.h"
#include "kiln/Analysis/AxisInfo.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/APSInt.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace kiln;

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

/// The name of value `i` for messages: `names[i]` when given, else "#i".
static std::string nameOf(ArrayRef<std::string> names, size_t i) {
  return i < names.size() ? names[i] : "#" + std::to_string(i);
}

/// True when the literal `value` may take `like`'s dtype where the two meet in control flow:
/// `like` is a non-literal scalar number of a kind at least the literal's.
static bool adoptsDType(const Tile &value, const Tile &like) {
  return value.isWeak() && !like.isWeak() && !like.isTile() && !like.dtype.isPointer() &&
         kindRank(value.dtype) <= kindRank(like.dtype);
}

Tile kiln::Builder::loopCarried(const Tile &value, const Tile &init, StringRef name) {
  if (adoptsDType(value, init))
    return literalAs(*value.literal, init.dtype, "a loop-carried value");
  if (value.dtype != init.dtype || value.value.getType() != init.value.getType())
    error("loop-carried value '" + name + "' changes type from " + describe(init) + " to " +
          describe(value));
  return materialize(value);
}

std::vector<Tile> kiln::Builder::forLoop(const Tile &lb, const Tile &ub, const Tile &step,
                                         ArrayRef<Tile> inits, const ForBody &body,
                                         ArrayRef<std::string> names, bool flatten,
                                         bool warpSpecialize) {
  requireKernel("a for loop");
  const std::pair<const Tile *, const char *> bounds[] = {
      {&lb, "lower bound"}, {&ub, "upper bound"}, {&step, "step"}};
  for (auto [t, what] : bounds) {
    if (t->isTile() || !t->dtype.isInt() || t->dtype.isBool())
      error(Twine("expected a scalar integer loop ") + what + ", found " + describe(*t));
  }
  if (step.isWeak() && (step.literal->negative || step.literal->magnitude == 0))
    error("expected a positive loop step, found " + fmtLiteral(*step.literal));
  DType ivType = integerPromote(integerPromote(lb.dtype, ub.dtype), step.dtype);
  Value lbv = cast(lb, ivType).value, ubv = cast(ub, ivType).value,
        stepv = cast(step, ivType).value;
  SmallVector<Value> initValues;
  SmallVector<Tile> initTiles;
  for (const Tile &t : inits) {
    initTiles.push_back(materialize(t));
    initValues.push_back(t.value);
  }
  auto forOp =
      scf::ForOp::create(b, loc, lbv, ubv, stepv, initValues, nullptr, ivType.isUnsigned());
  if (flatten)
    forOp->setAttr(kFlattenAttr, b.getUnitAttr());
  if (warpSpecialize)
    forOp->setAttr(kWarpSpecializeAttr, b.getUnitAttr());
  std::vector<Tile> results;
  {
    OpBuilder::InsertionGuard guard(b);
    Block *block = forOp.getBody();
    if (!block->empty() && block->back().hasTrait<OpTrait::IsTerminator>())
      block->back().erase();
    b.setInsertionPointToEnd(block);
    SmallVector<Tile> iters;
    for (auto [i, t] : llvm::enumerate(initTiles))
      iters.push_back(Tile{forOp.getRegionIterArgs()[i], t.dtype, std::nullopt});
    std::vector<Tile> next = body(Tile{forOp.getInductionVar(), ivType, std::nullopt}, iters);
    if (next.size() != inits.size())
      error("expected the loop body to yield " + Twine(inits.size()) +
            " loop-carried values, found " + Twine(next.size()));
    SmallVector<Value> yielded;
    for (auto [i, v] : llvm::enumerate(next))
      yielded.push_back(loopCarried(v, initTiles[i], nameOf(names, i)).value);
    scf::YieldOp::create(b, loc, yielded);
  }
  for (auto [i, t] : llvm::enumerate(initTiles))
    results.push_back(Tile{forOp.getResult(i), t.dtype, std::nullopt});
  return results;
}

std::vector<Tile> kiln::Builder::ifThenElse(const Tile &cond, const BranchBody &thenFn,
                                            const BranchBody &elseFn, ArrayRef<std::string> names) {
  requireKernel("an if statement");
  if (cond.isTile())
    error("expected a scalar condition for if, found " + describe(cond));
  Tile c = truthValue(cond);
  Location ifLoc = loc;
  auto tmp = scf::IfOp::create(b, loc, TypeRange{}, c.value, /*withElseRegion=*/bool(elseFn));
  Block *thenBlock = tmp.thenBlock(), *elseBlock = elseFn ? tmp.elseBlock() : nullptr;
  thenBlock->back().erase();
  if (elseBlock)
    elseBlock->back().erase();
  std::vector<Tile> thenVals, elseVals;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(thenBlock);
    thenVals = thenFn();
    if (elseFn) {
      b.setInsertionPointToEnd(elseBlock);
      elseVals = elseFn();
    } else if (!thenVals.empty()) {
      error("expected an else branch for an if whose then branch yields " + Twine(thenVals.size()) +
            " values, found none");
    }
    if (thenVals.size() != elseVals.size())
      error("expected both branches of if to yield the same number of values, found " +
            Twine(thenVals.size()) + " and " + Twine(elseVals.size()));
    // Line the branches up: a literal takes the other branch's dtype.
    SmallVector<Value> thenYield, elseYield;
    SmallVector<Type> types;
    for (size_t i = 0; i < thenVals.size(); ++i) {
      Tile &t = thenVals[i], &e = elseVals[i];
      std::string name = nameOf(names, i);
      if (adoptsDType(t, e)) {
        b.setInsertionPointToEnd(thenBlock);
        t = literalAs(*t.literal, e.dtype, "an if result");
      } else if (adoptsDType(e, t)) {
        b.setInsertionPointToEnd(elseBlock);
        e = literalAs(*e.literal, t.dtype, "an if result");
      }
      if (t.dtype != e.dtype || t.value.getType() != e.value.getType())
        error("value '" + name + "' has type " + describe(t) + " in the then branch but " +
              describe(e) + " in the else branch");
      thenYield.push_back(t.value);
      elseYield.push_back(e.value);
      types.push_back(t.value.getType());
    }
    b.setInsertionPointToEnd(thenBlock);
    scf::YieldOp::create(b, loc, thenYield);
    if (elseBlock) {
      b.setInsertionPointToEnd(elseBlock);
      scf::YieldOp::create(b, loc, elseYield);
    }
    if (types.empty())
      return {};
    // scf.if needs its result types up front: move the built regions into a typed op.
    b.setInsertionPoint(tmp);
    auto ifOp = scf::IfOp::create(b, ifLoc, types, c.value, false, false);
    ifOp.getThenRegion().takeBody(tmp.getThenRegion());
    ifOp.getElseRegion().takeBody(tmp.getElseRegion());
    tmp.erase();
    std::vector<Tile> results;
    for (auto [i, t] : llvm::enumerate(thenVals))
      results.push_back(Tile{ifOp.getResult(i), t.dtype, std::nullopt});
    return results;
  }
}

std::vector<Tile> kiln::Builder::whileLoop(ArrayRef<Tile> inits, const CondBody &condFn,
                                           const RegionBody &bodyFn, ArrayRef<std::string> names) {
  requireKernel("a while loop");
  SmallVector<Tile> initTiles;
  SmallVector<Value> initValues;
  SmallVector<Type> types;
  SmallVector<Location> locs;
  for (const Tile &t : inits) {
    initTiles.push_back(materialize(t));
    initValues.push_back(t.value);
    types.push_back(t.value.getType());
    locs.push_back(loc);
  }
  auto whileOp = scf::WhileOp::create(b, loc, types, initValues);
  {
    OpBuilder::InsertionGuard guard(b);
    auto regionArgs = [&](Block *block) {
      SmallVector<Tile> args;
      for (auto [i, t] : llvm::enumerate(initTiles))
        args.push_back(Tile{block->getArgument(i), t.dtype, std::nullopt});
      return args;
    };
    Block *before = b.createBlock(&whileOp.getBefore(), {}, types, locs);
    Tile c = condFn(regionArgs(before));
    if (c.isTile())
      error("expected a scalar while condition, found " + describe(c));
    c = truthValue(c);
    scf::ConditionOp::create(b, loc, c.value, before->getArguments());
    Block *after = b.createBlock(&whileOp.getAfter(), {}, types, locs);
    std::vector<Tile> next = bodyFn(regionArgs(after));
    if (next.size() != inits.size())
      error("expected the loop body to yield " + Twine(inits.size()) +
            " loop-carried values, found " + Twine(next.size()));
    SmallVector<Value> yielded;
    for (auto [i, v] : llvm::enumerate(next))
      yielded.push_back(loopCarried(v, initTiles[i], nameOf(names, i)).value);
    scf::YieldOp::create(b, loc, yielded);
  }
  std::vector<Tile> results;
  for (auto [i, t] : llvm::enumerate(initTiles))
    results.push_back(Tile{whileOp.getResult(i), t.dtype, std::nullopt});
  return results;
}
