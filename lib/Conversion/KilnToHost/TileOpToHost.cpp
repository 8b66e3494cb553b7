//===- TileOpToHost.cpp - Tile creation, shapes and elementwise ops, host ---===//
//
// This file implements the host type converter, the chunk/shuffle/splat helpers and the
// lowering of the ops that create and reshape tiles. A tile is its elements in row-major
// order, in chunks of at most kChunk lanes, so expand_dims and reshape are free, broadcast
// and trans are shuffles with masks computed here (one per chunk and source chunk), and
// arith/math ops are rebuilt per chunk with vector types (they stay in their dialects; the
// upstream lowerings take them to LLVM after the math approximations have run).
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Conversion/KilnToHost.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::host;

//===----------------------------------------------------------------------===//
// Types and helpers
//===----------------------------------------------------------------------===//

HostTypeConverter::HostTypeConverter(MLIRContext *ctx) {
  addConversion([](Type t) { return t; });
  addConversion([ctx](PointerType) -> Type { return LLVM::LLVMPointerType::get(ctx); });
  // Unused on the host (descriptor accesses were lowered to loads and stores).
  addConversion([ctx](TensorMapType) -> Type { return LLVM::LLVMPointerType::get(ctx); });
  // fp8 is bits to LLVM (-kiln-expand-fp8 left only loads, stores, constants and bitcasts).
  addConversion([ctx](Float8E4M3FNType) -> Type { return IntegerType::get(ctx, 8); });
  addConversion([ctx](Float8E5M2Type) -> Type { return IntegerType::get(ctx, 8); });
  addConversion([this, ctx](RankedTensorType type) -> std::optional<Type> {
    Type elem = convertType(type.getElementType());
    if (!elem || !type.hasStaticShape())
      return std::nullopt;
    if (isLargeTile(type)) // a buffer in memory (LargeTileToHost.cpp)
      return LLVM::LLVMPointerType::get(ctx);
    return getTileType(type.getNumElements(), elem);
  });
  auto cast = [](OpBuilder &b, Type type, ValueRange inputs, Location loc) -> Value {
    return UnrealizedConversionCastOp::create(b, loc, type, inputs).getResult(0);
  };
  addSourceMaterialization(cast);
  addTargetMaterialization(cast);
}

std::string kiln::host::getEntryName(llvm::StringRef kernel) {
  return (kernel + ".host_entry").str();
}

int64_t kiln::host::getNumElements(Type type) {
  if (auto t = dyn_cast<ShapedType>(type))
    return t.getNumElements();
  if (auto a = dyn_cast<LLVM::LLVMArrayType>(type))
    return a.getNumElements() * getNumElements(a.getElementType());
  return 1;
}

Type kiln::host::getTileType(int64_t n, Type elem) {
  auto chunk = VectorType::get({getChunkWidth(n)}, elem);
  if (n <= kChunk)
    return chunk;
  return LLVM::LLVMArrayType::get(chunk, n / kChunk);
}

Type kiln::host::getTileElementType(Type type) {
  if (auto a = dyn_cast<LLVM::LLVMArrayType>(type))
    type = a.getElementType();
  if (auto v = dyn_cast<VectorType>(type))
    return v.getElementType();
  return type;
}

bool kiln::host::isTile(Type type) { return isa<VectorType, LLVM::LLVMArrayType>(type); }

SmallVector<Value> kiln::host::unpack(OpBuilder &b, Location loc, Value tile) {
  auto a = dyn_cast<LLVM::LLVMArrayType>(tile.getType());
  if (!a)
    return {tile};
  SmallVector<Value> chunks;
  for (unsigned i = 0; i < a.getNumElements(); ++i)
    chunks.push_back(LLVM::ExtractValueOp::create(b, loc, tile, i));
  return chunks;
}

Value kiln::host::pack(OpBuilder &b, Location loc, Type type, ValueRange chunks) {
  if (!isa<LLVM::LLVMArrayType>(type))
    return chunks.front();
  Value v = LLVM::PoisonOp::create(b, loc, type);
  for (auto [i, c] : llvm::enumerate(chunks))
    v = LLVM::InsertValueOp::create(b, loc, v, c, i);
  return v;
}

