//===- HostEmitter.cpp - LLVM dialect -> optimized host object code -------===//
//
// This file implements the CPU path's back end: the target machine of the running host (its
// triple, CPU and features, so AVX-512 is used where the machine has it), translation of
// the lowered module to LLVM IR (with the loop annotations of the tile lowering as loop
// metadata), the O3 pipeline (which inlines each kernel into its host
// entry and vectorizes what the tile lowering left scalar), and emission of an ELF object
// (and assembly, for kilnc and tests). The object is what the runtime caches and links.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler.h"
#include "kiln/Conversion/KilnToHost.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/SubtargetFeature.h"
#include "llvm/TargetParser/Triple.h"

#include <mutex>

using namespace mlir;

namespace {
void initNative() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

std::string hostFeatures() {
  llvm::SubtargetFeatures features;
  for (auto &f : llvm::sys::getHostCPUFeatures())
    features.AddFeature(f.first(), f.second);
  return features.getString();
}

std::unique_ptr<llvm::TargetMachine> createHostTargetMachine(std::string &error) {
  initNative();
  llvm::Triple triple(llvm::sys::getProcessTriple());
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return nullptr;
  llvm::TargetOptions options;
  return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
      triple, llvm::sys::getHostCPUName(), hostFeatures(), options, llvm::Reloc::PIC_, std::nullopt,
      llvm::CodeGenOptLevel::Aggressive));
}

/// Makes the loop annotations SCF-to-CF left on latch branches as discardable attributes
/// (kiln::host::disableUnrolling) the branches' own, which translation turns into !llvm.loop
/// metadata.
void adoptLoopAnnotations(ModuleOp module) {
  auto adopt = [](auto br) {
    if (auto attr =
            br->template getAttrOfType<LLVM::LoopAnnotationAttr>(kiln::host::kLoopAnnotationAttr)) {
      br.setLoopAnnotationAttr(attr);
      br->removeAttr(kiln::host::kLoopAnnotationAttr);
    }
  };
  module.walk([&](Operation *op) {
    if (auto br = dyn_cast<LLVM::BrOp>(op))
      adopt(br);
    else if (auto condBr = dyn_cast<LLVM::CondBrOp>(op))
      adopt(condBr);
  });
}
} // namespace

std::string kiln::getHostTargetId() {
  return llvm::sys::getProcessTriple() + "/" + llvm::sys::getHostCPUName().str() + "/" +
         hostFeatures();
}

LogicalResult kiln::emitHostObject(ModuleOp module, std::string &llvmIR, std::string &assembly,
                                   std::vector<char> &object, bool wantAssembly) {
  Location loc = module.getLoc();
  std::string error;
  std::unique_ptr<llvm::TargetMachine> tm = createHostTargetMachine(error);
  if (!tm)
    return emitError(loc) << "no code generator for this host: " << error;
  adoptLoopAnnotations(module);
  llvm::LLVMContext llvmCtx;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(module, llvmCtx, "kiln");
  if (!llvmModule)
    return emitError(loc) << "translation to LLVM IR failed";
  llvmModule->setTargetTriple(tm->getTargetTriple());
  llvmModule->setDataLayout(tm->createDataLayout());
  // Tile code has no aliasing or trapping surprises LLVM must preserve beyond IEEE: keep
  // floating point strict (results must match the GPU's within rounding), only vectorize.
  for (llvm::Function &f : *llvmModule)
    if (!f.isDeclaration()) {
      f.addFnAttr("target-cpu", tm->getTargetCPU());
      f.addFnAttr("target-features", tm->getTargetFeatureString());
      f.addFnAttr(llvm::Attribute::NoUnwind);
    }
  // LLVM's default pipeline vectorizes loops and straight-line code (SLP) at O3.
  optimizeLLVMModule(*llvmModule, *tm);
  if (llvm::verifyModule(*llvmModule, &llvm::errs()))
    return emitError(loc) << "optimized LLVM IR does not verify";
  {
    llvm::raw_string_ostream os(llvmIR);
    llvmModule->print(os, nullptr);
  }
  auto emit = [&](llvm::CodeGenFileType kind, llvm::SmallVectorImpl<char> &out) {
    llvm::raw_svector_ostream os(out);
    llvm::legacy::PassManager pm;
    if (!addCodeGenerator(*tm, pm, os, kind, /*loopStrengthReduce=*/true))
      return false;
    pm.run(*llvmModule);
    return true;
  };
  if (wantAssembly) {
    llvm::SmallString<0> text;
    if (!emit(llvm::CodeGenFileType::AssemblyFile, text))
      return emitError(loc) << "the host code generator cannot emit assembly";
    assembly.assign(text.begin(), text.end());
  }
  llvm::SmallVector<char, 0> obj;
  if (!emit(llvm::CodeGenFileType::ObjectFile, obj))
    return emitError(loc) << "the host code generator cannot emit an object file";
  object.assign(obj.begin(), obj.end());
  return success();
}
