//===- kiln.h - Kiln's embedded C++ DSL -------------------------*- C++ -*-===//
//
// This file declares kiln::lang, the C++ door into Kiln: a kernel is a C++ lambda over
// symbolic tile values, traced once per specialization through kiln::Builder (the same
// semantic layer as the Python front end), compiled by the JIT and launched from C++:
//
//   using namespace kiln::lang;
//   auto add = kiln::kernel("add", [](Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n,
//                                     Const<int> BLOCK) {
//     auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
//     auto mask = offs < n;
//     store(out + offs, load(x + offs, mask) + load(y + offs, mask), mask);
//   });
//   add(grid(cdiv(n, 1024)), stream, x, y, out, n, 1024);
//
// Names follow triton.language. Every op records the C++ call site (file:line, and the column
// where the compiler provides one) through a defaulted `Loc` parameter; a user error throws
// kiln::lang::CompileError naming the kernel and that call site. The header needs neither MLIR
// nor LLVM headers. docs/cpp-dsl.md is the reference.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_KILN_H
#define KILN_KILN_H

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

//===----------------------------------------------------------------------===//
// Builtins (triton.language)
//===----------------------------------------------------------------------===//

/// program_id(axis) / num_programs(axis), axis 0..2: int32 scalars.
Value program_id(int axis, Loc loc = {});
Value num_programs(int axis, Loc loc = {});
/// arange(start, end): int32 tile [start, end); end - start a power of two.
Value arange(int64_t start, int64_t end, Loc loc = {});
Value zeros(const Shape &shape, DType dtype, Loc loc = {});
/// full(shape, value, dtype): `value` (a scalar) cast to `dtype`, splatted.
Value full(const Shape &shape, const Operand &value, DType dtype, Loc loc = {});

/// Triton's load/store modifiers: cache ".ca"/".cg"/".cv" (loads), ".wb"/".cs"/".wt" (stores);
/// eviction "evict_first"/"evict_last".
struct LoadOptions {
  std::string cache_modifier;
  std::string eviction_policy;
  bool is_volatile = false;
};
struct StoreOptions {
  std::string cache_modifier;
  std::string eviction_policy;
};
/// load(ptr, mask, other): mask and other broadcast with ptr; other (cast to the element
/// type) requires a mask. Pass None_ to leave one out.
Value load(const Operand &ptr, const Operand &mask = None_, const Operand &other = None_,
           const LoadOptions &options = {}, Loc loc = {});
/// store(ptr, value, mask): value cast to the element type and broadcast to ptr's shape.
void store(const Operand &ptr, const Operand &value, const Operand &mask = None_,
           const StoreOptions &options = {}, Loc loc = {});

/// where(cond, a, b): cond to int1, a and b promoted, all three broadcast.
Value where(const Operand &cond, const Operand &a, const Operand &b, Loc loc = {});
/// Whether minimum/maximum propagate NaN (Triton's tl.PropagateNan; NONE is the default).
enum class PropagateNan { NONE, ALL };
Value minimum(const Operand &a, const Operand &b, PropagateNan nan = PropagateNan::NONE,
              Loc loc = {});
Value maximum(const Operand &a, const Operand &b, PropagateNan nan = PropagateNan::NONE,
              Loc loc = {});

/// Float math; fp16/bf16 compute in fp32 and round back, integers are an error.
Value exp(const Operand &x, Loc loc = {});
Value exp2(const Operand &x, Loc loc = {});
Value log(const Operand &x, Loc loc = {});
Value log2(const Operand &x, Loc loc = {});
Value sqrt(const Operand &x, Loc loc = {});
Value rsqrt(const Operand &x, Loc loc = {});
Value sin(const Operand &x, Loc loc = {});
Value cos(const Operand &x, Loc loc = {});
Value erf(const Operand &x, Loc loc = {});
Value floor(const Operand &x, Loc loc = {});
Value ceil(const Operand &x, Loc loc = {});
/// abs: floats and signed integers; a no-op on unsigned integers.
Value abs(const Operand &x, Loc loc = {});