Value kiln::host::splatTile(OpBuilder &b, Location loc, Value scalar, Type type) {
  int64_t n = getNumElements(type);
  auto chunkTy = VectorType::get({getChunkWidth(n)}, getTileElementType(type));
  Value chunk = splat(b, loc, scalar, chunkTy);
  return pack(b, loc, type, SmallVector<Value>(n / chunkTy.getNumElements(), chunk));
}

SmallVector<Value> kiln::host::permute(OpBuilder &b, Location loc, ArrayRef<Value> src,
                                       int64_t srcN, ArrayRef<int32_t> indices) {
  int64_t ws = getChunkWidth(srcN), dstN = indices.size(), wd = getChunkWidth(dstN);
  SmallVector<Value> out;
  for (int64_t j = 0; j < dstN; j += wd) {
    ArrayRef<int32_t> lanes = indices.slice(j, wd);
    SmallVector<int64_t> from;
    for (int32_t f : lanes)
      if (!llvm::is_contained(from, f / ws))
        from.push_back(f / ws);
    if (from.size() == 1) {
      SmallVector<int32_t> mask;
      for (int32_t f : lanes)
        mask.push_back(int32_t(f - from[0] * ws));
      out.push_back(shuffle(b, loc, src[from[0]], mask));
      continue;
    }
    // Several source chunks (then ws == kChunk >= wd): merge them one at a time into a
    // vector of ws lanes, then narrow it to wd lanes.
    SmallVector<int32_t> mask(ws, 0);
    for (int64_t l = 0; l < wd; ++l) {
      int64_t c = lanes[l] / ws;
      if (c == from[0])
        mask[l] = int32_t(lanes[l] - c * ws);
      else if (c == from[1])
        mask[l] = int32_t(ws + lanes[l] - c * ws);
    }
    Value acc = LLVM::ShuffleVectorOp::create(b, loc, src[from[0]], src[from[1]], mask);
    for (size_t k = 2; k < from.size(); ++k) {
      for (int64_t l = 0; l < ws; ++l)
        mask[l] = int32_t(l);
      for (int64_t l = 0; l < wd; ++l)
        if (lanes[l] / ws == from[k])
          mask[l] = int32_t(ws + lanes[l] - from[k] * ws);
      acc = LLVM::ShuffleVectorOp::create(b, loc, acc, src[from[k]], mask);
    }
    if (wd < ws) {
      SmallVector<int32_t> narrow;
      for (int64_t l = 0; l < wd; ++l)
        narrow.push_back(int32_t(l));
      acc = shuffle(b, loc, acc, narrow);
    }
    out.push_back(acc);
  }
  return out;
}

SmallVector<int64_t> kiln::host::getStrides(ArrayRef<int64_t> shape) {
  return getRowMajorStrides(shape);
}

Value kiln::host::splat(OpBuilder &b, Location loc, Value scalar, VectorType type) {
  Value v = LLVM::PoisonOp::create(b, loc, type);
  Value zero = LLVM::ConstantOp::create(b, loc, b.getI32Type(), b.getI32IntegerAttr(0));
  v = LLVM::InsertElementOp::create(b, loc, v, scalar, zero);
  return LLVM::ShuffleVectorOp::create(b, loc, v, v,
                                       SmallVector<int32_t>(type.getNumElements(), 0));
}

Value kiln::host::shuffle(OpBuilder &b, Location loc, Value v, ArrayRef<int32_t> indices) {
  auto type = cast<VectorType>(v.getType());
  bool identity = int64_t(indices.size()) == type.getNumElements();
  for (size_t i = 0; identity && i < indices.size(); ++i)
    identity = indices[i] == int32_t(i);
  if (identity)
    return v;
  return LLVM::ShuffleVectorOp::create(b, loc, v, v, indices);
}

