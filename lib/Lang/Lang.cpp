//===- Lang.cpp - Kiln's embedded C++ DSL ---------------------------------===//
//
// This file implements kiln::lang: symbolic values over kiln::Builder tiles, the DSL's
// builtins and control flow, tracing a kernel body into kiln-dialect MLIR text, and the
// per-kernel cache of specializations that makes a repeat launch a key compare and a pointer
// read. Tiles live in the trace (a thread-local stack of them); a Value is a pointer to one
// plus the trace's serial number, so a Value that outlives its trace is caught, not followed.
//
//===----------------------------------------------------------------------===//

#include "kiln/kiln.h"

#include "kiln/Compiler.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Frontend/Builder.h"

#include "LangTrace.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Location.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/Parser/Parser.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/raw_ostream.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

using namespace kiln::lang;
using namespace kiln::lang::internal;
using kiln::Builder;
using kiln::Tile;

//===----------------------------------------------------------------------===//
// Traces
//===----------------------------------------------------------------------===//

namespace kiln::lang::internal {
Shared &shared() {
  static Shared *s = new Shared();
  return *s;
}

thread_local Trace *currentTrace = nullptr;
thread_local bool tracingDebug = false;
} // namespace kiln::lang::internal

namespace {
std::atomic<uint64_t> nextTraceId{1};

/// Sets tracingDebug for one variant lookup (which traces a new variant).
struct DebugTrace {
  explicit DebugTrace(bool on) : saved(tracingDebug) { tracingDebug = on; }
  ~DebugTrace() { tracingDebug = saved; }
  bool saved;
};

/// The variant key of a launch: `key`, and for debug a trailing word, so that debug and plain
/// variants are traced apart without copying the key of a plain launch.
struct VariantKey {
  VariantKey(const uint64_t *key, size_t size, bool debug) : data(key), size(size) {
    if (debug) {
      copy.assign(key, key + size);
      copy.push_back(1);
      data = copy.data();
      this->size = copy.size();
    }
  }
  const uint64_t *data;
  size_t size;
  std::vector<uint64_t> copy;
};

} // namespace

using kiln::lang::detail::Access;

/// The trace a DSL call at `loc` builds into, with the Builder's location set to `loc`.
Trace &internal::enter(const Loc &loc, const char *what) {
  if (!currentTrace)
    throw CompileError("", loc.file, loc.line, loc.column,
                       std::string("kiln::lang::") + what +
                           " called outside a kernel body (Values exist only while a "
                           "kiln::kernel is traced)");
  currentTrace->builder.setLocation(loc.file, loc.line, loc.column);
  return *currentTrace;
}
Values internal::wrapAll(Trace &t, llvm::ArrayRef<Tile> tiles) {
  Values values;
  for (const Tile &tile : tiles)
    values.push_back(Access::wrap(t, tile));
  return values;
}

