//===- KilnOps.cpp - kiln dialect operations ------------------------------===//
//
// This file implements verifiers, folders and canonicalization patterns of the kiln ops. Every
// verifier message says what was expected and what was found.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Dialect/Kiln/IR/LibDevice.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;

#define GET_OP_CLASSES
#include "kiln/Dialect/Kiln/IR/KilnOps.cpp.inc"

/// Shape of a tile type; empty for scalars.
static ArrayRef<int64_t> shapeOf(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return tensor.getShape();
  return {};
}

/// Prints a shape as [a, b, c] for diagnostics (scalars print as []).
static std::string fmtShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

//===----------------------------------------------------------------------===//
// MakeRangeOp
//===----------------------------------------------------------------------===//

LogicalResult MakeRangeOp::verify() {
  // I32 attributes read back unsigned; the values are signed.
  int64_t start = int32_t(getStart()), end = int32_t(getEnd());
  auto type = getType();
  if (type.getRank() != 1)
    return emitOpError("expected a 1-D result, found rank ") << type.getRank();
  if (end <= start)
    return emitOpError("expected end > start, found start = ") << start << ", end = " << end;
  int64_t n = end - start;
  if (!llvm::isPowerOf2_64(n))
    return emitOpError("expected end - start to be a power of two, found ") << n;
  if (type.getDimSize(0) != n)
    return emitOpError("expected result length ")
           << n << " (end - start), found " << type.getDimSize(0);
  return success();
}

//===----------------------------------------------------------------------===//
// SplatOp
//===----------------------------------------------------------------------===//

OpFoldResult SplatOp::fold(FoldAdaptor adaptor) {
  // splat(constant) -> dense constant tile.
  if (auto value = dyn_cast_or_null<TypedAttr>(adaptor.getSrc()))
    if (isa<IntegerAttr, FloatAttr>(value))
      return SplatElementsAttr::get(getType(), value);
  return {};
}

//===----------------------------------------------------------------------===//
// BroadcastOp
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  auto src = getSrc().getType(), dst = getType();
  if (src.getRank() != dst.getRank())
    return emitOpError("expected source rank ")
           << dst.getRank() << " to match result rank, found " << src.getRank();
  for (auto [s, d] : llvm::zip(src.getShape(), dst.getShape()))
    if (s != d && s != 1)
      return emitOpError("expected each source dimension to be 1 or equal to the result's, found "
                         "source shape ")
             << fmtShape(src.getShape()) << " and result shape " << fmtShape(dst.getShape());
  return success();
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getSrc().getType() == getType())
    return getSrc();
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(adaptor.getSrc()))
    return splat.resizeSplat(getType());
  return {};
}

/// A constant splat keeps its value in any shape (so that `acc * alpha[:, None]` with alpha a
/// constant splat of 1.0 folds to acc).
OpFoldResult ExpandDimsOp::fold(FoldAdaptor adaptor) {
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(adaptor.getSrc()))
    return splat.resizeSplat(getType());
  return {};
}

namespace {
/// broadcast(splat(x)) -> splat(x): a splat has no structure to stretch.
struct BroadcastOfSplat final : OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BroadcastOp op, PatternRewriter &rewriter) const override {
    auto splat = op.getSrc().getDefiningOp<SplatOp>();
    if (!splat)
      return rewriter.notifyMatchFailure(op, "source is not a splat");
    rewriter.replaceOpWithNewOp<SplatOp>(op, op.getType(), splat.getSrc());
    return success();
  }
};

/// broadcast(broadcast(x)) -> broadcast(x): stretching twice is stretching once.
struct BroadcastOfBroadcast final : OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(BroadcastOp op, PatternRewriter &rewriter) const override {
    auto inner = op.getSrc().getDefiningOp<BroadcastOp>();
    if (!inner)
      return rewriter.notifyMatchFailure(op, "source is not a broadcast");
    rewriter.replaceOpWithNewOp<BroadcastOp>(op, op.getType(), inner.getSrc());
    return success();
  }
};

/// expand_dims(splat(x)) -> splat(x): every element is x whatever the shape.
struct ExpandDimsOfSplat final : OpRewritePattern<ExpandDimsOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ExpandDimsOp op, PatternRewriter &rewriter) const override {
    auto splat = op.getSrc().getDefiningOp<SplatOp>();
    if (!splat)
      return rewriter.notifyMatchFailure(op, "source is not a splat");
    rewriter.replaceOpWithNewOp<SplatOp>(op, op.getType(), splat.getSrc());
    return success();
  }
};
} // namespace

