//===- kiln/lang/Value.h - Values, dtypes, parameters and operators --*- C++ -*-===//
//
// The first part of kiln::lang (kiln.h includes them all): source locations, dtypes, the
// symbolic Value every op takes and returns, the kernel parameter types (Ptr, Scalar, Const)
// and the operators on them.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LANG_VALUE_H
#define KILN_LANG_VALUE_H

#include "kiln/CompileError.h"
#include "kiln/DType.h"
#include "kiln/Runtime.h"
#include "kiln/Specialization.h"

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#if __cplusplus >= 202002L && defined(__has_include)
#if __has_include(<source_location>)
#include <source_location>
#endif
#endif
#if defined(__cpp_lib_source_location)
#define KILN_LANG_SOURCE_LOCATION 1
#elif defined(__has_builtin)
#if __has_builtin(__builtin_COLUMN)
#define KILN_LANG_BUILTIN_COLUMN() __builtin_COLUMN()
#endif
#endif
#ifndef KILN_LANG_BUILTIN_COLUMN
#define KILN_LANG_BUILTIN_COLUMN() 0u
#endif

namespace kiln {
struct Tile;
} // namespace kiln

#pragma GCC visibility push(default)

namespace kiln::lang {

//===----------------------------------------------------------------------===//
// Source locations and errors
//===----------------------------------------------------------------------===//

/// A C++ call site. Every DSL function takes one as its last, defaulted parameter, so the
/// default is evaluated where the user calls it. C++20 (std::source_location) gives the
/// column too; C++17 uses __builtin_FILE/__builtin_LINE, and the column where the compiler has
/// __builtin_COLUMN (clang), else 0 ("unknown").
struct Loc {
#ifdef KILN_LANG_SOURCE_LOCATION
  Loc(std::source_location here = std::source_location::current())
      : file(here.file_name()), line(here.line()), column(here.column()) {}
#else
  /// The tag keeps a `const char *` from converting to a Loc by accident.
  struct Here {};
  Loc(Here = {}, const char *file = __builtin_FILE(), unsigned line = __builtin_LINE(),
      unsigned column = KILN_LANG_BUILTIN_COLUMN())
      : file(file), line(line), column(column) {}
#endif
  /// An explicit location (`file` must outlive the trace, e.g. a string literal).
  static Loc at(const char *file, unsigned line, unsigned column) {
    Loc loc;
    loc.file = file;
    loc.line = line;
    loc.column = column;
    return loc;
  }

