//===- LargeTileToHost.cpp - Large tiles in memory, ops as loops over chunks -===//
//
// This file implements the host lowering of large tiles, those of more than kMaxRegisterTile
// elements. A large tile is a buffer (its elements in row-major order, i1 as bytes) in the
// kernel's scratch memory, written once by the op that defines it, and every op on it is one
// scf.for over chunks of kChunk lanes that reads its operands' chunks, computes with the
// same vector ops as a small tile, and stores the result's chunk. Code size, and so LLVM's
// compile time, no longer grows with the tile: a fully unrolled 2^20-element tile (8,192
// chunks per op) took LLVM minutes. Shape ops read through index maps (a vector load, a
// splat or a gather per chunk); expand_dims and reshape keep the buffer. Loop-carried large
// tiles are copied at scf.yield into buffers of the loop, so that a value carried to the next
// iteration is not overwritten when its defining op runs again. After the conversion the
// buffers (llvm.alloca marked kTileBufferAttr) are placed in the scratch memory the host
// entry allocates (placeTileBuffers).
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/KilnToHost.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::host;

//===----------------------------------------------------------------------===//
// Buffers and chunks
//===----------------------------------------------------------------------===//

namespace {

Value i32Const(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(v)));
}

/// `v` in every lane of a vector<kChunk x i32>.
Value i32Splat(OpBuilder &b, Location loc, int64_t v) {
  auto type = VectorType::get({kChunk}, b.getI32Type());
  return arith::ConstantOp::create(b, loc, type,
                                   DenseElementsAttr::get(type, b.getI32IntegerAttr(int32_t(v))));
}

Type ptrType(OpBuilder &b) { return LLVM::LLVMPointerType::get(b.getContext()); }

/// Bytes of one element in memory (pointers are 8 bytes on the hosts Kiln supports).
int64_t memoryBytes(Type memElem) {
  if (isa<LLVM::LLVMPointerType>(memElem))
    return 8;
  return std::max<int64_t>(1, memElem.getIntOrFloatBitWidth() / 8);
}

/// The address of element `index` (an i32) of a buffer of `memElem`.
Value elementAddress(OpBuilder &b, Location loc, Value buf, Type memElem, Value index) {
  return LLVM::GEPOp::create(b, loc, ptrType(b), memElem, buf, ValueRange{index});
}

/// `v` (a vector of i8 read from memory) as a vector of `elem` (i1: truncated).
Value fromMemory(OpBuilder &b, Location loc, Value v, Type elem) {
  if (!elem.isInteger(1))
    return v;
  auto type = VectorType::get(cast<VectorType>(v.getType()).getShape(), elem);
  return LLVM::TruncOp::create(b, loc, type, v);
}

/// Applies `fn` to every chunk of the converted tile `v` (vector or chunk array).
Value mapRegisterTile(OpBuilder &b, Location loc, Value v, Type elem,
                      function_ref<Value(Value, VectorType)> fn) {
  int64_t n = getNumElements(v.getType());
  auto chunkTy = VectorType::get({getChunkWidth(n)}, elem);
  SmallVector<Value> chunks;
  for (Value c : unpack(b, loc, v))
    chunks.push_back(fn(c, chunkTy));
  return pack(b, loc, getTileType(n, elem), chunks);
}

} // namespace

bool kiln::host::isLargeTile(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && t.hasStaticShape() && t.getNumElements() > kMaxRegisterTile;
}

bool kiln::host::hasLargeTile(Operation *op) {
  return llvm::any_of(op->getOperandTypes(), isLargeTile) ||
         llvm::any_of(op->getResultTypes(), isLargeTile);
}

Type kiln::host::getMemoryType(Type elem) {
  if (elem.isInteger(1))
    return IntegerType::get(elem.getContext(), 8);
  return elem;
}

