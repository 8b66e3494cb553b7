//===- PTXEmitter.cpp - LLVM dialect to PTX, in process -------------------===//
//
// This file implements the last stage of the GPU path: translate the LLVM dialect to LLVM IR,
// link the libdevice functions it calls, optimize at O3 with the NVPTX target machine (which
// also runs NVVMReflect), and print PTX. No external tool runs.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/IntrinsicsNVPTX.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Linker/Linker.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Target/TargetOptions.h"
#include "llvm/TargetParser/Triple.h"
#include <cstdlib>
#include <mutex>

using namespace mlir;

extern "C" {
void LLVMInitializeNVPTXTargetInfo();
void LLVMInitializeNVPTXTarget();
void LLVMInitializeNVPTXTargetMC();
void LLVMInitializeNVPTXAsmPrinter();
}

namespace {

constexpr llvm::StringLiteral kTriple = "nvptx64-nvidia-cuda";

void initNVPTX() {
  static std::once_flag once;
  std::call_once(once, [] {
    LLVMInitializeNVPTXTargetInfo();
    LLVMInitializeNVPTXTarget();
    LLVMInitializeNVPTXTargetMC();
    LLVMInitializeNVPTXAsmPrinter();
  });
}

/// libdevice.10.bc: $KILN_LIBDEVICE, then $CUDA_HOME, then /usr/local/cuda.
std::string findLibdevice() {
  if (const char *p = std::getenv("KILN_LIBDEVICE"))
    return p;
  std::string rel = "/nvvm/libdevice/libdevice.10.bc";
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"})
    if (const char *home = std::getenv(var))
      if (llvm::sys::fs::exists(std::string(home) + rel))
        return std::string(home) + rel;
  return "/usr/local/cuda" + rel;
}

LogicalResult linkLibdevice(llvm::Module &module, Location loc) {
  bool needed = llvm::any_of(module.functions(), [](llvm::Function &f) {
    return f.isDeclaration() && f.getName().starts_with("__nv_");
  });
  if (!needed)
    return success();
  std::string path = findLibdevice();
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return emitError(loc) << "libdevice not found at '" << path
                          << "' (set KILN_LIBDEVICE to libdevice.10.bc)";
  auto lib = llvm::parseBitcodeFile((*buffer)->getMemBufferRef(), module.getContext());
  if (!lib) {
    llvm::consumeError(lib.takeError());
    return emitError(loc) << "cannot read libdevice bitcode at '" << path << "'";
  }
  (*lib)->setTargetTriple(module.getTargetTriple());
  (*lib)->setDataLayout(module.getDataLayout());
  if (llvm::Linker::linkModules(module, std::move(*lib), llvm::Linker::LinkOnlyNeeded))
    return emitError(loc) << "linking libdevice failed";
  // Only kernels are entry points: everything libdevice brought in can be inlined away.
  for (llvm::Function &f : module.functions())
    if (!f.isDeclaration() && f.getCallingConv() != llvm::CallingConv::PTX_Kernel)
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  // libdevice asks NVVMReflect whether to flush denormals; Kiln keeps them (as Triton does).
  module.addModuleFlag(llvm::Module::Override, "nvvm-reflect-ftz", uint32_t(0));
  return success();
}

/// griddepcontrol (programmatic dependent launch) exists from sm_90; below it a grid has no
/// dependents to wait for or release, so extra.cuda.gdc_wait/gdc_launch_dependents are
/// nothing there (as Triton documents them: safe without dependent launch).
void dropGridDependencyControl(llvm::Module &module) {
  for (llvm::Intrinsic::ID id : {llvm::Intrinsic::nvvm_griddepcontrol_wait,
                                 llvm::Intrinsic::nvvm_griddepcontrol_launch_dependents}) {
    llvm::Function *f = llvm::Intrinsic::getDeclarationIfExists(&module, id);
    if (!f)
      continue;
    for (llvm::User *u : llvm::make_early_inc_range(f->users()))
      llvm::cast<llvm::Instruction>(u)->eraseFromParent();
    f->eraseFromParent();
  }
}

} // namespace

void kiln::optimizeLLVMModule(llvm::Module &module, llvm::TargetMachine &tm) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions tuning;
  tuning.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, tuning);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  mpm.run(module, mam);
}

