//===- kiln/lang/Builtins.h - The triton.language builtins ------*- C++ -*-===//
//
// kiln::lang's builtins, with triton.language's names: program_id, arange, load, store, dot,
// reductions, scans, math, atomics, debugging.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LANG_BUILTINS_H
#define KILN_LANG_BUILTINS_H

#include "kiln/lang/Value.h"

#pragma GCC visibility push(default)

namespace kiln::lang {
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
/// tl.device_assert(cond, msg): where `cond` is false in some element the launch fails with
/// `msg`, the kernel's name, its C++ line and the program id (rt::Error on the host backend; on
/// the GPU the kernel traps, which leaves the context unusable, as in CUDA). Checked only in
/// debug launches (`Launch::debug()`, `Target::debug`); elsewhere compiled out, as Triton's
/// outside TRITON_DEBUG.
void device_assert(const Operand &cond, const std::string &msg = "", Loc loc = {});

/// A tensor descriptor made in the kernel (Triton's tl.make_tensor_descriptor): the
/// row-major tensor of `shape` at `base` with `strides` in elements (the last the constant
/// 1), read and written in blocks of `block_shape` (powers of two), zero outside the tensor
/// on loads. Where the launcher can encode a tensor map from the launch's arguments (a 2-D
/// fp16/bf16 tensor whose base is a 16-byte-aligned pointer parameter, extents integer
/// parameters or constants, the row stride a parameter or constant of a multiple of 16 bytes)
/// the kernel takes the map as an extra parameter (appended, encoded at each launch) and on
/// sm_90a the TMA copies its blocks; elsewhere its accesses are masked loads and stores.
class TensorDescriptor {
public:
  /// desc.load(offsets): the block at element `offsets` (one per dimension).
  Value load(const std::vector<Operand> &offsets, Loc loc = {}) const;
  /// desc.store(offsets, value): `value` (the block's shape) written where it falls inside.
  void store(const std::vector<Operand> &offsets, const Operand &value, Loc loc = {}) const;
  const std::vector<int64_t> &block_shape() const { return block; }

private:
  friend TensorDescriptor make_tensor_descriptor(const Operand &, const std::vector<Operand> &,
                                                 const std::vector<Operand> &,
                                                 const std::vector<int64_t> &, Loc);
  Value map; ///< the tensor map parameter; invalid: none (masked accesses)
  Value base;
  Values shape, strides; ///< strides: all but the last (1)
  std::vector<int64_t> block;
};
TensorDescriptor make_tensor_descriptor(const Operand &base, const std::vector<Operand> &shape,
                                        const std::vector<Operand> &strides,
                                        const std::vector<int64_t> &block_shape, Loc loc = {});

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
Value atomic_add(const Operand &ptr, const Operand &val, const Operand &mask = None_, Loc loc = {});
Value atomic_max(const Operand &ptr, const Operand &val, const Operand &mask = None_, Loc loc = {});
Value atomic_min(const Operand &ptr, const Operand &val, const Operand &mask = None_, Loc loc = {});
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

} // namespace kiln::lang

#pragma GCC visibility pop

#endif // KILN_LANG_BUILTINS_H
