//===- DivOpToLLVM.cpp - fp32 division and IEEE square root ---------------===//
//
// This file implements the lowering of scalar f32 arith.divf to PTX div.full.f32 (PTX ISA
// 9.7.3.8: max error 2 ulp over the full range), which is what Triton emits for `a / b` on
// fp32; IEEE-rounded division (div.rn.f32) costs several times more instructions. Kernels that
// need the correctly rounded quotient use `kiln.language.div_rn` (arith.divf with the
// `kiln.ieee` attribute), which keeps the upstream lowering.
// f32 math.sqrt goes through libdevice (sqrt.approx.f32, as Triton's tl.sqrt); with `kiln.ieee`
// (`kiln.language.sqrt_rn`) it is PTX sqrt.rn.f32, the correctly rounded root.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace kiln;

namespace {
struct DivFOpLowering final : ConvertOpToLLVMPattern<arith::DivFOp> {
  DivFOpLowering(const LLVMTypeConverter &converter)
      : ConvertOpToLLVMPattern(converter, /*benefit=*/10) {}
  LogicalResult matchAndRewrite(arith::DivFOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!op.getType().isF32())
      return rewriter.notifyMatchFailure(op, "fast path is for f32 scalars");
    if (op->hasAttr(kIEEEDivAttr))
      return rewriter.notifyMatchFailure(op, "IEEE rounding requested");
    auto asmOp = LLVM::InlineAsmOp::create(
        rewriter, op.getLoc(), rewriter.getF32Type(),
        ValueRange{adaptor.getLhs(), adaptor.getRhs()}, "div.full.f32 $0, $1, $2;", "=f,f,f",
        /*has_side_effects=*/false, /*is_align_stack=*/false,
        LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
    rewriter.replaceOp(op, asmOp.getResult(0));
    return success();
  }
};
struct IEEESqrtOpLowering final : ConvertOpToLLVMPattern<math::SqrtOp> {
  IEEESqrtOpLowering(const LLVMTypeConverter &converter)
      : ConvertOpToLLVMPattern(converter, /*benefit=*/10) {}
  LogicalResult matchAndRewrite(math::SqrtOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!op.getType().isF32() || !op->hasAttr(kIEEEDivAttr))
      return rewriter.notifyMatchFailure(op, "not an IEEE-rounded f32 scalar sqrt");
    auto asmOp = LLVM::InlineAsmOp::create(
        rewriter, op.getLoc(), rewriter.getF32Type(), ValueRange{adaptor.getOperand()},
        "sqrt.rn.f32 $0, $1;", "=f,f", /*has_side_effects=*/false, /*is_align_stack=*/false,
        LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
    rewriter.replaceOp(op, asmOp.getResult(0));
    return success();
  }
};

} // namespace

void kiln::populateDivOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                       RewritePatternSet &patterns) {
  patterns.add<DivFOpLowering, IEEESqrtOpLowering>(converter);
}
