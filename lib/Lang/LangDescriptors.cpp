//===- LangDescriptors.cpp - Tensor descriptors made in C++ DSL kernels ---===//
//
// This file implements kiln::lang::make_tensor_descriptor and TensorDescriptor's load and
// store (Triton's tl.make_tensor_descriptor): where the launcher can encode a tensor map from
// the launch's arguments, Builder::derivedTensorMap (as for the Python front end) appends a
// map parameter with its recipe; every descriptor's accesses go to
// Builder::descriptorLoad/Store.
//
//===----------------------------------------------------------------------===//

#include "LangTrace.h"

#include "kiln/Dialect/Kiln/IR/Dialect.h"

#include "mlir/Dialect/Arith/Utils/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"

using namespace kiln::lang;
using namespace kiln::lang::internal;

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
  // Extents, then the strides but the last.
  std::vector<Tile> shapeTiles = tilesOf(t, shape), strideTiles;
  for (size_t i = 0; i + 1 < strides.size(); ++i)
    strideTiles.push_back(Access::tile(t, strides[i]));
  for (const Tile &tile : shapeTiles)
    d.shape.push_back(Access::wrap(t, tile));
  for (const Tile &tile : strideTiles)
    d.strides.push_back(Access::wrap(t, tile));
  if (std::optional<Tile> map = b.derivedTensorMap(baseTile, shapeTiles, strideTiles, block))
    d.map = Access::wrap(t, *map);
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
