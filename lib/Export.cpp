//===- Export.cpp - The C API exported by libkiln.so ----------------------===//
//
// This file implements the few symbols libkiln.so exports as a stable C ABI; everything else
// in the library (Kiln internals, LLVM and MLIR) stays hidden.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compiler.h"
#include "kiln/kiln_c.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/SourceMgr.h"
#include <cstdlib>
#include <cstring>

using namespace mlir;

static char *dupString(const std::string &s) {
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

extern "C" KILN_EXPORT const char *kiln_version(void) { return "0.1.0"; }

extern "C" KILN_EXPORT int kiln_compile_mlir(const char *source, const char *arch,
                                             int num_warps, char **ptx, char **error) {
  MLIRContext ctx(MLIRContext::Threading::DISABLED);
  kiln::initializeContext(ctx);
  std::string diagnostics;
  llvm::raw_string_ostream os(diagnostics);
  ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &diag) {
    os << kiln::formatDiagnostic(diag) << "\n";
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(source, &ctx, "kernel.mlir");
  kiln::CompileOptions options;
  options.arch = arch ? arch : "sm_90";
  options.numWarps = num_warps > 0 ? num_warps : 4;
  FailureOr<kiln::CompiledKernel> result =
      module ? kiln::compile(*module, options) : FailureOr<kiln::CompiledKernel>(failure());
  if (failed(result)) {
    if (error)
      *error = dupString(diagnostics.empty() ? "compilation failed" : diagnostics);
    return 1;
  }
  if (ptx)
    *ptx = dupString(result->ptx);
  return 0;
}

extern "C" KILN_EXPORT void kiln_free(char *p) { std::free(p); }