/// Triton's `a / b`: integers divide in fp32.
Value truediv(const Operand &a, const Operand &b, Loc loc = {});
/// Triton's `a // b` on integers: C-style truncating division.
Value floordiv(const Operand &a, const Operand &b, Loc loc = {});
/// cdiv(a, b) = (a + b - 1) // b, symbolic.
Value cdiv(const Operand &a, const Operand &b, Loc loc = {});
namespace detail {
template <class T> struct HostInt : std::is_integral<T> {};
template <class T> struct HostInt<Const<T>> : std::is_integral<T> {};
template <class T> constexpr auto hostValue(const T &v) { return v; }
template <class T> constexpr T hostValue(const Const<T> &v) { return v.value(); }
} // namespace detail
/// cdiv on C++ integers and integer Consts: computed in C++ (grid sizes, constexpr math).
template <class A, class B,
          std::enable_if_t<detail::HostInt<A>::value && detail::HostInt<B>::value, int> = 0>
constexpr auto cdiv(const A &a, const B &b) {
  return (detail::hostValue(a) + detail::hostValue(b) - 1) / detail::hostValue(b);
}

/// cast(x, dtype, bitcast): x.to(dtype, bitcast).
Value cast(const Operand &x, DType dtype, bool bitcast = false, Loc loc = {});

/// expand_dims(x, axis); axis may be negative (counted from the new rank).
Value expand_dims(const Operand &x, int axis, Loc loc = {});
/// broadcast_to(x, shape): scalars splat, tiles stretch size-1 dimensions.
Value broadcast_to(const Operand &x, const Shape &shape, Loc loc = {});
/// broadcast(a, b): both to their common shape.
std::pair<Value, Value> broadcast(const Operand &a, const Operand &b, Loc loc = {});
/// reshape / trans (traced; the GPU compiler does not lower them yet).
Value reshape(const Operand &x, const Shape &shape, bool can_reorder = false, Loc loc = {});
Value trans(const Operand &x, const std::vector<int32_t> &order = {}, Loc loc = {});

/// Reductions along `axis` (negative counts from the end), as tl.sum / tl.max / tl.min /
/// tl.argmax / tl.argmin / tl.xor_sum: the axis dropped (a scalar from a 1-D tile), or kept
/// as size 1 with keep_dims. sum accumulates integers narrower than 32 bits in (u)int32;
/// argmax/argmin give the int32 index of the first extreme value.
Value sum(const Operand &x, int axis, bool keep_dims = false, Loc loc = {});
Value max(const Operand &x, int axis, bool keep_dims = false, Loc loc = {});
Value min(const Operand &x, int axis, bool keep_dims = false, Loc loc = {});
Value argmax(const Operand &x, int axis, bool keep_dims = false, Loc loc = {});
Value argmin(const Operand &x, int axis, bool keep_dims = false, Loc loc = {});
Value xor_sum(const Operand &x, int axis, bool keep_dims = false, Loc loc = {});
/// tl.device_print(prefix, *args, hex): prints at run time from every program, each element
/// of a tile on its line (the host backend to stdout, the GPU through vprintf).
void device_print(const std::string &prefix, const Values &args = {}, bool hex = false,
                  Loc loc = {});

/// A combine function of tl.reduce / tl.associative_scan: the values of one side (one per
/// input) and of the other; returns the combined values, one per input, of their dtypes.
using Combine = std::function<Values(const Values &, const Values &)>;
/// tl.reduce(inputs, axis, combine, keep_dims): same-shape tiles reduced together along
/// `axis` by an associative `combine` (e.g. a value and its index).
Values reduce(const Values &inputs, int axis, const Combine &combine, bool keep_dims = false,
              Loc loc = {});
/// reduce of one tile: `combine(a, b)` returns one value.
Value reduce(const Operand &input, int axis, const std::function<Value(Value, Value)> &combine,
             bool keep_dims = false, Loc loc = {});
/// tl.associative_scan(inputs, axis, combine, reverse): inclusive scans of same-shape tiles.
Values associative_scan(const Values &inputs, int axis, const Combine &combine,
                        bool reverse = false, Loc loc = {});
Value associative_scan(const Operand &input, int axis,
                       const std::function<Value(Value, Value)> &combine, bool reverse = false,
                       Loc loc = {});
/// Inclusive scans along `axis`, as tl.cumsum / tl.cumprod (from the end with reverse).
Value cumsum(const Operand &x, int axis, bool reverse = false, Loc loc = {});
Value cumprod(const Operand &x, int axis, bool reverse = false, Loc loc = {});

