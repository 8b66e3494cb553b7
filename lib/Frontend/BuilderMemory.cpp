//===- BuilderMemory.cpp - Loads, stores, descriptors and debugging ----===//
//
// This file implements kiln::Builder's memory ops (masked loads and stores, cache and eviction
// modifiers, tensor descriptor accesses) and its debugging ops (device_print, device_assert).
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/Builder.h"

#include "BuilderSupport.h"
#include "kiln/Analysis/AxisInfo.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Passes.h"
#include "kiln/Transforms/DescriptorAccess.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/APSInt.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace kiln;

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// Parses a Triton cache modifier, with or without its leading dot.
static std::optional<CacheModifier> parseCache(StringRef s) {
  s.consume_front(".");
  return symbolizeCacheModifier(s);
}

/// Parses Triton's eviction policy spelling into `out` ("" is the default policy); false
/// for an unknown spelling.
static bool parseEvict(StringRef s, EvictionPolicyAttr &out, MLIRContext &ctx) {
  out = {};
  if (s == "evict_first")
    out = EvictionPolicyAttr::get(&ctx, EvictionPolicy::evict_first);
  else if (s == "evict_last")
    out = EvictionPolicyAttr::get(&ctx, EvictionPolicy::evict_last);
  return out || s.empty();
}

/// The cache modifier (one of `allowed`, Triton's ".cg" spelling) and eviction policy of a
/// `what` ("load" or "store"); an unknown or disallowed one is a user error.
static std::pair<std::optional<CacheModifier>, EvictionPolicyAttr>
parseAccessModifiers(kiln::Builder &b, const std::string &cacheName, const std::string &evictName,
                     std::initializer_list<CacheModifier> allowed, StringRef what) {
  std::optional<CacheModifier> cache;
  if (!cacheName.empty()) {
    cache = parseCache(cacheName);
    if (!cache || !llvm::is_contained(allowed, *cache)) {
      std::string names;
      for (CacheModifier c : allowed)
        names += (names.empty() ? "'." : ", '.") + stringifyCacheModifier(c).str() + "'";
      b.error("expected a " + what + " cache modifier (" + names + "), found '" + cacheName + "'");
    }
  }
  EvictionPolicyAttr evict;
  if (!parseEvict(evictName, evict, b.getContext()))
    b.error("expected an eviction policy ('evict_first', 'evict_last'), found '" + evictName + "'");
  return {cache, evict};
}

/// `values` cast to `to`, each an integer scalar of any width (else an error naming `what`):
/// the offsets of a descriptor access, the extents and strides of a descriptor the kernel
/// built.
static SmallVector<Value> descriptorScalars(kiln::Builder &builder, ArrayRef<Tile> values, DType to,
                                            const std::string &what) {
  return llvm::map_to_vector(values, [&](const Tile &t) {
    if (t.isTile() || !t.dtype.isInt())
      builder.error("expected integer scalars as " + what + ", found " + describe(t));
    return builder.materialize(builder.cast(t, to)).value;
  });
}

/// The operands descriptorLoad and descriptorStore share, checked: int32 offsets (from integers
/// of 32 bits or fewer, or constants in int32's range), the base pointer's element dtype, a
/// power-of-two block of the tensor's rank.
static SmallVector<Value> descriptorOffsets(kiln::Builder &builder, const Tile &desc,
                                            const Tile &base, ArrayRef<Tile> offsets,
                                            ArrayRef<Tile> shape, ArrayRef<Tile> strides,
                                            ArrayRef<int64_t> block, StringRef what) {
  // A descriptor the kernel built (tl.make_tensor_descriptor) has no tensor map.
  if (desc.value && !isa<TensorMapType>(desc.value.getType()))
    builder.error("expected a tensor descriptor for " + what);
  if (!base.dtype.isPointer() || base.isTile())
    builder.error("expected a scalar pointer as the base of a tensor descriptor, found " +
                  describe(base));
  if (shape.size() != block.size() || strides.size() + 1 != block.size())
    builder.error("expected a tensor descriptor of rank " + Twine(block.size()) + ", found " +
                  Twine(shape.size()) + " extents and " + Twine(strides.size() + 1) + " strides");
  if (offsets.size() != block.size())
    builder.error("expected " + Twine(block.size()) + " offsets for " + what + " of a rank-" +
                  Twine(block.size()) + " tensor descriptor, found " + Twine(offsets.size()));
  for (int64_t d : block)
    if (d <= 0 || !llvm::isPowerOf2_64(uint64_t(d)))
      builder.error("expected a block shape of powers of two for " + what + ", found " +
                    fmtShape(block));
  // int32 offsets, as Triton's: a 64-bit one, or a constant past int32's range, is an error
  // rather than an offset cut to its low 32 bits.
  for (const Tile &t : offsets) {
    if (t.isTile() || !t.dtype.isInt())
      continue; // (descriptorScalars names it)
    if (std::optional<int64_t> c = getConstantIntValue(t.value)) {
      if (*c < INT32_MIN || *c > INT32_MAX)
        builder.error("expected offsets for " + what + " in int32's range, found " +
                      std::to_string(*c));
    } else if (t.dtype.getBitWidth() > 32) {
      builder.error("expected int32 offsets for " + what + ", found " + describe(t) +
                    " (convert it with .to(tl.int32), as Triton asks)");
    }
  }
  return descriptorScalars(builder, offsets, DType::int32(), "the offsets of " + what.str());
}