bool kiln::addCodeGenerator(llvm::TargetMachine &tm, llvm::legacy::PassManager &pm,
                            llvm::raw_pwrite_stream &os, llvm::CodeGenFileType kind,
                            bool loopStrengthReduce) {
  // TargetPassConfig reads the process-wide -disable-lsr (a cl::opt<bool> of LLVM's) while it
  // builds the pipeline; one lock keeps concurrent compiles for the two back ends apart.
  static std::mutex mutex;
  static llvm::cl::opt<bool> *disableLSR = [] {
    auto &opts = llvm::cl::getRegisteredOptions();
    auto it = opts.find("disable-lsr");
    return it == opts.end() ? nullptr : static_cast<llvm::cl::opt<bool> *>(it->second);
  }();
  std::lock_guard<std::mutex> lock(mutex);
  bool saved = disableLSR && *disableLSR;
  if (disableLSR)
    disableLSR->setValue(saved || !loopStrengthReduce);
  bool failed = tm.addPassesToEmitFile(pm, os, nullptr, kind);
  if (disableLSR)
    disableLSR->setValue(saved);
  return !failed;
}

bool kiln::isKnownArch(StringRef arch) {
  initNVPTX();
  std::string err;
  llvm::Triple triple(kTriple);
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target || !arch.starts_with("sm_"))
    return false;
  // Ask a default subtarget (creating one for an unknown CPU would print warnings).
  std::unique_ptr<llvm::MCSubtargetInfo> sti(target->createMCSubtargetInfo(triple, "", ""));
  return sti && sti->isCPUStringValid(arch);
}

LogicalResult kiln::emitPTX(ModuleOp module, StringRef arch, std::string &llvmIR, std::string &ptx,
                            bool fpFusion, bool loopStrengthReduce) {
  initNVPTX();
  Location loc = module.getLoc();
  llvm::LLVMContext llvmCtx;
  std::unique_ptr<llvm::Module> llvmModule = translateModuleToLLVMIR(module, llvmCtx, "kiln");
  if (!llvmModule)
    return emitError(loc) << "translation to LLVM IR failed";

  llvm::Triple triple(kTriple);
  std::string err;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target)
    return emitError(loc) << "NVPTX target unavailable: " << err;
  if (!arch.starts_with("sm_"))
    return emitError(loc) << "expected an architecture like sm_90, found '" << arch << "'";
  // The PTX ISA version: 7.8 at least (L2 cache hints need 7.4), else the first version that
  // knows the target (PTX ISA, "Release notes" / "Target ISA notes"): sm_90a 8.0, sm_100 and
  // sm_101 8.6, sm_120 8.7, sm_103 and sm_121 8.8, sm_110 9.0. LLVM aborts the process on a
  // target its PTX version does not know, so every target gets one that knows it.
  int sm = 0;
  arch.drop_front(3).take_while(llvm::isDigit).getAsInteger(10, sm);
  std::string features = sm == 110                ? "+ptx90"
                         : sm == 103 || sm == 121 ? "+ptx88"
                         : sm >= 120              ? "+ptx87"
                         : sm >= 100              ? "+ptx86"
                         : arch.ends_with("a")    ? "+ptx80"
                                                  : "+ptx78";
  // Contraction of mul + add into fma, as Triton allows by default (enable_fp_fusion): without
  // it NVPTX emits add.rn / mul.rn, which ptxas may not fuse.
  llvm::TargetOptions options;
  options.AllowFPOpFusion = fpFusion ? llvm::FPOpFusion::Fast : llvm::FPOpFusion::Standard;
  std::unique_ptr<llvm::TargetMachine> tm(
      target->createTargetMachine(triple, arch, features, options, std::nullopt, std::nullopt,
                                  llvm::CodeGenOptLevel::Aggressive));
  if (!tm)
    return emitError(loc) << "cannot create an NVPTX target machine for '" << arch << "'";
  llvmModule->setTargetTriple(triple);
  llvmModule->setDataLayout(tm->createDataLayout());
  if (failed(linkLibdevice(*llvmModule, loc)))
    return failure();
  if (sm < 90)
    dropGridDependencyControl(*llvmModule);

  optimizeLLVMModule(*llvmModule, *tm);
  if (llvm::verifyModule(*llvmModule, &llvm::errs()))
    return emitError(loc) << "optimized LLVM IR does not verify";
  {
    llvm::raw_string_ostream os(llvmIR);
    llvmModule->print(os, nullptr);
  }
  llvm::SmallString<0> buffer;
  {
    llvm::raw_svector_ostream os(buffer);
    llvm::legacy::PassManager pm;
    if (!addCodeGenerator(*tm, pm, os, llvm::CodeGenFileType::AssemblyFile, loopStrengthReduce))
      return emitError(loc) << "NVPTX cannot emit assembly";
    pm.run(*llvmModule);
  }
  ptx.assign(buffer.begin(), buffer.end());
  return success();
}
