//===- Compiler.h - Compile kiln kernels to PTX and cubin -------*- C++ -*-===//
//
// This file declares Kiln's compiler entry points: a kiln-dialect module in, LLVM IR, PTX and
// (where nvJitLink is available) a cubin out. kilnc, the JIT runtime and the Python package
// all compile through here.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_H
#define KILN_COMPILER_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Support/LLVM.h"
#include <string>
#include <vector>

namespace llvm {
class Module;
class TargetMachine;
} // namespace llvm

namespace kiln {

/// What to compile for and how.
struct CompileOptions {
  std::string arch = "sm_90"; ///< sm_80, sm_86, sm_89, sm_90, sm_90a; "cpu": the host
  unsigned numWarps = 4;
  unsigned numStages = 1; ///< 1: off; 0: prefetch loop loads where cheap; >= 2: always
  /// GPU: a cap on registers per thread, 16..255 (Triton's maxnreg; ptxas's .maxnreg), set
  /// as the module's kiln.maxnreg; 0: none (or the module's own kiln.maxnreg).
  unsigned maxnreg = 0;
  /// f32 mul + add may contract to fma (Triton's enable_fp_fusion, on by default there too);
  /// a module's `kiln.enable_fp_fusion = false` turns it off.
  bool fpFusion = true;
  bool emitCubin = false;       ///< also assemble PTX to a cubin through nvJitLink
  bool debug = false;           ///< host: check every access and device_assert at run time
  bool emitHostAssembly = false; ///< host: also produce the assembly text
  bool printIRAfterAll = false; ///< print the IR after every pass to stderr
  std::string reproducerPath;   ///< where a failing pipeline writes its reproducer ("" = none)
};

/// Every stage of one compilation.
struct CompiledKernel {
  std::string name;      ///< the kernel's symbol
  std::string llvmDialect; ///< after the MLIR pipeline
  std::string llvmIR;    ///< optimized LLVM IR
  std::string ptx;
  std::vector<char> cubin; ///< empty unless requested and nvJitLink was found
  std::string hostAssembly; ///< host: assembly, when asked for
  std::vector<char> hostObject; ///< host: the relocatable object the runtime links
  unsigned numWarps = 4;
  unsigned sharedBytes = 0; ///< dynamic shared memory to launch with (shared rings)
  /// Per kernel parameter: rows of the TMA boxes copied through it (0: none), from the
  /// module's kiln.tma_box_rows (see rt::Kernel::getTensorMapBoxRows).
  std::vector<uint16_t> tensorMapBoxRows;
};

/// "file:line:col: error: message" (notes and remarks likewise), as compilers print them.
std::string formatDiagnostic(mlir::Diagnostic &diag);

/// True when the NVPTX backend knows `arch` (sm_70 ... sm_120a).
bool isKnownArch(llvm::StringRef arch);

/// Registers everything a kiln module needs in `ctx`.
void initializeContext(mlir::MLIRContext &ctx);

/// Runs the GPU pipeline on `module` (in place) and emits LLVM IR and PTX, or for arch "cpu"
/// the host pipeline and an object file. Errors are reported through the context's
/// diagnostic handler.
mlir::FailureOr<CompiledKernel> compile(mlir::ModuleOp module, const CompileOptions &options);

/// LLVM dialect module -> optimized LLVM IR and PTX for `arch` (in process, NVPTX backend).
/// libdevice is linked in when the module calls __nv_* functions. `fpFusion`: floating-point
/// multiply-adds may contract to fma (else every add and mul is emitted `.rn`, which ptxas
/// must not fuse either).
mlir::LogicalResult emitPTX(mlir::ModuleOp module, llvm::StringRef arch, std::string &llvmIR,
                            std::string &ptx, bool fpFusion = true);

/// LLVM's O3 pipeline for `tm` on `module` (both back ends).
void optimizeLLVMModule(llvm::Module &module, llvm::TargetMachine &tm);

/// PTX -> cubin through nvJitLink, opened with dlopen. Returns false with `error` set if the
/// library is missing or rejects the PTX.
bool assembleWithNvJitLink(llvm::StringRef ptx, llvm::StringRef arch, std::vector<char> &cubin,
                           std::string &error);

/// The architecture name of the host (CPU) backend.
inline constexpr const char *kHostArch = "cpu";

/// Identifies the code the host backend generates on this machine: triple, CPU and features
/// (part of the host backend's cache keys).
std::string getHostTargetId();

/// Lowered host module (LLVM dialect) -> optimized LLVM IR, assembly (when asked) and an ELF
/// object for this machine.
mlir::LogicalResult emitHostObject(mlir::ModuleOp module, std::string &llvmIR,
                                   std::string &assembly, std::vector<char> &object,
                                   bool wantAssembly);

} // namespace kiln

#endif // KILN_COMPILER_H