  const char *file;
  unsigned line;
  unsigned column;
};

/// A user error in a C++ kernel (kiln::CompileError, shared by every door): `what()` reads
/// `file.cpp:12:5: error: in kernel 'add': expected ..., found ...` (":5" only when the
/// column is known).
using kiln::CompileError;

//===----------------------------------------------------------------------===//
// Dtypes
//===----------------------------------------------------------------------===//

/// Scalar element kinds and dtypes: kiln/DType.h, the one spelling every door shares.
using kiln::DType;
using kiln::ScalarKind;

/// Dtype values, with triton.language's names: `x.to(float16)`, `zeros({64}, float32)`.
inline constexpr DType int1{ScalarKind::I1}, int8{ScalarKind::I8}, int16{ScalarKind::I16},
    int32{ScalarKind::I32}, int64{ScalarKind::I64}, uint8{ScalarKind::U8}, uint16{ScalarKind::U16},
    uint32{ScalarKind::U32}, uint64{ScalarKind::U64}, float16{ScalarKind::F16},
    bfloat16{ScalarKind::BF16}, float32{ScalarKind::F32}, float64{ScalarKind::F64},
    /// fp8: e4m3fn (max 448, no infinities) and e5m2, as triton.language's float8e4nv and
    /// float8e5 (torch's float8_e4m3fn and float8_e5m2).
    float8e4nv{ScalarKind::F8E4M3}, float8e5{ScalarKind::F8E5M2};

/// An element type for kernel parameters (`Ptr<f32>`, `Scalar<i64>`): its dtype, and `Host`,
/// the C++ type of one element (void where C++ has none), which a typed device pointer passed
/// at launch must point to.
template <ScalarKind Kind, class Host> struct Element {
  static constexpr DType dtype{Kind};
  using host = Host;
};
using i1 = Element<ScalarKind::I1, bool>;
using i8 = Element<ScalarKind::I8, int8_t>;
using i16 = Element<ScalarKind::I16, int16_t>;
using i32 = Element<ScalarKind::I32, int32_t>;
using i64 = Element<ScalarKind::I64, int64_t>;
using u8 = Element<ScalarKind::U8, uint8_t>;
using u16 = Element<ScalarKind::U16, uint16_t>;
using u32 = Element<ScalarKind::U32, uint32_t>;
using u64 = Element<ScalarKind::U64, uint64_t>;
using f16 = Element<ScalarKind::F16, void>;
using bf16 = Element<ScalarKind::BF16, void>;
using f32 = Element<ScalarKind::F32, float>;
using f64 = Element<ScalarKind::F64, double>;
using f8e4nv = Element<ScalarKind::F8E4M3, void>;
using f8e5 = Element<ScalarKind::F8E5M2, void>;

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

class Value;
class Operand;
class Index;
template <class T> class Const;
using Values = std::vector<Value>;
/// A tile shape: `{BLOCK_M, BLOCK_N}`.
using Shape = std::vector<int64_t>;

namespace detail {
struct Access;
template <class T> struct ParamTraits;
template <class T> inline constexpr bool alwaysFalse = false;
} // namespace detail

/// A symbolic scalar or tile inside a kernel being traced: what a Triton kernel calls a tensor.
/// Values exist only while their kernel is traced; using one afterwards is an error. The
/// operators (+ - * / % < <= > >= == != & | ^ << >> ~ ! unary -) and the functions below
/// build ops through kiln::Builder with Triton's promotion and broadcasting. `/` follows C++:
/// integer operands divide with truncation (Triton's `//`), others divide as floats; use
/// truediv()/floordiv() for Triton's spelling.
class Value {
public:
  /// An empty value; assign to it before use.
  Value() = default;
  /// A C++ number as a weak literal (it takes the dtype of what it meets, as in Triton).
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Value(T literal, Loc loc = {});
  template <class T> Value(const Const<T> &literal, Loc loc = {});

  /// The dtype (for a pointer: pointer<element>).
  DType dtype() const;
  /// The tile shape; empty for a scalar.
  Shape shape() const;
  bool is_tile() const { return !shape().empty(); }
  /// False for a default-constructed Value.
  bool valid() const { return tile != nullptr; }

  /// x.to(dtype): a value conversion with Triton's rules; `bitcast` reinterprets the bits.
  Value to(DType dtype, Loc loc = {}) const;
  Value to(DType dtype, bool bitcast, Loc loc = {}) const;
  /// Triton's `x[:, None]`, spelled `x[{Slice_, None_}]`: Slice_ keeps a dimension, None_
  /// inserts one of size 1.
  Value operator[](const Index &index) const;

