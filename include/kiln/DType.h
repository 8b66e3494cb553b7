//===- DType.h - Kiln's element types, without MLIR -------------*- C++ -*-===//
//
// This file declares the one spelling of Kiln's element types that every door shares: the
// scalar kinds, DType (a scalar or a pointer to one, printed and parsed with Triton's names),
// and ArgKind (how a kernel parameter is passed at launch). It includes no LLVM or MLIR
// header: the C++ DSL (kiln.h), the runtime and the Python extension use it as is; the
// Builder maps it to MLIR types (kiln::toMLIR in Frontend/Builder.h).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DTYPE_H
#define KILN_DTYPE_H

#include "kiln/kiln_c.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln {

/// The scalar element kinds of Kiln. MLIR integers are signless, so signedness lives here.
/// As in Triton, `I1` (int1, the boolean) counts as unsigned. F8E4M3 is Triton's fp8e4nv
/// (e4m3fn: no infinities, max 448), F8E5M2 its fp8e5.
enum class ScalarKind : uint8_t {
  I1,
  I8,
  I16,
  I32,
  I64,
  U8,
  U16,
  U32,
  U64,
  F16,
  BF16,
  F32,
  F64,
  F8E4M3,
  F8E5M2
};

/// A Kiln-level element type: a scalar kind, or a pointer to a scalar kind (pointers to
/// pointers are not supported). Printed like Triton: "int32", "uint8", "fp16", "bf16",
/// "pointer<fp32>".
class KILN_EXPORT DType {
public:
  /// int32, the type of a plain integer literal.
  constexpr DType() = default;
  /// A scalar dtype.
  constexpr DType(ScalarKind kind) : kind(kind) {}
  /// The pointer dtype `pointer<pointee>` (a pointer to a pointer's pointee for a pointer).
  static constexpr DType pointerTo(DType pointee) {
    DType d(pointee.kind);
    d.pointer = true;
    return d;
  }

  static constexpr DType int1() { return ScalarKind::I1; }
  static constexpr DType int8() { return ScalarKind::I8; }
  static constexpr DType int16() { return ScalarKind::I16; }
  static constexpr DType int32() { return ScalarKind::I32; }
  static constexpr DType int64() { return ScalarKind::I64; }
  static constexpr DType uint8() { return ScalarKind::U8; }
  static constexpr DType uint16() { return ScalarKind::U16; }
  static constexpr DType uint32() { return ScalarKind::U32; }
  static constexpr DType uint64() { return ScalarKind::U64; }
  static constexpr DType fp16() { return ScalarKind::F16; }
  static constexpr DType bf16() { return ScalarKind::BF16; }
  static constexpr DType fp32() { return ScalarKind::F32; }
  static constexpr DType fp64() { return ScalarKind::F64; }
  static constexpr DType fp8e4nv() { return ScalarKind::F8E4M3; }
  static constexpr DType fp8e5() { return ScalarKind::F8E5M2; }

  /// The scalar kind; for a pointer, the kind of its pointee.
  constexpr ScalarKind getKind() const { return kind; }
  /// True for `pointer<T>`.
  constexpr bool isPointer() const { return pointer; }
  /// The pointee of a pointer dtype (the dtype itself for scalars).
  constexpr DType getPointee() const { return DType(kind); }
  /// int1.
  constexpr bool isBool() const { return !pointer && kind == ScalarKind::I1; }
  /// Any integer, int1 included.
  constexpr bool isInt() const { return !pointer && kind <= ScalarKind::U64; }
  /// int8..int64.
  constexpr bool isSigned() const {
    return !pointer && kind >= ScalarKind::I8 && kind <= ScalarKind::I64;
  }
  /// int1 and uint8..uint64 (Triton counts int1 as unsigned).
  constexpr bool isUnsigned() const { return isInt() && !isSigned(); }
  /// fp16, bf16, fp32, fp64, fp8e4nv, fp8e5.
  constexpr bool isFloat() const { return !pointer && kind >= ScalarKind::F16; }
  /// fp8e4nv, fp8e5: loaded, stored, cast and multiplied by dot; arithmetic on them computes
  /// in fp32.
  constexpr bool isFp8() const {
    return !pointer && (kind == ScalarKind::F8E4M3 || kind == ScalarKind::F8E5M2);
  }
  /// Bits of the scalar (64 for pointers).
  unsigned getBitWidth() const;
  /// Explicit mantissa bits of a float (10 for fp16, 7 for bf16, 23 for fp32, 52 for fp64, 3
  /// for fp8e4nv, 2 for fp8e5); 0 for the rest.
  unsigned getMantissaWidth() const;
  /// The Triton name: "int32", "fp32", "pointer<fp32>".
  std::string str() const;
  /// Parses Triton names ("int32", "uint8", "fp16", "float32", "bfloat16", "pointer<fp32>",
  /// "*fp32") and short forms ("i32", "u8", "bool"); std::nullopt for anything else.
  static std::optional<DType> parse(std::string_view name);

  constexpr bool operator==(const DType &other) const {
    return kind == other.kind && pointer == other.pointer;
  }
  constexpr bool operator!=(const DType &other) const { return !(*this == other); }

private:
  ScalarKind kind = ScalarKind::I32;
  bool pointer = false;
};

/// How a kernel parameter is passed at launch (the runtime checks arguments against these).
/// TensorMap: the 128-byte CUtensorMap of a tensor descriptor, passed by value. Unsigned and
/// fp8 scalars pass as the integer of their width.
enum class ArgKind { Pointer, I1, I8, I16, I32, I64, F16, BF16, F32, F64, TensorMap };

/// "pointer", "i32", "f16", "tensormap", ...
KILN_EXPORT const char *toString(ArgKind kind);

} // namespace kiln

#endif // KILN_DTYPE_H
