//===- DType.cpp - Kiln's element types, without MLIR ---------------------===//
//
// This file implements kiln::DType's names and widths and kiln::toString(ArgKind).
//
//===----------------------------------------------------------------------===//

#include "kiln/DType.h"

#include <iterator>
#include <utility>

using namespace kiln;

unsigned DType::getBitWidth() const {
  if (pointer)
    return 64;
  switch (kind) {
  case ScalarKind::I1:
    return 1;
  case ScalarKind::I8:
  case ScalarKind::U8:
  case ScalarKind::F8E4M3:
  case ScalarKind::F8E5M2:
    return 8;
  case ScalarKind::I16:
  case ScalarKind::U16:
  case ScalarKind::F16:
  case ScalarKind::BF16:
    return 16;
  case ScalarKind::I32:
  case ScalarKind::U32:
  case ScalarKind::F32:
    return 32;
  default:
    return 64;
  }
}

unsigned DType::getMantissaWidth() const {
  switch (pointer ? ScalarKind::I32 : kind) {
  case ScalarKind::F16:
    return 10;
  case ScalarKind::BF16:
    return 7;
  case ScalarKind::F32:
    return 23;
  case ScalarKind::F64:
    return 52;
  case ScalarKind::F8E4M3:
    return 3;
  case ScalarKind::F8E5M2:
    return 2;
  default:
    return 0;
  }
}

/// Triton's names, indexed by ScalarKind.
static constexpr const char *kScalarNames[] = {"int1",  "int8",   "int16",  "int32",   "int64",
                                               "uint8", "uint16", "uint32", "uint64",  "fp16",
                                               "bf16",  "fp32",   "fp64",   "fp8e4nv", "fp8e5"};

std::string DType::str() const {
  std::string name = kScalarNames[static_cast<int>(kind)];
  return pointer ? "pointer<" + name + ">" : name;
}

static std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

std::optional<DType> DType::parse(std::string_view name) {
  name = trim(name);
  std::string_view pointee;
  if (name.substr(0, 1) == "*")
    pointee = name.substr(1);
  else if (name.substr(0, 8) == "pointer<" && name.size() > 8 && name.back() == '>')
    pointee = name.substr(8, name.size() - 9);
  if (pointee.data()) {
    std::optional<DType> p = parse(pointee);
    if (!p || p->isPointer())
      return std::nullopt;
    return pointerTo(*p);
  }
  static const std::pair<const char *, ScalarKind> aliases[] = {
      {"i1", ScalarKind::I1},
      {"bool", ScalarKind::I1},
      {"i8", ScalarKind::I8},
      {"i16", ScalarKind::I16},
      {"i32", ScalarKind::I32},
      {"i64", ScalarKind::I64},
      {"u8", ScalarKind::U8},
      {"u16", ScalarKind::U16},
      {"u32", ScalarKind::U32},
      {"u64", ScalarKind::U64},
      {"float16", ScalarKind::F16},
      {"bfloat16", ScalarKind::BF16},
      {"float32", ScalarKind::F32},
      {"float64", ScalarKind::F64},
      {"float8e4nv", ScalarKind::F8E4M3},
      {"float8_e4m3fn", ScalarKind::F8E4M3},
      {"float8e5", ScalarKind::F8E5M2},
      {"float8_e5m2", ScalarKind::F8E5M2}};
  for (size_t i = 0; i < std::size(kScalarNames); ++i)
    if (name == kScalarNames[i])
      return DType(static_cast<ScalarKind>(i));
  for (auto &[n, k] : aliases)
    if (name == n)
      return DType(k);
  return std::nullopt;
}

const char *kiln::toString(ArgKind kind) {
  switch (kind) {
  case ArgKind::Pointer:
    return "pointer";
  case ArgKind::I1:
    return "i1";
  case ArgKind::I8:
    return "i8";
  case ArgKind::I16:
    return "i16";
  case ArgKind::I32:
    return "i32";
  case ArgKind::I64:
    return "i64";
  case ArgKind::F16:
    return "f16";
  case ArgKind::BF16:
    return "bf16";
  case ArgKind::F32:
    return "f32";
  case ArgKind::F64:
    return "f64";
  case ArgKind::TensorMap:
    return "tensormap";
  }
  return "?";
}
