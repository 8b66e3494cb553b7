//===- ExpandFp8.cpp - fp8 conversions as integer arithmetic --------------===//
//
// This file implements -kiln-expand-fp8. Neither LLVM nor the targets' conversion patterns
// know the fp8 types (LLVM holds them as i8), so every `arith.extf` from and `arith.truncf`
// to f8E4M3FN (Triton's fp8e4nv) or f8E5M2 (fp8e5) becomes integer arithmetic on the bits,
// elementwise on tiles or scalars, the same on every target:
//   - fp8 -> f32 is exact: normal numbers move their exponent and mantissa fields; subnormals
//     are m * 2^(1 - bias - M); e4m3fn's S.1111.111 is NaN, e5m2's exponent 31 is inf or NaN.
//   - f32 -> fp8 rounds to nearest even and saturates to the largest finite value (448 and
//     57344), as PTX's cvt.rn.satfinite does; NaN stays NaN. Results below the normal range
//     are rounded by adding 2^23 to |x| * 2^(bias - 1 + M), whose low mantissa bits are then
//     the rounded subnormal code.
// With hardware-cvt (sm_89 and later) the conversions are left to the LLVM conversion, which
// uses PTX's cvt instructions with the same rounding and saturation (Fp8ConvertToLLVM.cpp).
// A dot of fp8 tiles keeps them only where wgmma multiplies fp8 (sm_90a, the warpgroup layout,
// K a multiple of 32); elsewhere its operands are converted to f16 first, which holds every
// fp8 value exactly, and it runs as an f16 dot.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/KilnGPU/IR/DotLayouts.h"
#include "kiln/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/PatternMatch.h"

#include <cmath>

namespace kiln {
#define GEN_PASS_DEF_KILNEXPANDFP8
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

namespace {

/// The fields of an fp8 format.
struct Fp8Format {
  int exponentBits, mantissaBits, bias;
  bool hasInfinity;   ///< e5m2 (IEEE-like); e4m3fn has none
  uint32_t maxFinite; ///< the code of the largest finite value
};

Fp8Format getFormat(Type t) {
  if (isa<Float8E4M3FNType>(getElementTypeOrSelf(t)))
    return {4, 3, 7, false, 0x7E};
  return {5, 2, 15, true, 0x7B};
}

/// Builds elementwise arithmetic of one shape (a tile shape, or a scalar).
struct Elementwise {
  OpBuilder &b;
  Location loc;
  Type like; ///< any value of the shape

