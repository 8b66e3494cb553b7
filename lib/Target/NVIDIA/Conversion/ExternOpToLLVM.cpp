//===- ExternOpToLLVM.cpp - extern_elementwise, registers, grid control ---===//
//
// This file lowers kiln.extern_elementwise to one call of its function per owned element (a
// declared llvm.func; libdevice's `__nv_*` functions are linked and inlined by the PTX
// emitter), kiln.globaltimer and kiln.smid to the PTX special registers %globaltimer and %smid
// (PTX ISA 10.18, 10.7), and kiln.grid_dependency to griddepcontrol (PTX ISA 9.7.13.x, sm_90;
// the PTX emitter drops it for older targets, where it has no meaning).
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace kiln;

namespace {

struct ExternElementwiseOpLowering final : ConvertOpToLLVMPattern<ExternElementwiseOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(ExternElementwiseOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type resultType = getTypeConverter()->convertType(op.getType());
    Type scalarType = getTypeConverter()->convertType(getElementTypeOrSelf(op.getType()));
    SmallVector<SmallVector<Value>> fields;
    SmallVector<Type> argTypes;
    for (auto [orig, conv] : llvm::zip(op.getSrcs(), adaptor.getSrcs())) {
      fields.push_back(unpackStruct(rewriter, loc, conv));
      argTypes.push_back(getTypeConverter()->convertType(getElementTypeOrSelf(orig.getType())));
    }
    auto fnType = LLVM::LLVMFunctionType::get(scalarType, argTypes);
    LLVM::LLVMFuncOp fn = getOrInsertFunction(rewriter, op, op.getSymbol(), fnType);
    if (fn.getFunctionType() != fnType)
      return rewriter.notifyMatchFailure(op, "the symbol is declared with another type");
    SmallVector<Value> results;
    for (size_t i = 0; i < fields.front().size(); ++i) {
      SmallVector<Value> args;
      for (auto &f : fields)
        args.push_back(f[i]);
      results.push_back(LLVM::CallOp::create(rewriter, loc, fn, args).getResult());
    }
    rewriter.replaceOp(op, packStruct(rewriter, loc, resultType, results));
    return success();
  }
};

struct GlobalTimerOpLowering final : ConvertOpToLLVMPattern<GlobalTimerOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(GlobalTimerOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, NVVM::GlobalTimerOp::create(rewriter, op.getLoc(), op.getType()));
    return success();
  }
};

struct SmIdOpLowering final : ConvertOpToLLVMPattern<SmIdOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(SmIdOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, NVVM::SmIdOp::create(rewriter, op.getLoc(), op.getType()));
    return success();
  }
};

struct GridDependencyOpLowering final : ConvertOpToLLVMPattern<GridDependencyOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(GridDependencyOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto kind = op.getKind() == GridDependencyKind::wait
                    ? NVVM::GridDepActionKind::wait
                    : NVVM::GridDepActionKind::launch_dependents;
    NVVM::GriddepcontrolOp::create(rewriter, op.getLoc(), kind);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void kiln::populateExternOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                          RewritePatternSet &patterns) {
  patterns.add<ExternElementwiseOpLowering, GlobalTimerOpLowering, SmIdOpLowering,
               GridDependencyOpLowering>(converter);
}
