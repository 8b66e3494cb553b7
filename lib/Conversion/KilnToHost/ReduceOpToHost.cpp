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

/// Applies the combine region chunk by chunk: `accs[i]` and `news[i]` are the chunks of
/// operand i (all of `n` elements); returns the chunks of each result.
FailureOr<SmallVector<SmallVector<Value>>>
combineChunks(ConversionPatternRewriter &rewriter, Operation *op, Region &region,
              const TypeConverter &converter, ArrayRef<SmallVector<Value>> accs,
              ArrayRef<SmallVector<Value>> news, int64_t n) {
  SmallVector<SmallVector<Value>> out(accs.size());
  for (size_t c = 0; c < accs[0].size(); ++c) {
    SmallVector<Value> args;
    for (auto &a : accs)
      args.push_back(a[c]);
    for (auto &v : news)
      args.push_back(v[c]);
    auto combined = applyCombine(rewriter, op, region, converter, args, getChunkWidth(n));
    if (failed(combined))
      return failure();
    for (auto [i, v] : llvm::enumerate(*combined))
      out[i].push_back(v);
  }
  return out;
}

struct ReduceConversion : OpConversionPattern<ReduceOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ReduceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto srcTy = cast<RankedTensorType>(op.getSrcs()[0].getType());
    unsigned axis = op.getAxis();
    SmallVector<int64_t> shape(srcTy.getShape());
    int64_t n = srcTy.getNumElements();
    SmallVector<SmallVector<Value>> cur;
    for (Value v : adaptor.getSrcs())
      cur.push_back(unpack(rewriter, loc, v));
    while (shape[axis] > 1) {
      SmallVector<int64_t> half = shape;
      half[axis] /= 2;
      SmallVector<int64_t> strides = getStrides(shape), halfStrides = getStrides(half);
      int64_t h = n / 2;
      SmallVector<int32_t> lo(h), hi(h);
      for (int64_t j = 0; j < h; ++j) {
        int64_t s = 0;
        for (size_t d = 0; d < half.size(); ++d)
          s += (j / halfStrides[d] % half[d]) * strides[d];
        lo[j] = int32_t(s);
        hi[j] = int32_t(s + half[axis] * strides[axis]);
      }
      SmallVector<SmallVector<Value>> los, his;
      for (auto &chunks : cur) {
        los.push_back(permute(rewriter, loc, chunks, n, lo));
        his.push_back(permute(rewriter, loc, chunks, n, hi));
      }
      auto combined =
          combineChunks(rewriter, op, op.getCombineOp(), *getTypeConverter(), los, his, h);
      if (failed(combined))
        return failure();
      cur = std::move(*combined);
      shape = half;
      n = h;
    }
    SmallVector<Value> results;
    for (auto [chunks, res] : llvm::zip(cur, op.getResults())) {
      if (isa<RankedTensorType>(res.getType())) {
        results.push_back(pack(rewriter, loc, getTypeConverter()->convertType(res.getType()),
                               chunks));
      } else {
        Value zero = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI32Type(),
                                              rewriter.getI32IntegerAttr(0));
        results.push_back(LLVM::ExtractElementOp::create(rewriter, loc, chunks[0], zero));
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
    int64_t n = srcTy.getNumElements(), len = shape[axis], w = getChunkWidth(n);
    int64_t stride = getStrides(shape)[axis];
    SmallVector<SmallVector<Value>> cur;
    for (Value v : adaptor.getSrcs())
      cur.push_back(unpack(rewriter, loc, v));
    auto maskTy = VectorType::get({w}, rewriter.getI1Type());
    for (int64_t d = 1; d < len; d *= 2) {
      SmallVector<int32_t> from(n);
      SmallVector<bool> keep(n);
      for (int64_t j = 0; j < n; ++j) {
        int64_t c = j / stride % len;
        bool has = reverse ? c + d < len : c >= d;
        keep[j] = !has;
        from[j] = int32_t(has ? (reverse ? j + d * stride : j - d * stride) : j);
      }
      SmallVector<SmallVector<Value>> shifted;
      for (auto &chunks : cur)
        shifted.push_back(permute(rewriter, loc, chunks, n, from));
      auto combined =
          combineChunks(rewriter, op, op.getCombineOp(), *getTypeConverter(), shifted, cur, n);
      if (failed(combined))
        return failure();
      for (int64_t c = 0; c * w < n; ++c) {
        Value keepMask = arith::ConstantOp::create(
            rewriter, loc, maskTy,
            DenseElementsAttr::get(maskTy, ArrayRef<bool>(keep).slice(c * w, w)));
        for (size_t i = 0; i < cur.size(); ++i)
          cur[i][c] = arith::SelectOp::create(rewriter, loc, keepMask, cur[i][c], (*combined)[i][c]);
      }
    }
    SmallVector<Value> results;
    for (auto [chunks, res] : llvm::zip(cur, op.getResults()))
      results.push_back(pack(rewriter, loc, getTypeConverter()->convertType(res.getType()), chunks));
    rewriter.replaceOp(op, results);
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
    // Per chunk of the accumulator: the offsets of a[i, 0] and b[0, j] of its lanes.
    int64_t w = getChunkWidth(m * n);
    auto i32Vec = VectorType::get({w}, rewriter.getI32Type());
    auto ptrVec = VectorType::get({w}, ptrTy);
    auto chunkAccTy = VectorType::get({w}, accElem);
    auto maskTy = VectorType::get({w}, rewriter.getI1Type());
    SmallVector<Value> aOffsets, bOffsets;
    for (int64_t c = 0; c < m * n; c += w) {
      SmallVector<int32_t> aRows, bCols;
      for (int64_t l = c; l < c + w; ++l) {
        aRows.push_back(int32_t(l / n * k));
        bCols.push_back(int32_t(l % n));
      }
      aOffsets.push_back(arith::ConstantOp::create(rewriter, loc, i32Vec,
                                                   DenseIntElementsAttr::get(i32Vec, aRows)));
      bOffsets.push_back(arith::ConstantOp::create(rewriter, loc, i32Vec,
                                                   DenseIntElementsAttr::get(i32Vec, bCols)));
    }
    Value aBase = splat(rewriter, loc, aBuf, ptrVec), bBase = splat(rewriter, loc, bBuf, ptrVec);
    Value all = arith::ConstantOp::create(rewriter, loc, maskTy, DenseElementsAttr::get(maskTy, true));
    Type accTy = getTypeConverter()->convertType(cTy);

    Value lb = arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(0));
    Value ub = arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(k));
    Value step = arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(1));
    auto loop = scf::ForOp::create(
        rewriter, loc, lb, ub, step, ValueRange{adaptor.getC()},
        [&](OpBuilder &b, Location l, Value kk, ValueRange iters) {
          Value kVec = splat(b, l, kk, i32Vec);
          Value nVec = splat(b, l, arith::ConstantOp::create(b, l, b.getI32IntegerAttr(n)), i32Vec);
          Value kRow = arith::MulIOp::create(b, l, kVec, nVec);
          auto load = [&](Value base, Value idx, Type elem) -> Value {
            Value ptrs = LLVM::GEPOp::create(b, l, ptrVec, elem, base, ValueRange{idx});
            auto t = VectorType::get({w}, elem);
            Value zero = LLVM::ZeroOp::create(b, l, t);
            return LLVM::masked_gather::create(b, l, t, ptrs, all, ValueRange{zero},
                                               std::max(1u, elem.getIntOrFloatBitWidth() / 8));
          };
          auto extend = [&](Value v) -> Value {
            Type e = getElementTypeOrSelf(v.getType());
            if (e == accElem)
              return v;
            if (isFloat)
              return arith::ExtFOp::create(b, l, chunkAccTy, v);
            return arith::ExtSIOp::create(b, l, chunkAccTy, v);
          };
          SmallVector<Value> accChunks = unpack(b, l, iters[0]), next;
          for (size_t c = 0; c < accChunks.size(); ++c) {
            Value av = load(aBase, arith::AddIOp::create(b, l, aOffsets[c], kVec), aTy.getElementType());
            Value bv = load(bBase, arith::AddIOp::create(b, l, bOffsets[c], kRow), bTy.getElementType());
            if (tf32) {
              av = roundToTF32(b, l, av);
              bv = roundToTF32(b, l, bv);
            }
            av = extend(av);
            bv = extend(bv);
            Value acc = accChunks[c];
            next.push_back(isFloat ? Value(math::FmaOp::create(b, l, av, bv, acc))
                                   : Value(arith::AddIOp::create(
                                         b, l, arith::MulIOp::create(b, l, av, bv), acc)));
          }
          scf::YieldOp::create(b, l, pack(b, l, accTy, next));
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
