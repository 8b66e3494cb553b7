//===- Session.cpp - Kiln's front-end facade without MLIR types -----------===//
//
// This file implements kiln::facade::Session: a value table of kiln::Tile behind integer
// handles, dtype names parsed with DType::parse, and each method forwarding to one
// kiln::Builder call (user errors are the Builder's kiln::CompileError). finishKernel hands
// the module to the compiler as a KernelSource, in memory.
//
//===----------------------------------------------------------------------===//

#include "kiln/Facade/Session.h"

#include "kiln/Compiler.h"
#include "kiln/Dialect/Kiln/IR/LibDevice.h"
#include "kiln/Frontend/Builder.h"

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringSwitch.h"

using namespace kiln;
using kiln::facade::Handle;

//===----------------------------------------------------------------------===//
// Session
//===----------------------------------------------------------------------===//

struct facade::Session::Impl {
  /// Shared with the sources finishKernel returns (their modules live in it).
  std::shared_ptr<mlir::MLIRContext> ctx = newContext();
  Builder builder{*ctx};
  /// Every value handed out since beginKernel; a handle is an index.
  std::vector<Tile> values;
  std::string kernel, file;
  unsigned line = 0, col = 0;
  /// The last finishKernel's tensor map recipes, with their parameters.
  std::vector<std::pair<unsigned, std::vector<int64_t>>> recipes;

  static std::shared_ptr<mlir::MLIRContext> newContext() {
    auto ctx = std::make_shared<mlir::MLIRContext>(mlir::MLIRContext::Threading::DISABLED);
    initializeContext(*ctx);
    return ctx;
  }

  Handle add(Tile t) {
    values.push_back(std::move(t));
    return Handle(values.size() - 1);
  }
  const Tile &get(Handle h) const {
    if (h < 0 || size_t(h) >= values.size())
      throw CompileError(kernel, file, line, col,
                         "internal error: invalid value handle " + std::to_string(h));
    return values[h];
  }
  std::optional<Tile> optional(Handle h) const {
    if (h < 0)
      return std::nullopt;
    return get(h);
  }
  std::vector<Tile> tiles(const std::vector<Handle> &hs) const {
    std::vector<Tile> out;
    for (Handle h : hs)
      out.push_back(get(h));
    return out;
  }
  std::vector<Handle> handles(const std::vector<Tile> &ts) {
    std::vector<Handle> out;
    for (const Tile &t : ts)
      out.push_back(add(t));
    return out;
  }
  DType parseDType(const std::string &name) {
    if (std::optional<DType> d = DType::parse(name))
      return *d;
    throw CompileError(kernel, file, line, col,
                       "expected a dtype name (int1, int8..int64, uint8..uint64, fp16, bf16, fp32, "
                       "fp64, fp8e4nv, fp8e5, or a pointer '*fp32'), found '" +
                           name + "'");
  }
};

facade::Session::Session() : impl(std::make_unique<Impl>()) {}
facade::Session::~Session() = default;

void facade::Session::setLocation(const std::string &file, unsigned line, unsigned col) {
  impl->file = file;
  impl->line = line;
  impl->col = col;
  impl->builder.setLocation(file, line, col);
}

void facade::Session::beginKernel(const std::string &name, const std::vector<ArgSpec> &args) {
  impl->values.clear();
  impl->kernel = name;
  std::vector<KernelArg> kargs;
  for (const ArgSpec &a : args) {
    KernelArg k{a.name, a.dtype == "tensormap" ? DType::int64() : impl->parseDType(a.dtype),
                std::nullopt, a.dtype == "tensormap", a.recipeField};
    if (a.divisibility)
      k.divisibility = a.divisibility;
    kargs.push_back(std::move(k));
  }
  impl->builder.beginKernel(name, kargs);
}

Handle facade::Session::arg(unsigned index) { return impl->add(impl->builder.arg(index)); }

