//===- ReduceOpToHost.cpp - Reductions, scans and dot for the host ---------===//
//
// This file lowers kiln.reduce, kiln.scan and kiln.dot for the host backend.
// - reduce: log2(n) steps, each splitting the reduced axis in halves with two shuffles and
//   combining the halves with the combine region applied to whole vectors (its scalar ops
//   rebuilt with vector types).
// - scan: Hillis-Steele, log2(n) steps; step d combines every element with the one d before
//   it along the axis (after it when `reverse`), keeping lanes with no such element.
// - dot: an scf.for over K; each step gathers column k of `a` and row k of `b` broadcast to
//   the MxN accumulator and adds their product (inputs extended to the accumulator type;
//   fp32 inputs rounded to tf32 as the tensor cores do unless inputPrecision = ieee/tf32x3).
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/KilnToHost.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::host;

namespace {

/// Applies the combine region of `op` to vectors of `width` lanes: block arguments bound to
/// `args` (accumulators, then new values); returns the yielded values.
FailureOr<SmallVector<Value>> applyCombine(ConversionPatternRewriter &rewriter, Operation *op,
                                           Region &region, const TypeConverter &converter,
                                           ValueRange args, int64_t width) {
  Block &block = region.front();
  IRMapping map;
  for (auto [arg, v] : llvm::zip(block.getArguments(), args))
    map.map(arg, v);
  Location loc = op->getLoc();
  auto vecOf = [&](Type scalar) {
    return VectorType::get({width}, converter.convertType(scalar));
  };
  for (Operation &inner : block.without_terminator()) {
    if (auto cst = dyn_cast<arith::ConstantOp>(inner)) {
      auto type = vecOf(cst.getType());
      auto typed = dyn_cast<TypedAttr>(cst.getValue());
      if (!typed || isa<ShapedType>(typed.getType()))
        return inner.emitError("unsupported constant in a combine region on the host path");
      map.map(cst.getResult(), arith::ConstantOp::create(
                                   rewriter, loc, type, DenseElementsAttr::get(type, typed)));
      continue;
    }
    if (!isa<arith::ArithDialect, math::MathDialect>(inner.getDialect()) ||
        inner.getNumRegions() != 0)
      return inner.emitError() << "'" << inner.getName()
                               << "' in a combine region is not supported on the host path "
                                  "(expected arith and math ops)";
    SmallVector<Value> operands;
    for (Value v : inner.getOperands()) {
      if (Value mapped = map.lookupOrNull(v)) {
        operands.push_back(mapped);
        continue;
      }
      // A scalar from outside the region: the same in every lane.
      Value outer = rewriter.getRemappedValue(v);
      if (!outer)
        return inner.emitError("cannot use this value in a combine region on the host path");
      operands.push_back(splat(rewriter, loc, outer, vecOf(v.getType())));
    }
    SmallVector<Type> types;
    for (Type t : inner.getResultTypes())
      types.push_back(vecOf(t));
    OperationState state(inner.getLoc(), inner.getName(), operands, types, inner.getAttrs());
    Operation *created = rewriter.create(state);
    map.map(inner.getResults(), created->getResults());
  }
  SmallVector<Value> results;
  for (Value v : block.getTerminator()->getOperands())
    results.push_back(map.lookup(v));
  return results;
}

struct ReduceConversion : OpConversionPattern<ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ReduceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto srcTy = cast<RankedTensorType>(op.getSrcs()[0].getType());
    unsigned axis = op.getAxis();
    SmallVector<int64_t> shape(srcTy.getShape());
    SmallVector<Value> cur(adaptor.getSrcs());
    while (shape[axis] > 1) {
      SmallVector<int64_t> half = shape;
      half[axis] /= 2;
      SmallVector<int64_t> strides = getStrides(shape), halfStrides = getStrides(half);
      int64_t n = 1;
      for (int64_t d : half)
        n *= d;
      SmallVector<int32_t> lo(n), hi(n);
      for (int64_t j = 0; j < n; ++j) {
        int64_t s = 0;
        for (size_t d = 0; d < half.size(); ++d)
          s += (j / halfStrides[d] % half[d]) * strides[d];
        lo[j] = int32_t(s);
        hi[j] = int32_t(s + half[axis] * strides[axis]);
      }
      SmallVector<Value> args;
      for (Value v : cur)
        args.push_back(shuffle(rewriter, loc, v, lo));
      for (Value v : cur)
        args.push_back(shuffle(rewriter, loc, v, hi));
      auto combined =
          applyCombine(rewriter, op, op.getCombineOp(), *getTypeConverter(), args, n);
      if (failed(combined))
        return failure();
      cur = *combined;
      shape = half;
    }
    SmallVector<Value> results;
    for (auto [v, res] : llvm::zip(cur, op.getResults())) {
      if (isa<RankedTensorType>(res.getType())) {
        results.push_back(v);
      } else {
        Value zero =
            LLVM::ConstantOp::create(rewriter, loc, rewriter.getI32Type(), rewriter.getI32IntegerAttr(0));
        results.push_back(LLVM::ExtractElementOp::create(rewriter, loc, v, zero));
      }
    }
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct ScanConversion : OpConversionPattern<ScanOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ScanOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto srcTy = cast<RankedTensorType>(op.getSrcs()[0].getType());
    unsigned axis = op.getAxis();
    bool reverse = op.getReverse();
    ArrayRef<int64_t> shape = srcTy.getShape();
    int64_t n = srcTy.getNumElements(), len = shape[axis];
    int64_t stride = getStrides(shape)[axis];
    SmallVector<Value> cur(adaptor.getSrcs());
    for (int64_t d = 1; d < len; d *= 2) {
      SmallVector<int32_t> from(n);
      SmallVector<bool> keep(n);
      for (int64_t j = 0; j < n; ++j) {
        int64_t c = j / stride % len;
        bool has = reverse ? c + d < len : c >= d;
        keep[j] = !has;
        from[j] = int32_t(has ? (reverse ? j + d * stride : j - d * stride) : j);
      }
      SmallVector<Value> args;
      for (Value v : cur)
        args.push_back(shuffle(rewriter, loc, v, from));
      for (Value v : cur)
        args.push_back(v);
      auto combined =
          applyCombine(rewriter, op, op.getCombineOp(), *getTypeConverter(), args, n);
      if (failed(combined))
        return failure();
      auto maskTy = VectorType::get({n}, rewriter.getI1Type());
      Value keepMask = arith::ConstantOp::create(rewriter, loc, maskTy,
                                                 DenseElementsAttr::get(maskTy, keep));
      for (size_t i = 0; i < cur.size(); ++i)
        cur[i] = arith::SelectOp::create(rewriter, loc, keepMask, cur[i], (*combined)[i]);
    }
    rewriter.replaceOp(op, cur);
    return success();
  }
};