Value kiln::host::allocTileBuffer(OpBuilder &b, Location loc, Operation *at, int64_t n, Type elem) {
  OpBuilder::InsertionGuard guard(b);
  auto func = at->getParentOfType<FunctionOpInterface>();
  b.setInsertionPointToStart(&func.getFunctionBody().front());
  Value one = LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(1));
  auto alloca = LLVM::AllocaOp::create(
      b, loc, ptrType(b), LLVM::LLVMArrayType::get(getMemoryType(elem), n), one, /*alignment=*/64);
  alloca->setAttr(kTileBufferAttr, b.getUnitAttr());
  return alloca;
}

void kiln::host::disableUnrolling(scf::ForOp loop) {
  MLIRContext *ctx = loop.getContext();
  auto off = BoolAttr::get(ctx, true);
  auto unroll = LLVM::LoopUnrollAttr::get(ctx, /*disable=*/off, {}, {}, {}, {}, {}, {});
  loop->setAttr(kLoopAnnotationAttr,
                LLVM::LoopAnnotationAttr::get(ctx, {}, {}, {}, unroll, {}, {}, {}, {}, {}, {}, {},
                                              {}, {}, {}, {}));
}

void kiln::host::forEachChunk(OpBuilder &b, Location loc, int64_t n,
                              function_ref<void(OpBuilder &, Location, Value)> body) {
  auto loop = scf::ForOp::create(b, loc, i32Const(b, loc, 0), i32Const(b, loc, n / kChunk),
                                 i32Const(b, loc, 1), ValueRange{},
                                 [&](OpBuilder &lb, Location l, Value c, ValueRange) {
                                   body(lb, l, c);
                                   scf::YieldOp::create(lb, l);
                                 });
  disableUnrolling(loop);
}

Value kiln::host::loadRawChunk(OpBuilder &b, Location loc, Value buf, Type elem, Value c) {
  Type mem = getMemoryType(elem);
  Value first = arith::MulIOp::create(b, loc, c, i32Const(b, loc, kChunk));
  return LLVM::LoadOp::create(b, loc, VectorType::get({kChunk}, mem),
                              elementAddress(b, loc, buf, mem, first), memoryBytes(mem));
}

Value kiln::host::loadTileChunk(OpBuilder &b, Location loc, Value buf, Type elem, Value c) {
  return fromMemory(b, loc, loadRawChunk(b, loc, buf, elem, c), elem);
}

void kiln::host::storeTileChunk(OpBuilder &b, Location loc, Value buf, Value c, Value v) {
  auto type = cast<VectorType>(v.getType());
  Type mem = getMemoryType(type.getElementType());
  if (mem != type.getElementType())
    v = LLVM::ZExtOp::create(b, loc, VectorType::get(type.getShape(), mem), v);
  Value first = arith::MulIOp::create(b, loc, c, i32Const(b, loc, kChunk));
  LLVM::StoreOp::create(b, loc, v, elementAddress(b, loc, buf, mem, first), memoryBytes(mem));
}

Value kiln::host::getChunkLanes(OpBuilder &b, Location loc, Value c) {
  auto type = VectorType::get({kChunk}, b.getI32Type());
  SmallVector<int32_t> iota;
  for (int64_t i = 0; i < kChunk; ++i)
    iota.push_back(int32_t(i));
  Value lanes = arith::ConstantOp::create(b, loc, type, DenseIntElementsAttr::get(type, iota));
  Value first = arith::MulIOp::create(b, loc, c, i32Const(b, loc, kChunk));
  return arith::AddIOp::create(b, loc, lanes, splat(b, loc, first, type));
}

