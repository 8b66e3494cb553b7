//===- BuilderArith.cpp - Promotion, arithmetic, math and casts --------===//
//
// This file implements kiln::Builder's type promotion (Triton's computation types, weak
// literals, pointer arithmetic checks), its binary and unary operators, math functions and casts.
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/Builder.h"

#include "BuilderSupport.h"
#include "kiln/Analysis/AxisInfo.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Passes.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

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
// Promotion and binary operand checking
//===----------------------------------------------------------------------===//

DType kiln::Builder::computationType(const Tile &a, const Tile &bb, bool divOrMod, StringRef op) {
  DType ta = a.dtype, tb = bb.dtype;
  // fp8 has no arithmetic of its own: operations compute in fp32 (fp64 with an fp64 operand).
  if (ta.isFp8() || tb.isFp8())
    return ta == DType::fp64() || tb == DType::fp64() ? DType::fp64() : DType::fp32();
  // A literal of a kind no higher than the other operand's takes the other operand's dtype.
  if (a.isWeak() != bb.isWeak()) {
    DType lit = a.isWeak() ? ta : tb, other = a.isWeak() ? tb : ta;
    if (kindRank(lit) <= kindRank(other)) {
      if (divOrMod && (other == DType::fp16() || other == DType::bf16()))
        return DType::fp32();
      return other;
    }
  }
  auto either = [&](DType d) { return ta == d || tb == d; };
  if (either(DType::fp64()))
    return DType::fp64();
  if (either(DType::fp32()))
    return DType::fp32();
  // fp16 and bf16 hold neither each other's range nor precision: their supremum is fp32
  // (current Triton's documented rule; Triton 3.0/3.1 code returned fp16 here).
  if (either(DType::fp16()) && either(DType::bf16()))
    return DType::fp32();
  // PTX has no fp16/bf16 division or remainder: those compute in fp32.
  if (either(DType::fp16()))
    return divOrMod ? DType::fp32() : DType::fp16();
  if (ta == DType::bf16() && tb == DType::bf16())
    return divOrMod ? DType::fp32() : DType::bf16();
  if (either(DType::bf16()))
    return DType::fp32();
  if (divOrMod && ta.isSigned() != tb.isSigned())
    error("expected operands of one signedness for '" + op + "', found " + ta.str() + " and " +
          tb.str() + "; cast them to the same signedness");
  return integerPromote(ta, tb);
}

/// Rejects pointer operands where `allow` is false, pointer + float and mixed pointers.
static std::optional<std::string> checkPtr(DType x, DType y, bool allow, StringRef op) {
  if (!x.isPointer())
    return std::nullopt;
  if (!allow)
    return ("expected numeric operands for '" + op + "', found " + x.str() + " and " + y.str())
        .str();
  if ((y.isPointer() && x != y) || y.isFloat())
    return ("expected an integer offset for pointer '" + op + "', found " + x.str() + " and " +
            y.str())
        .str();
  return std::nullopt;
}

std::pair<Tile, Tile> kiln::Builder::binaryOperands(const Tile &a, const Tile &bb, StringRef op,
                                                    bool allowLhsPtr, bool allowRhsPtr,
                                                    bool arithmetic, bool divOrMod) {
  requireKernel(("'" + op + "'").str());
  if (auto msg = checkPtr(a.dtype, bb.dtype, allowLhsPtr, op))
    error(*msg);
  if (auto msg = checkPtr(bb.dtype, a.dtype, allowRhsPtr, op))
    error(*msg);
  Tile x = materialize(a), y = materialize(bb);
  if (arithmetic && !a.dtype.isPointer() && !bb.dtype.isPointer()) {
    DType ret = computationType(a, bb, divOrMod, op);
    auto convert = [&](const Tile &t) {
      if (!t.isWeak())
        return cast(t, ret);
      const Literal &lit = *t.literal;
      if (ret.isInt() && lit.kind != Literal::Kind::Float) {
        if (ret.isUnsigned() && lit.negative && lit.magnitude)
          error("expected a non-negative literal with " + ret.str() + " operands of '" + op +
                "', found " + fmtLiteral(lit) + "; cast one of them explicitly");
        unsigned w = ret.getBitWidth();
        uint64_t max = ret.isSigned() ? (1ull << (w - 1)) - (lit.negative ? 0 : 1)
                                      : (w == 64 ? ~0ull : (1ull << w) - 1);
        if (lit.magnitude > max)
          error("expected a literal in the range of " + ret.str() + " for '" + op + "', found " +
                fmtLiteral(lit));
      }
      return literalAs(lit, ret, op);
    };
    x = convert(a);
    y = convert(bb);
  }
  return broadcast(x, y);
}

