//===- LangTestSupport.h - Helpers of the C++ DSL's compile tests -*- C++ -*-===//
//
// What LangMatmulTest.cpp and LangAttentionTest.cpp share: a substring test for PTX and MLIR
// text, and a fake device address that traces as 16-byte aligned (tracing looks only at the
// alignment).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TEST_UNIT_LANGTESTSUPPORT_H
#define KILN_TEST_UNIT_LANGTESTSUPPORT_H

#include "kiln/kiln.h"

#include <string>

namespace kiln::test {

inline bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

inline constexpr kiln::rt::CUdeviceptr kAligned = 0x10000;

} // namespace kiln::test

#endif // KILN_TEST_UNIT_LANGTESTSUPPORT_H
