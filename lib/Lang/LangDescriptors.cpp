//===- LangDescriptors.cpp - Tensor descriptors made in C++ DSL kernels ---===//
//
// This file implements kiln::lang::make_tensor_descriptor and TensorDescriptor's load and
// store (Triton's tl.make_tensor_descriptor): where the launcher can encode a tensor map from
// the launch's arguments, the trace appends a map parameter whose recipe traceKernel puts on
// it (kTensorMapRecipeAttr, ending in a 0 guard flag: read unguarded); every descriptor's
// accesses go to Builder::descriptorLoad/Store.
//
//===----------------------------------------------------------------------===//

#include "LangTrace.h"

#include "kiln/Dialect/Kiln/IR/Dialect.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace kiln::lang;
using namespace kiln::lang::internal;

namespace {
/// A map recipe field for `t` (kiln::addPointerTileMaps' form): a parameter number of an
/// int32 or int64 parameter (`aligned`: specialized a multiple of 16 bytes of fp16), or -1 - a
/// positive constant (a multiple of 8 when aligned); none otherwise. As the Python front end's
/// CodeGenerator.derived_tensor_map: no bool or unsigned parameter (whose words the launch
/// would read as signed).
std::optional<int64_t> recipeSource(const Tile &t, bool aligned) {
  if (std::optional<int64_t> c = mlir::getConstantIntValue(t.value))
    return *c > 0 && (!aligned || *c % 8 == 0) ? std::optional<int64_t>(-1 - *c) : std::nullopt;
  auto arg = mlir::dyn_cast<mlir::BlockArgument>(t.value);
  auto func = arg ? mlir::dyn_cast<mlir::func::FuncOp>(arg.getOwner()->getParentOp()) : nullptr;
  if (!func || t.isTile() || (t.dtype != DType::int32() && t.dtype != DType::int64()))
    return std::nullopt;
  auto div = func.getArgAttrOfType<mlir::IntegerAttr>(arg.getArgNumber(), kiln::kDivisibilityAttr);
  if (aligned && (!div || div.getInt() % 8))
    return std::nullopt;
  return int64_t(arg.getArgNumber());
}
} // namespace

TensorDescriptor kiln::lang::make_tensor_descriptor(const Operand &base,
                                                    const std::vector<Operand> &shape,
                                                    const std::vector<Operand> &strides,
                                                    const std::vector<int64_t> &block, Loc loc) {
  Trace &t = enter(loc, "make_tensor_descriptor");
  Builder &b = t.builder;
  if (shape.size() != strides.size() || shape.size() != block.size() || block.empty())
    b.error("expected shape, strides and block_shape of one non-zero rank for "
            "make_tensor_descriptor, found " +
            std::to_string(shape.size()) + ", " + std::to_string(strides.size()) + " and " +
            std::to_string(block.size()));
  Tile baseTile = Access::tile(t, base), last = Access::tile(t, strides.back());
  if (!baseTile.dtype.isPointer() || baseTile.isTile())
    b.error("expected a pointer as the base of make_tensor_descriptor, found " +
            baseTile.dtype.str());
  if (mlir::getConstantIntValue(last.value) != std::optional<int64_t>(1))
    b.error("expected the constant 1 as the last stride of make_tensor_descriptor (a "
            "contiguous last dimension)");
  TensorDescriptor d;
  d.base = Access::wrap(t, baseTile);
  d.block = block;
  std::vector<int64_t> recipe;
  DType elem = baseTile.dtype.getPointee();
  auto baseArg = mlir::dyn_cast<mlir::BlockArgument>(baseTile.value);
  if (block.size() == 2 && baseArg && (elem == DType::fp16() || elem == DType::bf16())) {
    auto func = mlir::cast<mlir::func::FuncOp>(baseArg.getOwner()->getParentOp());
    auto div =
        func.getArgAttrOfType<mlir::IntegerAttr>(baseArg.getArgNumber(), kiln::kDivisibilityAttr);
    if (div && div.getInt() % 16 == 0)
      recipe = {baseArg.getArgNumber(), elem == DType::fp16() ? 'h' : 'H', 2, block[0], block[1]};
  }
  // Extents, then the strides but the last; each a recipe field where it can be one.
  auto field = [&](const Operand &o, bool stride, Values &into) {
    Tile tile = Access::tile(t, o);
    into.push_back(Access::wrap(t, tile));
    std::optional<int64_t> src = recipe.empty() ? std::nullopt : recipeSource(tile, stride);
    src ? recipe.push_back(*src) : recipe.clear();
  };
  for (const Operand &o : shape)
    field(o, false, d.shape);
  for (size_t i = 0; i + 1 < strides.size(); ++i)
    field(strides[i], true, d.strides);
  if (!recipe.empty()) {
    recipe.push_back(0); // the kernel always reads it (no guarded loop as written)
    auto it = t.derivedMaps.find(recipe);
    if (it == t.derivedMaps.end())
      it = t.derivedMaps.emplace(recipe, b.appendTensorMapArgument()).first;
    d.map = Access::wrap(t, it->second);
  }
  return d;
}

Value TensorDescriptor::load(const std::vector<Operand> &offsets, Loc loc) const {
  Trace &t = enter(loc, "TensorDescriptor::load");
  std::vector<Tile> offs = tilesOf(t, offsets), shapeTiles = tilesOf(t, shape),
                    strideTiles = tilesOf(t, strides);
  return Access::wrap(t, t.builder.descriptorLoad(map.valid() ? Access::unwrap(t, map) : Tile(),
                                                  Access::unwrap(t, base), offs, shapeTiles,
                                                  strideTiles, block));
}

void TensorDescriptor::store(const std::vector<Operand> &offsets, const Operand &value,
                             Loc loc) const {
  Trace &t = enter(loc, "TensorDescriptor::store");
  std::vector<Tile> offs = tilesOf(t, offsets), shapeTiles = tilesOf(t, shape),
                    strideTiles = tilesOf(t, strides);
  t.builder.descriptorStore(map.valid() ? Access::unwrap(t, map) : Tile(), Access::unwrap(t, base),
                            offs, Access::tile(t, value), shapeTiles, strideTiles, block);
}
