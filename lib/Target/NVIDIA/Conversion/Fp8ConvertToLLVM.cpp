//===- Fp8ConvertToLLVM.cpp - fp8 conversions through the cvt instructions ===//
//
// This file implements the lowering of `arith.extf` from and `arith.truncf` to f8E4M3FN
// (Triton's fp8e4nv) and f8E5M2 (fp8e5) on sm_89 and later, where -kiln-expand-fp8 leaves them
// (its `hardware-cvt` option): two elements at a time through the PTX conversions that take
// pairs (PTX ISA 9.7.9.21, cvt):
//   fp8 -> f16    cvt.rn.f16x2.e4m3x2 / .e5m2x2 (exact); other widths from f16 (exact)
//   f32 -> fp8    cvt.rn.satfinite.e4m3x2.f32 / .e5m2x2.f32: round to nearest even, saturate
//                 to the largest finite value (infinities too), NaN stays NaN -- the
//                 semantics -kiln-expand-fp8 gives the other targets
//   f16 -> fp8    cvt.rn.satfinite.e4m3x2.f16x2; bf16 and f64 sources go through f32 first
// A thread's elements of a tile are paired in register order (an odd last one, or a scalar,
// is paired with itself). fp8 values are held as i8 bits. Triton converts the same way; the
// integer arithmetic of -kiln-expand-fp8 took 15-25 instructions an element.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/KilnGPU/IR/DotLayouts.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"

using namespace mlir;
using namespace kiln;

namespace {

/// "e4m3x2" or "e5m2x2": the PTX name of a pair of `fp8`.
StringRef pairName(Type fp8) {
  return isa<Float8E4M3FNType>(getElementTypeOrSelf(fp8)) ? "e4m3x2" : "e5m2x2";
}

Value inlineAsm(OpBuilder &b, Location loc, Type result, ValueRange args, StringRef text,
                StringRef constraints) {
  return LLVM::InlineAsmOp::create(b, loc, result, args, text, constraints,
                                   /*has_side_effects=*/false, /*is_align_stack=*/false,
                                   LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
                                   ArrayAttr())
      .getResult(0);
}

/// Converts the scalars of one op (a tile's owned elements, or one scalar) pair by pair.
template <typename OpTy> struct Fp8ConvertLowering final : ConvertOpToLLVMPattern<OpTy> {
  Fp8ConvertLowering(const LLVMTypeConverter &converter)
      : ConvertOpToLLVMPattern<OpTy>(converter, /*benefit=*/20) {}

  LogicalResult matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    constexpr bool extend = std::is_same_v<OpTy, arith::ExtFOp>;
    Type fp8 = extend ? op.getIn().getType() : op.getType();
    if (!isFp8Type(fp8))
      return rewriter.notifyMatchFailure(op, "not an fp8 conversion");
    Location loc = op.getLoc();
    Type resultType = this->getTypeConverter()->convertType(op.getType());
    auto tile = dyn_cast<RankedTensorType>(op.getType());
    SmallVector<Value> in =
        tile ? unpackStruct(rewriter, loc, adaptor.getIn()) : SmallVector<Value>{adaptor.getIn()};
    Type wide = getElementTypeOrSelf(extend ? op.getType() : op.getIn().getType());
    SmallVector<Value> out;
    for (size_t i = 0; i < in.size(); i += 2) {
      Value lo = in[i], hi = i + 1 < in.size() ? in[i + 1] : in[i];
      auto [x, y] = extend ? extendPair(rewriter, loc, fp8, wide, lo, hi)
                           : truncatePair(rewriter, loc, fp8, wide, lo, hi);
      out.push_back(x);
      if (i + 1 < in.size())
        out.push_back(y);
    }
    rewriter.replaceOp(op, tile ? packStruct(rewriter, loc, resultType, out) : out[0]);
    return success();
  }

