//===- BuilderFixture.h - What the Builder's gtests share -------*- C++ -*-===//
//
// This file declares the fixture of the Builder's op tests (BuilderReduceTest,
// BuilderDotScanTest, BuilderMathTest): a Builder in its own initialized context, a kernel begun
// at a user location, an op's printed form, and the message of the CompileError a call throws.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_BUILDERFIXTURE_H
#define KILN_TEST_UNIT_BUILDERFIXTURE_H

#include "kiln/Compiler.h"
#include "kiln/Frontend/Builder.h"

#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace kiln::test {

/// `op` as MLIR prints it.
inline std::string print(mlir::Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  op->print(os);
  return s;
}

class BuilderFixture : public ::testing::Test {
protected:
  mlir::MLIRContext ctx;
  kiln::Builder b{ctx};

  /// Initializes the context and begins kernel `name(args)` with ops located at
  /// `file:line:col`.
  void begin(const char *file, unsigned line, unsigned col, const char *name,
             llvm::ArrayRef<kiln::KernelArg> args) {
    kiln::initializeContext(ctx);
    b.setLocation(file, line, col);
    b.beginKernel(name, args);
  }
  /// The message of the CompileError `fn` throws, or "no error".
  static std::string errorOf(const std::function<void()> &fn) {
    try {
      fn();
    } catch (const kiln::CompileError &e) {
      return e.what();
    }
    return "no error";
  }
};

} // namespace kiln::test

#endif // KILN_TEST_UNIT_BUILDERFIXTURE_H