  Value &operator+=(const Operand &b);
  Value &operator-=(const Operand &b);
  Value &operator*=(const Operand &b);
  Value &operator/=(const Operand &b);
  Value &operator%=(const Operand &b);
  Value &operator&=(const Operand &b);
  Value &operator|=(const Operand &b);
  Value &operator^=(const Operand &b);
  Value &operator<<=(const Operand &b);
  Value &operator>>=(const Operand &b);

private:
  friend struct detail::Access;
  const Tile *tile = nullptr;
  uint64_t trace = 0;
};

/// Triton's `None` (a new axis in indexing, "absent" for load/store's mask and other) and
/// `:` (a full slice). Spelled with a trailing underscore so they clash with no macro.
struct NoneT {
  explicit constexpr NoneT(int) {}
};
struct SliceT {
  explicit constexpr SliceT(int) {}
};
inline constexpr NoneT None_{0};
inline constexpr SliceT Slice_{0};

/// An operand of a DSL op: a Value, or a C++ number that becomes a weak literal, or None_.
/// Converting to an Operand records the call site, which is how the operators learn it.
class Operand {
public:
  Operand(const Value &value, Loc loc = {}) : kind(Kind::Value), value(value), loc(loc) {}
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Operand(T literal, Loc loc = {}) : loc(loc) {
    if constexpr (std::is_unsigned_v<T>) {
      kind = Kind::UInt;
      u = uint64_t(literal);
    } else {
      kind = Kind::Int;
      i = int64_t(literal);
    }
  }
  Operand(bool literal, Loc loc = {}) : kind(Kind::Bool), b(literal), loc(loc) {}
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Operand(T literal, Loc loc = {}) : kind(Kind::Float), f(double(literal)), loc(loc) {}
  template <class T> Operand(const Const<T> &c, Loc loc = {}) : Operand(c.value(), loc) {}
  Operand(NoneT, Loc loc = {}) : kind(Kind::None), loc(loc) {}