  /// Two fp8 bytes (i8) to `wide` (f16, f32, bf16 or f64).
  static std::pair<Value, Value> extendPair(OpBuilder &b, Location loc, Type fp8, Type wide,
                                            Value lo, Value hi) {
    Type i16 = b.getI16Type(), f16 = b.getF16Type();
    Value l = LLVM::ZExtOp::create(b, loc, i16, lo);
    Value h = LLVM::ShlOp::create(b, loc, LLVM::ZExtOp::create(b, loc, i16, hi),
                                  LLVM::ConstantOp::create(b, loc, i16, b.getI16IntegerAttr(8)));
    Value packed = LLVM::OrOp::create(b, loc, l, h);
    Value halves = inlineAsm(b, loc, b.getI32Type(), packed,
                             ("cvt.rn.f16x2." + pairName(fp8) + " $0, $1;").str(), "=r,h");
    Value vec = LLVM::BitcastOp::create(b, loc, VectorType::get({2}, f16), halves);
    Value pair[2];
    for (int k = 0; k < 2; ++k) {
      Value idx = LLVM::ConstantOp::create(b, loc, b.getI32Type(), b.getI32IntegerAttr(k));
      Value v = LLVM::ExtractElementOp::create(b, loc, vec, idx);
      if (wide.isBF16()) // exact: every fp8 value is a bf16 one
        v = LLVM::FPTruncOp::create(b, loc, wide, LLVM::FPExtOp::create(b, loc, b.getF32Type(), v));
      else if (!wide.isF16())
        v = LLVM::FPExtOp::create(b, loc, wide, v);
      pair[k] = v;
    }
    return {pair[0], pair[1]};
  }

  /// Two `wide` values to fp8 bytes (i8).
  static std::pair<Value, Value> truncatePair(OpBuilder &b, Location loc, Type fp8, Type wide,
                                              Value lo, Value hi) {
    Type i16 = b.getI16Type(), i8 = b.getI8Type(), f32 = b.getF32Type();
    Value bits;
    if (wide.isF16()) {
      Type vecTy = VectorType::get({2}, b.getF16Type());
      Value vec = LLVM::UndefOp::create(b, loc, vecTy);
      Value halves[2] = {lo, hi}; // element 0: the low 16 bits, the lower byte
      for (int k = 0; k < 2; ++k)
        vec = LLVM::InsertElementOp::create(b, loc, vec, halves[k],
                                            LLVM::ConstantOp::create(b, loc, b.getI32Type(), k));
      Value word = LLVM::BitcastOp::create(b, loc, b.getI32Type(), vec);
      bits = inlineAsm(b, loc, i16, word,
                       ("cvt.rn.satfinite." + pairName(fp8) + ".f16x2 $0, $1;").str(), "=h,r");
    } else {
      auto toF32 = [&](Value v) -> Value {
        if (wide.isF32())
          return v;
        if (wide.getIntOrFloatBitWidth() > 32)
          return LLVM::FPTruncOp::create(b, loc, f32, v);
        return LLVM::FPExtOp::create(b, loc, f32, v);
      };
      // The first source fills the upper byte.
      bits = inlineAsm(b, loc, i16, ValueRange{toF32(hi), toF32(lo)},
                       ("cvt.rn.satfinite." + pairName(fp8) + ".f32 $0, $1, $2;").str(), "=h,f,f");
    }
    Value l = LLVM::TruncOp::create(b, loc, i8, bits);
    Value h = LLVM::TruncOp::create(
        b, loc, i8,
        LLVM::LShrOp::create(b, loc, bits,
                             LLVM::ConstantOp::create(b, loc, i16, b.getI16IntegerAttr(8))));
    return {l, h};
  }
};

} // namespace

void kiln::populateFp8ConvertToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                            RewritePatternSet &patterns) {
  patterns.add<Fp8ConvertLowering<arith::ExtFOp>, Fp8ConvertLowering<arith::TruncFOp>>(converter);
}
