//===- BuilderSupport.h - Helpers the Builder's files share -----*- C++ -*-===//
//
// This file holds the small helpers that several of kiln::Builder's implementation files use
// (lib/Frontend/Builder*.cpp): literal printing, Triton's promotion order, constants of a
// type, numpy's broadcast of two shapes, and the bit-exact selects and index tiles of the
// shape ops. Internal to lib/Frontend.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_FRONTEND_BUILDERSUPPORT_H
#define KILN_LIB_FRONTEND_BUILDERSUPPORT_H

#include "kiln/Frontend/Builder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/SmallVector.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

namespace kiln {

/// Prints a literal's value.
inline std::string fmtLiteral(const Literal &lit) {
  if (lit.kind == Literal::Kind::Float) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", lit.floatValue);
    return buf;
  }
  return (lit.negative ? "-" : "") + std::to_string(lit.magnitude);
}

/// Type-promotion kinds, ordered as Triton orders them: bool < integer < float.
inline int kindRank(DType d) { return d.isBool() ? 0 : d.isInt() ? 1 : 2; }

/// Triton's integer_promote_impl, the C "usual arithmetic conversions": with one signedness
/// the wider wins; otherwise the unsigned type wins unless the signed one is strictly wider.
inline DType integerPromote(DType a, DType b) {
  unsigned wa = a.getBitWidth(), wb = b.getBitWidth();
  if (a.isSigned() == b.isSigned())
    return wa > wb ? a : b;
  if (a.isUnsigned())
    return wa >= wb ? a : b;
  return wb >= wa ? b : a;
}

/// The mlir constant `scalar` of `type` (splatted when `type` is a tile).
inline mlir::Value constantOf(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type,
                              mlir::TypedAttr scalar) {
  if (auto tensor = mlir::dyn_cast<mlir::RankedTensorType>(type))
    return mlir::arith::ConstantOp::create(b, loc, mlir::SplatElementsAttr::get(tensor, scalar));
  return mlir::arith::ConstantOp::create(b, loc, scalar);
}

/// Zero of `type`'s element type, as a scalar attribute.
inline mlir::TypedAttr zeroAttr(mlir::OpBuilder &b, mlir::Type type) {
  mlir::Type elem = mlir::getElementTypeOrSelf(type);
  if (mlir::isa<mlir::FloatType>(elem))
    return b.getFloatAttr(elem, 0.0);
  return b.getIntegerAttr(elem, 0);
}

/// The numpy broadcast of two shapes, or std::nullopt with the offending dimension.
inline std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> a, llvm::ArrayRef<int64_t> b, int64_t &bad) {
  size_t rank = std::max(a.size(), b.size());
  llvm::SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      bad = i;
      return std::nullopt;
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

/// The integer dtype as wide as the float `d` (what moves a float's bits unchanged).
inline DType bitsOf(DType d) {
  switch (d.getBitWidth()) {
  case 8:
    return DType::int8();
  case 16:
    return DType::int16();
  case 64:
    return DType::int64();
  default:
    return DType::int32();
  }
}

/// cond ? x : y for three values of one shape whose x and y share their MLIR type (no
/// promotion, no broadcast: the bits of x or y, as they are).
inline Tile selectBits(mlir::OpBuilder &b, mlir::Location loc, const Tile &cond, const Tile &x,
                       const Tile &y) {
  return Tile{mlir::arith::SelectOp::create(b, loc, cond.value, x.value, y.value), x.dtype,
              std::nullopt};
}

/// The int32 tile of `shape` whose elements hold their index along `axis` (of size `n`):
/// make_range, expand_dims and broadcast, which need no data movement on the GPU (a reshape
/// would go through shared memory).
inline Tile indexAlong(Builder &bld, int64_t n, llvm::ArrayRef<int64_t> shape, int axis) {
  Tile t = bld.arange(0, n);
  for (int d = 0; d < int(shape.size()); ++d)
    if (d != axis)
      t = bld.expandDims(t, d);
  return bld.broadcastTo(t, shape);
}

/// The number of elements of a tile of `shape`.
inline int64_t numElements(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

} // namespace kiln

#endif // KILN_LIB_FRONTEND_BUILDERSUPPORT_H
