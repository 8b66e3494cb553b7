//===- Compile.h - The one door into Kiln's compiler, without MLIR -*- C++ -*-===//
//
// This file declares what every front end hands the compiler and what it gets back: a
// KernelSource (a kiln-dialect module built in memory, or MLIR text read from a file or a
// cache), CompileOptions beside it (never spliced into the module), and compileKernel, the
// one entry that kilnc, the C API, kiln.compile, the C++ DSL and the runtime's JIT all call.
// It includes no LLVM or MLIR header (the Python extension and C++ DSL users see only this);
// kiln/Compiler.h holds the MLIR-level entry points behind it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILE_H
#define KILN_COMPILE_H

#include "kiln/CompileError.h"
#include "kiln/DType.h"
#include "kiln/kiln_c.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace kiln {

/// The architecture name of the host (CPU) backend: kernels compiled for "cpu" run on this
/// machine's CPU, with host pointers as their pointer arguments.
inline constexpr const char *kHostArch = "cpu";

/// Which loop loads the compiler issues one iteration early (-kiln-pipeline-loads), besides
/// the operands of dots, which it always prefetches when no shared ring feeds them.
enum class LoadPrefetch : uint8_t {
  DotOperands, ///< only the operands of dots (Triton's default behaviour)
  Auto,        ///< also other loads whose prefetched tiles cost <= 32 registers per thread
  All,         ///< every loop load
};

/// How to compile, travelling beside the module from every door. The fields above the line
/// change the generated code and are part of every cache key (key()); the rest ask for
/// outputs.
struct CompileOptions {
  /// sm_80, sm_86, sm_89, sm_90, sm_90a (wgmma, TMA), sm_100 ...; "cpu": the host backend.
  /// Empty in a request to the JIT: the target of the device the kernel loads on.
  std::string arch;
  unsigned numWarps = 4;
  /// Triton's num_stages, with one meaning at every door: the depth of the software pipeline
  /// that feeds a loop's dots, i.e. the slots of the shared-memory rings their operands are
  /// copied into ahead of use (cp.async on sm_80+, also the TMA on sm_90a), 2..16 (larger
  /// values are taken as 16). 0 or 1: no rings (operands go through registers, prefetched one
  /// iteration ahead). The host backend ignores it.
  unsigned numStages = 3;
  /// Other loop loads issued early (see LoadPrefetch).
  LoadPrefetch loadPrefetch = LoadPrefetch::DotOperands;
  /// GPU: a cap on registers per thread, 16..255 (Triton's maxnreg, ptxas's .maxnreg); 0: none.
  unsigned maxnreg = 0;
  /// Floating-point mul + add may contract to fma (Triton's enable_fp_fusion, on by default).
  bool fpFusion = true;
  /// Host: check every access and tl.device_assert at run time; GPU: device_assert on, int32
  /// address arithmetic checked for wraps, integer division by zero reported.
  bool debug = false;
  // ---- outputs (not part of the key) ----
  bool emitCubin = false;        ///< also assemble PTX to a cubin through nvJitLink
  bool emitHostAssembly = false; ///< host: also produce the assembly text
  bool printIRAfterAll = false;  ///< print the IR after every pass to stderr
  std::string reproducerPath;    ///< where a failing pipeline writes its reproducer ("" = none)

  /// The code-changing options spelled for cache keys, e.g. "sm_90a/w8/s3/p0/r0/f1/d0".
  std::string key() const;
};

/// A kernel to compile: a kiln-dialect module a front end built in memory (handed to the
/// compiler as it is, never printed to be parsed again), or MLIR text (a .mlir file, a cache
/// artifact; parsed only when it must be compiled). Copies share the module. Printing is for
/// cache keys and dumps: getText() prints a built module once, with its source locations.
class KILN_EXPORT KernelSource {
public:
  /// MLIR text; `bufferName` names it in diagnostics of text without locations.
  KernelSource(std::string text, std::string bufferName = "kernel.mlir");
  KernelSource(const char *text) : KernelSource(std::string(text)) {}
  ~KernelSource();
  KernelSource(const KernelSource &);
  KernelSource(KernelSource &&) noexcept;
  KernelSource &operator=(const KernelSource &);
  KernelSource &operator=(KernelSource &&) noexcept;

