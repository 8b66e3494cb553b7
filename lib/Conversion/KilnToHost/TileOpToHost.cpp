//===- TileOpToHost.cpp - Tile creation, shapes and elementwise ops, host ---===//
//
// This file implements the host type converter, the shuffle/splat helpers and the lowering
// of the ops that create and reshape tiles. A tile is a flat row-major vector, so expand_dims
// and reshape are free, broadcast and trans are one shufflevector each with a mask computed
// here, and arith/math ops are rebuilt with vector types (they stay in their dialects; the
// upstream lowerings take them to LLVM after the math approximations have run).
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/KilnToHost.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/Support/xxhash.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::host;

//===----------------------------------------------------------------------===//
// Types and helpers
//===----------------------------------------------------------------------===//

HostTypeConverter::HostTypeConverter(MLIRContext *ctx) {
  addConversion([](Type t) { return t; });
  addConversion([ctx](PointerType) -> Type { return LLVM::LLVMPointerType::get(ctx); });
  addConversion([this](RankedTensorType type) -> std::optional<Type> {
    Type elem = convertType(type.getElementType());
    if (!elem || !type.hasStaticShape())
      return std::nullopt;
    return VectorType::get({type.getNumElements()}, elem);
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
  return 1;
}

SmallVector<int64_t> kiln::host::getStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int i = int(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
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

void kiln::host::callRuntime(OpBuilder &b, Location loc, Operation *at, ContextSlot slot,
                             ValueRange args) {
  MLIRContext *ctx = b.getContext();
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  Value context = getExtraArg(at, kContext);
  Value slotPtr = LLVM::GEPOp::create(b, loc, ptrTy, ptrTy, context,
                                      ArrayRef<LLVM::GEPArg>{int32_t(slot)});
  Value fn = LLVM::LoadOp::create(b, loc, ptrTy, slotPtr);
  SmallVector<Type> argTypes{ptrTy};
  SmallVector<Value> operands{fn, context};
  for (Value a : args) {
    argTypes.push_back(a.getType());
    operands.push_back(a);
  }
  auto fnTy = LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), argTypes);
  LLVM::CallOp::create(b, loc, fnTy, operands);
}

Value kiln::host::getStringPtr(OpBuilder &b, Location loc, Operation *at, StringRef text) {
  auto module = at->getParentOfType<ModuleOp>();
  std::string name = "kiln.str." + llvm::utohexstr(llvm::xxh3_64bits(text));
  auto global = module.lookupSymbol<LLVM::GlobalOp>(name);
  if (!global) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    std::string data = text.str();
    data.push_back('\0');
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), data.size());
    global = LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true, LLVM::Linkage::Internal,
                                    name, b.getStringAttr(data));
  }
  return LLVM::AddressOfOp::create(b, loc, global);
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

template <typename OpT, ExtraArg First>
struct GridOpConversion : OpConversionPattern<OpT> {
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
    auto type = cast<VectorType>(getTypeConverter()->convertType(op.getType()));
    SmallVector<APInt> values;
    unsigned bits = type.getElementTypeBitWidth();
    for (int64_t i = 0; i < type.getNumElements(); ++i)
      values.push_back(APInt(bits, int64_t(op.getStart()) + i, /*isSigned=*/true));
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, type,
                                                   DenseIntElementsAttr::get(type, values));
    return success();
  }
};

struct SplatConversion : OpConversionPattern<SplatOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SplatOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<VectorType>(getTypeConverter()->convertType(op.getType()));
    rewriter.replaceOp(op, splat(rewriter, op.getLoc(), adaptor.getSrc(), type));
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
    rewriter.replaceOp(op, shuffle(rewriter, op.getLoc(), adaptor.getSrc(), indices));
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
    rewriter.replaceOp(op, shuffle(rewriter, op.getLoc(), adaptor.getSrc(), indices));
    return success();
  }
};

struct AddPtrConversion : OpConversionPattern<AddPtrOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AddPtrOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type pointee = getTypeConverter()->convertType(getPointeeType(getElementTypeOrSelf(
        op.getPtr().getType())));
    Type resTy = getTypeConverter()->convertType(op.getType());
    rewriter.replaceOpWithNewOp<LLVM::GEPOp>(op, resTy, pointee, adaptor.getPtr(),
                                             ValueRange{adaptor.getOffset()});
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
        op->getNumRegions() != 0)
      return failure();
    SmallVector<Type> types;
    if (failed(getTypeConverter()->convertTypes(op->getResultTypes(), types)))
      return failure();
    SmallVector<NamedAttribute> attrs(op->getAttrs());
    if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
      if (!dense)
        return failure();
      rewriter.replaceOpWithNewOp<arith::ConstantOp>(
          op, types[0], dense.reshape(cast<ShapedType>(types[0])));
      return success();
    }
    OperationState state(op->getLoc(), op->getName(), operands, types, attrs);
    rewriter.replaceOp(op, rewriter.create(state)->getResults());
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
               AddPtrConversion>(converter, ctx);
  patterns.add<ElementwiseConversion>(converter, ctx);
}