std::optional<std::pair<Handle, unsigned>>
facade::Session::derivedTensorMap(Handle base, const std::vector<Handle> &shape,
                                  const std::vector<Handle> &strides,
                                  const std::vector<int64_t> &block) {
  std::vector<Tile> shapeTiles, strideTiles;
  for (Handle h : shape)
    shapeTiles.push_back(impl->get(h));
  for (Handle h : strides)
    strideTiles.push_back(impl->get(h));
  std::optional<Tile> map =
      impl->builder.derivedTensorMap(impl->get(base), shapeTiles, strideTiles, block);
  if (!map)
    return std::nullopt;
  unsigned index = mlir::cast<mlir::BlockArgument>(map->value).getArgNumber();
  return std::make_pair(impl->add(*map), index);
}

KernelSource facade::Session::finishKernel(bool tmaPointerTiles, bool attentionTiles) {
  mlir::OwningOpRef<mlir::ModuleOp> module = impl->builder.finishKernel();
  impl->values.clear();
  impl->recipes.clear();
  if (tmaPointerTiles && mlir::failed(addPointerTileMaps(*module, attentionTiles)))
    throw CompileError(impl->kernel, impl->file, impl->line, impl->col,
                       "internal error: -kiln-pointer-tiles-to-descriptors failed");
  std::vector<unsigned> params;
  std::vector<std::vector<int64_t>> recipes = kiln::tensorMapRecipes(*module, &params);
  for (size_t i = 0; i < recipes.size(); ++i)
    impl->recipes.emplace_back(params[i], std::move(recipes[i]));
  return makeKernelSource(impl->ctx, std::move(module));
}

std::vector<std::pair<unsigned, std::vector<int64_t>>> facade::Session::tensorMapRecipes() const {
  return impl->recipes;
}

void facade::Session::error(const std::string &message) {
  impl->builder.error(message);
  throw CompileError(impl->kernel, impl->file, impl->line, impl->col, message); // not reached
}

std::string facade::Session::dtype(Handle h) const { return impl->get(h).dtype.str(); }

std::vector<int64_t> facade::Session::shape(Handle h) const {
  llvm::ArrayRef<int64_t> s = impl->get(h).getShape();
  return std::vector<int64_t>(s.begin(), s.end());
}

bool facade::Session::isTile(Handle h) const { return impl->get(h).isTile(); }
bool facade::Session::isWeak(Handle h) const { return impl->get(h).isWeak(); }

Handle facade::Session::intConst(int64_t v) { return impl->add(impl->builder.intConst(v)); }
Handle facade::Session::uintConst(uint64_t v) { return impl->add(impl->builder.uintConst(v)); }
Handle facade::Session::floatConst(double v) { return impl->add(impl->builder.floatConst(v)); }
Handle facade::Session::boolConst(bool v) { return impl->add(impl->builder.boolConst(v)); }
Handle facade::Session::materialize(Handle h) {
  return impl->add(impl->builder.materialize(impl->get(h)));
}
Handle facade::Session::programId(int axis) { return impl->add(impl->builder.programId(axis)); }
Handle facade::Session::numPrograms(int axis) { return impl->add(impl->builder.numPrograms(axis)); }
Handle facade::Session::arange(int64_t start, int64_t end) {
  return impl->add(impl->builder.arange(start, end));
}
Handle facade::Session::full(const std::vector<int64_t> &shape, Handle value,
                             const std::string &dtype) {
  return impl->add(impl->builder.full(shape, impl->get(value), impl->parseDType(dtype)));
}
Handle facade::Session::zeros(const std::vector<int64_t> &shape, const std::string &dtype) {
  return impl->add(impl->builder.zeros(shape, impl->parseDType(dtype)));
}

