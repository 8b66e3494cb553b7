//===- GuardIntegerDivision.cpp - Integer division by zero ----------------===//
//
// This file implements -kiln-guard-integer-division. An integer division or remainder by zero,
// or of INT_MIN by -1, is undefined behaviour in LLVM IR: the host's idiv traps (SIGFPE) and
// the optimizer may rewrite the code around it into an endless loop. Triton leaves the value
// undefined; on a GPU the instruction gives some value. With `guard` each such op divides by
//   d' = (d == 0 || (signed && a == INT_MIN && d == -1)) ? 1 : d
// so the result is defined and the kernel goes on; with `check` (debug mode) it first asserts,
// at the op's location, that d != 0.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#define DEBUG_TYPE "kiln-guard-integer-division"

namespace kiln {
#define GEN_PASS_DEF_KILNGUARDINTEGERDIVISION
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

struct KilnGuardIntegerDivisionPass final
    : kiln::impl::KilnGuardIntegerDivisionBase<KilnGuardIntegerDivisionPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<Operation *> divisions;
    getOperation().walk([&](Operation *op) {
      if (isa<arith::DivSIOp, arith::DivUIOp, arith::RemSIOp, arith::RemUIOp,
              arith::FloorDivSIOp, arith::CeilDivSIOp, arith::CeilDivUIOp>(op))
        divisions.push_back(op);
    });
    for (Operation *op : divisions)
      guardDivision(op, guard, check);
  }
};

} // namespace
