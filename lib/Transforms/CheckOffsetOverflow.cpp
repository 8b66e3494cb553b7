//===- CheckOffsetOverflow.cpp - Debug checks on int32 address arithmetic -===//
//
// This file implements -kiln-check-offset-overflow (debug mode): every i32 add, sub, mul and
// shl whose result flows into the offset of a kiln.addptr is followed by a kiln.assert that
// it did not wrap, recomputed in 64 bits:
//   add/sub/mul: sext(a) op sext(b) == sext(a op b)
//   shl:         b < 32 (unsigned) and (a << b) >>s b == a
// The asserts carry the op's location, so the launch fails naming the line.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/TypeSwitch.h"

#define DEBUG_TYPE "kiln-check-offset-overflow"

namespace kiln {
#define GEN_PASS_DEF_KILNCHECKOFFSETOVERFLOW
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;

namespace {

bool isI32(Value v) { return getElementTypeOrSelf(v.getType()).isInteger(32); }

/// The i32 add/sub/mul/shl ops whose results reach the offsets of addptr ops in `module`.
llvm::SetVector<Operation *> addressArithmetic(ModuleOp module) {
  llvm::SetVector<Operation *> found;
  llvm::SmallVector<Value> work;
  llvm::DenseSet<Value> seen;
  module.walk([&](kiln::AddPtrOp op) { work.push_back(op.getOffset()); });
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (!seen.insert(v).second)
      continue;
    Operation *def = v.getDefiningOp();
    if (!def)
      continue;
    if (isa<arith::AddIOp, arith::SubIOp, arith::MulIOp, arith::ShLIOp>(def)) {
      if (isI32(v))
        found.insert(def);
      work.append(def->operand_begin(), def->operand_end());
    } else if (isa<kiln::SplatOp, kiln::BroadcastOp, kiln::ExpandDimsOp, kiln::ReshapeOp,
                   kiln::TransOp, arith::ExtSIOp, arith::ExtUIOp>(def)) {
      work.push_back(def->getOperand(0));
    } else if (auto select = dyn_cast<arith::SelectOp>(def)) {
      work.push_back(select.getTrueValue());
      work.push_back(select.getFalseValue());
    }
  }
  return found;
}

/// `type` with its element type replaced by `element` (tiles and scalars alike).
Type withElement(Type type, Type element) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return tensor.clone(element);
  return element;
}

/// The operator as the user wrote it, for the message.
StringRef spelling(Operation *op) {
  return TypeSwitch<Operation *, StringRef>(op)
      .Case([](arith::AddIOp) { return "+"; })
      .Case([](arith::SubIOp) { return "-"; })
      .Case([](arith::MulIOp) { return "*"; })
      .Default([](Operation *) { return "<<"; });
}

/// Inserts after `op` (an i32 add/sub/mul/shl) the assert that it did not wrap.
void checkAfter(Operation *op) {
  OpBuilder b(op->getContext());
  b.setInsertionPointAfter(op);
  Location loc = op->getLoc();
  Value lhs = op->getOperand(0), rhs = op->getOperand(1), result = op->getResult(0);
  Type type = result.getType();
  Type i64 = withElement(type, b.getI64Type());
  Value ok;
  if (isa<arith::ShLIOp>(op)) {
    // No bit shifted out and no shift by 32 or more: (a << b) >>s b == a, b <u 32.
    TypedAttr bits = b.getI32IntegerAttr(32);
    if (auto tensor = dyn_cast<RankedTensorType>(type))
      bits = DenseElementsAttr::get(tensor, bits);
    Value c32 = arith::ConstantOp::create(b, loc, bits);
    Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, rhs, c32);
    Value back = arith::ShRSIOp::create(b, loc, result, rhs);
    Value same = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, back, lhs);
    ok = arith::AndIOp::create(b, loc, inRange, same);
  } else {
    Value a = arith::ExtSIOp::create(b, loc, i64, lhs);
    Value c = arith::ExtSIOp::create(b, loc, i64, rhs);
    Value wide = TypeSwitch<Operation *, Value>(op)
                     .Case([&](arith::AddIOp) { return arith::AddIOp::create(b, loc, a, c); })
                     .Case([&](arith::SubIOp) { return arith::SubIOp::create(b, loc, a, c); })
                     .Default([&](Operation *) { return arith::MulIOp::create(b, loc, a, c); });
    Value narrow = arith::ExtSIOp::create(b, loc, i64, result);
    ok = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, wide, narrow);
  }
  std::string message = ("int32 overflow in address arithmetic: `a " + spelling(op) +
                         " b` wraps around (offsets are int32, as in Triton); compute the "
                         "offset in int64, e.g. with .to(tl.int64)")
                            .str();
  kiln::AssertOp::create(b, loc, ok, b.getStringAttr(message));
}

struct KilnCheckOffsetOverflowPass final
    : kiln::impl::KilnCheckOffsetOverflowBase<KilnCheckOffsetOverflowPass> {
  void runOnOperation() override {
    for (Operation *op : addressArithmetic(getOperation()))
      checkAfter(op);
  }
};

} // namespace
