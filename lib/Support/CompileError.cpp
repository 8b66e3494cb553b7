//===- CompileError.cpp - The one error of a kernel that does not compile -===//
//
// This file implements kiln::CompileError's message: "file:line[:col]: error: [in kernel 'k':
// ]message".
//
//===----------------------------------------------------------------------===//

#include "kiln/CompileError.h"

using namespace kiln;

static std::string formatError(const std::string &kernel, const std::string &file, unsigned line,
                               unsigned column, const std::string &message) {
  std::string out;
  if (!file.empty() || line) {
    out = file + ":" + std::to_string(line);
    if (column) // 0: unknown
      out += ":" + std::to_string(column);
    out += ": ";
  }
  out += "error: ";
  if (!kernel.empty())
    out += "in kernel '" + kernel + "': ";
  return out + message;
}

CompileError::CompileError(std::string kernel, std::string file, unsigned line, unsigned column,
                           std::string message, std::string diagnostics)
    : std::runtime_error(formatError(kernel, file, line, column, message)),
      kernel(std::move(kernel)), file(std::move(file)), line(line), column(column),
      message(std::move(message)), diagnostics(std::move(diagnostics)) {}

CompileError::~CompileError() = default;