/// Atomics, as tl.atomic_<op>(ptr, val, mask, sem, scope) for op in add, max, min, and, or,
/// xor, xchg: returns the old values. `sem` "acq_rel" (or ""), "acquire", "release",
/// "relaxed"; `scope` "gpu" (or ""), "cta", "sys".
Value atomic_rmw(const std::string &op, const Operand &ptr, const Operand &val,
                 const Operand &mask = None_, const std::string &sem = "",
                 const std::string &scope = "", Loc loc = {});
Value atomic_add(const Operand &ptr, const Operand &val, const Operand &mask = None_,
                 Loc loc = {});
Value atomic_max(const Operand &ptr, const Operand &val, const Operand &mask = None_,
                 Loc loc = {});
Value atomic_min(const Operand &ptr, const Operand &val, const Operand &mask = None_,
                 Loc loc = {});
/// tl.atomic_cas(ptr, cmp, val): where *ptr == cmp stores val; returns the old values.
Value atomic_cas(const Operand &ptr, const Operand &cmp, const Operand &val,
                 const std::string &sem = "", const std::string &scope = "", Loc loc = {});

/// dot(a, b) as triton.language.dot: an M x K by K x N product of tiles of one dtype (M, N,
/// K powers of two >= 16), on tensor cores where the target has them: fp16/bf16/fp8 -> fp32,
/// fp32 (tf32 by default) -> fp32, int8 -> int32.
Value dot(const Operand &a, const Operand &b, Loc loc = {});
/// dot(a, b, acc, input_precision, out_dtype): the product added to `acc` (M x N, the
/// result's dtype); `input_precision` "tf32" (or ""), "tf32x3" or "ieee" for fp32 inputs;
/// `out_dtype` float32, or float16 for fp16 inputs, int32 for int8.
Value dot(const Operand &a, const Operand &b, const Operand &acc,
          const std::string &input_precision = "", DType out_dtype = float32, Loc loc = {});

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

namespace detail {
/// A non-owning reference to a callable (no allocation), valid while the callable lives.
template <class Sig> class FunctionRef;
template <class R, class... A> class FunctionRef<R(A...)> {
public:
  template <class F, std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>, int> = 0>
  FunctionRef(F &&f)
      : object(const_cast<void *>(static_cast<const void *>(std::addressof(f)))),
        callback([](void *o, A... a) -> R {
          return (*static_cast<std::remove_reference_t<F> *>(o))(std::forward<A>(a)...);
        }) {}
  R operator()(A... a) const { return callback(object, std::forward<A>(a)...); }

private:
  void *object;
  R (*callback)(void *, A...);
};

using Yield = std::vector<Operand>;
Values forRange(const Operand &lo, const Operand &hi, const Operand &step,
                const std::vector<Operand> &inits,
                FunctionRef<Yield(const Value &, const Values &)> body, const Loc &loc,
                bool flatten = false);
Values ifThenElse(const Operand &cond, FunctionRef<Yield()> thenFn,
                  const FunctionRef<Yield()> *elseFn, const Loc &loc);
Values whileLoop(const std::vector<Operand> &inits, FunctionRef<Operand(const Values &)> cond,
                 FunctionRef<Yield(const Values &)> body, const Loc &loc);

/// What a region body returned, as yielded operands: nothing, one value, or several.
template <class R> Yield toYield(R &&r) {
  using T = std::decay_t<R>;
  if constexpr (std::is_same_v<T, Values> || std::is_same_v<T, std::vector<Operand>>)
    return Yield(r.begin(), r.end());
  else
    return Yield{Operand(std::forward<R>(r))};
}
template <class F, class... A> Yield invokeToYield(F &f, A &&...a) {
  if constexpr (std::is_void_v<std::invoke_result_t<F &, A...>>) {
    f(std::forward<A>(a)...);
    return {};
  } else {
    return toYield(f(std::forward<A>(a)...));
  }
}
template <class R> constexpr bool isMulti() {
  return std::is_same_v<std::decay_t<R>, Values> ||
         std::is_same_v<std::decay_t<R>, std::vector<Operand>>;
}
} // namespace detail