namespace {
/// Whether `v` is a tile of zeros (a dense or splat constant).
bool isZeroTile(Value v) {
  if (matchPattern(v, m_AnyZeroFloat()) || matchPattern(v, m_Zero()))
    return true;
  auto splat = v.getDefiningOp<SplatOp>();
  return splat &&
         (matchPattern(splat.getSrc(), m_AnyZeroFloat()) || matchPattern(splat.getSrc(), m_Zero()));
}

/// x + dot(a, b, 0) -> dot(a, b, x), as Triton's combine pass does: `acc += tl.dot(a, b)`
/// accumulates in the dot (one chain of tensor-core instructions, the accumulator left in
/// flight across a loop's iterations, and the same rounding as `tl.dot(a, b, acc)`) instead of
/// a product from zero added afterwards.
template <typename AddOp> struct AddOfDotFromZero final : OpRewritePattern<AddOp> {
  using OpRewritePattern<AddOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(AddOp add, PatternRewriter &rewriter) const override {
    for (unsigned i = 0; i < 2; ++i) {
      auto dot = add->getOperand(i).template getDefiningOp<DotOp>();
      Value other = add->getOperand(1 - i);
      if (!dot || !dot->hasOneUse() || !isZeroTile(dot.getC()) || other.getType() != dot.getType())
        continue;
      rewriter.replaceOpWithNewOp<DotOp>(add, dot.getType(), dot.getA(), dot.getB(), other,
                                         dot.getInputPrecisionAttr(),
                                         dot.getMaxNumImpreciseAccAttr());
      return success();
    }
    return rewriter.notifyMatchFailure(add, "no dot from a zero accumulator with one use");
  }
};
} // namespace

void DotOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<AddOfDotFromZero<arith::AddFOp>, AddOfDotFromZero<arith::AddIOp>>(context);
}

void BroadcastOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<BroadcastOfSplat, BroadcastOfBroadcast>(context);
}

//===----------------------------------------------------------------------===//
// ExpandDimsOp
//===----------------------------------------------------------------------===//

LogicalResult ExpandDimsOp::verify() {
  auto src = getSrc().getType(), dst = getType();
  int64_t axis = int32_t(getAxis());
  if (axis < 0 || axis > src.getRank())
    return emitOpError("expected axis in [0, ") << src.getRank() << "], found " << axis;
  SmallVector<int64_t> expected(src.getShape());
  expected.insert(expected.begin() + axis, 1);
  if (ArrayRef<int64_t>(expected) != dst.getShape())
    return emitOpError("expected result shape ")
           << fmtShape(expected) << ", found " << fmtShape(dst.getShape());
  return success();
}

void ExpandDimsOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<ExpandDimsOfSplat>(context);
}

//===----------------------------------------------------------------------===//
// ReshapeOp, TransOp
//===----------------------------------------------------------------------===//

LogicalResult ReshapeOp::verify() {
  auto src = getSrc().getType(), dst = getType();
  if (src.getNumElements() != dst.getNumElements())
    return emitOpError("expected the same number of elements, found ")
           << src.getNumElements() << " in " << fmtShape(src.getShape()) << " and "
           << dst.getNumElements() << " in " << fmtShape(dst.getShape());
  return success();
}

OpFoldResult ReshapeOp::fold(FoldAdaptor adaptor) {
  if (getSrc().getType() == getType())
    return getSrc();
  // A reshape of a reshape (neither reordering) is one reshape of the first one's source.
  if (auto inner = getSrc().getDefiningOp<ReshapeOp>();
      inner && !inner.getAllowReorder() && !getAllowReorder()) {
    if (inner.getSrc().getType() == getType())
      return inner.getSrc();
    getSrcMutable().assign(inner.getSrc());
    return getResult();
  }
  if (auto splat = dyn_cast_or_null<SplatElementsAttr>(adaptor.getSrc()))
    return splat.resizeSplat(getType());
  return {};
}