std::pair<Tile, Tile> kiln::Builder::bitwiseOperands(const Tile &a, const Tile &bb, StringRef op) {
  auto [x, y] = binaryOperands(a, bb, op, false, false, true, false);
  if (!x.dtype.isInt())
    error("expected integer operands for '" + op + "', found " + a.dtype.str() + " and " +
          bb.dtype.str());
  return {x, y};
}

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

Tile kiln::Builder::addPtr(const Tile &ptr, const Tile &offset, bool negate) {
  Value off = offset.value;
  Type offType = off.getType();
  // kiln.addptr reads offsets as signed: zero-extend unsigned ones so they stay positive.
  if (offset.dtype.isUnsigned() && offset.dtype.getBitWidth() < 64) {
    offType = getSameShape(offType, b.getI64Type());
    off = arith::ExtUIOp::create(b, loc, offType, off);
  }
  if (negate)
    off = arith::SubIOp::create(b, loc, constantOf(b, loc, offType, zeroAttr(b, offType)), off);
  return Tile{AddPtrOp::create(b, loc, ptr.value.getType(), ptr.value, off), ptr.dtype,
              std::nullopt};
}

Tile kiln::Builder::add(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "+", true, true, true, false);
  if (x.dtype.isPointer() && y.dtype.isPointer())
    error("expected an integer offset for pointer '+', found " + x.dtype.str() + " and " +
          y.dtype.str());
  if (y.dtype.isPointer())
    std::swap(x, y);
  if (x.dtype.isPointer())
    return addPtr(x, y, false);
  Value v = x.dtype.isFloat() ? Value(arith::AddFOp::create(b, loc, x.value, y.value))
                              : Value(arith::AddIOp::create(b, loc, x.value, y.value));
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::sub(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "-", true, false, true, false);
  if (x.dtype.isPointer())
    return addPtr(x, y, true);
  Value v = x.dtype.isFloat() ? Value(arith::SubFOp::create(b, loc, x.value, y.value))
                              : Value(arith::SubIOp::create(b, loc, x.value, y.value));
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::mul(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "*", false, false, true, false);
  Value v = x.dtype.isFloat() ? Value(arith::MulFOp::create(b, loc, x.value, y.value))
                              : Value(arith::MulIOp::create(b, loc, x.value, y.value));
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::truediv(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "/", false, false, true, true);
  if (x.dtype.isInt()) {
    x = cast(x, DType::fp32());
    y = cast(y, DType::fp32());
  }
  return Tile{arith::DivFOp::create(b, loc, x.value, y.value), x.dtype, std::nullopt};
}

Tile kiln::Builder::floordiv(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "//", false, false, true, true);
  if (!x.dtype.isInt())
    error("expected integer operands for '//', found " + a.dtype.str() + " and " + bb.dtype.str());
  Value v = x.dtype.isSigned() ? Value(arith::DivSIOp::create(b, loc, x.value, y.value))
                               : Value(arith::DivUIOp::create(b, loc, x.value, y.value));
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::mod(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "%", false, false, true, true);
  Value v;
  if (x.dtype.isFloat())
    v = arith::RemFOp::create(b, loc, x.value, y.value);
  else if (x.dtype.isSigned())
    v = arith::RemSIOp::create(b, loc, x.value, y.value);
  else
    v = arith::RemUIOp::create(b, loc, x.value, y.value);
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::cdiv(const Tile &a, const Tile &bb) {
  return floordiv(sub(add(a, bb), intConst(1)), bb);
}

Tile kiln::Builder::compare(const Tile &a, const Tile &bb, StringRef op, int signedPred,
                            int unsignedPred, int floatPred) {
  auto [x, y] = binaryOperands(a, bb, op, false, false, true, false);
  Value v;
  if (x.dtype.isFloat())
    v = arith::CmpFOp::create(b, loc, arith::CmpFPredicate(floatPred), x.value, y.value);
  else
    v = arith::CmpIOp::create(b, loc,
                              arith::CmpIPredicate(x.dtype.isSigned() ? signedPred : unsignedPred),
                              x.value, y.value);
  return Tile{v, DType::int1(), std::nullopt};
}

