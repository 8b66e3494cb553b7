//===- kilnc.cpp - The Kiln ahead-of-time kernel compiler -----------------===//
//
// This file implements kilnc: a kiln-dialect .mlir kernel in, the final MLIR, LLVM IR, PTX or
// a cubin out (or what a launch needs: --emit=launch). Malformed input gets a diagnostic and exit
// status 1; a failing pipeline also writes a reproducer.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/ToolOutputFile.h"

#include <optional>

using namespace mlir;
namespace cl = llvm::cl;

namespace {
enum class Emit { Default, MLIR, LLVM, PTX, Cubin, Asm, Obj, Launch };

cl::opt<std::string> inputFilename(cl::Positional, cl::desc("<input .mlir>"), cl::init("-"));
cl::opt<std::string> outputFilename("o", cl::desc("output file"), cl::value_desc("file"),
                                    cl::init("-"));
cl::opt<Emit>
    emit("emit", cl::desc("what to produce (default: ptx; asm for --arch=cpu)"),
         cl::init(Emit::Default),
         cl::values(clEnumValN(Emit::MLIR, "mlir", "LLVM-dialect MLIR after the pipeline"),
                    clEnumValN(Emit::LLVM, "llvm", "optimized LLVM IR"),
                    clEnumValN(Emit::PTX, "ptx", "PTX assembly"),
                    clEnumValN(Emit::Cubin, "cubin", "cubin through nvJitLink"),
                    clEnumValN(Emit::Asm, "asm", "host assembly (--arch=cpu)"),
                    clEnumValN(Emit::Obj, "obj", "host object file (--arch=cpu)"),
                    clEnumValN(Emit::Launch, "launch",
                               "what a launch of the compiled kernel needs: its "
                               "name, threads, dynamic shared memory and the TMA "
                               "box rows of each tensor map parameter")));
cl::opt<std::string> arch("arch",
                          cl::desc("target architecture (sm_80, sm_90, sm_90a; cpu: this host)"),
                          cl::init("sm_90"));
cl::opt<unsigned> numWarps("num-warps", cl::desc("warps per program"), cl::init(4));
cl::opt<unsigned> numStages("num-stages",
                            cl::desc("Triton's num_stages: slots of the shared rings that feed "
                                     "a loop's dots (sm_80+), 2..16; 0 or 1: no rings"),
                            cl::init(3));
cl::opt<kiln::LoadPrefetch> prefetchLoads(
    "prefetch-loads", cl::desc("which other loop loads are issued an iteration early"),
    cl::init(kiln::LoadPrefetch::DotOperands),
    cl::values(clEnumValN(kiln::LoadPrefetch::DotOperands, "dots",
                          "only the operands of dots (default)"),
               clEnumValN(kiln::LoadPrefetch::Auto, "auto",
                          "also loads whose prefetched tiles cost <= 32 registers per thread"),
               clEnumValN(kiln::LoadPrefetch::All, "all", "every loop load")));
cl::opt<unsigned> maxnreg("maxnreg",
                          cl::desc("cap on registers per thread, 16..255 (GPU; 0: none)"),
                          cl::init(0));
cl::opt<bool> fpFusion("fp-fusion",
                       cl::desc("floating-point mul + add may contract to fma (Triton's "
                                "enable_fp_fusion)"),
                       cl::init(true));
cl::opt<bool> tmaPointerTiles(
    "tma-pointer-tiles",
    cl::desc("sm_90a: matmul loops' pointer tiles (and their C stores) through the TMA, as the "
             "Python front end and the C++ DSL compile them: tensor maps appended to the "
             "kernel's parameters, whose recipes --emit=launch prints"),
    cl::init(false));
cl::opt<bool> printIRAfterAll("print-ir-after-all", cl::desc("print the IR after every pass"),
                              cl::init(false));
cl::opt<bool> debug("debug",
                    cl::desc("--arch=cpu: check every access and device_assert at run time"),
                    cl::init(false));
cl::opt<std::string> reproducer("reproducer",
                                cl::desc("where a failing pipeline writes its reproducer "
                                         "(default: <tmp>/kilnc-<input>.repro.mlir)"),
                                cl::init(""));

/// The default reproducer path: the temp directory, named after the input.
std::string defaultReproducerPath() {
  llvm::SmallString<128> path;
  llvm::sys::path::system_temp_directory(/*erasedOnReboot=*/true, path);
  std::string stem = inputFilename == "-" ? "stdin" : llvm::sys::path::stem(inputFilename).str();
  llvm::sys::path::append(path, "kilnc-" + stem + ".repro.mlir");
  return path.str().str();
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv, "Kiln kernel compiler\n");
  if (numWarps == 0 || (numWarps & (numWarps - 1)) || numWarps > 32) {
    llvm::errs() << "kilnc: error: expected --num-warps to be a power of two in [1, 32], found "
                 << numWarps << "\n";
    return 1;
  }