Handle facade::Session::binary(const std::string &op, Handle a, Handle b) {
  using Fn = Tile (Builder::*)(const Tile &, const Tile &);
  Fn fn = llvm::StringSwitch<Fn>(op)
              .Case("add", &Builder::add)
              .Case("sub", &Builder::sub)
              .Case("mul", &Builder::mul)
              .Case("truediv", &Builder::truediv)
              .Case("floordiv", &Builder::floordiv)
              .Case("mod", &Builder::mod)
              .Case("cdiv", &Builder::cdiv)
              .Case("umulhi", &Builder::umulhi)
              .Case("div_rn", &Builder::divRn)
              .Case("lt", &Builder::lt)
              .Case("le", &Builder::le)
              .Case("gt", &Builder::gt)
              .Case("ge", &Builder::ge)
              .Case("eq", &Builder::eq)
              .Case("ne", &Builder::ne)
              .Case("and", &Builder::bitAnd)
              .Case("or", &Builder::bitOr)
              .Case("xor", &Builder::bitXor)
              .Case("lshift", &Builder::shl)
              .Case("rshift", &Builder::shr)
              .Case("logical_and", &Builder::logicalAnd)
              .Case("logical_or", &Builder::logicalOr)
              .Default(nullptr);
  const Tile &x = impl->get(a), &y = impl->get(b);
  if (fn)
    return impl->add((impl->builder.*fn)(x, y));
  if (op == "minimum" || op == "minimum_nan")
    return impl->add(impl->builder.minimum(x, y, op == "minimum_nan"));
  if (op == "maximum" || op == "maximum_nan")
    return impl->add(impl->builder.maximum(x, y, op == "maximum_nan"));
  impl->builder.error("internal error: unknown binary operator '" + op + "'");
}

Handle facade::Session::fma(Handle x, Handle y, Handle z) {
  return impl->add(impl->builder.fma(impl->get(x), impl->get(y), impl->get(z)));
}

Handle facade::Session::unary(const std::string &op, Handle x) {
  using Fn = Tile (Builder::*)(const Tile &);
  Fn fn = llvm::StringSwitch<Fn>(op)
              .Case("neg", &Builder::neg)
              .Case("not", &Builder::logicalNot)
              .Case("invert", &Builder::bitNot)
              .Case("exp", &Builder::exp)
              .Case("exp2", &Builder::exp2)
              .Case("log", &Builder::log)
              .Case("log2", &Builder::log2)
              .Case("sqrt", &Builder::sqrt)
              .Case("rsqrt", &Builder::rsqrt)
              .Case("sin", &Builder::sin)
              .Case("cos", &Builder::cos)
              .Case("erf", &Builder::erf)
              .Case("floor", &Builder::floor)
              .Case("ceil", &Builder::ceil)
              .Case("abs", &Builder::abs)
              .Case("sqrt_rn", &Builder::sqrtRn)
              .Default(nullptr);
  if (!fn)
    impl->builder.error("internal error: unknown unary operator '" + op + "'");
  return impl->add((impl->builder.*fn)(impl->get(x)));
}

Handle facade::Session::libdevice(const std::string &name, const std::vector<Handle> &args) {
  std::vector<Tile> tiles;
  for (Handle h : args)
    tiles.push_back(impl->get(h));
  return impl->add(impl->builder.libdevice(name, tiles));
}

Handle facade::Session::externElementwise(const std::vector<Handle> &args,
                                          const std::vector<ExternOverload> &overloads, bool pure,
                                          const std::string &what) {
  std::vector<Tile> tiles;
  for (Handle h : args)
    tiles.push_back(impl->get(h));
  std::vector<Builder::ExternOverload> parsed;
  for (const auto &[argTypes, symbol, result] : overloads) {
    Builder::ExternOverload o{symbol, {}, impl->parseDType(result)};
    for (const std::string &t : argTypes)
      o.args.push_back(impl->parseDType(t));
    parsed.push_back(std::move(o));
  }
  return impl->add(impl->builder.externElementwise(tiles, parsed, pure, what));
}