Value kiln::host::getExtraArg(Operation *op, ExtraArg which) {
  auto func = op->getParentOfType<FunctionOpInterface>();
  Block &entry = func.getFunctionBody().front();
  return entry.getArgument(entry.getNumArguments() - kNumExtraArgs + which);
}

Value kiln::host::callRuntime(OpBuilder &b, Location loc, Operation *at, ContextSlot slot,
                              ValueRange args, Type result) {
  MLIRContext *ctx = b.getContext();
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  Value context = getExtraArg(at, kContext);
  Value slotPtr =
      LLVM::GEPOp::create(b, loc, ptrTy, ptrTy, context, ArrayRef<LLVM::GEPArg>{int32_t(slot)});
  Value fn = LLVM::LoadOp::create(b, loc, ptrTy, slotPtr);
  SmallVector<Type> argTypes{ptrTy};
  SmallVector<Value> operands{fn, context};
  for (Value a : args) {
    argTypes.push_back(a.getType());
    operands.push_back(a);
  }
  auto fnTy = LLVM::LLVMFunctionType::get(result ? result : LLVM::LLVMVoidType::get(ctx), argTypes);
  auto call = LLVM::CallOp::create(b, loc, fnTy, operands);
  return result ? call.getResult() : Value();
}

Value kiln::host::getStringPtr(OpBuilder &b, Location loc, Operation *at, StringRef text) {
  return getStringConstant(b, loc, at, text, "kiln.str.");
}

std::string kiln::host::formatSite(Location loc) {
  std::string out = "<unknown>";
  loc->walk([&](Location l) {
    if (auto f = dyn_cast<FileLineColLoc>(l)) {
      out = (f.getFilename().getValue() + ":" + llvm::Twine(f.getLine()) + ":" +
             llvm::Twine(f.getColumn()))
                .str();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return out;
}

namespace {

//===----------------------------------------------------------------------===//
// Grid
//===----------------------------------------------------------------------===//

template <typename OpT, ExtraArg First> struct GridOpConversion : OpConversionPattern<OpT> {
  using OpConversionPattern<OpT>::OpConversionPattern;
  LogicalResult matchAndRewrite(OpT op, typename OpT::Adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, getExtraArg(op, ExtraArg(First + unsigned(op.getAxis()))));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// Tile creation and shapes
//===----------------------------------------------------------------------===//

struct MakeRangeConversion : OpConversionPattern<MakeRangeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(MakeRangeOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type type = getTypeConverter()->convertType(op.getType());
    int64_t n = getNumElements(type), w = getChunkWidth(n);
    auto chunkTy = VectorType::get({w}, rewriter.getI32Type());
    SmallVector<Value> chunks;
    for (int64_t c = 0; c < n; c += w) {
      SmallVector<APInt> values;
      for (int64_t i = 0; i < w; ++i)
        values.push_back(APInt(32, int64_t(op.getStart()) + c + i, /*isSigned=*/true));
      chunks.push_back(arith::ConstantOp::create(rewriter, op.getLoc(), chunkTy,
                                                 DenseIntElementsAttr::get(chunkTy, values)));
    }
    rewriter.replaceOp(op, pack(rewriter, op.getLoc(), type, chunks));
    return success();
  }
};

struct SplatConversion : OpConversionPattern<SplatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SplatOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type type = getTypeConverter()->convertType(op.getType());
    rewriter.replaceOp(op, splatTile(rewriter, op.getLoc(), adaptor.getSrc(), type));
    return success();
  }
};

/// expand_dims and reshape: the row-major order of the elements does not change.
template <typename OpT> struct SameElementsConversion : OpConversionPattern<OpT> {
  using OpConversionPattern<OpT>::OpConversionPattern;
  LogicalResult matchAndRewrite(OpT op, typename OpT::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, adaptor.getSrc());
    return success();
  }
};

struct BroadcastConversion : OpConversionPattern<BroadcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BroadcastOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto srcTy = cast<RankedTensorType>(op.getSrc().getType());
    auto dstTy = cast<RankedTensorType>(op.getType());
    ArrayRef<int64_t> src = srcTy.getShape(), dst = dstTy.getShape();
    SmallVector<int64_t> srcStrides = getStrides(src), dstStrides = getStrides(dst);
    SmallVector<int32_t> indices(dstTy.getNumElements());
    for (int64_t i = 0; i < dstTy.getNumElements(); ++i) {
      int64_t s = 0;
      for (size_t d = 0; d < dst.size(); ++d)
        if (src[d] != 1)
          s += (i / dstStrides[d] % dst[d]) * srcStrides[d];
      indices[i] = int32_t(s);
    }
    Location loc = op.getLoc();
    rewriter.replaceOp(op, pack(rewriter, loc, getTypeConverter()->convertType(dstTy),
                                permute(rewriter, loc, unpack(rewriter, loc, adaptor.getSrc()),
                                        srcTy.getNumElements(), indices)));
    return success();
  }
};