LogicalResult TransOp::verify() {
  auto src = getSrc().getType(), dst = getType();
  ArrayRef<int32_t> order = getOrder();
  if ((int64_t)order.size() != src.getRank())
    return emitOpError("expected an order of ")
           << src.getRank() << " dimensions, found " << order.size();
  SmallVector<bool> seen(order.size(), false);
  for (int32_t d : order) {
    if (d < 0 || d >= (int32_t)order.size() || seen[d])
      return emitOpError("expected order to be a permutation of [0, ")
             << order.size() << "), found " << d << " out of range or repeated";
    seen[d] = true;
  }
  SmallVector<int64_t> expected;
  for (int32_t d : order)
    expected.push_back(src.getDimSize(d));
  if (ArrayRef<int64_t>(expected) != dst.getShape())
    return emitOpError("expected result shape ")
           << fmtShape(expected) << ", found " << fmtShape(dst.getShape());
  return success();
}

//===----------------------------------------------------------------------===//
// AddPtrOp
//===----------------------------------------------------------------------===//

LogicalResult AddPtrOp::verify() {
  if (shapeOf(getPtr().getType()) != shapeOf(getOffset().getType()) ||
      isa<RankedTensorType>(getPtr().getType()) != isa<RankedTensorType>(getOffset().getType()))
    return emitOpError("expected offset shape ")
           << fmtShape(shapeOf(getPtr().getType())) << " to match pointer shape, found "
           << fmtShape(shapeOf(getOffset().getType()));
  return success();
}

LogicalResult PtrCastOp::verify() {
  Type src = getSrc().getType(), dst = getResult().getType();
  if (isa<RankedTensorType>(src) != isa<RankedTensorType>(dst) || shapeOf(src) != shapeOf(dst))
    return emitOpError("expected operand and result of one shape, found ")
           << fmtShape(shapeOf(src)) << " and " << fmtShape(shapeOf(dst));
  Type s = getElementTypeOrSelf(src), d = getElementTypeOrSelf(dst);
  bool sp = isa<PointerType>(s), dp = isa<PointerType>(d);
  if ((sp && dp) || (sp && d.isInteger(64)) || (s.isInteger(64) && dp))
    return success();
  return emitOpError("expected a cast between a pointer and i64 or between pointers, found ")
         << s << " to " << d;
}

OpFoldResult AddPtrOp::fold(FoldAdaptor adaptor) {
  // ptr + 0 -> ptr.
  if (matchPattern(getOffset(), m_Zero()))
    return getPtr();
  return {};
}

//===----------------------------------------------------------------------===//
// Memory ops
//===----------------------------------------------------------------------===//

/// A volatile access takes no cache operator or eviction policy (PTX ISA 9.7.9.8: `ld.volatile`
/// has no `.cop` and no cache hint). Cache operators and eviction policies combine: the policy
/// is an L2 cache hint, as Triton emits it.
static LogicalResult verifyModifiers(Operation *op, std::optional<CacheModifier> cache,
                                     std::optional<EvictionPolicy> evict, bool isVolatile) {
  bool hasCache = cache && *cache != CacheModifier::none;
  bool hasEvict = evict && *evict != EvictionPolicy::normal;
  if (isVolatile && (hasCache || hasEvict))
    return op->emitOpError("expected no cache modifier or eviction policy on a volatile access");
  return success();
}

void LoadOp::build(OpBuilder &builder, OperationState &state, Value ptr, Value mask, Value other) {
  build(builder, state, getPointeeType(ptr.getType()), ptr, mask, other, CacheModifierAttr(),
        EvictionPolicyAttr(), UnitAttr());
}

LogicalResult LoadOp::verify() {
  if (getOther() && !getMask())
    return emitOpError("expected a mask when `other` is given");
  if (getCache() && (*getCache() == CacheModifier::wb || *getCache() == CacheModifier::wt))
    return emitOpError("expected a load cache modifier (ca, cg, cs, cv), found ")
           << stringifyCacheModifier(*getCache());
  return verifyModifiers(*this, getCache(), getEvict(), getIsVolatile());
}

void LoadOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  effects.emplace_back(MemoryEffects::Read::get(), GlobalMemory::get());
  // A volatile load must stay even when its result is unused (as Triton models it).
  if (getIsVolatile())
    effects.emplace_back(MemoryEffects::Write::get(), GlobalMemory::get());
}

LogicalResult StoreOp::verify() {
  // PTX's st takes .wb, .cg (cache in L2, not L1), .cs and .wt, as Triton's stores do.
  if (getCache() && (*getCache() == CacheModifier::ca || *getCache() == CacheModifier::cv))
    return emitOpError("expected a store cache modifier (wb, cg, cs, wt), found ")
           << stringifyCacheModifier(*getCache());
  return verifyModifiers(*this, getCache(), getEvict(), /*isVolatile=*/false);
}

