//===- Compiler.h - Compile kiln kernels to PTX and cubin -------*- C++ -*-===//
//
// This file declares the MLIR-level side of Kiln's compiler: compile(module, options) (a
// kiln-dialect module in, LLVM IR, PTX and optionally a cubin out), the emitters behind it,
// and makeKernelSource, which hands a front end's module to the one door, kiln/Compile.h's
// compileKernel, without printing it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILER_H
#define KILN_COMPILER_H

#include "kiln/Compile.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/LLVM.h"
#include "llvm/Support/CodeGen.h"
#include <memory>
#include <string>
#include <vector>

namespace llvm {
class Module;
class TargetMachine;
class raw_pwrite_stream;
namespace legacy {
class PassManager;
} // namespace legacy
} // namespace llvm

namespace kiln {

/// "file:line:col: error: message" (notes and remarks likewise), as compilers print them.
std::string formatDiagnostic(mlir::Diagnostic &diag);

/// True when the NVPTX backend knows `arch` (sm_70 ... sm_120a).
bool isKnownArch(llvm::StringRef arch);

/// How a kernel parameter of type `t` is passed at launch.
ArgKind getArgKind(mlir::Type t);

/// Registers everything a kiln module needs in `ctx` and loads the dialects.
void initializeContext(mlir::MLIRContext &ctx);

/// A kernel source holding `module`, built in `ctx` (which it keeps alive; it must have been
/// initialized with initializeContext). Compiling it clones the module in that context: the
/// caller must not use `ctx` from another thread meanwhile.
KernelSource makeKernelSource(std::shared_ptr<mlir::MLIRContext> ctx,
                              mlir::OwningOpRef<mlir::ModuleOp> module);

/// The recipes on `module`'s parameters (kTensorMapRecipeAttr), in parameter order, and (if
/// `params`) the parameters they are on.
std::vector<std::vector<int64_t>> tensorMapRecipes(mlir::ModuleOp module,
                                                   std::vector<unsigned> *params = nullptr);

/// -kiln-pointer-tiles-to-descriptors on `module` in place; the recipes of its tensor map
/// parameters afterwards, in parameter order (see PointerTileMaps), or failure.
mlir::FailureOr<std::vector<std::vector<int64_t>>> addPointerTileMaps(mlir::ModuleOp module,
                                                                      bool attentionTiles);

/// Runs the GPU pipeline on `module` (in place) and emits LLVM IR and PTX, or for arch "cpu"
/// the host pipeline and an object file. Errors are reported through the context's
/// diagnostic handler. Front ends call compileKernel (kiln/Compile.h), which calls this.
mlir::FailureOr<CompiledKernel> compile(mlir::ModuleOp module, const CompileOptions &options);

/// LLVM dialect module -> optimized LLVM IR and PTX for `arch` (in process, NVPTX backend).
/// libdevice is linked in when the module calls __nv_* functions. `fpFusion`: floating-point
/// multiply-adds may contract to fma (else every add and mul is emitted `.rn`, which ptxas
/// must not fuse either). `loopStrengthReduce`: LLVM's loop strength reduction runs in the
/// code generator (compile() turns it off for kernels with cp.async copies; see there).
mlir::LogicalResult emitPTX(mlir::ModuleOp module, llvm::StringRef arch, std::string &llvmIR,
                            std::string &ptx, bool fpFusion = true, bool loopStrengthReduce = true);

/// LLVM's O3 pipeline for `tm` on `module` (both back ends).
void optimizeLLVMModule(llvm::Module &module, llvm::TargetMachine &tm);

/// Adds `tm`'s code generator, writing `kind` to `os`, to `pm` (both back ends), with LLVM's
/// loop strength reduction or without. Returns false when `tm` cannot emit `kind`.
bool addCodeGenerator(llvm::TargetMachine &tm, llvm::legacy::PassManager &pm,
                      llvm::raw_pwrite_stream &os, llvm::CodeGenFileType kind,
                      bool loopStrengthReduce);

/// PTX -> cubin through nvJitLink, opened with dlopen. Returns false with `error` set if the
/// library is missing or rejects the PTX.
bool assembleWithNvJitLink(llvm::StringRef ptx, llvm::StringRef arch, std::vector<char> &cubin,
                           std::string &error);

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