  enum class Kind : uint8_t { None, Value, Int, UInt, Float, Bool };
  Kind getKind() const { return kind; }
  bool isNone() const { return kind == Kind::None; }
  const Loc &getLoc() const { return loc; }

private:
  friend struct detail::Access;
  Kind kind;
  Value value;
  union {
    int64_t i;
    uint64_t u;
    double f;
    bool b;
  };
  Loc loc;
};

/// One entry of an index list.
class IndexItem {
public:
  IndexItem(NoneT) : newAxis(true) {}
  IndexItem(SliceT) : newAxis(false) {}
  bool isNewAxis() const { return newAxis; }

private:
  bool newAxis;
};

/// The argument of Value::operator[]: `x[None_]`, `x[{Slice_, None_}]`.
class Index {
public:
  Index(NoneT, Loc loc = {}) : items{IndexItem(None_)}, loc(loc) {}
  Index(SliceT, Loc loc = {}) : items{IndexItem(Slice_)}, loc(loc) {}
  Index(std::initializer_list<IndexItem> items, Loc loc = {}) : items(items), loc(loc) {}
  const std::vector<IndexItem> &getItems() const { return items; }
  const Loc &getLoc() const { return loc; }

private:
  std::vector<IndexItem> items;
  Loc loc;
};

//===----------------------------------------------------------------------===//
// Kernel parameters
//===----------------------------------------------------------------------===//

/// A pointer parameter, `*fp32` in Triton. At launch it takes a rt::DeviceBuffer, a
/// rt::CUdeviceptr, a `void *` or a typed device pointer (`float *` for Ptr<f32>); a pointer
/// aligned to 16 bytes specializes the kernel with `kiln.divisibility = 16`.
template <class E> class Ptr : public Value {
  friend struct detail::ParamTraits<Ptr<E>>;
  explicit Ptr(const Value &v) : Value(v) {}
};

/// A scalar runtime parameter. An integer equal to 1 specializes the kernel on that value
/// (the constant 1 in the body, as Triton's `== 1` rule), one whose value is a multiple of 16
/// with `kiln.divisibility = 16` (kiln/Specialization.h, the rule both launchers share).
/// fp16/bf16 scalars are not supported as parameters.
template <class E> class Scalar : public Value {
  static_assert(!std::is_void_v<typename E::host> && !std::is_same_v<E, i1>,
                "kernel scalar parameters are integers, F32 or F64");
  friend struct detail::ParamTraits<Scalar<E>>;
  explicit Scalar(const Value &v) : Value(v) {}
};
using I8 = Scalar<i8>;
using I16 = Scalar<i16>;
using I32 = Scalar<i32>;
using I64 = Scalar<i64>;
using U8 = Scalar<u8>;
using U16 = Scalar<u16>;
using U32 = Scalar<u32>;
using U64 = Scalar<u64>;
using F32 = Scalar<f32>;
using F64 = Scalar<f64>;

/// A constexpr parameter (`BLOCK: tl.constexpr`): a plain C++ value during tracing, so C++
/// `if`/`for` on it are compile-time (Triton's constexpr branches and static_range). Its value
/// is part of the specialization: a new value traces and compiles a new variant.
template <class T> class Const {
  static_assert(std::is_arithmetic_v<T> || std::is_same_v<T, DType>,
                "Const<T> takes an integer, bool, floating-point or DType");

public:
  constexpr Const(T value) : v(value) {}
  constexpr operator T() const { return v; }
  constexpr T value() const { return v; }

private:
  T v;
};

// Const op Const folds in C++ (without these the built-in and the symbolic operators would
// be ambiguous). Const op number already uses the built-in operators.
#define KILN_LANG_CONST_BINARY(OP)                                                                 \
  template <class A, class B> constexpr auto operator OP(const Const<A> &a, const Const<B> &b) {   \
    return a.value() OP b.value();                                                                 \
  }
KILN_LANG_CONST_BINARY(+)
KILN_LANG_CONST_BINARY(-)
KILN_LANG_CONST_BINARY(*)
KILN_LANG_CONST_BINARY(/)
KILN_LANG_CONST_BINARY(%)
KILN_LANG_CONST_BINARY(<)
KILN_LANG_CONST_BINARY(<=)
KILN_LANG_CONST_BINARY(>)
KILN_LANG_CONST_BINARY(>=)
KILN_LANG_CONST_BINARY(==)
KILN_LANG_CONST_BINARY(!=)
KILN_LANG_CONST_BINARY(&)
KILN_LANG_CONST_BINARY(|)
KILN_LANG_CONST_BINARY(^)
KILN_LANG_CONST_BINARY(<<)
KILN_LANG_CONST_BINARY(>>)
#undef KILN_LANG_CONST_BINARY
template <class A> constexpr auto operator-(const Const<A> &a) { return -a.value(); }
template <class A> constexpr auto operator~(const Const<A> &a) { return ~a.value(); }
template <class A> constexpr auto operator!(const Const<A> &a) { return !a.value(); }

namespace detail {
/// The weak literal `literal` as a Value of the kernel being traced.
Value literalValue(const Operand &literal);
} // namespace detail
template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int>>
Value::Value(T literal, Loc loc) : Value(detail::literalValue(Operand(literal, loc))) {}
template <class T>
Value::Value(const Const<T> &literal, Loc loc)
    : Value(detail::literalValue(Operand(literal.value(), loc))) {}

//===----------------------------------------------------------------------===//
// Operators
//===----------------------------------------------------------------------===//

Value operator+(const Operand &a, const Operand &b);
Value operator-(const Operand &a, const Operand &b);
Value operator*(const Operand &a, const Operand &b);
/// Integer operands: truncating division (Triton's `//`); otherwise true division.
Value operator/(const Operand &a, const Operand &b);
/// C-style remainder for integers (the sign of `a`), fmod-like for floats.
Value operator%(const Operand &a, const Operand &b);
Value operator<(const Operand &a, const Operand &b);
Value operator<=(const Operand &a, const Operand &b);
Value operator>(const Operand &a, const Operand &b);
Value operator>=(const Operand &a, const Operand &b);
Value operator==(const Operand &a, const Operand &b);
Value operator!=(const Operand &a, const Operand &b);
Value operator&(const Operand &a, const Operand &b);
Value operator|(const Operand &a, const Operand &b);
Value operator^(const Operand &a, const Operand &b);
Value operator<<(const Operand &a, const Operand &b);
/// Arithmetic for signed, logical for unsigned integers.
Value operator>>(const Operand &a, const Operand &b);
Value operator-(const Operand &x);
Value operator~(const Operand &x);
/// Logical not (Python's `not`): an int1 result.
Value operator!(const Operand &x);

} // namespace kiln::lang

#pragma GCC visibility pop

#endif // KILN_LANG_VALUE_H