std::vector<Handle> facade::Session::inlineAsmElementwise(const std::string &asmText,
                                                          const std::string &constraints,
                                                          const std::vector<Handle> &args,
                                                          const std::vector<std::string> &dtypes,
                                                          bool pure, int64_t pack) {
  std::vector<Tile> tiles;
  for (Handle h : args)
    tiles.push_back(impl->get(h));
  std::vector<DType> parsed;
  for (const std::string &d : dtypes)
    parsed.push_back(impl->parseDType(d));
  return impl->handles(
      impl->builder.inlineAsmElementwise(asmText, constraints, tiles, parsed, pure, pack));
}

Handle facade::Session::hardwareRegister(const std::string &name) {
  if (name == "globaltimer")
    return impl->add(impl->builder.globalTimer());
  if (name == "smid")
    return impl->add(impl->builder.smId());
  impl->builder.error("internal error: unknown hardware register '" + name + "'");
}

void facade::Session::gridDependency(bool wait) { impl->builder.gridDependency(wait); }

std::vector<std::tuple<std::string, std::vector<std::string>, bool>>
kiln::facade::libdeviceFunctions() {
  std::vector<std::tuple<std::string, std::vector<std::string>, bool>> out;
  for (const libdevice::Function &f : libdevice::getFunctions()) {
    std::vector<std::string> overloads;
    for (const libdevice::Overload &o : f.overloads)
      overloads.push_back(o.symbol + ":" + o.args + ":" + o.result);
    out.emplace_back(f.name, std::move(overloads), f.promotes);
  }
  return out;
}

Handle facade::Session::where(Handle cond, Handle a, Handle b) {
  return impl->add(impl->builder.where(impl->get(cond), impl->get(a), impl->get(b)));
}

Handle facade::Session::cast(Handle x, const std::string &dtype, bool bitcast,
                             const std::string &rounding) {
  DType d = impl->parseDType(dtype);
  if (bitcast)
    return impl->add(impl->builder.bitcast(impl->get(x), d));
  if (!rounding.empty())
    return impl->add(impl->builder.cast(impl->get(x), d, rounding));
  return impl->add(impl->builder.cast(impl->get(x), d));
}

Handle facade::Session::hint(Handle x, const std::string &kind,
                             const std::vector<int64_t> &values) {
  return impl->add(impl->builder.hint(impl->get(x), kind, values));
}

Handle facade::Session::load(Handle ptr, Handle mask, Handle other, const std::string &cache,
                             const std::string &evict, bool isVolatile) {
  LoadOptions options{cache, evict, isVolatile};
  return impl->add(
      impl->builder.load(impl->get(ptr), impl->optional(mask), impl->optional(other), options));
}

Handle facade::Session::descriptorLoad(Handle desc, Handle base, const std::vector<Handle> &offsets,
                                       const std::vector<Handle> &shape,
                                       const std::vector<Handle> &strides,
                                       const std::vector<int64_t> &block) {
  // desc -1: a descriptor the kernel built (tl.make_tensor_descriptor), without a map.
  return impl->add(impl->builder.descriptorLoad(impl->optional(desc).value_or(Tile()),
                                                impl->get(base), impl->tiles(offsets),
                                                impl->tiles(shape), impl->tiles(strides), block));
}

void facade::Session::descriptorStore(Handle desc, Handle base, const std::vector<Handle> &offsets,
                                      Handle value, const std::vector<Handle> &shape,
                                      const std::vector<Handle> &strides,
                                      const std::vector<int64_t> &block) {
  impl->builder.descriptorStore(impl->optional(desc).value_or(Tile()), impl->get(base),
                                impl->tiles(offsets), impl->get(value), impl->tiles(shape),
                                impl->tiles(strides), block);
}

void facade::Session::store(Handle ptr, Handle value, Handle mask, const std::string &cache,
                            const std::string &evict) {
  StoreOptions options{cache, evict};
  impl->builder.store(impl->get(ptr), impl->get(value), impl->optional(mask), options);
}

Handle facade::Session::atomicRMW(const std::string &op, Handle ptr, Handle val, Handle mask,
                                  const std::string &sem, const std::string &scope) {
  return impl->add(impl->builder.atomicRMW(op, impl->get(ptr), impl->get(val), impl->optional(mask),
                                           sem, scope));
}