/// The extents (int32) and strides (int64) of a descriptor the kernel built, from integer
/// scalars of any width.
static SmallVector<Value> descriptorExtents(kiln::Builder &builder, ArrayRef<Tile> shape) {
  return descriptorScalars(builder, shape, DType::int32(),
                           "the shape of tl.make_tensor_descriptor");
}
static SmallVector<Value> descriptorStrides(kiln::Builder &builder, ArrayRef<Tile> strides) {
  return descriptorScalars(builder, strides, DType::int64(),
                           "the strides of tl.make_tensor_descriptor");
}

Tile kiln::Builder::descriptorLoad(const Tile &desc, const Tile &base, ArrayRef<Tile> offsets,
                                   ArrayRef<Tile> shape, ArrayRef<Tile> strides,
                                   ArrayRef<int64_t> block) {
  requireKernel("desc.load");
  SmallVector<Value> offs =
      descriptorOffsets(*this, desc, base, offsets, shape, strides, block, "desc.load");
  DType elem = base.dtype.getPointee();
  auto type = RankedTensorType::get(block, toMLIR(elem, ctx));
  if (!desc.value) // built in the kernel: the masked load of the block, now
    return Tile{emitDescriptorBlockLoad(b, loc, type, base.value, offs,
                                        descriptorExtents(*this, shape),
                                        descriptorStrides(*this, strides)),
                elem, std::nullopt};
  // Extents and strides in the op's types (int32, int64): a host descriptor's parameters are,
  // a descriptor made from the kernel's arguments casts them.
  Value v =
      DescriptorLoadOp::create(b, loc, type, desc.value, base.value, offs,
                               descriptorExtents(*this, shape), descriptorStrides(*this, strides));
  return Tile{v, elem, std::nullopt};
}

void kiln::Builder::descriptorStore(const Tile &desc, const Tile &base, ArrayRef<Tile> offsets,
                                    const Tile &value, ArrayRef<Tile> shape, ArrayRef<Tile> strides,
                                    ArrayRef<int64_t> block) {
  requireKernel("desc.store");
  SmallVector<Value> offs =
      descriptorOffsets(*this, desc, base, offsets, shape, strides, block, "desc.store");
  if (!value.isTile() || value.getShape() != block)
    error("expected a value of the descriptor's block shape " + fmtShape(block) +
          " for desc.store, found " + describe(value));
  Tile v = materialize(cast(value, base.dtype.getPointee()));
  if (!desc.value) { // built in the kernel: the masked store of the block, now
    emitDescriptorBlockStore(b, loc, v.value, base.value, offs, descriptorExtents(*this, shape),
                             descriptorStrides(*this, strides));
    return;
  }
  DescriptorStoreOp::create(b, loc, desc.value, base.value, offs, v.value,
                            descriptorExtents(*this, shape), descriptorStrides(*this, strides));
}