Value detail::literalValue(const Operand &literal) {
  Trace &t = enter(literal.getLoc(), "Value");
  return Access::wrap(t, Access::tile(t, literal));
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

DType Value::dtype() const { return Access::self(*this, "dtype").dtype; }

Shape Value::shape() const {
  llvm::ArrayRef<int64_t> s = Access::self(*this, "shape").getShape();
  return Shape(s.begin(), s.end());
}

Value Value::to(DType dtype, Loc loc) const { return to(dtype, false, loc); }

Value Value::to(DType dtype, bool bitcast, Loc loc) const {
  return cast(*this, dtype, bitcast, loc);
}

Value Value::operator[](const Index &index) const {
  Trace &t = enter(index.getLoc(), "operator[]");
  Tile x = Access::unwrap(t, *this);
  // Triton's __getitem__: None inserts an axis at its position, ':' keeps one.
  for (auto [dim, item] : llvm::enumerate(index.getItems()))
    if (item.isNewAxis())
      x = t.builder.expandDims(x, int(dim));
  return Access::wrap(t, x);
}

#define KILN_LANG_COMPOUND(OP)                                                                     \
  Value &Value::operator OP##=(const Operand &b) { return *this = (*this OP b); }
KILN_LANG_COMPOUND(+)
KILN_LANG_COMPOUND(-)
KILN_LANG_COMPOUND(*)
KILN_LANG_COMPOUND(/)
KILN_LANG_COMPOUND(%)
KILN_LANG_COMPOUND(&)
KILN_LANG_COMPOUND(|)
KILN_LANG_COMPOUND(^)
KILN_LANG_COMPOUND(<<)
KILN_LANG_COMPOUND(>>)
#undef KILN_LANG_COMPOUND

//===----------------------------------------------------------------------===//
// Operators and builtins
//===----------------------------------------------------------------------===//

using BinaryFn = Tile (Builder::*)(const Tile &, const Tile &);
using UnaryFn = Tile (Builder::*)(const Tile &);

/// `fn(a, b)` at `loc` (the operators pass their left operand's call site).
static Value binary(const Loc &loc, const char *what, const Operand &a, const Operand &b,
                    BinaryFn fn) {
  Trace &t = enter(loc, what);
  Tile x = Access::tile(t, a), y = Access::tile(t, b);
  return Access::wrap(t, (t.builder.*fn)(x, y));
}

static Value unary(const Loc &loc, const char *what, const Operand &a, UnaryFn fn) {
  Trace &t = enter(loc, what);
  return Access::wrap(t, (t.builder.*fn)(Access::tile(t, a)));
}

#define KILN_LANG_BINARY(OP, FN)                                                                   \
  Value kiln::lang::operator OP(const Operand &a, const Operand &b) {                              \
    return binary(a.getLoc(), "operator" #OP, a, b, &Builder::FN);                                 \
  }
KILN_LANG_BINARY(+, add)
KILN_LANG_BINARY(-, sub)
KILN_LANG_BINARY(*, mul)
KILN_LANG_BINARY(%, mod)
KILN_LANG_BINARY(<, lt)
KILN_LANG_BINARY(<=, le)
KILN_LANG_BINARY(>, gt)
KILN_LANG_BINARY(>=, ge)
KILN_LANG_BINARY(==, eq)
KILN_LANG_BINARY(!=, ne)
KILN_LANG_BINARY(&, bitAnd)
KILN_LANG_BINARY(|, bitOr)
KILN_LANG_BINARY(^, bitXor)
KILN_LANG_BINARY(<<, shl)
KILN_LANG_BINARY(>>, shr)
#undef KILN_LANG_BINARY

Value kiln::lang::operator/(const Operand &a, const Operand &b) {
  Trace &t = enter(a.getLoc(), "operator/");
  // C++ division: truncating when both operands are integers, true division otherwise.
  std::optional<kiln::DType> da = Access::dtypeOf(t, a), db = Access::dtypeOf(t, b);
  bool ints = da && db && da->isInt() && db->isInt();
  Tile x = Access::tile(t, a), y = Access::tile(t, b);
  return Access::wrap(t, ints ? t.builder.floordiv(x, y) : t.builder.truediv(x, y));
}

Value kiln::lang::operator-(const Operand &x) {
  return unary(x.getLoc(), "operator-", x, &Builder::neg);
}
Value kiln::lang::operator~(const Operand &x) {
  return unary(x.getLoc(), "operator~", x, &Builder::bitNot);
}
Value kiln::lang::operator!(const Operand &x) {
  return unary(x.getLoc(), "operator!", x, &Builder::logicalNot);
}

Value kiln::lang::program_id(int axis, Loc loc) {
  Trace &t = enter(loc, "program_id");
  return Access::wrap(t, t.builder.programId(axis));
}

Value kiln::lang::num_programs(int axis, Loc loc) {
  Trace &t = enter(loc, "num_programs");
  return Access::wrap(t, t.builder.numPrograms(axis));
}

Value kiln::lang::arange(int64_t start, int64_t end, Loc loc) {
  Trace &t = enter(loc, "arange");
  return Access::wrap(t, t.builder.arange(start, end));
}

Value kiln::lang::zeros(const Shape &shape, DType dtype, Loc loc) {
  Trace &t = enter(loc, "zeros");
  return Access::wrap(t, t.builder.zeros(shape, dtype));
}

Value kiln::lang::full(const Shape &shape, const Operand &value, DType dtype, Loc loc) {
  Trace &t = enter(loc, "full");
  return Access::wrap(t, t.builder.full(shape, Access::tile(t, value), dtype));
}

Value kiln::lang::load(const Operand &ptr, const Operand &mask, const Operand &other,
                       const LoadOptions &options, Loc loc) {
  Trace &t = enter(loc, "load");
  kiln::LoadOptions opts;
  opts.cache = options.cache_modifier;
  opts.evict = options.eviction_policy;
  opts.isVolatile = options.is_volatile;
  Tile p = Access::tile(t, ptr);
  std::optional<Tile> m = Access::optional(t, mask), o = Access::optional(t, other);
  return Access::wrap(t, t.builder.load(p, m, o, opts));
}

void kiln::lang::store(const Operand &ptr, const Operand &value, const Operand &mask,
                       const StoreOptions &options, Loc loc) {
  Trace &t = enter(loc, "store");
  kiln::StoreOptions opts;
  opts.cache = options.cache_modifier;
  opts.evict = options.eviction_policy;
  Tile p = Access::tile(t, ptr), v = Access::tile(t, value);
  t.builder.store(p, v, Access::optional(t, mask), opts);
}

Value kiln::lang::where(const Operand &cond, const Operand &a, const Operand &b, Loc loc) {
  Trace &t = enter(loc, "where");
  Tile c = Access::tile(t, cond), x = Access::tile(t, a), y = Access::tile(t, b);
  return Access::wrap(t, t.builder.where(c, x, y));
}

Value kiln::lang::minimum(const Operand &a, const Operand &b, PropagateNan nan, Loc loc) {
  Trace &t = enter(loc, "minimum");
  Tile x = Access::tile(t, a), y = Access::tile(t, b);
  return Access::wrap(t, t.builder.minimum(x, y, nan == PropagateNan::ALL));
}

Value kiln::lang::maximum(const Operand &a, const Operand &b, PropagateNan nan, Loc loc) {
  Trace &t = enter(loc, "maximum");
  Tile x = Access::tile(t, a), y = Access::tile(t, b);
  return Access::wrap(t, t.builder.maximum(x, y, nan == PropagateNan::ALL));
}

#define KILN_LANG_MATH(NAME, FN)                                                                   \
  Value kiln::lang::NAME(const Operand &x, Loc loc) { return unary(loc, #NAME, x, &Builder::FN); }
KILN_LANG_MATH(exp, exp)
KILN_LANG_MATH(exp2, exp2)
KILN_LANG_MATH(log, log)
KILN_LANG_MATH(log2, log2)
KILN_LANG_MATH(sqrt, sqrt)
KILN_LANG_MATH(rsqrt, rsqrt)
KILN_LANG_MATH(sin, sin)
KILN_LANG_MATH(cos, cos)
KILN_LANG_MATH(erf, erf)
KILN_LANG_MATH(floor, floor)
KILN_LANG_MATH(ceil, ceil)
KILN_LANG_MATH(abs, abs)
#undef KILN_LANG_MATH

Value kiln::lang::truediv(const Operand &a, const Operand &b, Loc loc) {
  return binary(loc, "truediv", a, b, &Builder::truediv);
}
Value kiln::lang::floordiv(const Operand &a, const Operand &b, Loc loc) {
  return binary(loc, "floordiv", a, b, &Builder::floordiv);
}
Value kiln::lang::cdiv(const Operand &a, const Operand &b, Loc loc) {
  return binary(loc, "cdiv", a, b, &Builder::cdiv);
}

Value kiln::lang::cast(const Operand &x, DType dtype, bool bitcast, Loc loc) {
  Trace &t = enter(loc, "cast");
  Tile v = Access::tile(t, x);
  return Access::wrap(t, bitcast ? t.builder.bitcast(v, dtype) : t.builder.cast(v, dtype));
}

Value kiln::lang::expand_dims(const Operand &x, int axis, Loc loc) {
  Trace &t = enter(loc, "expand_dims");
  return Access::wrap(t, t.builder.expandDims(Access::tile(t, x), axis));
}

Value kiln::lang::broadcast_to(const Operand &x, const Shape &shape, Loc loc) {
  Trace &t = enter(loc, "broadcast_to");
  return Access::wrap(t, t.builder.broadcastTo(Access::tile(t, x), shape));
}

std::pair<Value, Value> kiln::lang::broadcast(const Operand &a, const Operand &b, Loc loc) {
  Trace &t = enter(loc, "broadcast");
  Tile x = Access::tile(t, a), y = Access::tile(t, b);
  auto [bx, by] = t.builder.broadcast(x, y);
  return {Access::wrap(t, bx), Access::wrap(t, by)};
}

Value kiln::lang::reshape(const Operand &x, const Shape &shape, bool canReorder, Loc loc) {
  Trace &t = enter(loc, "reshape");
  return Access::wrap(t, t.builder.reshape(Access::tile(t, x), shape, canReorder));
}

Value kiln::lang::trans(const Operand &x, const std::vector<int32_t> &order, Loc loc) {
  Trace &t = enter(loc, "trans");
  return Access::wrap(t, t.builder.trans(Access::tile(t, x), order));
}

#define KILN_LANG_REDUCTION(NAME, METHOD)                                                          \
  Value kiln::lang::NAME(const Operand &x, int axis, bool keep_dims, Loc loc) {                    \
    Trace &t = enter(loc, #NAME);                                                                  \
    return Access::wrap(t, t.builder.METHOD(Access::tile(t, x), axis, keep_dims));                 \
  }
KILN_LANG_REDUCTION(sum, sum)
KILN_LANG_REDUCTION(max, max)
KILN_LANG_REDUCTION(min, min)
KILN_LANG_REDUCTION(argmax, argmax)
KILN_LANG_REDUCTION(argmin, argmin)
KILN_LANG_REDUCTION(xor_sum, xorSum)
#undef KILN_LANG_REDUCTION

void kiln::lang::device_print(const std::string &prefix, const Values &args, bool hex, Loc loc) {
  Trace &t = enter(loc, "device_print");
  t.builder.print(prefix, tilesOf(t, args), hex);
}

void kiln::lang::device_assert(const Operand &cond, const std::string &msg, Loc loc) {
  Trace &t = enter(loc, "device_assert");
  Tile c = Access::tile(t, cond);
  if (tracingDebug) // as Triton: nothing outside debug mode
    t.builder.deviceAssert(c, msg);
}

/// Builder's combine body for a DSL combine function: the region's block arguments as Values
/// in, the yielded tiles out.
static Builder::CombineBody combineBody(Trace &t, const Combine &combine) {
  return [&t, &combine](llvm::ArrayRef<Tile> lhs, llvm::ArrayRef<Tile> rhs) {
    return tilesOf(t, combine(wrapAll(t, lhs), wrapAll(t, rhs)));
  };
}

/// A one-value combine function as a Combine.
static Combine combineOne(const std::function<Value(Value, Value)> &combine) {
  return [&combine](const Values &a, const Values &b) { return Values{combine(a[0], b[0])}; };
}

Values kiln::lang::reduce(const Values &inputs, int axis, const Combine &combine, bool keep_dims,
                          Loc loc) {
  Trace &t = enter(loc, "reduce");
  return wrapAll(t, t.builder.reduce(tilesOf(t, inputs), axis, combineBody(t, combine), keep_dims));
}

Value kiln::lang::reduce(const Operand &input, int axis,
                         const std::function<Value(Value, Value)> &combine, bool keep_dims,
                         Loc loc) {
  Trace &t = enter(loc, "reduce");
  Combine one = combineOne(combine);
  return wrapAll(
      t, t.builder.reduce({Access::tile(t, input)}, axis, combineBody(t, one), keep_dims))[0];
}

Values kiln::lang::associative_scan(const Values &inputs, int axis, const Combine &combine,
                                    bool reverse, Loc loc) {
  Trace &t = enter(loc, "associative_scan");
  return wrapAll(t, t.builder.scan(tilesOf(t, inputs), axis, combineBody(t, combine), reverse));
}

Value kiln::lang::associative_scan(const Operand &input, int axis,
                                   const std::function<Value(Value, Value)> &combine, bool reverse,
                                   Loc loc) {
  Trace &t = enter(loc, "associative_scan");
  Combine one = combineOne(combine);
  return wrapAll(t,
                 t.builder.scan({Access::tile(t, input)}, axis, combineBody(t, one), reverse))[0];
}

Value kiln::lang::cumsum(const Operand &x, int axis, bool reverse, Loc loc) {
  Trace &t = enter(loc, "cumsum");
  return Access::wrap(t, t.builder.cumsum(Access::tile(t, x), axis, reverse));
}

Value kiln::lang::cumprod(const Operand &x, int axis, bool reverse, Loc loc) {
  Trace &t = enter(loc, "cumprod");
  return Access::wrap(t, t.builder.cumprod(Access::tile(t, x), axis, reverse));
}

Value kiln::lang::atomic_rmw(const std::string &op, const Operand &ptr, const Operand &val,
                             const Operand &mask, const std::string &sem, const std::string &scope,
                             Loc loc) {
  Trace &t = enter(loc, "atomic_rmw");
  return Access::wrap(t, t.builder.atomicRMW(op, Access::tile(t, ptr), Access::tile(t, val),
                                             Access::optional(t, mask), sem, scope));
}

Value kiln::lang::atomic_add(const Operand &ptr, const Operand &val, const Operand &mask, Loc loc) {
  return atomic_rmw("add", ptr, val, mask, "", "", loc);
}
Value kiln::lang::atomic_max(const Operand &ptr, const Operand &val, const Operand &mask, Loc loc) {
  return atomic_rmw("max", ptr, val, mask, "", "", loc);
}
Value kiln::lang::atomic_min(const Operand &ptr, const Operand &val, const Operand &mask, Loc loc) {
  return atomic_rmw("min", ptr, val, mask, "", "", loc);
}

Value kiln::lang::atomic_cas(const Operand &ptr, const Operand &cmp, const Operand &val,
                             const std::string &sem, const std::string &scope, Loc loc) {
  Trace &t = enter(loc, "atomic_cas");
  return Access::wrap(t, t.builder.atomicCAS(Access::tile(t, ptr), Access::tile(t, cmp),
                                             Access::tile(t, val), sem, scope));
}

Value kiln::lang::dot(const Operand &a, const Operand &b, Loc loc) {
  Trace &t = enter(loc, "dot");
  return Access::wrap(t, t.builder.dot(Access::tile(t, a), Access::tile(t, b)));
}

Value kiln::lang::dot(const Operand &a, const Operand &b, const Operand &acc,
                      const std::string &input_precision, DType out_dtype, Loc loc) {
  Trace &t = enter(loc, "dot");
  return Access::wrap(t, t.builder.dot(Access::tile(t, a), Access::tile(t, b), Access::tile(t, acc),
                                       input_precision, out_dtype));
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

Values detail::forRange(const Operand &lo, const Operand &hi, const Operand &step,
                        const std::vector<Operand> &inits,
                        FunctionRef<Yield(const Value &, const Values &)> body, const Loc &loc,
                        bool flatten, bool warpSpecialize) {
  Trace &t = enter(loc, "for_range");
  Tile l = Access::tile(t, lo), h = Access::tile(t, hi), s = Access::tile(t, step);
  std::vector<Tile> initTiles = tilesOf(t, inits);
  t.builder.setLocation(loc.file, loc.line, loc.column);
  std::vector<Tile> results = t.builder.forLoop(
      l, h, s, initTiles,
      [&](const Tile &iv, llvm::ArrayRef<Tile> iters) {
        Yield next = body(Access::wrap(t, iv), wrapAll(t, iters));
        return tilesOf(t, next);
      },
      {}, flatten, warpSpecialize);
  return wrapAll(t, results);
}

Values detail::ifThenElse(const Operand &cond, FunctionRef<Yield()> thenFn,
                          const FunctionRef<Yield()> *elseFn, const Loc &loc) {
  Trace &t = enter(loc, "if_");
  Tile c = Access::tile(t, cond);
  Builder::BranchBody elseBody;
  if (elseFn)
    elseBody = [&] { return tilesOf(t, (*elseFn)()); };
  std::vector<Tile> results = t.builder.ifThenElse(
      c, [&] { return tilesOf(t, thenFn()); }, elseBody);
  return wrapAll(t, results);
}

Values detail::whileLoop(const std::vector<Operand> &inits,
                         FunctionRef<Operand(const Values &)> cond,
                         FunctionRef<Yield(const Values &)> body, const Loc &loc) {
  Trace &t = enter(loc, "while_");
  std::vector<Tile> initTiles = tilesOf(t, inits);
  std::vector<Tile> results = t.builder.whileLoop(
      initTiles,
      [&](llvm::ArrayRef<Tile> values) { return Access::tile(t, cond(wrapAll(t, values))); },
      [&](llvm::ArrayRef<Tile> values) { return tilesOf(t, body(wrapAll(t, values))); });
  return wrapAll(t, results);
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

Launch kiln::lang::grid(int64_t x, int64_t y, int64_t z) {
  for (int64_t d : {x, y, z})
    if (d < 0 || d > INT32_MAX)
      throw kiln::rt::Error("grid dimension " + std::to_string(d) +
                            " is out of range [0, 2^31 - 1]");
  Launch launch;
  launch.grid = kiln::rt::Grid{unsigned(x), unsigned(y), unsigned(z)};
  return launch;
}

kiln::rt::JIT &kiln::lang::jit() {
  // Never destroyed: kernels in static objects may launch during static destruction.
  static kiln::rt::JIT *j = new kiln::rt::JIT(
      kiln::rt::useHostBackend() ? std::string(kiln::rt::kHostArch) : std::string());
  return *j;
}

/// num_warps 1, 2, 4, ..., 32 index the loaded kernels of a variant.
static constexpr unsigned kMaxWarpsLog2 = 5;

namespace {
/// One specialization of a kernel: its key, its module, and its loaded kernel per device and
/// num_warps with the default num_stages and no register cap (the others, rare, searched).
struct Variant {
  std::vector<uint64_t> key;
  std::optional<kiln::KernelSource> source;
  /// The source with its pointer tiles through tensor maps (sm_90a devices), made on first use;
  /// no recipes: the pass left the kernel as it was.
  std::optional<kiln::PointerTileMaps> tma;
  std::vector<std::array<detail::LoadedKernel, kMaxWarpsLog2 + 1>> kernels;
  std::vector<std::tuple<int, unsigned, unsigned, unsigned, detail::LoadedKernel>> others;

  /// The source a launch on `arch` compiles: on sm_90a (unless KILN_TMA_POINTER_TILES=0, or
  /// `pointerTiles` false) the one with the compiler's tensor maps, as the Python front end
  /// compiles; `maps`: the recipes of every map parameter (make_tensor_descriptor's too), null
  /// for none. Call with the context's lock held.
  const kiln::KernelSource &sourceFor(const std::string &arch, bool pointerTiles,
                                      const std::vector<std::vector<int64_t>> *&maps) {
    maps = nullptr;
    if (arch != "sm_90a" || !pointerTiles || !tmaPointerTiles()) {
      if (!plainMaps)
        plainMaps = kiln::tensorMapRecipes(*source);
      if (!plainMaps->empty())
        maps = &*plainMaps;
      return *source;
    }
    if (!tma)
      tma = kiln::addPointerTileMaps(*source, /*attentionTiles=*/true);
    if (!tma->recipes.empty())
      maps = &tma->recipes;
    return tma->source;
  }
  /// The recipes of the traced source's own maps (make_tensor_descriptor's), made on first use.
  std::optional<std::vector<std::vector<int64_t>>> plainMaps;

  /// KILN_TMA_POINTER_TILES=0 (read once) keeps the pointer loads, as in Python.
  static bool tmaPointerTiles() {
    static const bool on = [] {
      const char *v = std::getenv("KILN_TMA_POINTER_TILES");
      return !v || !*v || std::string(v) != "0";
    }();
    return on;
  }
};
} // namespace

class detail::KernelState {
public:
  KernelState(std::string name, const Loc &loc) : name(std::move(name)), loc(loc) {}

  /// The variant of `key`, traced by `traceVariant` when new. Call with `mutex` held.
  Variant &variant(const uint64_t *key, size_t size, FunctionRef<KernelSource()> traceVariant) {
    auto matches = [&](const Variant &v) {
      return v.key.size() == size && std::memcmp(v.key.data(), key, size * sizeof(uint64_t)) == 0;
    };
    if (last && matches(*last))
      return *last;
    for (const std::unique_ptr<Variant> &v : variants)
      if (matches(*v))
        return *(last = v.get());
    auto v = std::make_unique<Variant>();
    v->key.assign(key, key + size);
    v->source = traceVariant();
    variants.push_back(std::move(v));
    return *(last = variants.back().get());
  }

  const std::string name;
  const Loc loc;
  std::mutex mutex;

private:
  std::vector<std::unique_ptr<Variant>> variants;
  Variant *last = nullptr;
};

std::shared_ptr<detail::KernelState> detail::newKernelState(std::string name, const Loc &loc) {
  if (name.empty())
    throw CompileError("", loc.file, loc.line, loc.column, "expected a kernel name, found \"\"");
  return std::make_shared<KernelState>(std::move(name), loc);
}

const std::string &detail::kernelName(const KernelState &state) { return state.name; }

void detail::badArgument(const KernelState &state, size_t index, const std::string &message) {
  throw kiln::rt::Error("kernel '" + state.name + "' argument " + std::to_string(index) + ": " +
                        message);
}

void detail::badDevice(const KernelState &state, int launchDevice, int bufferDevice) {
  throw kiln::rt::Error("kernel '" + state.name + "': launched with .device(" +
                        std::to_string(launchDevice) +
                        ") but its buffers are on cuda:" + std::to_string(bufferDevice));
}

detail::LoadedKernel detail::getKernel(KernelState &state, const uint64_t *key, size_t keySize,
                                       const Launch &launch, int device, size_t numRuntimeArgs,
                                       FunctionRef<KernelSource()> traceVariant) {
  unsigned numWarps = launch.warps, maxnreg = launch.regs, stages = launch.stages;
  unsigned slot = 0;
  while (slot <= kMaxWarpsLog2 && (1u << slot) != numWarps)
    ++slot;
  if (slot > kMaxWarpsLog2)
    throw kiln::rt::Error("kernel '" + state.name +
                          "': expected num_warps 1, 2, 4, 8, 16 or 32, found " +
                          std::to_string(numWarps));
  if (maxnreg && (maxnreg < 16 || maxnreg > 255))
    throw kiln::rt::Error("kernel '" + state.name +
                          "': expected maxnreg from 16 to 255 registers per thread, found " +
                          std::to_string(maxnreg));
  // Host kernels have no device; GPU launches without one run on the current device.
  if (jit().isHost())
    device = 0;
  else if (device < 0)
    device = kiln::rt::currentDevice();
  bool plain = !maxnreg && stages == Launch().stages;
  std::lock_guard<std::mutex> lock(state.mutex);
  VariantKey vk(key, keySize, launch.dbg);
  DebugTrace debugTrace(launch.dbg);
  Variant &v = state.variant(vk.data, vk.size, traceVariant);
  if (size_t(device) >= v.kernels.size())
    v.kernels.resize(device + 1);
  if (plain) {
    if (v.kernels[device][slot].kernel)
      return v.kernels[device][slot];
  } else {
    for (auto &[dev, warps, nstages, regs, k] : v.others)
      if (dev == device && warps == numWarps && nstages == stages && regs == maxnreg)
        return k;
  }
  kiln::CompileOptions options;
  options.numWarps = numWarps;
  options.numStages = stages;
  options.maxnreg = maxnreg;
  options.debug = launch.dbg;
  LoadedKernel k;
  {
    // The traced module lives in the shared context.
    std::lock_guard<std::recursive_mutex> ctxLock(shared().mutex);
    const KernelSource &source =
        v.sourceFor(jit().isHost() ? std::string(kiln::kHostArch) : kiln::rt::getArch(device),
                    /*pointerTiles=*/true, k.maps);
    k.kernel = &jit().get(source, options, device);
  }
  size_t expected = numRuntimeArgs + (k.maps ? k.maps->size() : 0);
  if (k.kernel->getSignature().size() != expected)
    throw kiln::rt::Error("kernel '" + state.name + "': compiled with " +
                          std::to_string(k.kernel->getSignature().size()) +
                          " parameters, expected " + std::to_string(expected));
  if (plain)
    v.kernels[device][slot] = k;
  else
    v.others.emplace_back(device, numWarps, stages, maxnreg, k);
  return k;
}

void detail::launchWithMaps(const KernelState &state, const LoadedKernel &k, kiln::rt::Grid grid,
                            kiln::rt::CUstream stream, const uint64_t *words,
                            size_t numRuntimeArgs) {
  // Each map passed by value: the driver copies its 128 bytes at the launch.
  struct alignas(kiln::rt::kTensorMapAlign) Map {
    unsigned char bytes[kiln::rt::kTensorMapBytes];
  };
  const std::vector<std::vector<int64_t>> &maps = *k.maps;
  // On the stack for the usual few maps and parameters (this is every launch's path).
  llvm::SmallVector<Map, 4> storage(maps.size());
  llvm::SmallVector<void *, 32> params(numRuntimeArgs + maps.size());
  for (size_t i = 0; i < numRuntimeArgs; ++i)
    params[i] = const_cast<uint64_t *>(&words[i]);
  const std::vector<kiln::ArgKind> &signature = k.kernel->getSignature();
  const std::vector<uint16_t> &rows = k.kernel->getTensorMapBoxRows();
  for (size_t j = 0; j < maps.size(); ++j) {
    size_t param = numRuntimeArgs + j;
    try {
      kiln::rt::encodeRecipeTensorMap(storage[j].bytes, maps[j], signature, words,
                                      param < rows.size() ? rows[param] : 0);
    } catch (const kiln::rt::Error &e) {
      throw kiln::rt::Error("kernel '" + state.name + "': " + e.what());
    }
    params[param] = storage[j].bytes;
  }
  k.kernel->launchRaw(grid, stream, params.data());
}

const std::string &detail::getMLIR(KernelState &state, const uint64_t *key, size_t keySize,
                                   FunctionRef<KernelSource()> traceVariant) {
  std::lock_guard<std::mutex> lock(state.mutex);
  const KernelSource &source = *state.variant(key, keySize, traceVariant).source;
  std::lock_guard<std::recursive_mutex> ctxLock(shared().mutex);
  return source.getText();
}

kiln::KernelSource detail::traceKernel(const KernelState &state, const std::vector<ArgSpec> &args,
                                       FunctionRef<void(const Values &)> body) {
  std::lock_guard<std::recursive_mutex> lock(shared().mutex);
  Trace trace(nextTraceId++, state.name, currentTrace);
  currentTrace = &trace;
  struct Restore {
    Trace &t;
    ~Restore() { currentTrace = t.outer; }
  } restore{trace};
  try {
    Builder &b = trace.builder;
    b.setLocation(state.loc.file, state.loc.line, state.loc.column);
    std::vector<kiln::KernelArg> kernelArgs;
    for (auto [i, a] : llvm::enumerate(args))
      kernelArgs.push_back({"arg" + std::to_string(i), a.dtype,
                            a.spec == kiln::Specialization::DivisibleBy16
                                ? std::optional<int32_t>(kiln::kSpecializationDivisor)
                                : std::nullopt});
    b.beginKernel(state.name, kernelArgs);
    Values values;
    for (size_t i = 0; i < args.size(); ++i) {
      // `== 1`: the body sees the constant (the parameter stays, unread, so that every
      // variant of a kernel packs the same arguments).
      Tile arg = args[i].spec == kiln::Specialization::EqualsOne
                     ? b.full({}, b.intConst(1), args[i].dtype)
                     : b.arg(i);
      values.push_back(Access::wrap(trace, arg));
    }
    body(values);
    mlir::OwningOpRef<mlir::ModuleOp> module = b.finishKernel();
    return kiln::makeKernelSource(shared().ctx, std::move(module));
  } catch (const kiln::CompileError &e) {
    throw CompileError(e.getKernel().empty() ? state.name : e.getKernel(), e.getFile(), e.getLine(),
                       e.getColumn(), e.getMessage());
  }
}

std::pair<std::string, std::vector<std::vector<int64_t>>>
detail::compilePTX(KernelState &state, const uint64_t *key, size_t keySize, const Target &target,
                   FunctionRef<KernelSource()> traceVariant) {
  std::lock_guard<std::mutex> lock(state.mutex);
  VariantKey vk(key, keySize, target.debug);
  DebugTrace debugTrace(target.debug);
  Variant &v = state.variant(vk.data, vk.size, traceVariant);
  std::lock_guard<std::recursive_mutex> ctxLock(shared().mutex);
  kiln::CompileOptions options;
  options.arch = target.arch;
  options.numWarps = target.num_warps;
  options.numStages = target.num_stages;
  options.maxnreg = target.maxnreg;
  options.debug = target.debug;
  const std::vector<std::vector<int64_t>> *maps = nullptr;
  const KernelSource &source = v.sourceFor(target.arch, target.tma_pointer_tiles, maps);
  try {
    return {kiln::compileKernel(source, options).ptx,
            maps ? *maps : std::vector<std::vector<int64_t>>()};
  } catch (const CompileError &e) {
    // The first diagnostic names the user's C++ line: the traced ops carry it.
    std::string what = "does not compile for " + target.arch + ": " + e.getMessage();
    if (e.getLine())
      throw CompileError(state.name, e.getFile(), e.getLine(), e.getColumn(), what,
                         e.getDiagnostics());
    throw CompileError(state.name, state.loc.file, state.loc.line, state.loc.column, what,
                       e.getDiagnostics());
  }
}