Handle facade::Session::atomicCAS(Handle ptr, Handle cmp, Handle val, const std::string &sem,
                                  const std::string &scope) {
  return impl->add(
      impl->builder.atomicCAS(impl->get(ptr), impl->get(cmp), impl->get(val), sem, scope));
}

void facade::Session::devicePrint(const std::string &prefix, const std::vector<Handle> &args,
                                  bool hex) {
  std::vector<Tile> tiles;
  for (Handle h : args)
    tiles.push_back(impl->get(h));
  impl->builder.print(prefix, tiles, hex);
}

void facade::Session::deviceAssert(Handle cond, const std::string &message) {
  impl->builder.deviceAssert(impl->get(cond), message);
}

void facade::Session::debugBarrier() { impl->builder.debugBarrier(); }

void facade::Session::assume(Handle cond) { impl->builder.assume(impl->get(cond)); }

Handle facade::Session::expandDims(Handle x, int axis) {
  return impl->add(impl->builder.expandDims(impl->get(x), axis));
}
Handle facade::Session::broadcastTo(Handle x, const std::vector<int64_t> &shape) {
  return impl->add(impl->builder.broadcastTo(impl->get(x), shape));
}
std::vector<Handle> facade::Session::broadcast(Handle a, Handle b) {
  auto [x, y] = impl->builder.broadcast(impl->get(a), impl->get(b));
  return std::vector<Handle>{impl->add(x), impl->add(y)};
}
Handle facade::Session::reshape(Handle x, const std::vector<int64_t> &shape, bool canReorder) {
  return impl->add(impl->builder.reshape(impl->get(x), shape, canReorder));
}
Handle facade::Session::trans(Handle x, const std::vector<int32_t> &order) {
  return impl->add(impl->builder.trans(impl->get(x), order));
}
Handle facade::Session::join(Handle a, Handle b) {
  return impl->add(impl->builder.join(impl->get(a), impl->get(b)));
}
std::vector<Handle> facade::Session::split(Handle a) {
  auto [x, y] = impl->builder.split(impl->get(a));
  return std::vector<Handle>{impl->add(x), impl->add(y)};
}
Handle facade::Session::interleave(Handle a, Handle b) {
  return impl->add(impl->builder.interleave(impl->get(a), impl->get(b)));
}
Handle facade::Session::cat(Handle a, Handle b, bool canReorder) {
  return impl->add(impl->builder.cat(impl->get(a), impl->get(b), canReorder));
}
Handle facade::Session::flip(Handle x, std::optional<int> dim) {
  return impl->add(impl->builder.flip(impl->get(x), dim));
}
Handle facade::Session::gather(Handle src, Handle index, int axis) {
  return impl->add(impl->builder.gather(impl->get(src), impl->get(index), axis));
}
Handle facade::Session::sort(Handle x, std::optional<int> dim, bool descending) {
  return impl->add(impl->builder.sort(impl->get(x), dim, descending));
}
Handle facade::Session::topk(Handle x, int64_t k, std::optional<int> dim) {
  return impl->add(impl->builder.topk(impl->get(x), k, dim));
}
Handle facade::Session::histogram(Handle x, int64_t numBins, Handle mask) {
  return impl->add(impl->builder.histogram(impl->get(x), numBins, impl->optional(mask)));
}

Handle facade::Session::reduceOp(const std::string &op, Handle x, int axis, bool keepDims) {
  using Fn = Tile (Builder::*)(const Tile &, int, bool);
  Fn fn = llvm::StringSwitch<Fn>(op)
              .Case("sum", &Builder::sum)
              .Case("sum_in_dtype", &Builder::sumInDType)
              .Case("max", &Builder::max)
              .Case("min", &Builder::min)
              .Case("argmax", &Builder::argmax)
              .Case("argmin", &Builder::argmin)
              .Case("xor_sum", &Builder::xorSum)
              .Default(nullptr);
  if (!fn)
    impl->builder.error("internal error: unknown reduction '" + op + "'");
  return impl->add((impl->builder.*fn)(impl->get(x), axis, keepDims));
}