/// The checks descriptor_load and descriptor_store share: one offset and one shape extent
/// per dimension of the block, a stride for each but the last, and the base's element type.
static LogicalResult verifyDescriptorAccess(Operation *op, Type base, RankedTensorType block,
                                            size_t offsets, size_t shape, size_t strides) {
  size_t rank = block.getRank();
  if (rank < 1 || rank > 5)
    return op->emitOpError("expected a block of rank 1 to 5, found rank ") << rank;
  if (offsets != rank || shape != rank || strides != rank - 1)
    return op->emitOpError("expected ")
           << rank << " offsets, " << rank << " shape extents and " << rank - 1
           << " strides for a block of rank " << rank << ", found " << offsets << ", " << shape
           << " and " << strides;
  if (getPointeeType(base) != block.getElementType())
    return op->emitOpError("expected a block of the base's element type ")
           << getPointeeType(base) << ", found " << block.getElementType();
  return success();
}

LogicalResult DescriptorLoadOp::verify() {
  return verifyDescriptorAccess(*this, getBase().getType(), getType(), getOffsets().size(),
                                getShape().size(), getStrides().size());
}

LogicalResult DescriptorStoreOp::verify() {
  return verifyDescriptorAccess(*this, getBase().getType(),
                                cast<RankedTensorType>(getValue().getType()), getOffsets().size(),
                                getShape().size(), getStrides().size());
}

LogicalResult AtomicRMWOp::verify() {
  Type elem = getElementTypeOrSelf(getVal().getType());
  bool isFloat = isa<FloatType>(elem);
  switch (getKind()) {
  case RMWKind::fadd:
    if (!isFloat)
      return emitOpError("expected a float element type for fadd, found ") << elem;
    break;
  case RMWKind::and_:
  case RMWKind::or_:
  case RMWKind::xor_:
  case RMWKind::umax:
  case RMWKind::umin:
  case RMWKind::add:
    if (!isa<IntegerType>(elem))
      return emitOpError("expected an integer element type for ")
             << stringifyRMWKind(getKind()) << ", found " << elem;
    break;
  default:
    break;
  }
  return success();
}

LogicalResult AtomicCASOp::verify() {
  Type elem = getElementTypeOrSelf(getVal().getType());
  unsigned width = isa<PointerType>(elem) ? 64 : elem.getIntOrFloatBitWidth();
  if (width != 16 && width != 32 && width != 64)
    return emitOpError("expected a 16, 32 or 64-bit element type, found ")
           << getElementTypeOrSelf(getVal().getType());
  return success();
}

//===----------------------------------------------------------------------===//
// DotOp
//===----------------------------------------------------------------------===//

LogicalResult DotOp::verify() {
  auto a = getA().getType(), b = getB().getType(), c = getC().getType();
  if (a.getRank() != 2 || b.getRank() != 2 || c.getRank() != 2)
    return emitOpError("expected 2-D operands, found ranks ")
           << a.getRank() << ", " << b.getRank() << " and " << c.getRank();
  if (a.getDimSize(1) != b.getDimSize(0))
    return emitOpError("expected a's K dimension ")
           << a.getDimSize(1) << " to match b's, found " << b.getDimSize(0);
  if (c.getDimSize(0) != a.getDimSize(0) || c.getDimSize(1) != b.getDimSize(1))
    return emitOpError("expected accumulator shape ")
           << fmtShape({a.getDimSize(0), b.getDimSize(1)}) << ", found " << fmtShape(c.getShape());
  for (int64_t d : {a.getDimSize(0), a.getDimSize(1), b.getDimSize(1)})
    if (d < 16 || !llvm::isPowerOf2_64(d))
      return emitOpError("expected every dot dimension to be a power of two >= 16, found ")
             << fmtShape(a.getShape()) << " * " << fmtShape(b.getShape());
  Type ea = a.getElementType(), eb = b.getElementType(), ec = c.getElementType();
  bool fp8 = isa<Float8E4M3FNType, Float8E5M2Type>(ea);
  if (ea != eb && !(fp8 && isa<Float8E4M3FNType, Float8E5M2Type>(eb)))
    return emitOpError("expected a and b of one element type (or two fp8 types), found ")
           << ea << " and " << eb;
  bool ok = (ea.isF16() && (ec.isF32() || ec.isF16())) || (ea.isBF16() && ec.isF32()) ||
            (ea.isF32() && ec.isF32()) || (fp8 && ec.isF32()) ||
            (ea.isInteger(8) && ec.isInteger(32));
  if (!ok)
    return emitOpError("expected f16->f16|f32, bf16->f32, f32->f32, fp8->f32 or i8->i32, found ")
           << ea << " -> " << ec;
  if (!ea.isF32() && getInputPrecision() != InputPrecision::tf32)
    return emitOpError("expected inputPrecision only with f32 inputs, found ")
           << stringifyInputPrecision(getInputPrecision()) << " with " << ea;
  return success();
}

