//===- ConvertKilnToLLVM.cpp - The -kiln-convert-to-llvm pass -------------===//
//
// This file implements -kiln-convert-to-llvm: it checks that every op can be lowered (naming
// the ones the GPU path does not support yet), runs the axis analysis, and applies the Kiln,
// arith, math (libdevice), cf and func patterns in one conversion. Kernels become llvm.funcs
// marked nvvm.kernel with maxntid = 32 * num_warps (the launch's warps, kLaunchWarpsAttr, in a
// warp-specialized kernel), and nvvm.maxnreg = N where the pass's
// maxnreg option caps the registers per thread (Triton's maxnreg) or, in a warp-specialized
// kernel, the registers its threads start with (kgpu::getEntryRegisters).
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Passes.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"
#include "kiln/Target/NVIDIA/TensorMap.h"

#include "mlir/Analysis/Liveness.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/LLVMCommon/ConversionTarget.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlowOps.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "llvm/Support/MathExtras.h"

#define DEBUG_TYPE "kiln-convert-to-llvm"

namespace kiln {
#define GEN_PASS_DEF_KILNCONVERTTOLLVM
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

/// The module attribute that caps the registers per thread of its kernels.

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

/// Whether `v` is live just before `op` (defined earlier, or live into its block, and used at
/// or after `op` or live out of the block).
bool isLiveBefore(const Liveness &liveness, Value v, Operation *op) {
  const LivenessBlockInfo *info = liveness.getLiveness(op->getBlock());
  if (!info)
    return false;
  Operation *def = v.getDefiningOp();
  bool defined =
      info->isLiveIn(v) || (def && def->getBlock() == op->getBlock() && def->isBeforeInBlock(op));
  if (!defined)
    return false;
  if (info->isLiveOut(v))
    return true;
  Operation *start = def && def->getBlock() == op->getBlock() ? def : &op->getBlock()->front();
  Operation *end = info->getEndOperation(v, start);
  return end == op || op->isBeforeInBlock(end);
}

/// Offsets of buffers of `sizes` bytes in one pool, 1024-byte aligned, placed in order: buffer
/// i takes the lowest bytes no earlier buffer j with interferes(j, i) holds.
SmallVector<int64_t> placeBuffers(ArrayRef<int64_t> sizes,
                                  function_ref<bool(size_t, size_t)> interferes) {
  SmallVector<int64_t> offsets;
  for (size_t i = 0; i < sizes.size(); ++i) {
    // Byte ranges of the earlier buffers live together with this one, lowest first.
    SmallVector<std::pair<int64_t, int64_t>> taken;
    for (size_t j = 0; j < i; ++j)
      if (interferes(j, i))
        taken.push_back({offsets[j], offsets[j] + sizes[j]});
    llvm::sort(taken);
    int64_t at = 0;
    for (auto [begin, end] : taken)
      if (at + sizes[i] > begin)
        at = std::max<int64_t>(at, llvm::alignTo(end, 1024));
    offsets.push_back(at);
  }
  return offsets;
}

/// Places the shared rings (kiln_gpu.local_alloc) in the dynamic shared memory, 1024-byte
/// aligned, and returns its size: rings that are live at the same time get disjoint bytes,
/// the others may share them (two loops of a kernel reuse one pool). -kiln-pipeline-dot-
/// operands ends every pipelined loop with async_wait 0, whose barrier orders the loop's last
/// copies and reads before any later ring is written.
int64_t assignRingOffsets(ModuleOp module) {
  int64_t total = 0;
  MLIRContext *ctx = module.getContext();
  for (auto func : module.getOps<func::FuncOp>()) {
    SmallVector<kgpu::LocalAllocOp> allocs;
    func.walk([&](kgpu::LocalAllocOp op) { allocs.push_back(op); });
    if (allocs.empty())
      continue;
    Liveness liveness(func);
    SmallVector<int64_t> sizes;
    for (kgpu::LocalAllocOp op : allocs)
      sizes.push_back(getSharedSlotBytes(op.getResult().getType()) *
                      op.getResult().getType().getNumSlots());
    SmallVector<int64_t> offsets = placeBuffers(sizes, [&](size_t j, size_t i) {
      return isLiveBefore(liveness, allocs[j].getResult(), allocs[i]) ||
             isLiveBefore(liveness, allocs[i].getResult(), allocs[j]);
    });
    for (auto [op, at, bytes] : llvm::zip(allocs, offsets, sizes)) {
      op->setAttr(kSharedOffsetAttr, IntegerAttr::get(IntegerType::get(ctx, 32), at));
      total = std::max(total, at + bytes);
    }
  }
  return total;
}

/// Places the operand buffers of the wgmma dots whose A is stored where it is defined
/// (kWgmmaBufferOffsetAttr): the dots of one A value share one buffer (A stored once, each
/// dot's B after it in turn), and buffers of A values live at the same time get disjoint
/// bytes, others share them (tutorial 06's backward at HEAD_DIM 128, causal: k and v of the
/// dK/dV loops and q and do of the dQ loops, each used by a masked and an unmasked loop, took
/// 8 buffers, 250,128 bytes with the rest; now 2 A values at a time).
void assignWgmmaBufferOffsets(ModuleOp module) {
  MLIRContext *ctx = module.getContext();
  for (auto func : module.getOps<func::FuncOp>()) {
    SmallVector<Value> values;            // A values, first use order
    llvm::DenseMap<Value, int64_t> bytes; // largest buffer of each value's dots
    llvm::DenseMap<Value, SmallVector<DotOp>> dots;
    func.walk([&](DotOp op) {
      int64_t n = getWgmmaHoistedBufferBytes(op);
      if (!n)
        return;
      Value a = op.getA();
      if (!dots.count(a))
        values.push_back(a);
      dots[a].push_back(op);
      bytes[a] = std::max(bytes[a], n);
    });
    if (values.empty())
      continue;
    Liveness liveness(func);
    auto definedAt = [](Value v) {
      Operation *def = v.getDefiningOp();
      return def ? def : &cast<BlockArgument>(v).getOwner()->front();
    };
    SmallVector<int64_t> sizes;
    for (Value v : values)
      sizes.push_back(bytes[v]);
    SmallVector<int64_t> offsets = placeBuffers(sizes, [&](size_t j, size_t i) {
      Value a = values[j], b = values[i];
      return isLiveBefore(liveness, a, definedAt(b)) || isLiveBefore(liveness, b, definedAt(a)) ||
             definedAt(a) == definedAt(b);
    });
    for (auto [v, at] : llvm::zip(values, offsets))
      for (DotOp op : dots[v])
        op->setAttr(kWgmmaBufferOffsetAttr, IntegerAttr::get(IntegerType::get(ctx, 32), at));
  }
}

/// Fails, naming the kernel, when the dynamic shared memory (`dynamicShared`: the dot rings)
/// and the static buffers (scratch pool, barriers, wgmma operand buffers) together pass what
/// a block may use; the driver would refuse the launch.
LogicalResult checkSharedMemory(ModuleOp module, int64_t dynamicShared) {
  int64_t staticShared = 0;
  for (auto global : module.getOps<LLVM::GlobalOp>())
    if (global.getAddrSpace() == 3)
      if (auto array = dyn_cast<LLVM::LLVMArrayType>(global.getGlobalType()))
        if (array.getNumElements() > 0)
          staticShared += int64_t(array.getNumElements()) *
                          int64_t(DataLayout::closest(global).getTypeSize(array.getElementType()));
  if (dynamicShared + staticShared <= kgpu::kMaxSharedBytes)
    return success();
  for (auto func : module.getOps<LLVM::LLVMFuncOp>())
    if (!func.isExternal())
      return func.emitError("kernel '")
             << func.getName() << "' needs " << dynamicShared + staticShared
             << " bytes of shared memory (" << dynamicShared << " for the rings of its dots, "
             << staticShared << " for scratch and buffers), more than the " << kgpu::kMaxSharedBytes
             << " a block may use: lower num_stages or the tile sizes";
  return failure();
}

struct KilnConvertToLLVMPass final : kiln::impl::KilnConvertToLLVMBase<KilnConvertToLLVMPass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (failed(checkGPUSupport(module)) || failed(checkLaidOut(module)))
      return signalPassFailure();
    // The launch's warps: the layouts', and in a warp-specialized kernel a producer warpgroup
    // beside them (kLaunchWarpsAttr).
    unsigned launchWarps = 4;
    if (auto attr = module->getAttrOfType<IntegerAttr>(kgpu::kLaunchWarpsAttr))
      launchWarps = attr.getInt();
    else if (auto attr = module->getAttrOfType<IntegerAttr>(kgpu::kNumWarpsAttr))
      launchWarps = attr.getInt();

