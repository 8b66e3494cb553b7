//===- CompileError.h - The one error of a kernel that does not compile -*- C++ -*-===//
//
// This file declares kiln::CompileError, the error every door reports a kernel that does not
// build or compile with: the Builder (a user error while tracing), the compiler (a
// diagnostic), the C++ DSL, kilnc and the Python extension (which maps it to
// kiln.CompilationError). It includes no LLVM or MLIR header.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_COMPILEERROR_H
#define KILN_COMPILEERROR_H

#include "kiln/kiln_c.h"

#include <stdexcept>
#include <string>

namespace kiln {

/// A kernel that does not build or compile: what was expected, what was found, and where.
/// `line` and `column` are 0 and `file` empty when the error has no source location.
class KILN_EXPORT CompileError : public std::runtime_error {
public:
  /// `diagnostics`: every diagnostic of a failed compile ("file:line:col: error: ..." lines,
  /// notes included); empty for an error of the front end.
  CompileError(std::string kernel, std::string file, unsigned line, unsigned column,
               std::string message, std::string diagnostics = "");
  ~CompileError() override;
  /// Reads `file.py:12:5: error: in kernel 'add': expected ..., found ...`.
  const std::string &getKernel() const { return kernel; }
  const std::string &getFile() const { return file; }
  unsigned getLine() const { return line; }
  unsigned getColumn() const { return column; }
  /// The message without the location prefix.
  const std::string &getMessage() const { return message; }
  /// Every diagnostic of the failed compile (empty for a front-end error).
  const std::string &getDiagnostics() const { return diagnostics; }

private:
  std::string kernel, file;
  unsigned line, column;
  std::string message, diagnostics;
};

} // namespace kiln

#endif // KILN_COMPILEERROR_H