std::vector<Handle> facade::Session::reduce(const std::vector<Handle> &inputs, int axis,
                                            const CombineBody &combine, bool keepDims) {
  std::vector<Tile> results = impl->builder.reduce(
      impl->tiles(inputs), axis,
      [&](llvm::ArrayRef<Tile> acc, llvm::ArrayRef<Tile> next) {
        return impl->tiles(combine(impl->handles(acc.vec()), impl->handles(next.vec())));
      },
      keepDims);
  return impl->handles(results);
}

std::vector<Handle> facade::Session::scan(const std::vector<Handle> &inputs, int axis,
                                          const CombineBody &combine, bool reverse) {
  std::vector<Tile> results = impl->builder.scan(
      impl->tiles(inputs), axis,
      [&](llvm::ArrayRef<Tile> acc, llvm::ArrayRef<Tile> next) {
        return impl->tiles(combine(impl->handles(acc.vec()), impl->handles(next.vec())));
      },
      reverse);
  return impl->handles(results);
}

Handle facade::Session::scanOp(const std::string &op, Handle x, int axis, bool reverse,
                               const std::string &dtype) {
  std::optional<DType> d;
  if (!dtype.empty())
    d = impl->parseDType(dtype);
  if (op == "cumsum")
    return impl->add(impl->builder.cumsum(impl->get(x), axis, reverse, d));
  if (op == "cumprod" && !d)
    return impl->add(impl->builder.cumprod(impl->get(x), axis, reverse));
  impl->builder.error("internal error: unknown scan '" + op + "'" + (d ? " with a dtype" : ""));
}

Handle facade::Session::dot(Handle a, Handle b, Handle acc, const std::string &inputPrecision,
                            const std::string &outDtype, int32_t maxNumImpreciseAcc) {
  DType out = impl->parseDType(outDtype);
  return impl->add(impl->builder.dot(impl->get(a), impl->get(b), impl->optional(acc),
                                     inputPrecision, out, maxNumImpreciseAcc));
}

std::vector<Handle> facade::Session::forLoop(Handle lb, Handle ub, Handle step,
                                             const std::vector<Handle> &inits, const ForBody &body,
                                             const std::vector<std::string> &names, bool flatten,
                                             bool warpSpecialize) {
  std::vector<Tile> results = impl->builder.forLoop(
      impl->get(lb), impl->get(ub), impl->get(step), impl->tiles(inits),
      [&](const Tile &iv, llvm::ArrayRef<Tile> iters) {
        Handle ivh = impl->add(iv);
        std::vector<Handle> next = body(ivh, impl->handles(iters.vec()));
        return impl->tiles(next);
      },
      names, flatten, warpSpecialize);
  return impl->handles(results);
}

std::vector<Handle> facade::Session::ifThenElse(Handle cond, const BranchBody &thenFn,
                                                const BranchBody &elseFn,
                                                const std::vector<std::string> &names) {
  Builder::BranchBody elseBody;
  if (elseFn)
    elseBody = [&] { return impl->tiles(elseFn()); };
  std::vector<Tile> results = impl->builder.ifThenElse(
      impl->get(cond), [&] { return impl->tiles(thenFn()); }, elseBody, names);
  return impl->handles(results);
}

std::vector<Handle> facade::Session::whileLoop(const std::vector<Handle> &inits,
                                               const CondBody &condFn, const RegionBody &bodyFn,
                                               const std::vector<std::string> &names) {
  std::vector<Tile> results = impl->builder.whileLoop(
      impl->tiles(inits),
      [&](llvm::ArrayRef<Tile> args) { return impl->get(condFn(impl->handles(args.vec()))); },
      [&](llvm::ArrayRef<Tile> args) { return impl->tiles(bodyFn(impl->handles(args.vec()))); },
      names);
  return impl->handles(results);
}