    AxisInfoAnalysis axis(module);
    // Alignment facts on pointer arguments carry over to LLVM; the rest were for the analysis.
    // A tensor map is a by-value grid constant: its address is that of the parameter itself,
    // which TMA copies read (cvta.param), instead of a local copy.
    for (auto func : module.getOps<func::FuncOp>())
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        if (isa<TensorMapType>(func.getArgument(i).getType())) {
          func.setArgAttr(i, LLVM::LLVMDialect::getByValAttrName(),
                          TypeAttr::get(LLVM::LLVMArrayType::get(IntegerType::get(ctx, 8),
                                                                 nvidia::kTensorMapBytes)));
          func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                          IntegerAttr::get(IntegerType::get(ctx, 64), nvidia::kTensorMapAlign));
          func.setArgAttr(i, NVVM::NVVMDialect::getGridConstantAttrName(), UnitAttr::get(ctx));
        } else if (auto div = func.getArgAttrOfType<IntegerAttr>(i, kDivisibilityAttr)) {
          func.removeArgAttr(i, kDivisibilityAttr);
          if (isa<PointerType>(func.getArgument(i).getType()))
            func.setArgAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                            IntegerAttr::get(IntegerType::get(ctx, 64), div.getInt()));
        }

    // Scratch of ops that move data between threads: one pool, barriers from an analysis.
    SharedScratch scratch(module);

    assignWgmmaBufferOffsets(module);
    int64_t dynamicShared = assignRingOffsets(module);
    if (dynamicShared)
      module->setAttr(kDynamicSharedAttr,
                      IntegerAttr::get(IntegerType::get(ctx, 32), dynamicShared));
    if (module.walk([](kgpu::AsyncCopyOp) { return WalkResult::interrupt(); }).wasInterrupted())
      module->setAttr(kCpAsyncCopiesAttr, UnitAttr::get(ctx));

    const TargetInfo &target = getNVIDIATargetInfo();
    KilnLLVMTypeConverter converter(ctx);
    RewritePatternSet patterns(ctx);
    populateTileOpToLLVMPatterns(converter, patterns, target);
    populateLayoutConversionToLLVMPatterns(converter, patterns, scratch, target);
    populateWgmmaDotToLLVMPatterns(converter, patterns, target);
    populateDotOpToLLVMPatterns(converter, patterns, scratch, target);
    populateScanOpToLLVMPatterns(converter, patterns, scratch, target);
    populateDebugOpToLLVMPatterns(converter, patterns, target);
    populateExternOpToLLVMPatterns(converter, patterns);
    populateElementwiseOpToLLVMPatterns(converter, patterns, axis, target);
    populateMemoryOpToLLVMPatterns(converter, patterns, axis, target);
    populateSharedRingToLLVMPatterns(converter, patterns, axis, target);
    populateReduceOpToLLVMPatterns(converter, patterns, scratch, target);
    populateDivOpToLLVMPatterns(converter, patterns);
    populateFp8ConvertToLLVMPatterns(converter, patterns);
    populateAtomicOpToLLVMPatterns(converter, patterns, scratch, target);
    populateFuncToLLVMConversionPatterns(converter, patterns);
    cf::populateControlFlowToLLVMConversionPatterns(converter, patterns);
    arith::populateArithToLLVMConversionPatterns(converter, patterns);
    // libdevice for the math functions NVPTX cannot select itself (log, sin, ...).
    populateLibDeviceConversionPatterns(converter, patterns, /*benefit=*/2);
    populateMathToLLVMConversionPatterns(converter, patterns);

    LLVMConversionTarget conversionTarget(*ctx);
    conversionTarget.addLegalDialect<NVVM::NVVMDialect>();
    conversionTarget
        .addIllegalDialect<KilnDialect, kgpu::KilnGPUDialect, arith::ArithDialect,
                           math::MathDialect, func::FuncDialect, cf::ControlFlowDialect>();
    conversionTarget.addLegalOp<ModuleOp>();
    if (failed(applyPartialConversion(module, conversionTarget, std::move(patterns))))
      return signalPassFailure();

    if (failed(checkSharedMemory(module, dynamicShared)))
      return signalPassFailure();

    // A register cap per thread (Triton's maxnreg, a compile option): ptxas takes 16..255.
    if (maxnreg && (maxnreg < 16 || maxnreg > 255)) {
      module.emitError() << "maxnreg = " << unsigned(maxnreg)
                         << ": expected a register count per thread from 16 to 255";
      return signalPassFailure();
    }
    for (auto func : module.getOps<LLVM::LLVMFuncOp>()) {
      if (func.isExternal())
        continue;
      func->setAttr(NVVM::NVVMDialect::getKernelFuncAttrName(), UnitAttr::get(ctx));
      func->setAttr(NVVM::NVVMDialect::getMaxntidAttrName(),
                    DenseI32ArrayAttr::get(ctx, {int32_t(launchWarps * kgpu::kWarpSize), 1, 1}));
      // A warp-specialized kernel (never with a maxnreg cap) declares the registers each
      // thread starts with, which its setmaxnreg ops change (getEntryRegisters).
      int64_t cap = maxnreg;
      if (!cap && module->hasAttr(kgpu::kLaunchWarpsAttr))
        cap = kgpu::getEntryRegisters(launchWarps);
      if (cap)
        func->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(),
                      IntegerAttr::get(IntegerType::get(ctx, 32), cap));
    }
  }
};

} // namespace
