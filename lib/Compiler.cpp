//===- Compiler.cpp - Kiln's compile driver -------------------------------===//
//
// This file implements kiln::compile: verify, run the GPU pipeline (with IR printing and
// reproducers when asked), then emit LLVM IR, PTX and optionally a cubin.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Passes.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "mlir/Pass/PassManager.h"

#include <algorithm>

using namespace mlir;

std::string kiln::formatDiagnostic(Diagnostic &diag) {
  std::string out;
  llvm::raw_string_ostream os(out);
  if (auto loc = diag.getLocation()->findInstanceOf<FileLineColLoc>())
    os << loc.getFilename().getValue() << ":" << loc.getLine() << ":" << loc.getColumn() << ": ";
  switch (diag.getSeverity()) {
  case DiagnosticSeverity::Error:
    os << "error: ";
    break;
  case DiagnosticSeverity::Warning:
    os << "warning: ";
    break;
  case DiagnosticSeverity::Note:
    os << "note: ";
    break;
  case DiagnosticSeverity::Remark:
    os << "remark: ";
    break;
  }
  os << diag;
  for (Diagnostic &note : diag.getNotes())
    os << "\n" << formatDiagnostic(note);
  return out;
}

namespace {
/// The compute capability of an "sm_<major><minor>[a]" target (90 for sm_90a); 0 otherwise.
int getSmVersion(llvm::StringRef arch) {
  int version = 0;
  if (!arch.consume_front("sm_"))
    return 0;
  arch.consume_back("a");
  return arch.getAsInteger(10, version) ? 0 : version;
}
} // namespace

void kiln::initializeContext(MLIRContext &ctx) {
  DialectRegistry registry;
  registerKilnDialects(registry);
  ctx.appendDialectRegistry(registry);
  ctx.loadAllAvailableDialects();
}

kiln::ArgKind kiln::getArgKind(Type t) {
  if (isa<PointerType>(t))
    return ArgKind::Pointer;
  if (isa<TensorMapType>(t))
    return ArgKind::TensorMap;
  if (t.isInteger(1))
    return ArgKind::I1;
  if (t.isInteger(8) || (isa<FloatType>(t) && t.getIntOrFloatBitWidth() == 8))
    return ArgKind::I8;
  if (t.isInteger(16))
    return ArgKind::I16;
  if (t.isInteger(32))
    return ArgKind::I32;
  if (t.isInteger(64))
    return ArgKind::I64;
  if (t.isF16())
    return ArgKind::F16;
  if (t.isBF16())
    return ArgKind::BF16;
  if (t.isF32())
    return ArgKind::F32;
  return ArgKind::F64;
}