Value kiln::host::gatherElements(OpBuilder &b, Location loc, Value buf, Type elem, Value indices) {
  Type mem = getMemoryType(elem);
  auto ptrsTy = VectorType::get({kChunk}, ptrType(b));
  Value bases = splat(b, loc, buf, ptrsTy);
  Value ptrs = LLVM::GEPOp::create(b, loc, ptrsTy, mem, bases, ValueRange{indices});
  auto maskTy = VectorType::get({kChunk}, b.getI1Type());
  Value all = arith::ConstantOp::create(b, loc, maskTy, DenseElementsAttr::get(maskTy, true));
  auto type = VectorType::get({kChunk}, mem);
  Value pass = LLVM::PoisonOp::create(b, loc, type);
  Value v =
      LLVM::masked_gather::create(b, loc, type, ptrs, all, ValueRange{pass}, memoryBytes(mem));
  return fromMemory(b, loc, v, elem);
}

Value kiln::host::gatherPermuted(OpBuilder &b, Location loc, Value src, Type elem, Value c,
                                 ArrayRef<int64_t> dstShape, ArrayRef<int64_t> srcStrides,
                                 int64_t offset) {
  SmallVector<int64_t> dstStrides = getStrides(dstShape);
  // offset + sum_d ((i / dstStrides[d]) % dstShape[d]) * srcStrides[d], on an i32 or a vector.
  auto indexOf = [&](Value i) -> Value {
    bool vec = isa<VectorType>(i.getType());
    auto cst = [&](int64_t v) { return vec ? i32Splat(b, loc, v) : i32Const(b, loc, v); };
    Value s = cst(offset);
    for (size_t d = 0; d < dstShape.size(); ++d) {
      if (srcStrides[d] == 0 || dstShape[d] == 1)
        continue;
      Value coord = arith::DivUIOp::create(b, loc, i, cst(dstStrides[d]));
      coord = arith::RemUIOp::create(b, loc, coord, cst(dstShape[d]));
      s = arith::AddIOp::create(b, loc, s,
                                arith::MulIOp::create(b, loc, coord, cst(srcStrides[d])));
    }
    return s;
  };
  if (dstShape.back() % kChunk != 0)
    return gatherElements(b, loc, src, elem, indexOf(getChunkLanes(b, loc, c)));
  // The chunk lies in one row of the last dimension: lane l reads first + l * stride.
  Type mem = getMemoryType(elem);
  Value first = indexOf(arith::MulIOp::create(b, loc, c, i32Const(b, loc, kChunk)));
  int64_t stride = srcStrides.back();
  auto type = VectorType::get({kChunk}, mem);
  if (stride == 1)
    return fromMemory(b, loc,
                      LLVM::LoadOp::create(b, loc, type, elementAddress(b, loc, src, mem, first),
                                           memoryBytes(mem)),
                      elem);
  if (stride == 0) {
    Value x = LLVM::LoadOp::create(b, loc, mem, elementAddress(b, loc, src, mem, first),
                                   memoryBytes(mem));
    return fromMemory(b, loc, splat(b, loc, x, type), elem);
  }
  auto i32Vec = VectorType::get({kChunk}, b.getI32Type());
  SmallVector<int32_t> steps;
  for (int64_t l = 0; l < kChunk; ++l)
    steps.push_back(int32_t(l * stride));
  Value lanes = arith::ConstantOp::create(b, loc, i32Vec, DenseIntElementsAttr::get(i32Vec, steps));
  return gatherElements(b, loc, src, elem,
                        arith::AddIOp::create(b, loc, lanes, splat(b, loc, first, i32Vec)));
}

Value kiln::host::toTileBuffer(OpBuilder &b, Location loc, Operation *at, Value v,
                               RankedTensorType type, const TypeConverter &converter) {
  if (isLargeTile(type))
    return v;
  Type elem = converter.convertType(type.getElementType());
  Value buf = allocTileBuffer(b, loc, at, type.getNumElements(), elem);
  if (elem.isInteger(1))
    v = mapRegisterTile(b, loc, v, b.getI8Type(), [&](Value c, VectorType t) -> Value {
      return LLVM::ZExtOp::create(b, loc, t, c);
    });
  LLVM::StoreOp::create(b, loc, v, buf, memoryBytes(getMemoryType(elem)));
  return buf;
}

