//===- Pipelines.cpp - Kiln's named pass pipelines ------------------------===//
//
// This file implements the pass pipelines shared by kilnc, the JIT and kiln-opt, and the
// registration of Kiln's dialects and passes.
//
//===----------------------------------------------------------------------===//

#include "kiln/Passes.h"

#include "mlir/Conversion/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void kiln::buildGPUPipeline(OpPassManager &pm, const GPUPipelineOptions &options) {
  // tiles -> simplified tiles
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // debug mode: int32 address arithmetic that wraps, and integer division by zero, fail the
  // launch at their line
  if (options.debug) {
    pm.addPass(createKilnCheckOffsetOverflow());
    pm.addPass(createKilnGuardIntegerOps(KilnGuardIntegerOpsOptions{false, true}));
  }
  // fp8 conversions -> integer arithmetic (sm_89+: left for PTX's cvt); fp8 dots wgmma does
  // not take -> f16 dots
  pm.addPass(
      createKilnExpandFp8(KilnExpandFp8Options{options.wgmma, options.numWarps, options.fp8Cvt}));
  // sm_80+: a loop's dot operands through shared rings filled by cp.async (sm_90a: or the
  // TMA), ringSlots - 1 stages ahead (num_stages 0 or 1: no rings). Without wgmma the rings
  // take no descriptor loads, so those become masked loads first and are copied like any
  // other.
  bool rings = (options.wgmma || options.cpAsync) && options.ringSlots >= 2;
  auto addRings = [&] {
    if (rings)
      pm.addPass(createKilnPipelineDotOperands(KilnPipelineDotOperandsOptions{
          options.ringSlots, options.numWarps, options.wgmma, options.ringBudget}));
  };
  // tl.range(..., flatten=True): a persistent kernel's tile loop and its K loop become one
  // loop, so the rings stream the next tile's operands in while this one finishes.
  if (rings) {
    pm.addPass(createKilnFlattenLoops());
    pm.addPass(createCSEPass());
  }
  if (options.wgmma)
    addRings();
  // tensor descriptor accesses the rings did not take -> masked loads and stores
  // (sm_90a: stores of 2-D blocks through shared memory and the TMA)
  pm.addPass(
      createKilnLowerDescriptors(KilnLowerDescriptorsOptions{options.wgmma, options.ringBudget}));
  pm.addPass(createCSEPass());
  if (!options.wgmma)
    addRings();
  // tiles -> pipelined tiles: loads of the next loop iteration issued early
  // (the pass's num-stages: 1 dot operands only, 0 a per-loop cost model, 2 every load)
  unsigned prefetch = options.loadPrefetch == LoadPrefetch::DotOperands ? 1
                      : options.loadPrefetch == LoadPrefetch::Auto      ? 0
                                                                        : 2;
  pm.addPass(createKilnPipelineLoads(KilnPipelineLoadsOptions{prefetch, options.numWarps}));
  // tiles -> layouts
  pm.addPass(createKilnAssignLayouts(KilnAssignLayoutsOptions{options.numWarps, options.wgmma}));
  // sm_90a: a producer warpgroup issues the TMA copies of a loop marked
  // tl.range(..., warp_specialize=True) (warpSpecialize: of every loop that fits)
  if (options.wgmma && !options.maxnreg)
    pm.addPass(createKilnWarpSpecialize(KilnWarpSpecializeOptions{
        options.producerRegisters, options.pingPong, options.warpSpecialize}));
  // a loop of dots that do no work in its first or last iteration (FlashAttention-3's order):
  // those iterations peeled, the idle dots gone
  if (options.wgmma && !options.maxnreg)
    pm.addPass(createKilnPeelDotLoops());
  pm.addPass(createSCFToControlFlowPass());
  // layouts -> LLVM + NVVM
  pm.addPass(createKilnConvertToLLVM(KilnConvertToLLVMOptions{options.maxnreg}));
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void kiln::buildHostPipeline(OpPassManager &pm, const HostPipelineOptions &options) {
  // tiles -> simplified tiles
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // debug mode: int32 address arithmetic that wraps fails the launch at its line
  if (options.debug)
    pm.addPass(createKilnCheckOffsetOverflow());
  // integer division by zero -> a defined value (debug mode: an error at its line), not a trap
  pm.addPass(createKilnGuardIntegerOps(KilnGuardIntegerOpsOptions{true, options.debug}));
  // fp8 conversions -> integer arithmetic; fp8 dots -> f16 dots
  pm.addPass(createKilnExpandFp8());
  // tensor descriptor accesses -> masked loads and stores
  pm.addPass(createKilnLowerDescriptors());
  pm.addPass(createCSEPass());
  // tiles -> vectors + LLVM memory ops, host entry functions
  pm.addPass(createKilnConvertToHost(KilnConvertToHostOptions{options.debug}));
  pm.addPass(createCanonicalizerPass());
  // vectors, arith, math, scf, func -> LLVM
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(createConvertVectorToLLVMPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void kiln::registerKilnDialects(DialectRegistry &registry) {
  registry.insert<KilnDialect, gpu::KilnGPUDialect, arith::ArithDialect, math::MathDialect,
                  scf::SCFDialect, func::FuncDialect, cf::ControlFlowDialect, LLVM::LLVMDialect,
                  NVVM::NVVMDialect, vector::VectorDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
}

void kiln::registerKilnPassesAndPipelines() {
  registerKilnPasses();
  PassPipelineRegistration<>("kiln-gpu-pipeline",
                             "kiln tiles -> LLVM dialect + NVVM (num_warps = 4)",
                             [](OpPassManager &pm) { buildGPUPipeline(pm, {}); });
  PassPipelineRegistration<>("kiln-host-pipeline", "kiln tiles -> LLVM dialect for the host CPU",
                             [](OpPassManager &pm) { buildHostPipeline(pm, {}); });
}
