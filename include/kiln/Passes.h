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
/// Attribute of an scf.for from `tl.range(..., warp_specialize=True)`: -kiln-warp-specialize
/// gives the loop a producer warpgroup (sm_90a).
inline constexpr llvm::StringLiteral kWarpSpecializeAttr = "kiln.warp_specialize";
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
  /// sm_89 and later: fp8 conversions through PTX's cvt of pairs (e4m3x2, e5m2x2), not
  /// integer arithmetic.
  bool fp8Cvt = false;
  /// Bytes of shared memory one loop's rings may take (the target's per-block limit less
  /// room for barriers and scratch).
  int64_t ringBudget = 224 * 1024;
  /// Registers per thread the kernels may use, 16..255 (.maxnreg); 0: no cap.
  unsigned maxnreg = 0;
  /// sm_90a: every loop fed by the TMA that fits gets a producer warpgroup
  /// (-kiln-warp-specialize); off, only loops marked tl.range(..., warp_specialize=True) do.
  /// Never with a register cap (the roles move registers between them). Off by default: on
  /// the H100 a producer alone ran 0.96-1.01x the plain attention loop
  /// (bench/results/2026-11-27-h100-session30.md).
  bool warpSpecialize = false;
  /// The two consumer warpgroups of a warp-specialized loop take turns issuing its dots.
  bool pingPong = true;
  /// Registers per thread the producer warpgroup of a warp-specialized loop keeps.
  unsigned producerRegisters = 24;
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