/// Rounds fp32 lanes to tf32 (10 mantissa bits, to nearest with ties away from zero, as
/// cvt.rna.tf32.f32 does); infinities and NaNs pass unchanged.
Value roundToTF32(OpBuilder &b, Location loc, Value x) {
  auto vecTy = cast<VectorType>(x.getType());
  auto intTy = VectorType::get(vecTy.getShape(), b.getI32Type());
  auto cst = [&](uint32_t v) {
    return arith::ConstantOp::create(b, loc, intTy,
                                     DenseElementsAttr::get(intTy, b.getI32IntegerAttr(v)));
  };
  Value bits = arith::BitcastOp::create(b, loc, intTy, x);
  Value rounded = arith::AndIOp::create(b, loc, arith::AddIOp::create(b, loc, bits, cst(0x1000)),
                                        cst(0xFFFFE000u));
  Value exponent = arith::AndIOp::create(b, loc, bits, cst(0x7F800000u));
  Value finite =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, exponent, cst(0x7F800000u));
  Value out = arith::SelectOp::create(b, loc, finite, rounded, bits);
  return arith::BitcastOp::create(b, loc, vecTy, out);
}

struct DotConversion : OpConversionPattern<DotOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(DotOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto aTy = cast<RankedTensorType>(op.getA().getType());
    auto bTy = cast<RankedTensorType>(op.getB().getType());
    auto cTy = cast<RankedTensorType>(op.getC().getType());
    if (aTy.getRank() != 2)
      return op.emitError("only 2-D dot is supported on the host path");
    int64_t m = aTy.getDimSize(0), k = aTy.getDimSize(1), n = bTy.getDimSize(1);
    Type accElem = cTy.getElementType();
    auto accTy = VectorType::get({m * n}, accElem);
    auto ptrTy = LLVM::LLVMPointerType::get(getContext());
    bool isFloat = isa<FloatType>(accElem);
    bool tf32 = aTy.getElementType().isF32() && op.getInputPrecision() == InputPrecision::tf32;

    // Both operands in stack memory (entry-block allocas), gathered from per step.
    auto func = op->getParentOfType<FunctionOpInterface>();
    Value aBuf, bBuf;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(&func.getFunctionBody().front());
      Value one = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI64Type(),
                                           rewriter.getI64IntegerAttr(1));
      aBuf = LLVM::AllocaOp::create(rewriter, loc, ptrTy, adaptor.getA().getType(), one, 64);
      bBuf = LLVM::AllocaOp::create(rewriter, loc, ptrTy, adaptor.getB().getType(), one, 64);
    }
    LLVM::StoreOp::create(rewriter, loc, adaptor.getA(), aBuf);
    LLVM::StoreOp::create(rewriter, loc, adaptor.getB(), bBuf);
    auto i32Vec = VectorType::get({m * n}, rewriter.getI32Type());
    SmallVector<int32_t> aRows(m * n), bCols(m * n);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        aRows[i * n + j] = int32_t(i * k);
        bCols[i * n + j] = int32_t(j);
      }
    Value aOffsets = arith::ConstantOp::create(rewriter, loc, i32Vec,
                                               DenseIntElementsAttr::get(i32Vec, aRows));
    Value bOffsets = arith::ConstantOp::create(rewriter, loc, i32Vec,
                                               DenseIntElementsAttr::get(i32Vec, bCols));
    auto ptrVec = VectorType::get({m * n}, ptrTy);
    Value aBase = splat(rewriter, loc, aBuf, ptrVec), bBase = splat(rewriter, loc, bBuf, ptrVec);
    auto maskTy = VectorType::get({m * n}, rewriter.getI1Type());
    Value all = arith::ConstantOp::create(rewriter, loc, maskTy, DenseElementsAttr::get(maskTy, true));

    Value lb = arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(0));
    Value ub = arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(k));
    Value step = arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(1));
    auto loop = scf::ForOp::create(
        rewriter, loc, lb, ub, step, ValueRange{adaptor.getC()},
        [&](OpBuilder &b, Location l, Value kk, ValueRange iters) {
          Value kVec = splat(b, l, kk, i32Vec);
          Value nVec = splat(b, l, arith::ConstantOp::create(b, l, b.getI32IntegerAttr(n)), i32Vec);
          Value aIdx = arith::AddIOp::create(b, l, aOffsets, kVec);
          Value bIdx = arith::AddIOp::create(b, l, bOffsets, arith::MulIOp::create(b, l, kVec, nVec));
          auto load = [&](Value base, Value idx, Type elem) -> Value {
            Value ptrs = LLVM::GEPOp::create(b, l, ptrVec, elem, base, ValueRange{idx});
            auto t = VectorType::get({m * n}, elem);
            Value zero = LLVM::ZeroOp::create(b, l, t);
            return LLVM::masked_gather::create(b, l, t, ptrs, all, ValueRange{zero},
                                               std::max(1u, elem.getIntOrFloatBitWidth() / 8));
          };
          Value av = load(aBase, aIdx, aTy.getElementType());
          Value bv = load(bBase, bIdx, bTy.getElementType());
          auto extend = [&](Value v) -> Value {
            Type e = getElementTypeOrSelf(v.getType());
            if (e == accElem)
              return v;
            if (isFloat)
              return arith::ExtFOp::create(b, l, accTy, v);
            return arith::ExtSIOp::create(b, l, accTy, v);
          };
          if (tf32) {
            av = roundToTF32(b, l, av);
            bv = roundToTF32(b, l, bv);
          }
          av = extend(av);
          bv = extend(bv);
          Value acc = iters[0];
          Value next = isFloat ? Value(math::FmaOp::create(b, l, av, bv, acc))
                               : Value(arith::AddIOp::create(
                                     b, l, arith::MulIOp::create(b, l, av, bv), acc));
          scf::YieldOp::create(b, l, next);
        });
    rewriter.replaceOp(op, loop.getResult(0));
    return success();
  }
};

} // namespace

void kiln::host::populateReduceOpToHostPatterns(TypeConverter &converter,
                                                RewritePatternSet &patterns) {
  patterns.add<ReduceConversion, ScanConversion, DotConversion>(converter,
                                                                patterns.getContext());
}