//===----------------------------------------------------------------------===//
// ReduceOp, ScanOp
//===----------------------------------------------------------------------===//

/// Checks what reduce and scan share: operands of one shape, a valid axis, and a combine
/// region taking 2N scalars of the operands' element types and returning N of them.
static LogicalResult verifyCombiner(Operation *op, ValueRange srcs, int64_t axis, Region &region) {
  if (srcs.empty())
    return op->emitOpError("expected at least one operand");
  auto first = cast<RankedTensorType>(srcs[0].getType());
  for (Value src : srcs)
    if (cast<RankedTensorType>(src.getType()).getShape() != first.getShape())
      return op->emitOpError("expected all operands of shape ")
             << fmtShape(first.getShape()) << ", found "
             << fmtShape(cast<RankedTensorType>(src.getType()).getShape());
  if (axis < 0 || axis >= first.getRank())
    return op->emitOpError("expected axis in [0, ") << first.getRank() << "), found " << axis;
  Block &block = region.front();
  unsigned n = srcs.size();
  if (block.getNumArguments() != 2 * n)
    return op->emitOpError("expected the combine region to take ")
           << 2 * n << " arguments, found " << block.getNumArguments();
  for (unsigned i = 0; i < 2 * n; ++i) {
    Type expected = cast<RankedTensorType>(srcs[i % n].getType()).getElementType();
    if (block.getArgument(i).getType() != expected)
      return op->emitOpError("expected combine argument ")
             << i << " of type " << expected << ", found " << block.getArgument(i).getType();
  }
  Operation *term = block.getTerminator();
  if (term->getNumOperands() != n)
    return op->emitOpError("expected the combine region to yield ")
           << n << " values, found " << term->getNumOperands();
  for (unsigned i = 0; i < n; ++i)
    if (term->getOperand(i).getType() != block.getArgument(i).getType())
      return op->emitOpError("expected combine result ")
             << i << " of type " << block.getArgument(i).getType() << ", found "
             << term->getOperand(i).getType();
  return success();
}

LogicalResult ReduceOp::verifyRegions() {
  if (failed(verifyCombiner(*this, getSrcs(), int32_t(getAxis()), getCombineOp())))
    return failure();
  if (getNumResults() != getSrcs().size())
    return emitOpError("expected ") << getSrcs().size() << " results, found " << getNumResults();
  for (auto [src, res] : llvm::zip(getSrcs(), getResults())) {
    auto type = cast<RankedTensorType>(src.getType());
    SmallVector<int64_t> shape(type.getShape());
    shape.erase(shape.begin() + getAxis());
    // Compare shape and element type only: after layout assignment the result carries a slice
    // encoding of the operand's layout.
    auto resTensor = dyn_cast<RankedTensorType>(res.getType());
    bool ok = shape.empty() ? res.getType() == type.getElementType()
                            : resTensor && resTensor.getShape() == ArrayRef<int64_t>(shape) &&
                                  resTensor.getElementType() == type.getElementType();
    if (!ok)
      return emitOpError("expected a result of shape ")
             << fmtShape(shape) << " and element type " << type.getElementType() << ", found "
             << res.getType();
  }
  return success();
}

LogicalResult ScanOp::verifyRegions() {
  if (failed(verifyCombiner(*this, getSrcs(), int32_t(getAxis()), getCombineOp())))
    return failure();
  if (getResultTypes() != getSrcs().getTypes())
    return emitOpError("expected results of the operands' types");
  return success();
}

//===----------------------------------------------------------------------===//
// ExternElementwiseOp
//===----------------------------------------------------------------------===//