struct TransConversion : OpConversionPattern<TransOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(TransOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto srcTy = cast<RankedTensorType>(op.getSrc().getType());
    auto dstTy = cast<RankedTensorType>(op.getType());
    ArrayRef<int32_t> order = op.getOrder();
    SmallVector<int64_t> srcStrides = getStrides(srcTy.getShape()),
                         dstStrides = getStrides(dstTy.getShape());
    SmallVector<int32_t> indices(dstTy.getNumElements());
    for (int64_t i = 0; i < dstTy.getNumElements(); ++i) {
      int64_t s = 0;
      for (size_t d = 0; d < order.size(); ++d)
        s += (i / dstStrides[d] % dstTy.getDimSize(d)) * srcStrides[order[d]];
      indices[i] = int32_t(s);
    }
    Location loc = op.getLoc();
    rewriter.replaceOp(op, pack(rewriter, loc, getTypeConverter()->convertType(dstTy),
                                permute(rewriter, loc, unpack(rewriter, loc, adaptor.getSrc()),
                                        srcTy.getNumElements(), indices)));
    return success();
  }
};

struct AddPtrConversion : OpConversionPattern<AddPtrOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AddPtrOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type pointee = getTypeConverter()->convertType(
        getPointeeType(getElementTypeOrSelf(op.getPtr().getType())));
    Type resTy = getTypeConverter()->convertType(op.getType());
    Location loc = op.getLoc();
    SmallVector<Value> ptrs = unpack(rewriter, loc, adaptor.getPtr());
    SmallVector<Value> offsets = unpack(rewriter, loc, adaptor.getOffset());
    SmallVector<Value> chunks;
    for (auto [p, o] : llvm::zip(ptrs, offsets))
      chunks.push_back(LLVM::GEPOp::create(rewriter, loc, p.getType(), pointee, p, ValueRange{o}));
    rewriter.replaceOp(op, pack(rewriter, loc, resTy, chunks));
    return success();
  }
};

/// kiln.ptr_cast on each chunk (vectors of pointers or i64): inttoptr / ptrtoint; a pointer
/// to a pointer keeps the value (one opaque pointer type).
struct PtrCastConversion : OpConversionPattern<PtrCastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PtrCastOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type resTy = getTypeConverter()->convertType(op.getType());
    Type chunkType =
        isa<LLVM::LLVMArrayType>(resTy) ? cast<LLVM::LLVMArrayType>(resTy).getElementType() : resTy;
    bool toPtr = isa<PointerType>(getElementTypeOrSelf(op.getType()));
    bool fromPtr = isa<PointerType>(getElementTypeOrSelf(op.getSrc().getType()));
    SmallVector<Value> chunks;
    for (Value v : unpack(rewriter, loc, adaptor.getSrc())) {
      if (toPtr && !fromPtr)
        chunks.push_back(LLVM::IntToPtrOp::create(rewriter, loc, chunkType, v));
      else if (!toPtr)
        chunks.push_back(LLVM::PtrToIntOp::create(rewriter, loc, chunkType, v));
      else
        chunks.push_back(v);
    }
    rewriter.replaceOp(op, pack(rewriter, loc, resTy, chunks));
    return success();
  }
};