Value kiln::host::fromTileBuffer(OpBuilder &b, Location loc, Value buf, int64_t n, Type elem) {
  Type mem = getMemoryType(elem);
  Value v = LLVM::LoadOp::create(b, loc, getTileType(n, mem), buf, memoryBytes(mem));
  if (mem == elem)
    return v;
  return mapRegisterTile(b, loc, v, elem, [&](Value c, VectorType t) -> Value {
    return LLVM::TruncOp::create(b, loc, t, c);
  });
}

void kiln::host::lowerLargeElementwise(
    ConversionPatternRewriter &rewriter, Operation *op, ValueRange operands,
    const TypeConverter &converter,
    function_ref<SmallVector<Value>(OpBuilder &, Location, ValueRange, TypeRange)> perChunk) {
  Location loc = op->getLoc();
  auto elementOf = [&](Type t) {
    return converter.convertType(cast<RankedTensorType>(t).getElementType());
  };
  int64_t n = cast<RankedTensorType>(op->getResult(0).getType()).getNumElements();
  SmallVector<Type> chunkTypes;
  SmallVector<Value> buffers;
  for (Type t : op->getResultTypes()) {
    chunkTypes.push_back(VectorType::get({kChunk}, elementOf(t)));
    buffers.push_back(allocTileBuffer(rewriter, loc, op, n, elementOf(t)));
  }
  forEachChunk(rewriter, loc, n, [&](OpBuilder &b, Location l, Value c) {
    SmallVector<Value> args;
    for (auto [orig, v] : llvm::zip(op->getOperands(), operands))
      args.push_back(
          isLargeTile(orig.getType()) ? loadTileChunk(b, l, v, elementOf(orig.getType()), c) : v);
    for (auto [buf, r] : llvm::zip(buffers, perChunk(b, l, args, chunkTypes)))
      storeTileChunk(b, l, buf, c, r);
  });
  rewriter.replaceOp(op, buffers);
}