std::optional<Tile> kiln::Builder::derivedTensorMap(const Tile &base, ArrayRef<Tile> shape,
                                                    ArrayRef<Tile> strides,
                                                    ArrayRef<int64_t> block) {
  requireKernel("tl.make_tensor_descriptor");
  auto fn = llvm::cast<func::FuncOp>(kernelOp);
  // An argument of the kernel a recipe may name (its number), or none.
  auto argument = [&](const Tile &t) -> std::optional<unsigned> {
    auto arg = llvm::dyn_cast<BlockArgument>(t.value);
    if (!arg || arg.getOwner() != &fn.getBody().front() || t.isTile() ||
        !recipeFields[arg.getArgNumber()])
      return std::nullopt;
    return arg.getArgNumber();
  };
  auto divisibility = [&](unsigned i) {
    auto div = fn.getArgAttrOfType<IntegerAttr>(i, kDivisibilityAttr);
    return div ? div.getInt() : int64_t(1);
  };
  DType elem = base.dtype.getPointee();
  // The recipe's dtype code (the launchers' numpy characters, rt::tensorElementKind): 16-bit
  // floats, and the 8-bit elements the TMA moves as bytes (fp8 and int8 dot operands).
  const char code = elem == DType::fp16()      ? 'h'
                    : elem == DType::bf16()    ? 'H'
                    : elem == DType::fp8e4nv() ? 'e'
                    : elem == DType::fp8e5()   ? 'E'
                    : elem == DType::int8()    ? 'c'
                    : elem == DType::uint8()   ? 'C'
                                               : 0;
  std::optional<unsigned> b = argument(base);
  const size_t rank = block.size();
  if (rank < 2 || rank > 5 || shape.size() != rank || strides.size() + 1 != rank || !b ||
      !base.dtype.isPointer() || !code || divisibility(*b) % 16)
    return std::nullopt;
  const int64_t itemsize = elem.getBitWidth() / 8;
  std::vector<int64_t> recipe = {*b, code, int64_t(rank)};
  recipe.insert(recipe.end(), block.begin(), block.end());
  // An extent or stride: an int32/int64 argument (a stride specialized a multiple of 16
  // bytes), or -1 - a positive constant (a stride a multiple of 16 bytes). No bool or unsigned
  // argument: the launcher reads a field's word as a signed integer.
  auto field = [&](const Tile &t, bool stride) -> std::optional<int64_t> {
    if (t.isTile() || !t.dtype.isInt() || t.dtype.isBool())
      return std::nullopt;
    if (std::optional<int64_t> c = getConstantIntValue(t.value))
      return *c > 0 && (!stride || *c * itemsize % 16 == 0) ? std::optional<int64_t>(-1 - *c)
                                                            : std::nullopt;
    // An extent that is an int32 argument times a positive constant (`NUM_TOKENS * TOPK`, an
    // MoE layer's token rows): the argument's number plus the constant << 32 (the launcher
    // multiplies in int32, as the kernel does).
    if (auto mul = t.value.getDefiningOp<arith::MulIOp>();
        mul && !stride && t.dtype == DType::int32())
      for (auto [x, y] : {std::pair(mul.getLhs(), mul.getRhs()), {mul.getRhs(), mul.getLhs()}}) {
        std::optional<int64_t> c = getConstantIntValue(y);
        std::optional<unsigned> a = argument(Tile{x, DType::int32(), std::nullopt});
        if (c && *c > 0 && *c < (int64_t(1) << 30) && a && argTypes[*a] == DType::int32())
          return int64_t(*a) + (*c << 32);
      }
    std::optional<unsigned> a = argument(t);
    if (!a || (t.dtype != DType::int32() && t.dtype != DType::int64()) ||
        (stride && divisibility(*a) * itemsize % 16))
      return std::nullopt;
    return int64_t(*a);
  };
  SmallVector<std::pair<const Tile *, bool>> fields;
  for (const Tile &t : shape)
    fields.push_back({&t, false});
  for (const Tile &t : strides)
    fields.push_back({&t, true});
  for (auto [t, stride] : fields) {
    std::optional<int64_t> f = field(*t, stride);
    if (!f)
      return std::nullopt;
    recipe.push_back(*f);
  }
  recipe.push_back(0); // read unguarded
  auto it = derivedMaps.find(recipe);
  if (it == derivedMaps.end()) {
    Tile map = appendTensorMapArgument();
    unsigned index = llvm::cast<BlockArgument>(map.value).getArgNumber();
    fn.setArgAttr(index, kTensorMapRecipeAttr, DenseI64ArrayAttr::get(&ctx, recipe));
    it = derivedMaps.emplace(recipe, index).first;
  }
  return Tile{fn.getArgument(it->second), argTypes[it->second], std::nullopt};
}