/// `for i in range(lo, hi, step): body(i)`, as scf.for; no loop-carried values.
template <class Body, std::enable_if_t<std::is_invocable_v<Body &, Value>, int> = 0>
void for_range(const Operand &lo, const Operand &hi, const Operand &step, Body &&body,
               Loc loc = {}) {
  detail::forRange(
      lo, hi, step, {},
      [&](const Value &iv, const Values &) { return detail::invokeToYield(body, iv); }, loc);
}
/// for_range(lo, hi, body): step 1.
template <class Body, std::enable_if_t<std::is_invocable_v<Body &, Value>, int> = 0>
void for_range(const Operand &lo, const Operand &hi, Body &&body, Loc loc = {}) {
  for_range(lo, hi, 1, std::forward<Body>(body), loc);
}
/// `for i in tl.range(lo, hi, step, flatten=True): body(i)`: on the GPU the loop is fused with
/// the one for_range in its body (a persistent kernel's tile loop and K loop), so the
/// operand copies of the next outer iteration overlap this one's end (see docs/language.md).
template <class Body, std::enable_if_t<std::is_invocable_v<Body &, Value>, int> = 0>
void for_range_flat(const Operand &lo, const Operand &hi, const Operand &step, Body &&body,
                    Loc loc = {}) {
  detail::forRange(
      lo, hi, step, {},
      [&](const Value &iv, const Values &) { return detail::invokeToYield(body, iv); }, loc,
      /*flatten=*/true);
}
/// One loop-carried value: `acc = init; for i in range(lo, hi, step): acc = body(i, acc)`;
/// returns the final acc. The body must keep acc's dtype and shape.
template <class Body, std::enable_if_t<std::is_invocable_v<Body &, Value, Value>, int> = 0>
Value for_range(const Operand &lo, const Operand &hi, const Operand &step, const Operand &init,
                Body &&body, Loc loc = {}) {
  return detail::forRange(
      lo, hi, step, {init},
      [&](const Value &iv, const Values &c) { return detail::invokeToYield(body, iv, c[0]); },
      loc)[0];
}
/// Several loop-carried values: body(i, values) returns the next values.
template <class Body, std::enable_if_t<std::is_invocable_v<Body &, Value, Values>, int> = 0>
Values for_range(const Operand &lo, const Operand &hi, const Operand &step, const Values &inits,
                 Body &&body, Loc loc = {}) {
  return detail::forRange(
      lo, hi, step, std::vector<Operand>(inits.begin(), inits.end()),
      [&](const Value &iv, const Values &c) { return detail::invokeToYield(body, iv, c); }, loc);
}

/// `if cond: then()`, as scf.if with no results.
template <class Then, std::enable_if_t<std::is_invocable_v<Then &>, int> = 0>
void if_(const Operand &cond, Then &&thenFn, Loc loc = {}) {
  static_assert(std::is_void_v<std::invoke_result_t<Then &>>,
                "an if_ without an else branch yields nothing: give it an else branch");
  detail::ifThenElse(
      cond, [&] { return detail::invokeToYield(thenFn); }, nullptr, loc);
}
/// `x = then() if cond else else_()`: both branches return nothing, a Value (or number), or
/// Values, of the same dtypes and shapes; returns void, a Value or Values accordingly.
template <class Then, class Else,
          std::enable_if_t<std::is_invocable_v<Then &> && std::is_invocable_v<Else &>, int> = 0>
auto if_(const Operand &cond, Then &&thenFn, Else &&elseFn, Loc loc = {}) {
  using R = std::invoke_result_t<Then &>;
  static_assert(std::is_void_v<R> == std::is_void_v<std::invoke_result_t<Else &>> &&
                    detail::isMulti<R>() == detail::isMulti<std::invoke_result_t<Else &>>(),
                "both branches of if_ must return nothing, one value, or Values");
  auto thenYield = [&] { return detail::invokeToYield(thenFn); };
  auto elseYield = [&] { return detail::invokeToYield(elseFn); };
  detail::FunctionRef<detail::Yield()> elseRef(elseYield);
  Values results = detail::ifThenElse(cond, thenYield, &elseRef, loc);
  if constexpr (std::is_void_v<R>)
    return;
  else if constexpr (detail::isMulti<R>())
    return results;
  else
    return results[0];
}

/// `while cond(v): v = body(v)` with one value; returns the final value.
template <class Cond, class Body,
          std::enable_if_t<std::is_invocable_v<Cond &, Value> && std::is_invocable_v<Body &, Value>,
                           int> = 0>
