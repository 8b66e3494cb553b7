//===- Compile.cpp - The one door into Kiln's compiler --------------------===//
//
// This file implements kiln::compileKernel, which every front end calls (kilnc, the C API,
// kiln.compile, the C++ DSL and the runtime's JIT): a KernelSource (a module built in
// memory, compiled from a clone in its own context, or text, parsed once) and CompileOptions
// in, a CompiledKernel or a located CompileError out. Also KernelSource and the option key.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compile.h"
#include "kiln/Compiler.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/raw_ostream.h"

#include <mutex>
#include <optional>

#include "BuildId.inc" // KILN_BUILD_ID: a hash of the compiler's sources (lib/build_id.cmake)

using namespace mlir;

//===----------------------------------------------------------------------===//
// KernelSource
//===----------------------------------------------------------------------===//

/// A built module (with the context it lives in, destroyed after it) or text.
struct kiln::KernelSource::Impl {
  std::shared_ptr<MLIRContext> ctx;
  OwningOpRef<ModuleOp> module;
  std::string bufferName;
  std::once_flag printed;
  std::string text;
};

kiln::KernelSource::KernelSource(std::string text, std::string bufferName)
    : impl(std::make_shared<Impl>()) {
  impl->text = std::move(text);
  impl->bufferName = std::move(bufferName);
  std::call_once(impl->printed, [] {}); // the text is given
}
kiln::KernelSource::KernelSource(std::shared_ptr<Impl> impl) : impl(std::move(impl)) {}
kiln::KernelSource::~KernelSource() = default;
kiln::KernelSource::KernelSource(const KernelSource &) = default;
kiln::KernelSource::KernelSource(KernelSource &&) noexcept = default;
kiln::KernelSource &kiln::KernelSource::operator=(const KernelSource &) = default;
kiln::KernelSource &kiln::KernelSource::operator=(KernelSource &&) noexcept = default;

bool kiln::KernelSource::isBuilt() const { return bool(impl->module); }

const std::string &kiln::KernelSource::getText() const {
  std::call_once(impl->printed, [&] {
    llvm::raw_string_ostream os(impl->text);
    impl->module->print(os, OpPrintingFlags().enableDebugInfo(/*enable=*/true,
                                                              /*prettyForm=*/false));
  });
  return impl->text;
}

std::string kiln::KernelSource::getName() const {
  if (!impl->module)
    return "";
  for (auto func : impl->module->getOps<func::FuncOp>())
    return func.getSymName().str();
  return "";
}

kiln::KernelSource kiln::makeKernelSource(std::shared_ptr<MLIRContext> ctx,
                                          OwningOpRef<ModuleOp> module) {
  auto impl = std::make_shared<KernelSource::Impl>();
  impl->ctx = std::move(ctx);
  impl->module = std::move(module);
  return KernelSource(std::move(impl));
}

//===----------------------------------------------------------------------===//
// Options
//===----------------------------------------------------------------------===//

std::string kiln::CompileOptions::key() const {
  return arch + "/w" + std::to_string(numWarps) + "/s" + std::to_string(numStages) + "/p" +
         std::to_string(int(loadPrefetch)) + "/r" + std::to_string(maxnreg) + "/f" +
         std::to_string(int(fpFusion)) + "/d" + std::to_string(int(debug));
}

bool kiln::isKnownTarget(const std::string &arch) { return arch == kHostArch || isKnownArch(arch); }

std::string kiln::buildId() { return "kiln-0.1.0/llvm-" LLVM_VERSION_STRING "/" KILN_BUILD_ID; }

//===----------------------------------------------------------------------===//
// compileKernel
//===----------------------------------------------------------------------===//

namespace {
/// The context text sources parse into: one per thread, never destroyed (kernels compile at
/// any time, static destruction included), its dialects loaded once.
MLIRContext &textContext() {
  thread_local MLIRContext *ctx = [] {
    auto *c = new MLIRContext(MLIRContext::Threading::DISABLED);
    kiln::initializeContext(*c);
    return c;
  }();
  return *ctx;
}

/// Collects a compile's diagnostics: all of them as text, and the first error's location.
class Diagnostics {
public:
  explicit Diagnostics(MLIRContext &ctx)
      : handler(&ctx, [this](Diagnostic &diag) {
          all += kiln::formatDiagnostic(diag) + "\n";
          if (diag.getSeverity() == DiagnosticSeverity::Error && !first) {
            first = diag.str();
            if (auto loc = diag.getLocation()->findInstanceOf<FileLineColLoc>())
              where = loc;
          }
          return success();
        }) {}