int64_t kiln::host::placeTileBuffers(FunctionOpInterface func) {
  Block &entry = func.getFunctionBody().front();
  Value scratch = entry.getArgument(entry.getNumArguments() - kNumExtraArgs + kScratch);
  SmallVector<LLVM::AllocaOp> buffers;
  func.walk([&](LLVM::AllocaOp a) {
    if (a->hasAttr(kTileBufferAttr))
      buffers.push_back(a);
  });
  int64_t offset = 0;
  for (LLVM::AllocaOp a : buffers) {
    auto type = cast<LLVM::LLVMArrayType>(a.getElemType());
    OpBuilder b(a);
    Value at = LLVM::ConstantOp::create(b, a.getLoc(), b.getI64Type(), b.getI64IntegerAttr(offset));
    Value p =
        LLVM::GEPOp::create(b, a.getLoc(), ptrType(b), b.getI8Type(), scratch, ValueRange{at});
    a.replaceAllUsesWith(p);
    a.erase();
    offset += llvm::alignTo(type.getNumElements() * memoryBytes(type.getElementType()), 64);
  }
  return offset;
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

namespace {

/// Benefit above the register-tile patterns, which do not handle large tiles.
constexpr unsigned kLargeBenefit = 2;

template <typename OpT> struct LargePattern : OpConversionPattern<OpT> {
  LargePattern(TypeConverter &tc, MLIRContext *ctx)
      : OpConversionPattern<OpT>(tc, ctx, kLargeBenefit) {}
  Type elementOf(Type t) const {
    return this->getTypeConverter()->convertType(cast<RankedTensorType>(t).getElementType());
  }
};

struct LargeMakeRangeLowering : LargePattern<MakeRangeOp> {
  using LargePattern::LargePattern;
  LogicalResult matchAndRewrite(MakeRangeOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    if (!isLargeTile(type))
      return rewriter.notifyMatchFailure(op, "a register tile");
    Location loc = op.getLoc();
    Value buf = allocTileBuffer(rewriter, loc, op, type.getNumElements(), rewriter.getI32Type());
    forEachChunk(rewriter, loc, type.getNumElements(), [&](OpBuilder &b, Location l, Value c) {
      Value v = arith::AddIOp::create(b, l, getChunkLanes(b, l, c),
                                      i32Splat(b, l, int64_t(op.getStart())));
      storeTileChunk(b, l, buf, c, v);
    });
    rewriter.replaceOp(op, buf);
    return success();
  }
};

struct LargeSplatLowering : LargePattern<SplatOp> {
  using LargePattern::LargePattern;
  LogicalResult matchAndRewrite(SplatOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    if (!isLargeTile(type))
      return rewriter.notifyMatchFailure(op, "a register tile");
    Location loc = op.getLoc();
    Type elem = elementOf(type);
    Value buf = allocTileBuffer(rewriter, loc, op, type.getNumElements(), elem);
    Value v = splat(rewriter, loc, adaptor.getSrc(), VectorType::get({kChunk}, elem));
    forEachChunk(rewriter, loc, type.getNumElements(),
                 [&](OpBuilder &b, Location l, Value c) { storeTileChunk(b, l, buf, c, v); });
    rewriter.replaceOp(op, buf);
    return success();
  }
};

/// broadcast and trans: each chunk of the result read through its index map.
template <typename OpT> struct LargePermuteLowering : LargePattern<OpT> {
  using LargePattern<OpT>::LargePattern;
  LogicalResult matchAndRewrite(OpT op, typename OpT::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto srcTy = cast<RankedTensorType>(op.getSrc().getType());
    auto dstTy = cast<RankedTensorType>(op.getType());
    if (!isLargeTile(dstTy))
      return rewriter.notifyMatchFailure(op, "a register tile");
    Location loc = op.getLoc();
    Type mem = getMemoryType(this->elementOf(dstTy));
    Value src = toTileBuffer(rewriter, loc, op, adaptor.getSrc(), srcTy, *this->getTypeConverter());
    SmallVector<int64_t> strides = getStrides(srcTy.getShape()), perDim;
    if constexpr (std::is_same_v<OpT, TransOp>) {
      for (int32_t o : op.getOrder())
        perDim.push_back(strides[o]);
    } else {
      for (auto [d, s] : llvm::enumerate(srcTy.getShape()))
        perDim.push_back(s == 1 ? 0 : strides[d]);
    }
    Value buf = allocTileBuffer(rewriter, loc, op, dstTy.getNumElements(), mem);
    forEachChunk(rewriter, loc, dstTy.getNumElements(), [&](OpBuilder &b, Location l, Value c) {
      storeTileChunk(b, l, buf, c,
                     gatherPermuted(b, l, src, mem, c, dstTy.getShape(), perDim, /*offset=*/0));
    });
    rewriter.replaceOp(op, buf);
    return success();
  }
};

struct LargeAddPtrLowering : LargePattern<AddPtrOp> {
  using LargePattern::LargePattern;
  LogicalResult matchAndRewrite(AddPtrOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!isLargeTile(op.getType()))
      return rewriter.notifyMatchFailure(op, "a register tile");
    Type pointee = getTypeConverter()->convertType(
        getPointeeType(getElementTypeOrSelf(op.getPtr().getType())));
    lowerLargeElementwise(rewriter, op, adaptor.getOperands(), *getTypeConverter(),
                          [&](OpBuilder &b, Location l, ValueRange args, TypeRange types) {
                            return SmallVector<Value>{LLVM::GEPOp::create(
                                b, l, types[0], pointee, args[0], ValueRange{args[1]})};
                          });
    return success();
  }
};

struct LargePtrCastLowering : LargePattern<PtrCastOp> {
  using LargePattern::LargePattern;
  LogicalResult matchAndRewrite(PtrCastOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!isLargeTile(op.getType()))
      return rewriter.notifyMatchFailure(op, "a register tile");
    bool toPtr = isa<PointerType>(getElementTypeOrSelf(op.getType()));
    bool fromPtr = isa<PointerType>(getElementTypeOrSelf(op.getSrc().getType()));
    lowerLargeElementwise(rewriter, op, adaptor.getOperands(), *getTypeConverter(),
                          [&](OpBuilder &b, Location l, ValueRange args, TypeRange types) {
                            Value v = args[0];
                            if (toPtr && !fromPtr)
                              v = LLVM::IntToPtrOp::create(b, l, types[0], v);
                            else if (!toPtr)
                              v = LLVM::PtrToIntOp::create(b, l, types[0], v);
                            return SmallVector<Value>{v};
                          });
    return success();
  }
};

