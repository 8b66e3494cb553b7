//===- GuardIntegerOps.cpp - Integer ops whose results LLVM leaves undefined ===//
//
// This file implements -kiln-guard-integer-ops. Two integer edge cases are undefined
// behaviour in LLVM IR, and the host backend met both (the front-end fuzzer's mutants):
//  - a division or remainder by zero, or of INT_MIN by -1: the host's idiv traps (SIGFPE) and
//    the optimizer may rewrite the code around it into an endless loop. Triton leaves the value
//    undefined; on a GPU the instruction gives some value. With `guard` each such op divides by
//      d' = (d == 0 || (signed && a == INT_MIN && d == -1)) ? 1 : d
//    and with `check` (debug mode) it first asserts, at the op's location, that d != 0.
//  - a shift by the bit width or more (poison: the fuzzer saw a wild address follow). With
//    `guard` shifts take PTX's rule (PTX ISA, shl/shr: amounts past the width are clamped to
//    it): shl and shrui give 0, shrsi gives the sign, as `a >> (width - 1)`.
// The GPU pipeline runs it with `check` alone in debug mode; the host pipeline always guards.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#define DEBUG_TYPE "kiln-guard-integer-ops"

namespace kiln {
#define GEN_PASS_DEF_KILNGUARDINTEGEROPS
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

/// A constant of `type` (a tile or a scalar of integers) with every element `value`.
Value splatConstant(OpBuilder &b, Location loc, Type type, const APInt &value) {
  auto element = cast<IntegerType>(getElementTypeOrSelf(type));
  TypedAttr attr = IntegerAttr::get(element, value);
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    attr = DenseElementsAttr::get(tensor, attr);
  return arith::ConstantOp::create(b, loc, attr);
}

void guardDivision(Operation *op, bool guard, bool check) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  Type type = rhs.getType();
  unsigned width = getElementTypeOrSelf(type).getIntOrFloatBitWidth();
  Value zero = splatConstant(b, loc, type, APInt::getZero(width));
  Value isZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rhs, zero);
  if (check) {
    Value nonZero = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, rhs, zero);
    kiln::AssertOp::create(b, loc, nonZero,
                           b.getStringAttr("integer division by zero (the result would be "
                                           "undefined)"));
  }
  if (!guard)
    return;
  Value bad = isZero;
  if (isa<arith::DivSIOp, arith::RemSIOp, arith::FloorDivSIOp, arith::CeilDivSIOp>(op)) {
    Value minusOne = splatConstant(b, loc, type, APInt::getAllOnes(width));
    Value smallest = splatConstant(b, loc, type, APInt::getSignedMinValue(width));
    Value overflow = arith::AndIOp::create(
        b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, rhs, minusOne),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, lhs, smallest));
    bad = arith::OrIOp::create(b, loc, bad, overflow);
  }
  Value one = splatConstant(b, loc, type, APInt(width, 1));
  Value divisor = arith::SelectOp::create(b, loc, bad, one, rhs);
  op->setOperand(1, divisor);
}

/// Gives `op` (shli, shrui, shrsi) PTX's result for amounts of the bit width or more.
void guardShift(Operation *op) {
  OpBuilder b(op);
  b.setInsertionPoint(op);
  Location loc = op->getLoc();
  Value amount = op->getOperand(1);
  Type type = amount.getType();
  unsigned width = getElementTypeOrSelf(type).getIntOrFloatBitWidth();
  Value limit = splatConstant(b, loc, type, APInt(width, width));
  Value tooFar = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, amount, limit);
  if (isa<arith::ShRSIOp>(op)) {
    Value last = splatConstant(b, loc, type, APInt(width, width - 1));
    op->setOperand(1, arith::SelectOp::create(b, loc, tooFar, last, amount));
    return;
  }
  Value zero = splatConstant(b, loc, type, APInt::getZero(width));
  op->setOperand(1, arith::SelectOp::create(b, loc, tooFar, zero, amount));
  b.setInsertionPointAfter(op);
  Value shifted = op->getResult(0);
  auto result = arith::SelectOp::create(b, loc, tooFar, zero, shifted);
  shifted.replaceAllUsesExcept(result, result);
}

struct KilnGuardIntegerOpsPass final
    : kiln::impl::KilnGuardIntegerOpsBase<KilnGuardIntegerOpsPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<Operation *> divisions;
    getOperation().walk([&](Operation *op) {
      if (isa<arith::DivSIOp, arith::DivUIOp, arith::RemSIOp, arith::RemUIOp, arith::FloorDivSIOp,
              arith::CeilDivSIOp, arith::CeilDivUIOp>(op))
        divisions.push_back(op);
    });
    for (Operation *op : divisions)
      guardDivision(op, guard, check);
    if (!guard)
      return;
    SmallVector<Operation *> shifts;
    getOperation().walk([&](Operation *op) {
      if (isa<arith::ShLIOp, arith::ShRUIOp, arith::ShRSIOp>(op))
        shifts.push_back(op);
    });
    for (Operation *op : shifts)
      guardShift(op);
  }
};

} // namespace
