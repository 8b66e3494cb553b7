//===- ConvertKilnToLLVM.cpp - The -kiln-convert-to-llvm pass -------------===//
//
// This file implements -kiln-convert-to-llvm: it checks that every op can be lowered (naming
// the ones the GPU path does not support yet), runs the axis analysis, and applies the Kiln,
// arith, math (libdevice), cf and func patterns in one conversion. Kernels become llvm.funcs
// marked nvvm.kernel with maxntid = 32 * num_warps.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Conversion/KilnToLLVM.h"
#include "kiln/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "llvm/Support/MathExtras.h"

#define DEBUG_TYPE "kiln-convert-to-llvm"

namespace kiln {
#define GEN_PASS_DEF_KILNCONVERTTOLLVM
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

LogicalResult kiln::checkGPUSupport(ModuleOp module) {
  bool ok = succeeded(checkKernels(module));
  module.walk([&](Operation *op) {
    if (auto cst = dyn_cast<arith::ConstantOp>(op))
      if (isa<DenseElementsAttr>(cst.getValue()) && !isa<SplatElementsAttr>(cst.getValue())) {
        op->emitError() << "non-splat tile constants are not supported on the GPU path yet";
        ok = false;
        return;
      }
  });
  return success(ok);
}

namespace {

/// Reports tiles that reached the lowering without a layout.
LogicalResult checkLaidOut(ModuleOp module) {
  bool ok = true;
  module.walk([&](Operation *op) {
    for (Value v : op->getResults()) {
      auto t = dyn_cast<RankedTensorType>(v.getType());
      if (!t)
        continue;
      if (!t.getEncoding()) {
        op->emitError() << "expected a tile with a layout, found " << t
                        << " (run -kiln-assign-layouts first)";
        ok = false;
        return;
      }
      if (!kgpu::getRootBlocked(t.getEncoding()) ||
          kgpu::getKeptDims(t.getEncoding()).size() != size_t(t.getRank())) {
        op->emitError() << "expected a blocked or slice layout of rank " << t.getRank()
                        << ", found " << t.getEncoding();
        ok = false;
        return;
      }
    }
  });
  return success(ok);
}

struct KilnConvertToLLVMPass final : kiln::impl::KilnConvertToLLVMBase<KilnConvertToLLVMPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (failed(checkGPUSupport(module)) || failed(checkLaidOut(module)))
      return signalPassFailure();
    unsigned numWarps = 4;
    if (auto attr = module->getAttrOfType<IntegerAttr>(kgpu::kNumWarpsAttr))
      numWarps = attr.getInt();

    AxisInfoAnalysis axis(module);
    // Alignment facts on pointer arguments carry over to LLVM; the rest were for the analysis.
    for (auto func : module.getOps<func::FuncOp>())
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (auto div = func.getArgAttrOfType<IntegerAttr>(i, kDivisibilityAttr)) {
          func.removeArgAttr(i, kDivisibilityAttr);
          if (isa<PointerType>(func.getArgument(i).getType()))
            func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                            IntegerAttr::get(IntegerType::get(ctx, 64), div.getInt()));
        }

    // Scratch of ops that move data between threads: one pool, barriers from an analysis.
    SharedScratch scratch(module);

    // Shared rings live in the dynamic shared memory, one after another.
    int64_t dynamicShared = 0;
    module.walk([&](kgpu::LocalAllocOp op) {
      dynamicShared = llvm::alignTo(dynamicShared, 1024);
      op->setAttr(kSharedOffsetAttr,
                  IntegerAttr::get(IntegerType::get(ctx, 32), dynamicShared));
      dynamicShared += getSharedSlotBytes(op.getResult().getType()) *
                       op.getResult().getType().getNumSlots();
    });
    if (dynamicShared)
      module->setAttr(kDynamicSharedAttr, IntegerAttr::get(IntegerType::get(ctx, 32),
                                                           dynamicShared));

    const TargetInfo &target = getNVIDIATargetInfo();
    KilnLLVMTypeConverter converter(ctx);
    RewritePatternSet patterns(ctx);
    populateTileOpToLLVMPatterns(converter, patterns, target);
    populateLayoutConversionToLLVMPatterns(converter, patterns, scratch, target);
    populateWgmmaDotToLLVMPatterns(converter, patterns, target);
    populateDotOpToLLVMPatterns(converter, patterns, scratch, target);
    populateScanOpToLLVMPatterns(converter, patterns, scratch, target);
    populateDebugOpToLLVMPatterns(converter, patterns, target);
    populateElementwiseOpToLLVMPatterns(converter, patterns, axis, target);
    populateMemoryOpToLLVMPatterns(converter, patterns, axis, target);
    populateSharedRingToLLVMPatterns(converter, patterns, axis, target);
    populateReduceOpToLLVMPatterns(converter, patterns, scratch, target);
    populateDivOpToLLVMPatterns(converter, patterns);
    populateAtomicOpToLLVMPatterns(converter, patterns, scratch, target);
    populateFuncToLLVMConversionPatterns(converter, patterns);
    cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
    arith::populateArithToLLVMConversionPatterns(converter, patterns);
    // libdevice for the math functions NVPTX cannot select itself (log, sin, ...).
    populateLibDeviceConversionPatterns(converter, patterns, /*benefit=*/2);
    populateMathToLLVMConversionPatterns(converter, patterns);

    LLVMConversionTarget conversionTarget(*ctx);
    conversionTarget.addLegalDialect<NVVM::NVVMDialect>();
    conversionTarget.addIllegalDialect<KilnDialect, kgpu::KilnGPUDialect, arith::ArithDialect,
                                       math::MathDialect, func::FuncDialect,
                                       cf::ControlFlowDialect>();
    conversionTarget.addLegalOp<ModuleOp>();
    if (failed(applyPartialConversion(module, conversionTarget, std::move(patterns))))
      return signalPassFailure();

    for (auto func : module.getOps<LLVM::LLVMFuncOp>()) {
      if (func.isExternal())
        continue;
      func->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
      func->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                    DenseI32ArrayAttr::get(ctx, {int32_t(numWarps * kgpu::kWarpSize), 1, 1}));
    }
  }
};

} // namespace