using IP = arith::CmpIPredicate;
using FP = arith::CmpFPredicate;

Tile kiln::Builder::lt(const Tile &a, const Tile &bb) {
  return compare(a, bb, "<", int(IP::slt), int(IP::ult), int(FP::OLT));
}
Tile kiln::Builder::le(const Tile &a, const Tile &bb) {
  return compare(a, bb, "<=", int(IP::sle), int(IP::ule), int(FP::OLE));
}
Tile kiln::Builder::gt(const Tile &a, const Tile &bb) {
  return compare(a, bb, ">", int(IP::sgt), int(IP::ugt), int(FP::OGT));
}
Tile kiln::Builder::ge(const Tile &a, const Tile &bb) {
  return compare(a, bb, ">=", int(IP::sge), int(IP::uge), int(FP::OGE));
}
Tile kiln::Builder::eq(const Tile &a, const Tile &bb) {
  return compare(a, bb, "==", int(IP::eq), int(IP::eq), int(FP::OEQ));
}
// Triton's `!=` on floats is unordered (NaN != NaN is true).
Tile kiln::Builder::ne(const Tile &a, const Tile &bb) {
  return compare(a, bb, "!=", int(IP::ne), int(IP::ne), int(FP::UNE));
}

Tile kiln::Builder::bitAnd(const Tile &a, const Tile &bb) {
  auto [x, y] = bitwiseOperands(a, bb, "&");
  return Tile{arith::AndIOp::create(b, loc, x.value, y.value), x.dtype, std::nullopt};
}
Tile kiln::Builder::bitOr(const Tile &a, const Tile &bb) {
  auto [x, y] = bitwiseOperands(a, bb, "|");
  return Tile{arith::OrIOp::create(b, loc, x.value, y.value), x.dtype, std::nullopt};
}
Tile kiln::Builder::bitXor(const Tile &a, const Tile &bb) {
  auto [x, y] = bitwiseOperands(a, bb, "^");
  return Tile{arith::XOrIOp::create(b, loc, x.value, y.value), x.dtype, std::nullopt};
}
Tile kiln::Builder::shl(const Tile &a, const Tile &bb) {
  auto [x, y] = bitwiseOperands(a, bb, "<<");
  return Tile{arith::ShLIOp::create(b, loc, x.value, y.value), x.dtype, std::nullopt};
}
Tile kiln::Builder::shr(const Tile &a, const Tile &bb) {
  // Arithmetic or logical by the shifted operand's own signedness, before the operands meet
  // in a common dtype (Triton: int8 >> uint8 shifts arithmetically, in uint8); a literal
  // shifted by a tensor takes the tensor's (Triton's reflected >>).
  bool arithmetic = (a.isWeak() && !bb.isWeak() ? bb.dtype : a.dtype).isSigned();
  auto [x, y] = bitwiseOperands(a, bb, ">>");
  Value v = arithmetic ? Value(arith::ShRSIOp::create(b, loc, x.value, y.value))
                       : Value(arith::ShRUIOp::create(b, loc, x.value, y.value));
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::truthValue(const Tile &x) {
  // A pointer's truth is `ptr != 0`, as Triton casts it (vLLM's `if bias_ptr:`).
  return cast(x, DType::int1());
}

Tile kiln::Builder::logicalAnd(const Tile &a, const Tile &bb) {
  return bitAnd(truthValue(a), truthValue(bb));
}
Tile kiln::Builder::logicalOr(const Tile &a, const Tile &bb) {
  return bitOr(truthValue(a), truthValue(bb));
}

Tile kiln::Builder::neg(const Tile &x) {
  requireKernel("unary '-'");
  if (x.dtype.isPointer())
    error("expected a number for unary '-', found " + describe(x));
  if (x.isWeak()) {
    // -literal stays a literal, as Python folds it before Triton sees it.
    Literal lit = *x.literal;
    if (lit.kind == Literal::Kind::Float) {
      lit.floatValue = -lit.floatValue;
      return floatConst(lit.floatValue);
    }
    if (lit.magnitude == 0)
      return intConst(0);
    if (!lit.negative && lit.magnitude <= (1ull << 63))
      return intConst(int64_t(0) - int64_t(lit.magnitude - 1) - 1);
    if (lit.negative)
      return uintConst(lit.magnitude);
    error("expected a literal representable in 64 bits, found -" + fmtLiteral(lit));
  }
  if (x.dtype.isFp8())
    return neg(cast(x, DType::fp32()));
  if (x.dtype.isFloat())
    return Tile{arith::NegFOp::create(b, loc, x.value), x.dtype, std::nullopt};
  Type t = x.value.getType();
  return Tile{arith::SubIOp::create(b, loc, constantOf(b, loc, t, zeroAttr(b, t)), x.value),
              x.dtype, std::nullopt};
}

Tile kiln::Builder::bitNot(const Tile &x) {
  requireKernel("'~'");
  if (!x.dtype.isInt())
    error("expected an integer for '~', found " + describe(x));
  Type t = x.value.getType();
  Type elem = getElementTypeOrSelf(t);
  Value ones = constantOf(
      b, loc, t, b.getIntegerAttr(elem, llvm::APInt::getAllOnes(elem.getIntOrFloatBitWidth())));
  return Tile{arith::XOrIOp::create(b, loc, x.value, ones), x.dtype, std::nullopt};
}

Tile kiln::Builder::logicalNot(const Tile &x) {
  requireKernel("'not'");
  Tile t = truthValue(x);
  Value one = constantOf(b, loc, t.value.getType(), b.getIntegerAttr(b.getI1Type(), 1));
  return Tile{arith::XOrIOp::create(b, loc, t.value, one), t.dtype, std::nullopt};
}

/// min/max of two promoted operands: floats through `NanF` (propagates NaN) or `NumF`
/// (Triton's default: the number wins), integers through the signed or unsigned op.
template <typename NanF, typename NumF, typename SignedI, typename UnsignedI>
static Value createExtremum(OpBuilder &b, Location loc, const Tile &x, const Tile &y,
                            bool propagateNan) {
  if (x.dtype.isFloat())
    return propagateNan ? Value(NanF::create(b, loc, x.value, y.value))
                        : Value(NumF::create(b, loc, x.value, y.value));
  if (x.dtype.isSigned())
    return SignedI::create(b, loc, x.value, y.value);
  return UnsignedI::create(b, loc, x.value, y.value);
}

Tile kiln::Builder::minimum(const Tile &a, const Tile &bb, bool propagateNan) {
  auto [x, y] = binaryOperands(a, bb, "minimum", false, false, true, false);
  Value v = createExtremum<arith::MinimumFOp, arith::MinNumFOp, arith::MinSIOp, arith::MinUIOp>(
      b, loc, x, y, propagateNan);
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::maximum(const Tile &a, const Tile &bb, bool propagateNan) {
  auto [x, y] = binaryOperands(a, bb, "maximum", false, false, true, false);
  Value v = createExtremum<arith::MaximumFOp, arith::MaxNumFOp, arith::MaxSIOp, arith::MaxUIOp>(
      b, loc, x, y, propagateNan);
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::where(const Tile &cond, const Tile &a, const Tile &bb) {
  requireKernel("where");
  if ((a.dtype.isPointer() || bb.dtype.isPointer()) && a.dtype != bb.dtype)
    error("expected where operands of one dtype, found " + a.dtype.str() + " and " +
          bb.dtype.str());
  Tile c = truthValue(cond);
  auto [x, y] = binaryOperands(a, bb, "where", true, true, true, false);
  // Broadcast all three to one shape: cond with x, x with y, then cond again.
  std::tie(c, x) = broadcast(c, x);
  std::tie(x, y) = broadcast(x, y);
  std::tie(c, x) = broadcast(c, x);
  return Tile{arith::SelectOp::create(b, loc, c.value, x.value, y.value), x.dtype, std::nullopt};
}

/// The attribute that asks the targets for IEEE round-to-nearest (the NVIDIA lowering's
/// kIEEEDivAttr): arith.divf keeps llvm.fdiv (div.rn.f32) instead of div.full.f32.
static constexpr llvm::StringLiteral kIEEEAttr = "kiln.ieee";

Tile kiln::Builder::fma(const Tile &x0, const Tile &y0, const Tile &z0) {
  requireKernel("fma");
  auto [x1, y1] = binaryOperands(x0, y0, "fma", false, false, true, false);
  auto [z1, x] = binaryOperands(z0, x1, "fma", false, false, true, false);
  auto [z, y] = binaryOperands(z1, y1, "fma", false, false, true, false);
  if (!x.dtype.isFloat() || x.dtype.isFp8())
    error("expected floating-point operands (fp16, bf16, fp32, fp64) for fma, found " +
          x0.dtype.str() + ", " + y0.dtype.str() + " and " + z0.dtype.str());
  x = materialize(x);
  y = materialize(y);
  z = materialize(z);
  return Tile{math::FmaOp::create(b, loc, x.value, y.value, z.value), x.dtype, std::nullopt};
}

Tile kiln::Builder::umulhi(const Tile &a, const Tile &bb) {
  requireKernel("umulhi");
  auto [x, y] = binaryOperands(a, bb, "umulhi", false, false, true, false);
  unsigned w = x.dtype.isInt() ? x.dtype.getBitWidth() : 0;
  if (w != 32 && w != 64)
    error("expected 32- or 64-bit integer operands (int32, uint32, int64, uint64) for umulhi, "
          "found " +
          a.dtype.str() + " and " + bb.dtype.str());
  x = materialize(x);
  y = materialize(y);
  // The double-width product of the zero-extended operands, shifted down by w.
  Type type = x.value.getType();
  Type wide = getSameShape(type, b.getIntegerType(2 * w));
  Value xw = arith::ExtUIOp::create(b, loc, wide, x.value);
  Value yw = arith::ExtUIOp::create(b, loc, wide, y.value);
  Value prod = arith::MulIOp::create(b, loc, xw, yw);
  Value shift = constantOf(b, loc, wide, b.getIntegerAttr(b.getIntegerType(2 * w), w));
  Value high = arith::ShRUIOp::create(b, loc, prod, shift);
  return Tile{arith::TruncIOp::create(b, loc, type, high), x.dtype, std::nullopt};
}

Tile kiln::Builder::divRn(const Tile &a, const Tile &bb) {
  requireKernel("div_rn");
  auto [x, y] = binaryOperands(a, bb, "div_rn", false, false, true, false);
  auto fp32 = [](const Tile &t) { return t.dtype == DType::fp32() || t.isWeak(); };
  if (x.dtype != DType::fp32() || !fp32(a) || !fp32(bb))
    error("expected fp32 operands for div_rn, found " + a.dtype.str() + " and " + bb.dtype.str());
  x = materialize(x);
  y = materialize(y);
  auto op = arith::DivFOp::create(b, loc, x.value, y.value);
  op->setAttr(kIEEEAttr, b.getUnitAttr());
  return Tile{op, x.dtype, std::nullopt};
}

Tile kiln::Builder::sqrtRn(const Tile &x) {
  requireKernel("sqrt_rn");
  if (x.dtype != DType::fp32())
    error("expected an fp32 argument for sqrt_rn, found " + describe(x));
  Tile in = materialize(x);
  auto op = math::SqrtOp::create(b, loc, in.value);
  op->setAttr(kIEEEAttr, b.getUnitAttr());
  return Tile{op, x.dtype, std::nullopt};
}

//===----------------------------------------------------------------------===//
// Math and casts
//===----------------------------------------------------------------------===//

Tile kiln::Builder::unaryFloatMath(const Tile &x, StringRef name,
                                   Value (*create)(OpBuilder &, Location, Value)) {
  requireKernel(name);
  if (x.dtype.isFp8())
    return unaryFloatMath(cast(x, DType::fp32()), name, create);
  if (!x.dtype.isFloat())
    error("expected a floating-point argument (fp16, bf16, fp32, fp64) for " + name + ", found " +
          describe(x));
  Tile in = materialize(x);
  if (x.dtype == DType::fp16() || x.dtype == DType::bf16()) {
    // No fp16/bf16 versions in libdevice: compute in fp32 and round back.
    Tile wide = cast(in, DType::fp32());
    return cast(Tile{create(b, loc, wide.value), DType::fp32(), std::nullopt}, x.dtype);
  }
  return Tile{create(b, loc, in.value), x.dtype, std::nullopt};
}

/// Creates the one-operand op OpT; the math functions below differ only in it.
template <typename OpT> static Value createUnary(OpBuilder &b, Location loc, Value v) {
  return OpT::create(b, loc, v);
}

Tile kiln::Builder::exp(const Tile &x) {
  return unaryFloatMath(x, "exp", createUnary<math::ExpOp>);
}
Tile kiln::Builder::exp2(const Tile &x) {
  return unaryFloatMath(x, "exp2", createUnary<math::Exp2Op>);
}
Tile kiln::Builder::log(const Tile &x) {
  return unaryFloatMath(x, "log", createUnary<math::LogOp>);
}
Tile kiln::Builder::log2(const Tile &x) {
  return unaryFloatMath(x, "log2", createUnary<math::Log2Op>);
}
Tile kiln::Builder::sqrt(const Tile &x) {
  return unaryFloatMath(x, "sqrt", createUnary<math::SqrtOp>);
}
Tile kiln::Builder::rsqrt(const Tile &x) {
  return unaryFloatMath(x, "rsqrt", createUnary<math::RsqrtOp>);
}
Tile kiln::Builder::sin(const Tile &x) {
  return unaryFloatMath(x, "sin", createUnary<math::SinOp>);
}
Tile kiln::Builder::cos(const Tile &x) {
  return unaryFloatMath(x, "cos", createUnary<math::CosOp>);
}
Tile kiln::Builder::erf(const Tile &x) {
  return unaryFloatMath(x, "erf", createUnary<math::ErfOp>);
}
Tile kiln::Builder::floor(const Tile &x) {
  return unaryFloatMath(x, "floor", createUnary<math::FloorOp>);
}
Tile kiln::Builder::ceil(const Tile &x) {
  return unaryFloatMath(x, "ceil", createUnary<math::CeilOp>);
}

Tile kiln::Builder::abs(const Tile &x) {
  requireKernel("abs");
  if (x.dtype.isFp8())
    return abs(cast(x, DType::fp32()));
  Tile in = materialize(x);
  if (x.dtype.isFloat())
    return Tile{math::AbsFOp::create(b, loc, in.value), x.dtype, std::nullopt};
  if (x.dtype.isSigned())
    return Tile{math::AbsIOp::create(b, loc, in.value), x.dtype, std::nullopt};
  if (x.dtype.isUnsigned())
    return in;
  error("expected a number for abs, found " + describe(x));
}

/// Triton's pointer casts (kiln.ptr_cast keeps the address): an integer to a pointer (as a
/// 64-bit unsigned value, LLVM's inttoptr), a pointer to int64/uint64 or to int1 (!= null),
/// a pointer to a pointer of another element type.
Tile kiln::Builder::castPointer(const Tile &x, DType dst) {
  DType src = x.dtype;
  if (src == dst)
    return materialize(x);
  auto fail = [&](StringRef expected) {
    error("cannot cast " + describe(x) + " to " + dst.str() + ": expected " + expected);
  };
  Tile in = materialize(x.isWeak() ? cast(x, DType::int64()) : x);
  auto ptrCast = [&](Value v, DType to) {
    Type type = getSameShape(v.getType(), toMLIR(to, ctx));
    return Tile{PtrCastOp::create(b, loc, type, v), to, std::nullopt};
  };
  if (dst.isPointer()) {
    if (src.isPointer())
      return ptrCast(in.value, dst);
    if (!src.isInt() && !src.isBool())
      fail("an integer or a pointer to cast to a pointer");
    Value v = in.value;
    unsigned width = src.isBool() ? 1 : src.getBitWidth();
    Type i64 = getSameShape(v.getType(), b.getI64Type());
    if (width < 64)
      v = arith::ExtUIOp::create(b, loc, i64, v);
    return ptrCast(v, dst);
  }
  // A pointer to a number.
  if (dst.isBool()) {
    Tile a = ptrCast(in.value, DType::int64());
    Value zero = arith::ConstantOp::create(
        b, loc, a.value.getType(),
        isa<RankedTensorType>(a.value.getType())
            ? mlir::TypedAttr(DenseElementsAttr::get(mlir::cast<ShapedType>(a.value.getType()),
                                                     b.getI64IntegerAttr(0)))
            : mlir::TypedAttr(b.getI64IntegerAttr(0)));
    return Tile{arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, a.value, zero), dst,
                std::nullopt};
  }
  if (!dst.isInt() || dst.getBitWidth() != 64)
    fail("int64, uint64 or int1 for a pointer (Triton's rule)");
  Tile a = ptrCast(in.value, DType::int64());
  return Tile{a.value, dst, std::nullopt};
}

Tile kiln::Builder::cast(const Tile &x, DType dst) {
  requireKernel("a cast");
  DType src = x.dtype;
  if (src.isPointer() || dst.isPointer())
    return castPointer(x, dst);
  if (x.isWeak())
    return literalAs(*x.literal, dst, "a cast");
  if (src == dst)
    return x;
  Type type = getSameShape(x.value.getType(), toMLIR(dst, ctx));
  auto make = [&](Value v) { return Tile{v, dst, std::nullopt}; };
  // fp16, bf16 and fp8 convert to anything but fp32 through fp32 (-kiln-expand-fp8 lowers the
  // fp8 <-> fp32 conversions).
  bool half = src == DType::fp16() || src == DType::bf16() || src.isFp8();
  if (half && dst != DType::fp32())
    return cast(cast(x, DType::fp32()), dst);
  if (dst.isFp8() && src != DType::fp32())
    return cast(cast(x, DType::fp32()), dst);
  if (src.isFloat() && dst.isFloat())
    return dst.getBitWidth() < src.getBitWidth()
               ? make(arith::TruncFOp::create(b, loc, type, x.value))
               : make(arith::ExtFOp::create(b, loc, type, x.value));
  if (dst.isBool()) {
    // To int1 is a comparison with zero (unordered for floats: NaN is true).
    Type t = x.value.getType();
    Value zero = constantOf(b, loc, t, zeroAttr(b, t));
    if (src.isFloat())
      return make(arith::CmpFOp::create(b, loc, FP::UNE, x.value, zero));
    return make(arith::CmpIOp::create(b, loc, IP::ne, x.value, zero));
  }
  if (src.isInt() && dst.isInt()) {
    unsigned ws = src.getBitWidth(), wd = dst.getBitWidth();
    if (ws == wd)
      return make(x.value);
    if (wd < ws)
      return make(arith::TruncIOp::create(b, loc, type, x.value));
    return src.isSigned() ? make(arith::ExtSIOp::create(b, loc, type, x.value))
                          : make(arith::ExtUIOp::create(b, loc, type, x.value));
  }
  if (src.isFloat())
    return dst.isSigned() ? make(arith::FPToSIOp::create(b, loc, type, x.value))
                          : make(arith::FPToUIOp::create(b, loc, type, x.value));
  return src.isSigned() ? make(arith::SIToFPOp::create(b, loc, type, x.value))
                        : make(arith::UIToFPOp::create(b, loc, type, x.value));
}

Tile kiln::Builder::cast(const Tile &x, DType dst, StringRef rounding) {
  requireKernel("a cast");
  if (rounding != "rtne" && rounding != "rtz")
    error("expected fp_downcast_rounding 'rtne' or 'rtz' for a cast, found '" + rounding + "'");
  Tile in = materialize(x);
  DType src = in.dtype;
  if (src == dst)
    return in;
  if (!src.isFloat() || !dst.isFloat() || dst.getBitWidth() >= src.getBitWidth())
    error("expected fp_downcast_rounding only for a cast to a narrower float (Triton's rule), "
          "found a cast from " +
          src.str() + " to " + dst.str());
  Tile nearest = cast(in, dst);
  if (rounding == "rtne")
    return nearest;
  // Toward zero: the nearest value, or its neighbour toward zero where it lies beyond x.
  // Both bracket x, so that neighbour is the largest magnitude <= |x|: one less in the
  // sign-magnitude bits (an infinity steps to the largest finite value). Exact compares and
  // bit moves only: both backends give the same bits; NaN compares false and stays NaN.
  Tile beyond = gt(abs(cast(nearest, src)), abs(in));
  Tile bits = bitcast(nearest, bitsOf(dst));
  Tile toward = sub(bits, intConst(1));
  return bitcast(where(beyond, toward, bits), dst);
}

/// The value a loop's iteration argument `arg` starts from (scf.for's init, scf.while's
/// operand for its `before` region, and for its `after` region the value the condition
/// forwards when that is a `before` argument, as the language's `while` loops are built);
/// null for other block arguments.
static Value loopInitialValue(BlockArgument arg) {
  Operation *parent = arg.getOwner()->getParentOp();
  if (auto loop = dyn_cast_or_null<scf::ForOp>(parent))
    if (arg.getOwner() == loop.getBody() && arg.getArgNumber() > 0)
      return loop.getInitArgs()[arg.getArgNumber() - 1];
  if (auto loop = dyn_cast_or_null<scf::WhileOp>(parent)) {
    Block *before = loop.getBeforeBody();
    if (arg.getOwner() == before)
      return loop.getInits()[arg.getArgNumber()];
    auto condition =
        before->empty() ? scf::ConditionOp() : dyn_cast<scf::ConditionOp>(before->back());
    if (arg.getOwner() == loop.getAfterBody() && condition)
      if (auto in = dyn_cast<BlockArgument>(condition.getArgs()[arg.getArgNumber()]);
          in && in.getOwner() == before)
        return loop.getInits()[in.getArgNumber()];
  }
  return Value();
}

Tile kiln::Builder::hint(const Tile &x, StringRef kind, ArrayRef<int64_t> values) {
  requireKernel(kind);
  StringRef attr;
  if (kind == "multiple_of")
    attr = kMultipleOfAttr;
  else if (kind == "max_contiguous")
    attr = kMaxContiguousAttr;
  else if (kind == "max_constancy")
    attr = kMaxConstancyAttr;
  if (attr.empty())
    error("unknown hint '" + kind + "' (expected multiple_of, max_contiguous or max_constancy)");
  // Integers, and pointers (Triton's tl.multiple_of(a_ptrs, [16, 16]): pointers' facts are in
  // bytes, as the axis analysis keeps them).
  if ((!x.dtype.isInt() && !x.dtype.isPointer()) || x.dtype.isBool())
    error("expected an integer or pointer tile or scalar for " + kind + ", found " + describe(x));
  Tile t = materialize(x);
  unsigned rank = t.isTile() ? t.getShape().size() : 1;
  if (values.size() != rank && values.size() != 1)
    error("expected " + Twine(rank) + " value" + (rank == 1 ? "" : "s") + " for " + kind + " of " +
          describe(x) + ", found " + Twine(values.size()));
  SmallVector<int64_t> field;
  for (unsigned d = 0; d < rank; ++d) {
    int64_t v = values.size() == 1 ? values[0] : values[d];
    if (v < 1)
      error("expected positive values for " + kind + ", found " + Twine(v));
    // The analysis works in powers of two: the largest one dividing the value is as true.
    field.push_back(int64_t(1) << llvm::countr_zero(uint64_t(v)));
  }
  // Recorded on the op that computes the value (a function argument has its own
  // specialization); the axis analysis reads it there.
  Value holder = t.value;
  // A loop-carried value (tutorial 08's `tl.multiple_of(a_ptrs, [16, 16])` in its K loop,
  // the result unused: Triton records the hint on the loop, for its block argument). The
  // fact holds at every iteration, the first included, so it is recorded on the value the
  // loop starts from; the axis analysis carries it through the loop's steps (what a step
  // keeps aligned stays aligned), which never claims more than the hint.
  while (auto arg = dyn_cast<BlockArgument>(holder)) {
    Value init = loopInitialValue(arg);
    if (!init)
      break;
    holder = init;
  }
  if (Operation *def = holder.getDefiningOp(); def && def->getNumResults() == 1)
    def->setAttr(attr, DenseI64ArrayAttr::get(&ctx, field));
  return t;
}

std::vector<Tile> kiln::Builder::widenFp8(ArrayRef<Tile> inputs) {
  std::vector<Tile> out;
  for (const Tile &t : inputs)
    out.push_back(t.dtype.isFp8() ? cast(t, DType::fp32()) : t);
  return out;
}

Tile kiln::Builder::bitcast(const Tile &x, DType dst) {
  requireKernel("a bitcast");
  if (x.dtype.isPointer() || dst.isPointer())
    return castPointer(x, dst); // Triton's bitcast of pointers is their cast
  if (x.dtype.getBitWidth() != dst.getBitWidth())
    error("cannot bitcast " + describe(x) + " to " + dst.str() + ": expected " +
          Twine(x.dtype.getBitWidth()) + " bits, found " + Twine(dst.getBitWidth()));
  Tile in = materialize(x);
  Type type = getSameShape(in.value.getType(), toMLIR(dst, ctx));
  if (type == in.value.getType())
    return Tile{in.value, dst, std::nullopt};
  return Tile{arith::BitcastOp::create(b, loc, type, in.value), dst, std::nullopt};
}