LogicalResult ExternElementwiseOp::verify() {
  if (getSymbol().empty())
    return emitOpError("expected a function symbol");
  if (getSrcs().empty())
    return emitOpError("expected at least one operand");
  ArrayRef<int64_t> shape = shapeOf(getType());
  bool tile = isa<RankedTensorType>(getType());
  for (auto [i, v] : llvm::enumerate(getSrcs())) {
    if (isa<RankedTensorType>(v.getType()) != tile || shapeOf(v.getType()) != shape)
      return emitOpError("expected operand ")
             << i << " of shape " << fmtShape(shape) << " like the result, found " << v.getType();
  }
  // A libdevice symbol takes and returns fixed element types.
  auto [function, overload] = libdevice::lookupSymbol(getSymbol());
  if (!overload)
    return success();
  MLIRContext &ctx = *getContext();
  if (overload->args.size() != getSrcs().size())
    return emitOpError("expected ") << overload->args.size() << " operands for @" << getSymbol()
                                    << ", found " << getSrcs().size();
  for (auto [i, v] : llvm::enumerate(getSrcs())) {
    Type want = libdevice::getCodeType(overload->args[i], ctx);
    if (getElementTypeOrSelf(v.getType()) != want)
      return emitOpError("expected operand ")
             << i << " of @" << getSymbol() << " to have element type " << want << ", found "
             << v.getType();
  }
  Type want = libdevice::getCodeType(overload->result, ctx);
  if (getElementTypeOrSelf(getType()) != want)
    return emitOpError("expected @")
           << getSymbol() << " to return element type " << want << ", found " << getType();
  return success();
}

void ExternElementwiseOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  if (getPure())
    return;
  effects.emplace_back(MemoryEffects::Read::get(), SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Write::get(), SideEffects::DefaultResource::get());
}

//===----------------------------------------------------------------------===//
// InlineAsmElementwiseOp
//===----------------------------------------------------------------------===//

unsigned kiln::getInlineAsmElementsPerRegister(Type element, unsigned pack) {
  unsigned bits = isa<PointerType>(element) ? 64 : element.getIntOrFloatBitWidth();
  return bits < 32 ? std::min(32 / bits, pack) : 1;
}

unsigned kiln::getInlineAsmRegisters(Type element, unsigned pack) {
  return llvm::divideCeil(pack, getInlineAsmElementsPerRegister(element, pack));
}

std::pair<unsigned, unsigned> kiln::countInlineAsmConstraints(StringRef constraints) {
  unsigned outputs = 0, inputs = 0;
  SmallVector<StringRef> parts;
  constraints.split(parts, ',');
  for (StringRef part : parts) {
    part = part.trim();
    if (part.starts_with("="))
      ++outputs;
    else if (!part.empty() && !part.starts_with("~"))
      ++inputs;
  }
  return {outputs, inputs};
}

LogicalResult InlineAsmElementwiseOp::verify() {
  if (getResults().empty())
    return emitOpError("expected at least one result");
  Type first = getResults()[0].getType();
  ArrayRef<int64_t> shape = shapeOf(first);
  bool tile = isa<RankedTensorType>(first);
  for (Value v : llvm::concat<Value>(getSrcs(), getResults()))
    if (isa<RankedTensorType>(v.getType()) != tile || shapeOf(v.getType()) != shape)
      return emitOpError("expected every operand and result of type ")
             << (tile ? "tile " + fmtShape(shape) : std::string("scalar")) << ", found "
             << v.getType();
  unsigned pack = getPack(), outputs = 0, inputs = 0;
  for (Value v : getResults())
    outputs += getInlineAsmRegisters(getElementTypeOrSelf(v.getType()), pack);
  for (Value v : getSrcs())
    inputs += getInlineAsmRegisters(getElementTypeOrSelf(v.getType()), pack);
  auto [namedOutputs, namedInputs] = countInlineAsmConstraints(getConstraints());
  if (namedOutputs != outputs || namedInputs != inputs)
    return emitOpError("expected constraints for ")
           << outputs << " outputs and " << inputs << " inputs (pack = " << pack << "), found "
           << namedOutputs << " and " << namedInputs << " in \"" << getConstraints() << "\"";
  return success();
}

void InlineAsmElementwiseOp::getEffects(
    SmallVectorImpl<SideEffects::EffectInstance<MemoryEffects::Effect>> &effects) {
  if (getPure())
    return;
  effects.emplace_back(MemoryEffects::Read::get(), SideEffects::DefaultResource::get());
  effects.emplace_back(MemoryEffects::Write::get(), SideEffects::DefaultResource::get());
}
