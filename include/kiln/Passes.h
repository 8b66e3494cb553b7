//===- Passes.h - Kiln passes and pipelines ---------------------*- C++ -*-===//
//
// This file declares Kiln's passes (generated from Passes.td), their registration, and the
// named pipelines that kilnc, the JIT and kiln-opt share.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES_H
#define KILN_PASSES_H

#include "kiln/Compile.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Dialect/KilnGPU/IR/Dialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace kiln {

/// Attribute of an scf.for from `tl.range(..., flatten=True)`: -kiln-flatten-loops fuses it
/// with its inner loop.
inline constexpr llvm::StringLiteral kFlattenAttr = "kiln.flatten";
#define GEN_PASS_DECL
#include "kiln/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "kiln/Passes.h.inc"

/// Options of the GPU pipeline (what kiln::compile makes of CompileOptions).
struct GPUPipelineOptions {
  unsigned numWarps = 4;
  /// Loop loads issued an iteration early besides dot operands (kiln-pipeline-loads).
  LoadPrefetch loadPrefetch = LoadPrefetch::DotOperands;
  /// Slots of the dot operand rings (kiln-pipeline-dot-operands, sm_80+): Triton's
  /// num_stages; 0 or 1 leaves dot operands register-staged (no rings).
  unsigned ringSlots = 3;
  bool wgmma = false; ///< sm_90a: dots on warpgroup tensor cores
  bool debug = false; ///< check int32 address arithmetic for wraps (-kiln-check-offset-overflow)
  /// sm_80 and later: cp.async, ldmatrix and mma.sync, so dot operand rings without wgmma.
  bool cpAsync = false;
  /// Bytes of shared memory one loop's rings may take (the target's per-block limit less
  /// room for barriers and scratch).
  int64_t ringBudget = 224 * 1024;
  /// Registers per thread the kernels may use, 16..255 (.maxnreg); 0: no cap.
  unsigned maxnreg = 0;
  /// sm_90a: attention loops fed by the TMA get a producer warpgroup (-kiln-warp-specialize);
  /// not with a register cap (the roles move registers between them). Off: on the H100 it
  /// ran 0.96-1.01x the kernel without it (bench/results/2026-11-27-h100-session30.md); it is
  /// the base FlashAttention-3's ping-pong and a persistent schedule would build on.
  bool warpSpecialize = false;
  /// With warpSpecialize: the two consumer warpgroups take turns issuing the loop's dots.
  bool pingPong = false;
  /// With warpSpecialize: registers per thread the producer warpgroup keeps.
  unsigned producerRegisters = 40;
};

/// kiln (no layouts) -> LLVM dialect + NVVM, ready for translation to LLVM IR.
void buildGPUPipeline(mlir::OpPassManager &pm, const GPUPipelineOptions &options);

/// Options of the host (CPU) pipeline.
struct HostPipelineOptions {
  bool debug = false; ///< bounds-check every access through the runtime, check int32 address
                      ///< arithmetic for wraps
};

/// kiln (no layouts) -> LLVM dialect for the host CPU (see -kiln-convert-to-host).
void buildHostPipeline(mlir::OpPassManager &pm, const HostPipelineOptions &options);

/// Registers the kiln, kiln_gpu and upstream dialects Kiln uses, and their translations.
void registerKilnDialects(mlir::DialectRegistry &registry);

/// Registers Kiln's passes and the named pipeline `kiln-gpu-pipeline` with kiln-opt.
void registerKilnPassesAndPipelines();
} // namespace kiln

#endif // KILN_PASSES_H