Tile kiln::Builder::load(const Tile &ptr, std::optional<Tile> mask, std::optional<Tile> other,
                         const LoadOptions &options) {
  requireKernel("load");
  if (mask && !mask->value)
    mask.reset();
  if (other && !other->value)
    other.reset();
  if (!ptr.dtype.isPointer())
    error("expected a pointer or a tile of pointers for load, found " + describe(ptr));
  if (other && !mask)
    error("expected a mask for load when `other` is given, found none");
  if (!ptr.isTile()) {
    if (mask && mask->isTile())
      error("expected a scalar mask for a load through a scalar pointer, found " + describe(*mask));
    if (other && other->isTile())
      error("expected a scalar `other` for a load through a scalar pointer, found " +
            describe(*other));
  }
  if (mask && !mask->dtype.isBool())
    error("expected a mask of dtype int1 for load, found " + describe(*mask));
  auto [cache, evict] =
      parseAccessModifiers(*this, options.cache, options.evict,
                           {CacheModifier::ca, CacheModifier::cg, CacheModifier::cv}, "load");
  // ld.volatile takes no cache operator and no cache hint (PTX ISA 9.7.9.8).
  if (options.isVolatile && (cache || evict))
    error("expected no cache modifier or eviction policy on a volatile load, found '" +
          options.cache + "' and '" + options.evict + "'");

  // Triton broadcasts ptr, mask and other together; other takes the pointee dtype.
  Tile p = materialize(ptr);
  DType elem = ptr.dtype.getPointee();
  std::optional<Tile> m, o;
  if (mask)
    std::tie(p, m) = broadcast(p, cast(*mask, DType::int1()));
  if (other)
    std::tie(p, o) = broadcast(p, cast(*other, elem));
  if (m && m->getShape() != p.getShape())
    m = stretchTo(*m, p.getShape());
  Type result = getSameShape(p.value.getType(), toMLIR(elem, ctx));
  auto op = LoadOp::create(b, loc, result, p.value, m ? m->value : Value(), o ? o->value : Value(),
                           cache ? CacheModifierAttr::get(&ctx, *cache) : CacheModifierAttr(),
                           evict, options.isVolatile);
  return Tile{op.getResult(), elem, std::nullopt};
}

void kiln::Builder::store(const Tile &ptr, const Tile &value, std::optional<Tile> mask,
                          const StoreOptions &options) {
  requireKernel("store");
  if (mask && !mask->value)
    mask.reset();
  if (!ptr.dtype.isPointer())
    error("expected a pointer or a tile of pointers for store, found " + describe(ptr));
  if (!ptr.isTile()) {
    if (value.isTile())
      error("expected a scalar value for a store through a scalar pointer, found " +
            describe(value));
    if (mask && mask->isTile())
      error("expected a scalar mask for a store through a scalar pointer, found " +
            describe(*mask));
  }
  if (mask && !mask->dtype.isBool())
    error("expected a mask of dtype int1 for store, found " + describe(*mask));
  auto [cache, evict] = parseAccessModifiers(
      *this, options.cache, options.evict,
      {CacheModifier::wb, CacheModifier::cg, CacheModifier::cs, CacheModifier::wt}, "store");

  // value and mask broadcast to the pointer's shape, never the other way round.
  ArrayRef<int64_t> shape = ptr.getShape();
  auto fit = [&](const Tile &t, StringRef what) {
    int64_t bad = 0;
    auto common = broadcastShapes(shape, t.getShape(), bad);
    if (!common || ArrayRef<int64_t>(*common) != shape)
      error("expected a " + what + " that broadcasts to the pointer shape " + fmtShape(shape) +
            " for store, found " + describe(t));
    return ptr.isTile() ? stretchTo(t, shape) : t;
  };
  Tile v = fit(cast(value, ptr.dtype.getPointee()), "value");
  std::optional<Tile> m;
  if (mask)
    m = fit(materialize(*mask), "mask");
  StoreOp::create(b, loc, ptr.value, v.value, m ? m->value : Value(),
                  cache ? CacheModifierAttr::get(&ctx, *cache) : CacheModifierAttr(), evict);
}

//===----------------------------------------------------------------------===//
// Debugging
//===----------------------------------------------------------------------===//

void kiln::Builder::print(StringRef prefix, ArrayRef<Tile> args, bool hex) {
  requireKernel("device_print");
  SmallVector<Value> values;
  for (const Tile &a : args)
    values.push_back(materialize(a).value);
  // Triton's semantic.device_print: a prefix followed by values reads " prefix: ".
  std::string p = prefix.str();
  if (!args.empty()) {
    if (!StringRef(p).ends_with(" "))
      p += " ";
    if (!StringRef(p).ends_with(": "))
      p = p.substr(0, p.size() - 1) + ": ";
  }
  if (p.size() > 2 && !StringRef(p).starts_with(" "))
    p = " " + p;
  PrintOp::create(b, loc, p, hex, values);
}

void kiln::Builder::deviceAssert(const Tile &cond, StringRef message) {
  requireKernel("device_assert");
  Tile c = materialize(truthValue(cond));
  AssertOp::create(b, loc, c.value, message);
}

void kiln::Builder::debugBarrier() {
  requireKernel("debug_barrier");
  BarrierOp::create(b, loc);
}

void kiln::Builder::assume(const Tile &cond) {
  requireKernel("assume");
  (void)truthValue(cond);
}