/// A large constant: a splat fills its buffer; any other is a constant global (never written:
/// only an op's own result is ever stored to).
LogicalResult lowerLargeConstant(ConversionPatternRewriter &rewriter, arith::ConstantOp op,
                                 Type elem) {
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    return rewriter.notifyMatchFailure(op, "not a dense constant");
  Location loc = op.getLoc();
  if (isa<FloatType>(dense.getElementType()) && isa<IntegerType>(elem))
    dense = dense.bitcast(elem); // fp8 is held as i8 bits
  int64_t n = dense.getNumElements();
  if (dense.isSplat()) {
    auto chunkTy = VectorType::get({kChunk}, dense.getElementType());
    Value v = arith::ConstantOp::create(
        rewriter, loc, chunkTy, DenseElementsAttr::get(chunkTy, dense.getSplatValue<Attribute>()));
    Value buf = allocTileBuffer(rewriter, loc, op, n, elem);
    forEachChunk(rewriter, loc, n,
                 [&](OpBuilder &b, Location l, Value c) { storeTileChunk(b, l, buf, c, v); });
    rewriter.replaceOp(op, buf);
    return success();
  }
  Type mem = getMemoryType(elem);
  auto flatTy = RankedTensorType::get({n}, mem);
  DenseElementsAttr flat;
  if (mem != elem) {
    SmallVector<APInt> bytes;
    for (const APInt &v : dense.getValues<APInt>())
      bytes.push_back(v.zext(8));
    flat = DenseElementsAttr::get(flatTy, bytes);
  } else {
    flat = dense.reshape(flatTy);
  }
  auto module = op->getParentOfType<ModuleOp>();
  std::string name;
  for (unsigned i = 0; name.empty() || SymbolTable::lookupSymbolIn(module, name); ++i)
    name = "kiln.tile_constant." + std::to_string(i);
  {
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPointToStart(module.getBody());
    LLVM::GlobalOp::create(rewriter, loc, LLVM::LLVMArrayType::get(mem, n), /*isConstant=*/true,
                           LLVM::Linkage::Internal, name, flat, /*alignment=*/64);
  }
  rewriter.replaceOp(op, LLVM::AddressOfOp::create(rewriter, loc, ptrType(rewriter), name));
  return success();
}

/// arith and math ops (and constants) on large tiles.
struct LargeElementwiseLowering : ConversionPattern {
  LargeElementwiseLowering(TypeConverter &converter, MLIRContext *ctx)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), kLargeBenefit, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                                ConversionPatternRewriter &rewriter) const override {
    if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) ||
        op->getNumRegions() != 0 || op->getNumResults() == 0 ||
        !isLargeTile(op->getResult(0).getType()))
      return failure();
    if (auto cst = dyn_cast<arith::ConstantOp>(op))
      return lowerLargeConstant(
          rewriter, cst,
          getTypeConverter()->convertType(cast<RankedTensorType>(cst.getType()).getElementType()));
    lowerLargeElementwise(rewriter, op, operands, *getTypeConverter(),
                          [&](OpBuilder &b, Location l, ValueRange args, TypeRange types) {
                            OperationState state(l, op->getName(), args, types, op->getAttrs());
                            return SmallVector<Value>(b.create(state)->getResults());
                          });
    return success();
  }
};