//===----------------------------------------------------------------------===//
// arith and math on tiles
//===----------------------------------------------------------------------===//

/// Rebuilds an arith or math op whose operands or results are tiles with vector types.
struct ElementwiseConversion : ConversionPattern {
  ElementwiseConversion(TypeConverter &converter, MLIRContext *ctx)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                                ConversionPatternRewriter &rewriter) const override {
    if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) ||
        op->getNumRegions() != 0 || hasLargeTile(op))
      return failure();
    SmallVector<Type> types;
    if (failed(getTypeConverter()->convertTypes(op->getResultTypes(), types)))
      return failure();
    Location loc = op->getLoc();
    SmallVector<NamedAttribute> attrs(op->getAttrs());
    if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
      if (!dense)
        return failure();
      // fp8 is held as i8 bits.
      Type elem = getTileElementType(types[0]);
      if (isa<FloatType>(dense.getElementType()) && isa<IntegerType>(elem))
        dense = dense.bitcast(elem);
      int64_t n = dense.getNumElements(), w = getChunkWidth(n);
      auto chunkTy = VectorType::get({w}, dense.getElementType());
      SmallVector<Value> chunks;
      if (dense.isSplat()) {
        Value c = arith::ConstantOp::create(
            rewriter, loc, chunkTy,
            DenseElementsAttr::get(chunkTy, dense.getSplatValue<Attribute>()));
        chunks.assign(n / w, c);
      } else {
        SmallVector<Attribute> values(dense.getValues<Attribute>());
        for (int64_t c = 0; c < n; c += w)
          chunks.push_back(arith::ConstantOp::create(
              rewriter, loc, chunkTy,
              DenseElementsAttr::get(chunkTy, ArrayRef<Attribute>(values).slice(c, w))));
      }
      rewriter.replaceOp(op, pack(rewriter, loc, types[0], chunks));
      return success();
    }
    // One op per chunk; scalar operands (a select's condition) are shared.
    int64_t numChunks = 1;
    for (Value v : operands)
      if (auto a = dyn_cast<LLVM::LLVMArrayType>(v.getType()))
        numChunks = a.getNumElements();
    SmallVector<SmallVector<Value>> operandChunks;
    for (Value v : operands)
      operandChunks.push_back(isTile(v.getType()) ? unpack(rewriter, loc, v)
                                                  : SmallVector<Value>(numChunks, v));
    SmallVector<SmallVector<Value>> resultChunks(types.size());
    for (int64_t c = 0; c < numChunks; ++c) {
      SmallVector<Value> chunkOperands;
      for (auto &chunks : operandChunks)
        chunkOperands.push_back(chunks[c]);
      SmallVector<Type> chunkTypes;
      for (Type t : types)
        chunkTypes.push_back(
            isa<LLVM::LLVMArrayType>(t) ? cast<LLVM::LLVMArrayType>(t).getElementType() : t);
      OperationState state(loc, op->getName(), chunkOperands, chunkTypes, attrs);
      Operation *created = rewriter.create(state);
      for (auto [i, r] : llvm::enumerate(created->getResults()))
        resultChunks[i].push_back(r);
    }
    SmallVector<Value> results;
    for (auto [t, chunks] : llvm::zip(types, resultChunks))
      results.push_back(pack(rewriter, loc, t, chunks));
    rewriter.replaceOp(op, results);
    return success();
  }
};

} // namespace

void kiln::host::populateTileOpToHostPatterns(TypeConverter &converter,
                                              RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<GridOpConversion<ProgramIdOp, kPidX>, GridOpConversion<NumProgramsOp, kGridX>,
               MakeRangeConversion, SplatConversion, SameElementsConversion<ExpandDimsOp>,
               SameElementsConversion<ReshapeOp>, BroadcastConversion, TransConversion,
               AddPtrConversion, PtrCastConversion>(converter, ctx);
  patterns.add<ElementwiseConversion>(converter, ctx);
}