  Type of(Type elem) const {
    if (auto t = dyn_cast<RankedTensorType>(like))
      return RankedTensorType::get(t.getShape(), elem);
    return elem;
  }
  Value constant(Type elem, TypedAttr scalar) const {
    Type t = of(elem);
    if (auto tensor = dyn_cast<RankedTensorType>(t))
      return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(tensor, scalar));
    return arith::ConstantOp::create(b, loc, scalar);
  }
  Value i32(int64_t v) const { return constant(b.getI32Type(), b.getI32IntegerAttr(int32_t(v))); }
  Value f32(double v) const { return constant(b.getF32Type(), b.getF32FloatAttr(float(v))); }
  Value shl(Value x, int64_t n) const { return arith::ShLIOp::create(b, loc, x, i32(n)); }
  Value shr(Value x, int64_t n) const { return arith::ShRUIOp::create(b, loc, x, i32(n)); }
  Value band(Value x, int64_t m) const { return arith::AndIOp::create(b, loc, x, i32(m)); }
  Value bor(Value x, Value y) const { return arith::OrIOp::create(b, loc, x, y); }
  Value add(Value x, Value y) const { return arith::AddIOp::create(b, loc, x, y); }
  Value cmp(arith::CmpIPredicate p, Value x, Value y) const {
    return arith::CmpIOp::create(b, loc, p, x, y);
  }
  Value select(Value c, Value x, Value y) const { return arith::SelectOp::create(b, loc, c, x, y); }
  Value bitcast(Value x, Type elem) const { return arith::BitcastOp::create(b, loc, of(elem), x); }
};

/// The f32 value of fp8 `x` (exact).
Value expandExtend(OpBuilder &b, Location loc, Value x) {
  Fp8Format f = getFormat(x.getType());
  Elementwise e{b, loc, x.getType()};
  Type i8 = b.getI8Type(), i32 = b.getI32Type(), f32 = b.getF32Type();
  Value u = arith::ExtUIOp::create(b, loc, e.of(i32), e.bitcast(x, i8));
  Value sign = e.shl(e.band(u, 0x80), 24);
  Value exp = e.band(e.shr(u, f.mantissaBits), (1 << f.exponentBits) - 1);
  Value man = e.band(u, (1 << f.mantissaBits) - 1);
  // Normal: the exponent rebiased, the mantissa at the top of f32's.
  Value normal = e.bor(e.shl(e.add(exp, e.i32(127 - f.bias)), 23), e.shl(man, 23 - f.mantissaBits));
  // Subnormal (exponent 0, zero included): m * 2^(1 - bias - M), exact in f32.
  Value sub = arith::MulFOp::create(b, loc, arith::UIToFPOp::create(b, loc, e.of(f32), man),
                                    e.f32(std::ldexp(1.0, 1 - f.bias - f.mantissaBits)));
  Value subBits = e.bitcast(sub, i32);
  Value bits = e.select(e.cmp(arith::CmpIPredicate::eq, exp, e.i32(0)), subBits, normal);
  // Specials: e4m3fn's all-ones code is NaN; e5m2's top exponent is inf (m = 0) or NaN.
  Value nan = e.i32(0x7FC00000), inf = e.i32(0x7F800000);
  int64_t topExp = (1 << f.exponentBits) - 1;
  if (f.hasInfinity) {
    Value special = e.select(e.cmp(arith::CmpIPredicate::eq, man, e.i32(0)), inf, nan);
    bits = e.select(e.cmp(arith::CmpIPredicate::eq, exp, e.i32(topExp)), special, bits);
  } else {
    bits = e.select(e.cmp(arith::CmpIPredicate::eq, e.band(u, 0x7F), e.i32(0x7F)), nan, bits);
  }
  return e.bitcast(e.bor(bits, sign), f32);
}

/// fp8 of f32 `x` of type `dstType`, rounded to nearest even, saturated to the largest finite
/// value; NaN stays NaN.
Value expandTruncate(OpBuilder &b, Location loc, Value x, Type dstType) {
  Fp8Format f = getFormat(dstType);
  Elementwise e{b, loc, x.getType()};
  Type i32 = b.getI32Type();
  using P = arith::CmpIPredicate;
  Value u = e.bitcast(x, i32);
  Value sign = e.band(e.shr(u, 24), 0x80);
  Value a = e.band(u, 0x7FFFFFFF);
  int shift = 23 - f.mantissaBits;
  // Normal results: the rebiased exponent and the top mantissa bits, rounded to even.
  Value exp = arith::SubIOp::create(b, loc, e.shr(a, 23), e.i32(127 - f.bias));
  Value man = e.band(a, 0x7FFFFF);
  Value code = e.bor(e.shl(exp, f.mantissaBits), e.shr(man, shift));
  Value rem = e.band(man, (1 << shift) - 1), half = e.i32(1 << (shift - 1));
  Value odd = e.cmp(P::ne, e.band(code, 1), e.i32(0));
  Value up = arith::OrIOp::create(b, loc, e.cmp(P::ugt, rem, half),
                                  arith::AndIOp::create(b, loc, e.cmp(P::eq, rem, half), odd));
  Value normal = e.add(code, arith::ExtUIOp::create(b, loc, e.of(i32), up));
  // Below the normal range: round |x| * 2^(bias - 1 + M) to an integer by adding 2^23 (the
  // low mantissa bits of the sum are the rounded value; the scaling is exact).
  Value scaled = arith::MulFOp::create(b, loc, e.bitcast(a, b.getF32Type()),
                                       e.f32(std::ldexp(1.0, f.bias - 1 + f.mantissaBits)));
  Value sum = arith::AddFOp::create(b, loc, scaled, e.f32(8388608.0));
  Value sub = e.band(e.bitcast(sum, i32), 0x7FFFFF);
  Value r = e.select(e.cmp(P::sgt, exp, e.i32(0)), normal, sub);
  // Saturate (infinities too), then NaN.
  Value max = e.i32(f.maxFinite);
  r = e.select(e.cmp(P::ugt, r, max), max, r);
  r = e.select(e.cmp(P::uge, a, e.i32(0x7F800000)), max, r);
  r = e.select(e.cmp(P::ugt, a, e.i32(0x7F800000)), e.i32(0x7F), r);
  Value byte = arith::TruncIOp::create(b, loc, e.of(b.getI8Type()), e.bor(r, sign));
  return arith::BitcastOp::create(b, loc, dstType, byte);
}

struct KilnExpandFp8Pass final : kiln::impl::KilnExpandFp8Base<KilnExpandFp8Pass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    // 1. Dots wgmma cannot take in fp8: f16 operands (exact). So is a dot of two fp8 formats
    // (e4m3 x e5m2) on every target (Kiln's wgmma rings and descriptors hold one type a dot).
    module.walk([&](DotOp dot) {
      if (!isFp8Type(dot.getA().getType()))
        return;
      bool mixed =
          getElementTypeOrSelf(dot.getA().getType()) != getElementTypeOrSelf(dot.getB().getType());
      if (wgmma && !mixed && fitsWgmma(dot) &&
          getWgmmaAccumulatorLayout(ctx, dot.getType().getShape(), numWarps))
        return;
      b.setInsertionPoint(dot);
      for (OpOperand *operand : {&dot.getAMutable(), &dot.getBMutable()}) {
        Value v = operand->get();
        auto type = cast<RankedTensorType>(v.getType());
        if (hardwareCvt) { // one cvt a pair, straight to f16
          operand->set(arith::ExtFOp::create(b, dot.getLoc(), type.clone(b.getF16Type()), v));
          continue;
        }
        Value wide = arith::ExtFOp::create(b, dot.getLoc(), type.clone(b.getF32Type()), v);
        operand->set(arith::TruncFOp::create(b, dot.getLoc(), type.clone(b.getF16Type()), wide));
      }
    });
    // 2. Conversions from and to fp8 (sm_89+: the target's cvt instructions).
    if (hardwareCvt)
      return;
    SmallVector<Operation *> casts;
    module.walk([&](Operation *op) {
      if ((isa<arith::ExtFOp>(op) && isFp8Type(op->getOperand(0).getType())) ||
          (isa<arith::TruncFOp>(op) && isFp8Type(op->getResult(0).getType())))
        casts.push_back(op);
    });
    for (Operation *op : casts) {
      b.setInsertionPoint(op);
      Location loc = op->getLoc();
      Value src = op->getOperand(0);
      Type dst = op->getResult(0).getType();
      Value result;
      if (isa<arith::ExtFOp>(op)) {
        result = expandExtend(b, loc, src);
        if (!getElementTypeOrSelf(dst).isF32())
          result = arith::ExtFOp::create(b, loc, dst, result);
      } else {
        if (!getElementTypeOrSelf(src.getType()).isF32()) {
          Type f32 = Elementwise{b, loc, src.getType()}.of(b.getF32Type());
          src = getElementTypeOrSelf(src.getType()).getIntOrFloatBitWidth() > 32
                    ? Value(arith::TruncFOp::create(b, loc, f32, src))
                    : Value(arith::ExtFOp::create(b, loc, f32, src));
        }
        result = expandTruncate(b, loc, src, dst);
      }
      op->getResult(0).replaceAllUsesWith(result);
      op->erase();
    }
  }
};

} // namespace