FailureOr<kiln::CompiledKernel> kiln::compile(ModuleOp module, const CompileOptions &options) {
  CompiledKernel out;
  out.numWarps = options.numWarps;
  bool host = options.arch == kHostArch;
  if (!host && !isKnownArch(options.arch))
    return emitError(module.getLoc())
           << "unknown target architecture '" << options.arch
           << "' (expected sm_<major><minor>[a] known to NVPTX, e.g. sm_80, sm_90, sm_90a, or "
              "cpu for the host)";
  if (failed(verify(module)))
    return failure();
  auto kernels = llvm::to_vector(module.getOps<func::FuncOp>());
  if (kernels.size() != 1)
    return emitError(module.getLoc())
           << "expected exactly one kernel function, found " << kernels.size();
  out.name = kernels.front().getSymName().str();

  PassManager pm(module.getContext());
  if (options.printIRAfterAll) {
    module.getContext()->disableMultithreading();
    pm.enableIRPrinting([](Pass *, Operation *) { return false; },
                        [](Pass *, Operation *) { return true; });
  }
  if (!options.reproducerPath.empty())
    pm.enableCrashReproducerGeneration(options.reproducerPath, /*genLocalReproducer=*/false);
  if (host) {
    buildHostPipeline(pm, HostPipelineOptions{options.debug});
  } else {
    GPUPipelineOptions pipeline;
    pipeline.numWarps = options.numWarps;
    pipeline.loadPrefetch = options.loadPrefetch;
    // num_stages: slots of the dot operand rings (0 or 1: none; more than 16 are 16).
    pipeline.ringSlots = std::min(options.numStages, 16u);
    pipeline.debug = options.debug;
    pipeline.maxnreg = options.maxnreg;
    // wgmma exists only in the arch-specific sm_90a target.
    pipeline.wgmma = options.arch == "sm_90a";
    // cp.async, ldmatrix and mma.sync.m16n8k16 need sm_80.
    int sm = getSmVersion(options.arch);
    pipeline.cpAsync = sm >= 80;
    // cvt between f32/f16 and e4m3x2/e5m2x2 needs sm_89 (PTX ISA 7.8).
    pipeline.fp8Cvt = sm >= 89;
    // Shared memory per block (CUDA programming guide, compute capabilities): 163 KiB on
    // sm_80/87, 99 KiB on sm_86/89 and sm_12x, 227 KiB on sm_90 and sm_100; 3 KiB stay for
    // barriers and scratch.
    int64_t sharedKiB = sm == 80 || sm == 87 ? 163 : sm == 86 || sm == 89 || sm >= 120 ? 99 : 227;
    pipeline.ringBudget = (sharedKiB - 3) * 1024;
    buildGPUPipeline(pm, pipeline);
  }
  if (failed(pm.run(module)))
    return failure();
  if (auto shared = module->getAttrOfType<IntegerAttr>(kDynamicSharedAttr))
    out.sharedBytes = unsigned(shared.getInt());
  // A warp-specialized kernel launches a producer warpgroup beside the warps asked for.
  if (auto warps = module->getAttrOfType<IntegerAttr>(kiln::gpu::kLaunchWarpsAttr))
    out.numWarps = unsigned(warps.getInt());
  if (!host) {
    // Static shared memory: the address-space-3 globals with a size (the ops' scratch pool,
    // mbarriers); the dynamic rings' extern symbol has none.
    constexpr unsigned kSharedAddressSpace = 3; // NVPTX's .shared state space
    DataLayout layout(module);
    module.walk([&](LLVM::GlobalOp global) {
      if (global.getAddrSpace() == kSharedAddressSpace)
        out.staticSharedBytes += unsigned(layout.getTypeSize(global.getGlobalType()));
    });
  }
  if (auto rows = module->getAttrOfType<DenseI32ArrayAttr>(kTmaBoxRowsAttr))
    for (int32_t r : rows.asArrayRef())
      out.tensorMapBoxRows.push_back(uint16_t(r));
  {
    llvm::raw_string_ostream os(out.llvmDialect);
    module.print(os);
  }
  if (host)
    return failed(emitHostObject(module, out.llvmIR, out.hostAssembly, out.hostObject,
                                 options.emitHostAssembly))
               ? FailureOr<CompiledKernel>(failure())
               : FailureOr<CompiledKernel>(std::move(out));
  // Kernels that copy by cp.async go without LLVM's loop strength reduction: on NVPTX it
  // rewrites a loop's pointer recurrences (a ring's row pointers advancing by BLOCK_K) as
  // pointers less a common loop-invariant offset, re-added at every use (NVPTX has only
  // [reg + imm] addresses): in a 128x256x64 grouped GEMM 12 64-bit adds an iteration and the
  // moves pairing their registers, 137 -> 124 SASS instructions an iteration and 202 -> 180
  // registers without it; on the H200 that kernel went 0.91 -> 1.01x Triton and tutorial 06's
  // D 64 backward 0.96-0.98 -> 0.99-1.00x. Kernels copying by the TMA keep it: the persistent
  // attention forward lost 3% without it (bench/results/2026-11-28-h200-session38.md). Only
  // measured on sm_90: other targets keep it.
  bool lsr = getSmVersion(options.arch) < 90 || !module->hasAttr(kCpAsyncCopiesAttr);
  if (failed(emitPTX(module, options.arch, out.llvmIR, out.ptx, options.fpFusion, lsr)))
    return failure();
  if (options.emitCubin && !assembleWithNvJitLink(out.ptx, options.arch, out.cubin, out.cubinError))
    out.cubin.clear();
  return out;
}