  [[noreturn]] void fail(const std::string &kernel, const std::string &fallback) {
    if (where)
      throw kiln::CompileError(kernel, where->getFilename().str(), where->getLine(),
                               where->getColumn(), *first, all);
    throw kiln::CompileError(kernel, "", 0, 0, first ? *first : fallback, all);
  }

private:
  std::string all;
  std::optional<std::string> first;
  std::optional<FileLineColLoc> where;
  ScopedDiagnosticHandler handler;
};
} // namespace

kiln::CompiledKernel kiln::compileKernel(const KernelSource &source,
                                         const CompileOptions &options) {
  KernelSource::Impl &src = source.getImpl();
  MLIRContext &ctx = src.module ? *src.ctx : textContext();
  Diagnostics diagnostics(ctx);
  // The source stays as it is: the pipeline runs on a copy.
  OwningOpRef<ModuleOp> module = src.module
                                     ? OwningOpRef<ModuleOp>(src.module->clone())
                                     : parseSourceString<ModuleOp>(src.text, &ctx, src.bufferName);
  if (!module)
    diagnostics.fail("", "the kernel does not parse");
  std::string name;
  std::vector<ArgKind> signature;
  for (auto func : module->getOps<func::FuncOp>()) {
    name = func.getSymName().str();
    signature.clear();
    for (Type t : func.getArgumentTypes())
      signature.push_back(getArgKind(t));
  }
  FailureOr<CompiledKernel> compiled = compile(*module, options);
  if (failed(compiled))
    diagnostics.fail(name, "the kernel does not compile");
  compiled->signature = std::move(signature);
  return std::move(*compiled);
}

//===----------------------------------------------------------------------===//
// Tensor maps for pointer tiles
//===----------------------------------------------------------------------===//

std::vector<std::vector<int64_t>> kiln::tensorMapRecipes(ModuleOp module,
                                                         std::vector<unsigned> *params) {
  std::vector<std::vector<int64_t>> recipes;
  for (auto func : module.getOps<func::FuncOp>())
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto recipe = func.getArgAttrOfType<DenseI64ArrayAttr>(i, kiln::kTensorMapRecipeAttr)) {
        recipes.emplace_back(recipe.asArrayRef().begin(), recipe.asArrayRef().end());
        if (params)
          params->push_back(i);
      }
  return recipes;
}

FailureOr<std::vector<std::vector<int64_t>>> kiln::addPointerTileMaps(ModuleOp module,
                                                                      bool attentionTiles) {
  PassManager pm(module.getContext());
  pm.addPass(
      createKilnPointerTilesToDescriptors(KilnPointerTilesToDescriptorsOptions{attentionTiles}));
  if (failed(pm.run(module)))
    return failure();
  return tensorMapRecipes(module);
}

std::vector<std::vector<int64_t>> kiln::tensorMapRecipes(const KernelSource &source) {
  KernelSource::Impl &src = source.getImpl();
  return src.module ? tensorMapRecipes(*src.module) : std::vector<std::vector<int64_t>>();
}

kiln::PointerTileMaps kiln::addPointerTileMaps(const KernelSource &source, bool attentionTiles) {
  KernelSource::Impl &src = source.getImpl();
  // Text is parsed into a context of its own, which the new source keeps.
  std::shared_ptr<MLIRContext> ctx = src.ctx;
  if (!src.module) {
    ctx = std::make_shared<MLIRContext>(MLIRContext::Threading::DISABLED);
    initializeContext(*ctx);
  }
  Diagnostics diagnostics(*ctx);
  OwningOpRef<ModuleOp> module =
      src.module ? OwningOpRef<ModuleOp>(src.module->clone())
                 : parseSourceString<ModuleOp>(src.text, ctx.get(), src.bufferName);
  if (!module)
    diagnostics.fail("", "the kernel does not parse");
  // The C++ DSL and text keep what the Python front end folds as it builds (`x * 1` of a
  // parameter specialized to 1, constant steps): canonicalized first, as the pipeline begins.
  PassManager pm(ctx.get());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (failed(pm.run(*module)))
    diagnostics.fail(source.getName(), "internal error: canonicalization failed");
  FailureOr<std::vector<std::vector<int64_t>>> recipes =
      addPointerTileMaps(*module, attentionTiles);
  if (failed(recipes))
    diagnostics.fail(source.getName(), "internal error: -kiln-pointer-tiles-to-descriptors failed");
  if (recipes->empty())
    return {source, {}, {}};
  std::vector<unsigned> params;
  *recipes = tensorMapRecipes(*module, &params);
  return {makeKernelSource(std::move(ctx), std::move(module)), std::move(*recipes),
          std::move(params)};
}