/// scf.yield of a loop (for, while) carrying large tiles: each carried buffer is copied into
/// a buffer of the yield, which the next iteration reads. Without the copy, the op that
/// defined the yielded value would overwrite it in the next iteration while the block
/// argument still refers to it. -kiln-convert-to-host marks each such yield beforehand
/// (kYieldCopiesAttr, computed on the unconverted loop): per operand, no copy (the iteration's
/// own argument, unchanged), one copy, or two (through a temporary: when an operand may share
/// its buffer with an argument of the loop, all operands are copied out before any argument's
/// buffer is written).
struct LargeYieldLowering : LargePattern<scf::YieldOp> {
  using LargePattern::LargePattern;
  LogicalResult matchAndRewrite(scf::YieldOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto copies = op->getAttrOfType<DenseI32ArrayAttr>(kYieldCopiesAttr);
    if (!copies)
      return rewriter.notifyMatchFailure(op, "no large tile carried by a loop");
    Location loc = op.getLoc();
    SmallVector<Value> values(adaptor.getOperands());
    for (int phase = 2; phase >= 1; --phase)
      for (auto [i, v] : llvm::enumerate(values)) {
        if (copies[i] < phase)
          continue;
        auto type = cast<RankedTensorType>(op.getOperand(i).getType());
        Type elem = elementOf(type);
        Value buf = allocTileBuffer(rewriter, loc, op, type.getNumElements(), elem);
        int64_t bytes = type.getNumElements() * memoryBytes(getMemoryType(elem));
        Value len = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI64Type(),
                                             rewriter.getI64IntegerAttr(bytes));
        LLVM::MemcpyOp::create(rewriter, loc, buf, v, len, /*isVolatile=*/false);
        v = buf;
      }
    rewriter.replaceOpWithNewOp<scf::YieldOp>(op, values);
    return success();
  }
};

/// True when the (unconverted) tile `v` may share its buffer with a block argument or another
/// value: expand_dims and reshape keep their operand's buffer, region results and block
/// arguments are buffers of other ops.
bool mayShareBuffer(Value v) {
  while (Operation *def = v.getDefiningOp()) {
    if (!isa<ExpandDimsOp, ReshapeOp>(def))
      return isa<scf::SCFDialect>(def->getDialect()) || isa<UnrealizedConversionCastOp>(def);
    v = def->getOperand(0);
  }
  return true;
}

} // namespace

void kiln::host::markLargeYields(ModuleOp module) {
  module.walk([](scf::YieldOp op) {
    Operation *loop = op->getParentOp();
    if (!isa<scf::ForOp, scf::WhileOp>(loop) || !llvm::any_of(op->getOperandTypes(), isLargeTile))
      return;
    auto forOp = dyn_cast<scf::ForOp>(loop);
    SmallVector<int32_t> copies;
    bool shared = false;
    for (auto [i, v] : llvm::enumerate(op->getOperands())) {
      bool unchanged = forOp && v == forOp.getRegionIterArgs()[i];
      copies.push_back(isLargeTile(v.getType()) && !unchanged ? 1 : 0);
      shared |= copies.back() && mayShareBuffer(v);
    }
    if (shared)
      for (int32_t &c : copies)
        c *= 2;
    op->setAttr(kYieldCopiesAttr, DenseI32ArrayAttr::get(op->getContext(), copies));
  });
}

void kiln::host::populateLargeTileToHostPatterns(TypeConverter &converter,
                                                 RewritePatternSet &patterns) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<LargeMakeRangeLowering, LargeSplatLowering, LargePermuteLowering<BroadcastOp>,
               LargePermuteLowering<TransOp>, LargeAddPtrLowering, LargePtrCastLowering,
               LargeElementwiseLowering, LargeYieldLowering>(converter, ctx);
}