Value while_(const Operand &init, Cond &&cond, Body &&body, Loc loc = {}) {
  return detail::whileLoop(
      {init}, [&](const Values &v) { return Operand(cond(v[0])); },
      [&](const Values &v) { return detail::invokeToYield(body, v[0]); }, loc)[0];
}
/// `while cond(values): values = body(values)`; returns the final values.
template <class Cond, class Body,
          std::enable_if_t<
              std::is_invocable_v<Cond &, Values> && std::is_invocable_v<Body &, Values>, int> = 0>
Values while_(const Values &inits, Cond &&cond, Body &&body, Loc loc = {}) {
  return detail::whileLoop(
      std::vector<Operand>(inits.begin(), inits.end()),
      [&](const Values &v) { return Operand(cond(v)); },
      [&](const Values &v) { return detail::invokeToYield(body, v); }, loc);
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// How to launch: the grid (programs along x, y, z), the warps per program, the software
/// pipeline depth, an optional cap on registers per thread and the device.
struct Launch {
  rt::Grid grid;
  unsigned warps = 4;
  unsigned stages = 3; ///< Triton's num_stages (kiln::CompileOptions::numStages)
  unsigned regs = 0;   ///< 0: no cap
  int dev = -1;        ///< -1: the device of the DeviceBuffer arguments, else the current one
  /// Triton's `num_warps=`: 1, 2, 4, 8, 16 or 32.
  Launch &num_warps(unsigned n) {
    warps = n;
    return *this;
  }
  /// Triton's `num_stages=`: slots of the shared rings that feed a loop's dots (2..16; 0 or
  /// 1: none), as CompileOptions::numStages; default 3, as Triton's.
  Launch &num_stages(unsigned n) {
    stages = n;
    return *this;
  }
  /// Triton's `maxnreg=`: at most n registers per thread (16..255; ptxas's .maxnreg), on the
  /// GPU; the host backend ignores it.
  Launch &maxnreg(unsigned n) {
    regs = n;
    return *this;
  }
  /// The GPU to run on (its ordinal). Without it, a launch runs on the device of its
  /// rt::DeviceBuffer arguments, else on rt::currentDevice(); the stream must belong to that
  /// device. The kernel is loaded once per device; the current device is left as it was.
  Launch &device(int ordinal) {
    dev = ordinal;
    return *this;
  }
};
/// grid(x, y, z): a launch of x * y * z programs with 4 warps each. A zero dimension launches
/// nothing; a negative one, or one above 2^31 - 1, throws rt::Error.
Launch grid(int64_t x, int64_t y = 1, int64_t z = 1);

/// What compile() targets (no GPU needed).
struct Target {
  std::string arch = "sm_90";
  unsigned num_warps = 4;
  unsigned num_stages = 3; ///< Triton's num_stages (CompileOptions::numStages)
  unsigned maxnreg = 0;    ///< a cap on registers per thread (16..255), 0: none
};
/// One specialization compiled ahead of time: the traced MLIR (with the C++ locations) and PTX.
struct Compiled {
  std::string name;
  std::string mlir;
  std::string ptx;
};

/// The process-wide JIT that launches use, created on first use: the host backend when
/// rt::useHostBackend() ($KILN_BACKEND=cpu, or no GPU), else every GPU, each kernel compiled
/// for each device's architecture and loaded per device. Pointer arguments are
/// then host addresses (rt::Buffer gives memory for either). Its caches are the runtime's:
/// memory, then $KILN_CACHE_DIR.
rt::JIT &jit();

namespace detail {
class KernelState;
/// A runtime argument of one specialization: its dtype and what its value specializes.
struct ArgSpec {
  DType dtype;
  Specialization spec;
};
std::shared_ptr<KernelState> newKernelState(std::string name, const Loc &loc);
const std::string &kernelName(const KernelState &state);
/// The loaded kernel of the variant `key` launched as `launch` (its device -1: the current
/// one); on the first sight of `key`, `traceVariant` returns its module. The hot path: a
/// lock, a key compare, a pointer read.
const rt::Kernel &getKernel(KernelState &state, const uint64_t *key, size_t keySize,
                            const Launch &launch, int device, size_t numRuntimeArgs,
                            FunctionRef<KernelSource()> traceVariant);
/// The MLIR text of the variant `key`, traced on first sight.
const std::string &getMLIR(KernelState &state, const uint64_t *key, size_t keySize,
                           FunctionRef<KernelSource()> traceVariant);
/// Traces `body` (called with the runtime arguments' values) into a kernel module.
KernelSource traceKernel(const KernelState &state, const std::vector<ArgSpec> &args,
                         FunctionRef<void(const Values &)> body);
/// PTX of the variant `key` for `target`, compiled in process.
std::string compilePTX(KernelState &state, const uint64_t *key, size_t keySize,
                       const Target &target, FunctionRef<KernelSource()> traceVariant);
/// Throws rt::Error: "kernel 'k' argument 3: <message>".
[[noreturn]] void badArgument(const KernelState &state, size_t index, const std::string &message);
/// Throws rt::Error: the launch's .device() differs from its buffers' device.
[[noreturn]] void badDevice(const KernelState &state, int launchDevice, int bufferDevice);

/// True when the host integer `v` is representable as `To`.
template <class To, class From> constexpr bool fits(From v) {
  if constexpr (std::is_signed_v<From>) {
    if (v < 0) {
      if constexpr (std::is_unsigned_v<To>)
        return false;
      else
        return int64_t(v) >= int64_t(std::numeric_limits<To>::min());
    }
  }
  return uint64_t(v) <= uint64_t(std::numeric_limits<To>::max());
}

template <class T> struct ParamTraits {
  static_assert(alwaysFalse<T>, "a kernel parameter must be Ptr<E>, a scalar (I32, I64, U32, "
                                "U64, F32, F64, Scalar<E>) or Const<T>");
};
template <class E> struct ParamTraits<Ptr<E>> {
  static constexpr bool runtime = true;
  static constexpr DType dtype() { return DType::pointerTo(E::dtype); }
  template <class A>
  static uint64_t toBits(const A &a, Specialization &spec, const KernelState &, size_t) {
    uint64_t bits;
    if constexpr (std::is_same_v<A, rt::DeviceBuffer>) {
      bits = a.get();
    } else if constexpr (std::is_same_v<A, rt::CUdeviceptr> || std::is_same_v<A, std::nullptr_t>) {
      bits = uint64_t(a);
    } else if constexpr (std::is_pointer_v<A>) {
      using Pointee = std::remove_cv_t<std::remove_pointer_t<A>>;
      static_assert(std::is_void_v<Pointee> || std::is_same_v<Pointee, typename E::host>,
                    "a typed device pointer passed to Ptr<E> must point to E's element type");
      bits = uint64_t(reinterpret_cast<uintptr_t>(a));
    } else {
      static_assert(alwaysFalse<A>, "a Ptr<E> parameter takes a rt::DeviceBuffer, a "
                                    "rt::CUdeviceptr or a device pointer");
    }
    spec = specializePointer(bits);
    return bits;
  }
  static Ptr<E> make(const Value &v) { return Ptr<E>(v); }
};
template <class E> struct ParamTraits<Scalar<E>> {
  using Host = typename E::host;
  static constexpr bool runtime = true;
  static constexpr DType dtype() { return E::dtype; }
  template <class A>
  static uint64_t toBits(const A &a, Specialization &spec, const KernelState &state,
                         size_t index) {
    if constexpr (std::is_integral_v<Host>) {
      static_assert(std::is_integral_v<A> && !std::is_same_v<A, bool>,
                    "an integer kernel parameter takes a C++ integer");
      if (!fits<Host>(a))
        badArgument(state, index, std::to_string(a) + " does not fit " + E::dtype.str());
      Host v = Host(a);
      if constexpr (std::is_signed_v<Host>)
        spec = specializeInt(int64_t(v));
      else
        spec = specializeUInt(uint64_t(v), /*wide=*/uint64_t(v) > uint64_t(INT64_MAX));
      return uint64_t(std::make_unsigned_t<Host>(v));
    } else {
      static_assert(std::is_arithmetic_v<A>, "a float kernel parameter takes a C++ number");
      Host v = Host(a);
      spec = Specialization::None;
      uint64_t bits = 0;
      std::memcpy(&bits, &v, sizeof(v));
      return bits;
    }
  }
  static Scalar<E> make(const Value &v) { return Scalar<E>(v); }
};
template <class T> struct ParamTraits<Const<T>> {
  static constexpr bool runtime = false;
  template <class A> static uint64_t toWord(const A &a, const KernelState &state, size_t index) {
    static_assert(std::is_convertible_v<A, T>, "a Const<T> parameter takes a value of type T");
    T v = T(a);
    if constexpr (std::is_same_v<T, DType>) {
      return uint64_t(v.getKind()) | uint64_t(v.isPointer()) << 8;
    } else if constexpr (std::is_floating_point_v<T>) {
      double d = double(v);
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof(d));
      return bits;
    } else {
      if constexpr (std::is_integral_v<A> && !std::is_same_v<T, bool>) {
        if (!fits<T>(a))
          badArgument(state, index, std::to_string(a) + " does not fit the Const parameter");
      }
      return uint64_t(int64_t(v));
    }
  }
  static Const<T> fromWord(uint64_t w) {
    if constexpr (std::is_same_v<T, DType>) {
      DType d(ScalarKind(w & 0xff));
      return (w >> 8) ? DType::pointerTo(d) : d;
    } else if constexpr (std::is_floating_point_v<T>) {
      double d;
      std::memcpy(&d, &w, sizeof(d));
      return T(d);
    } else {
      return T(int64_t(w));
    }
  }
};

/// The parameter types of a lambda or function, as `void(P...)` with P decayed.
template <class F> struct Signature : Signature<decltype(&F::operator())> {};
template <class R, class... P> struct Signature<R (*)(P...)> {
  static_assert(std::is_void_v<R>, "a kernel body returns void");
  using type = void(std::decay_t<P>...);
};
template <class R, class... P> struct Signature<R(P...)> : Signature<R (*)(P...)> {};
template <class C, class R, class... P>
struct Signature<R (C::*)(P...) const> : Signature<R (*)(P...)> {};
template <class C, class R, class... P>
struct Signature<R (C::*)(P...)> : Signature<R (*)(P...)> {};
} // namespace detail