  bool host = arch == kiln::kHostArch;
  if (!host && !kiln::isKnownArch(arch)) {
    llvm::errs() << "kilnc: error: unknown --arch '" << arch
                 << "' (expected sm_<major><minor>[a] known to NVPTX, e.g. sm_80, sm_90, sm_90a, "
                    "or cpu)\n";
    return 1;
  }
  if (emit == Emit::Default)
    emit = host ? Emit::Asm : Emit::PTX;
  if (host && emit == Emit::Launch) {
    llvm::errs() << "kilnc: error: --emit=launch does not apply to --arch=" << arch
                 << " (expected mlir, llvm, asm or obj)\n";
    return 1;
  }
  if (host != (emit == Emit::Asm || emit == Emit::Obj) && emit != Emit::MLIR &&
      emit != Emit::LLVM && emit != Emit::Launch) {
    llvm::errs() << "kilnc: error: --emit=" << (host ? "ptx/cubin" : "asm/obj")
                 << " does not apply to --arch=" << arch
                 << (host ? " (expected mlir, llvm, asm or obj)\n"
                          : " (expected mlir, llvm, ptx or cubin)\n");
    return 1;
  }

  std::string errorMessage;
  auto file = openInputFile(inputFilename, &errorMessage);
  if (!file) {
    llvm::errs() << "kilnc: error: " << errorMessage << "\n";
    return 1;
  }
  kiln::CompileOptions options;
  options.arch = arch;
  options.numWarps = numWarps;
  options.numStages = numStages;
  options.loadPrefetch = prefetchLoads;
  options.maxnreg = maxnreg;
  options.fpFusion = fpFusion;
  options.emitCubin = emit == Emit::Cubin;
  options.debug = debug;
  options.emitHostAssembly = emit == Emit::Asm;
  options.printIRAfterAll = printIRAfterAll;
  options.reproducerPath = reproducer.empty() ? defaultReproducerPath() : reproducer.getValue();
  std::optional<kiln::CompiledKernel> result;
  std::vector<std::vector<int64_t>> maps;
  std::vector<unsigned> mapParams;
  try {
    kiln::KernelSource source(file->getBuffer().str(), file->getBufferIdentifier().str());
    if (tmaPointerTiles && arch == "sm_90a") {
      kiln::PointerTileMaps withMaps = kiln::addPointerTileMaps(source, /*attentionTiles=*/true);
      source = withMaps.source;
      maps = std::move(withMaps.recipes);
      mapParams = std::move(withMaps.params);
    }
    result = kiln::compileKernel(source, options);
  } catch (const kiln::CompileError &e) {
    const std::string &all = e.getDiagnostics();
    llvm::errs() << (all.empty() ? std::string(e.what()) + "\n" : all);
    // The pipeline runs under crash recovery: a crashing pass becomes a failure with a
    // reproducer. Tell that apart from a rejected input: exit 2, "internal compiler error".
    if (StringRef(all).contains("signal was caught") ||
        StringRef(all).contains("crash has been detected")) {
      llvm::errs() << "kilnc: internal compiler error: a pass crashed on this input; please "
                      "report it with the reproducer at "
                   << options.reproducerPath << "\n";
      return 2;
    }
    return 1;
  }
  if (emit == Emit::Cubin && result->cubin.empty()) {
    llvm::errs() << "kilnc: error: no cubin: " << result->cubinError << "\n";
    return 1;
  }

  auto output = openOutputFile(outputFilename, &errorMessage);
  if (!output) {
    llvm::errs() << "kilnc: error: " << errorMessage << "\n";
    return 1;
  }
  switch (emit) {
  case Emit::MLIR:
    output->os() << result->llvmDialect;
    break;
  case Emit::LLVM:
    output->os() << result->llvmIR;
    break;
  case Emit::PTX:
    output->os() << result->ptx;
    break;
  case Emit::Cubin:
    output->os().write(result->cubin.data(), result->cubin.size());
    break;
  case Emit::Asm:
    output->os() << result->hostAssembly;
    break;
  case Emit::Obj:
    output->os().write(result->hostObject.data(), result->hostObject.size());
    break;
  case Emit::Launch: {
    // One "key value" line each; tma_box_rows has one entry per kernel parameter (0: not a
    // tensor map the kernel copies through), for kiln::rt::getTensorMapBox.
    output->os() << "kernel " << result->name << "\nthreads " << result->numWarps * 32
                 << "\nshared_bytes " << result->sharedBytes << "\ntma_box_rows";
    for (uint16_t rows : result->tensorMapBoxRows)
      output->os() << " " << rows;
    output->os() << "\n";
    // --tma-pointer-tiles: per map parameter with a recipe (those appended after the kernel's
    // own parameters, and any the input carried), its number and recipe
    // (kiln::PointerTileMaps; kiln::rt::encodeRecipeTensorMap encodes it at launch).
    for (size_t i = 0; i < maps.size(); ++i) {
      output->os() << "tensor_map " << mapParams[i];
      for (int64_t field : maps[i])
        output->os() << " " << field;
      output->os() << "\n";
    }
    break;
  }
  case Emit::Default:
    break;
  }
  output->keep();
  return 0;
}