  /// The module as MLIR text with locations: what cache keys hash, and a debugging dump.
  const std::string &getText() const;
  /// True when the source holds a module built in memory.
  bool isBuilt() const;
  /// The kernel's name ("" for text not yet parsed).
  std::string getName() const;

  /// Defined in lib/ (it holds the MLIR module and its context).
  struct Impl;
  explicit KernelSource(std::shared_ptr<Impl> impl);
  Impl &getImpl() const { return *impl; }

private:
  std::shared_ptr<Impl> impl;
};

/// Every stage of one compilation.
struct CompiledKernel {
  std::string name;               ///< the kernel's symbol
  std::vector<ArgKind> signature; ///< how each parameter is passed
  std::string llvmDialect;        ///< after the MLIR pipeline
  std::string llvmIR;             ///< optimized LLVM IR
  std::string ptx;
  std::vector<char> cubin;      ///< empty unless requested and nvJitLink was found
  std::string cubinError;       ///< why there is no cubin, when one was asked for
  std::string hostAssembly;     ///< host: assembly, when asked for
  std::vector<char> hostObject; ///< host: the relocatable object the runtime links
  /// Warps to launch: CompileOptions::numWarps, and in a warp-specialized kernel (sm_90a
  /// attention loops fed by the TMA) a producer warpgroup beside them.
  unsigned numWarps = 4;
  unsigned sharedBytes = 0; ///< dynamic shared memory to launch with (shared rings)
  /// Static shared memory: the module's shared-memory globals (the ops' scratch pool).
  unsigned staticSharedBytes = 0;
  /// Per kernel parameter: rows of the TMA boxes copied through it (0: none), from the
  /// compiled module (see rt::Kernel::getTensorMapBoxRows).
  std::vector<uint16_t> tensorMapBoxRows;
};

/// Compiles `source` with `options` (options.arch names the target). Throws CompileError
/// located at the first error diagnostic (the user's line: front ends give their ops source
/// locations), with every diagnostic in getDiagnostics(); a failure to produce a requested
/// cubin is reported in `cubinError`, not thrown. Needs no GPU. Thread-safe for distinct
/// sources (a source's module is cloned, never changed).
KILN_EXPORT CompiledKernel compileKernel(const KernelSource &source, const CompileOptions &options);

/// A kernel whose pointer tiles were rewritten to tensor-map accesses for the TMA (what the
/// Python front end does on sm_90a): `source` with the maps appended as parameters after the
/// kernel's own, and per appended map its recipe (kTensorMapRecipeAttr: base parameter, dtype
/// code 'h' f16 / 'H' bf16, rank, block, then extents and row stride as parameter numbers or
/// -1 - constant), which a launcher encodes with rt::encodeRecipeTensorMap.
struct PointerTileMaps {
  KernelSource source;
  std::vector<std::vector<int64_t>> recipes;
  /// The parameter each recipe's map is (the appended maps come last; text may have carried
  /// recipes on earlier parameters already).
  std::vector<unsigned> params;
};

/// Runs -kiln-pointer-tiles-to-descriptors (with `attentionTiles`: its attention-tiles option)
/// on a copy of `source` (MLIR text is parsed into a context the result keeps); for a kernel
/// the pass leaves as it is, returns `source` with no recipes. Call with the source's context
/// free of other threads (as compileKernel). Throws CompileError if the text does not parse or
/// the pass fails.
KILN_EXPORT PointerTileMaps addPointerTileMaps(const KernelSource &source, bool attentionTiles);

/// The recipes of `source`'s tensor map parameters (kTensorMapRecipeAttr: the compiler's, and
/// the C++ DSL's make_tensor_descriptor maps, whose recipes end in a 0: read unguarded), in
/// parameter order; none for MLIR text not yet parsed.
KILN_EXPORT std::vector<std::vector<int64_t>> tensorMapRecipes(const KernelSource &source);

/// True when the compiler knows `arch`: "cpu", or sm_70 ... sm_120a (the NVPTX backend's).
KILN_EXPORT bool isKnownTarget(const std::string &arch);

/// Identifies this build of libkiln: Kiln, LLVM and the build (part of every cache key).
KILN_EXPORT std::string buildId();

} // namespace kiln

#endif // KILN_COMPILE_H
