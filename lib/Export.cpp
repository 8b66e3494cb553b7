//===- Export.cpp - The C API exported by libkiln.so ----------------------===//
//
// This file implements the few symbols libkiln.so exports as a stable C ABI; everything else
// in the library (Kiln internals, LLVM and MLIR) stays hidden.
//
//===----------------------------------------------------------------------===//

#include "kiln/Compile.h"
#include "kiln/kiln_c.h"

#include <cstdlib>
#include <cstring>

static char *dupString(const std::string &s) {
  char *p = static_cast<char *>(std::malloc(s.size() + 1));
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

extern "C" KILN_EXPORT const char *kiln_version(void) { return "0.1.0"; }

extern "C" KILN_EXPORT int kiln_compile_mlir(const char *source, const char *arch, int num_warps,
                                             char **ptx, char **error) {
  kiln::CompileOptions options;
  options.arch = arch ? arch : "sm_90";
  options.numWarps = num_warps > 0 ? num_warps : 4;
  try {
    kiln::CompiledKernel result = kiln::compileKernel(kiln::KernelSource(source), options);
    if (ptx)
      *ptx = dupString(result.ptx);
    return 0;
  } catch (const kiln::CompileError &e) {
    if (error)
      *error = dupString(e.getDiagnostics().empty() ? e.what() : e.getDiagnostics());
    return 1;
  }
}

extern "C" KILN_EXPORT void kiln_free(char *p) { std::free(p); }