template <class Sig> class Kernel;

/// A kernel: its body and the cache of its specializations. Calling it launches:
/// `kernel(grid(n).num_warps(8), stream, args...)` with one host argument per parameter
/// (Const parameters take their value). Copies share the cache. Thread-safe.
template <class... P> class Kernel<void(P...)> {
  static constexpr size_t N = sizeof...(P);
  static constexpr std::array<bool, N + 1> runtimeMask = {detail::ParamTraits<P>::runtime...,
                                                          false};
  /// The position among runtime (or Const) parameters of parameter `i`.
  static constexpr size_t slot(size_t i) {
    size_t n = 0;
    for (size_t j = 0; j < i; ++j)
      n += runtimeMask[j] == runtimeMask[i];
    return n;
  }
  static constexpr size_t countRuntime() {
    size_t n = 0;
    for (size_t j = 0; j < N; ++j)
      n += runtimeMask[j];
    return n;
  }
  static constexpr size_t NR = countRuntime();
  static_assert(NR <= 64, "a kernel takes at most 64 runtime parameters");
  template <size_t I> using Param = std::tuple_element_t<I, std::tuple<P...>>;

  /// key[0]: divisibility bits of the runtime arguments, key[1]: their `== 1` bits;
  /// key[2 + k]: Const value k.
  /// device: of the rt::DeviceBuffer arguments (-1: none).
  struct Packed {
    std::array<uint64_t, N - NR + 2> key{};
    std::array<uint64_t, NR + 1> bits{};
    int device = -1;
  };

public:
  Kernel(std::string name, std::function<void(P...)> body, Loc loc = {})
      : state(detail::newKernelState(std::move(name), loc)), body(std::move(body)) {}

  /// Launches on `stream` (nullptr: the default stream). The first launch of a specialization
  /// traces and compiles it; later ones only pack arguments and call cuLaunchKernel.
  template <class... A>
  void operator()(const Launch &launch, rt::CUstream stream, const A &...args) const {
    static_assert(sizeof...(A) == N, "a kernel launch takes one argument per parameter");
    Packed p = pack(std::index_sequence_for<P...>{}, args...);
    if (launch.dev >= 0 && p.device >= 0 && launch.dev != p.device)
      detail::badDevice(*state, launch.dev, p.device);
    const rt::Kernel &k =
        detail::getKernel(*state, p.key.data(), p.key.size(), launch,
                          launch.dev >= 0 ? launch.dev : p.device, NR, [&] { return trace(p); });
    if (launch.grid.x == 0 || launch.grid.y == 0 || launch.grid.z == 0)
      return;
    std::array<void *, NR + 1> params;
    for (size_t i = 0; i < NR; ++i)
      params[i] = &p.bits[i];
    k.launchRaw(launch.grid, stream, params.data());
  }

  /// The traced MLIR of the specialization these arguments select (no GPU needed; device
  /// pointers may be any numbers, only their alignment matters).
  template <class... A> std::string mlir(const A &...args) const {
    static_assert(sizeof...(A) == N, "mlir() takes one argument per parameter");
    Packed p = pack(std::index_sequence_for<P...>{}, args...);
    return detail::getMLIR(*state, p.key.data(), p.key.size(), [&] { return trace(p); });
  }
  /// MLIR and PTX of that specialization for `target`, compiled in process (no GPU needed).
  template <class... A> Compiled compile(const Target &target, const A &...args) const {
    Packed p = pack(std::index_sequence_for<P...>{}, args...);
    std::string text = mlir(args...);
    std::string ptx = detail::compilePTX(*state, p.key.data(), p.key.size(), target,
                                         [&] { return trace(p); });
    return Compiled{name(), std::move(text), std::move(ptx)};
  }
  template <class... A> Compiled compile(const A &...args) const {
    return compile(Target{}, args...);
  }

  const std::string &name() const { return detail::kernelName(*state); }

private:
  template <size_t... I, class... A>
  Packed pack(std::index_sequence<I...>, const A &...args) const {
    Packed p;
    (packOne<I>(p, args), ...);
    return p;
  }
  template <size_t I, class A> void packOne(Packed &p, const A &a) const {
    using T = detail::ParamTraits<Param<I>>;
    if constexpr (T::runtime) {
      Specialization spec = Specialization::None;
      p.bits[slot(I)] = T::toBits(a, spec, *state, I);
      if (spec == Specialization::DivisibleBy16)
        p.key[0] |= uint64_t(1) << slot(I);
      else if (spec == Specialization::EqualsOne)
        p.key[1] |= uint64_t(1) << slot(I);
      if constexpr (std::is_same_v<A, rt::DeviceBuffer>) {
        if (p.device >= 0 && a.getDevice() != p.device)
          detail::badArgument(*state, I,
                              "is on cuda:" + std::to_string(a.getDevice()) +
                                  " but an earlier argument is on cuda:" +
                                  std::to_string(p.device) +
                                  "; the buffers of a launch must be on one device");
        p.device = a.getDevice();
      }
    } else {
      p.key[2 + slot(I)] = T::toWord(a, *state, I);
    }
  }
  template <size_t I> static Param<I> makeParam(const Values &args, const Packed &p) {
    using T = detail::ParamTraits<Param<I>>;
    if constexpr (T::runtime)
      return T::make(args[slot(I)]);
    else
      return T::fromWord(p.key[2 + slot(I)]);
  }
  template <size_t... I>
  void invoke(std::index_sequence<I...>, const Values &args, const Packed &p) const {
    std::tuple<P...> params{makeParam<I>(args, p)...};
    std::apply(body, params);
  }
  template <class T>
  static void addSpec(std::vector<detail::ArgSpec> &specs, uint64_t divisible, uint64_t one) {
    if constexpr (detail::ParamTraits<T>::runtime) {
      size_t i = specs.size();
      specs.push_back({detail::ParamTraits<T>::dtype(),
                       (one >> i & 1)         ? Specialization::EqualsOne
                       : (divisible >> i & 1) ? Specialization::DivisibleBy16
                                              : Specialization::None});
    }
  }
  KernelSource trace(const Packed &p) const {
    std::vector<detail::ArgSpec> specs;
    (addSpec<P>(specs, p.key[0], p.key[1]), ...);
    return detail::traceKernel(*state, specs, [&](const Values &args) {
      invoke(std::index_sequence_for<P...>{}, args, p);
    });
  }

  std::shared_ptr<detail::KernelState> state;
  std::function<void(P...)> body;
};

/// Defines a kernel from a lambda (or function) whose parameters are Ptr<E>, scalars and
/// Const<T>: `auto add = kiln::kernel("add", [](Ptr<f32> x, ..., Const<int> BLOCK) {...});`.
template <class F> auto kernel(std::string name, F body, Loc loc = {}) {
  using Sig = typename detail::Signature<std::remove_pointer_t<std::decay_t<F>>>::type;
  return Kernel<Sig>(std::move(name), std::move(body), loc);
}

} // namespace kiln::lang

namespace kiln {
/// kiln::kernel is kiln::lang::kernel.
using lang::kernel;
} // namespace kiln

#pragma GCC visibility pop

#endif // KILN_KILN_H
