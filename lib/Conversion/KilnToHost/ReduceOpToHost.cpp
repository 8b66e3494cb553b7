//===- ReduceOpToHost.cpp - Reductions, scans and dot for the host ---------===//
//
// This file lowers kiln.reduce, kiln.scan and kiln.dot for the host backend.
// - reduce: log2(n) steps, each splitting the reduced axis in halves with two shuffles and
//   combining the halves with the combine region applied to whole vectors (its scalar ops
//   rebuilt with vector types).
// - scan: Hillis-Steele, log2(n) steps; step d combines every element with the one d before
//   it along the axis (after it when `reverse`), keeping lanes with no such element.
// - dot: operands and accumulator in stack memory; for each row i of the accumulator, a loop
//   over K adds a[i, k] * b[k, :] (a contiguous row of b) to the row held in registers
//   (inputs extended to the accumulator type; fp32 inputs rounded to tf32 as the tensor cores
//   do unless inputPrecision = ieee/tf32x3). Code size does not grow with the tile.
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
  auto vecOf = [&](Type scalar) { return VectorType::get({width}, converter.convertType(scalar)); };
  for (Operation &inner : block.without_terminator()) {
    if (auto cst = dyn_cast<arith::ConstantOp>(inner)) {
      auto type = vecOf(cst.getType());
      auto typed = dyn_cast<TypedAttr>(cst.getValue());
      if (!typed || isa<ShapedType>(typed.getType()))
        return inner.emitError("unsupported constant in a combine region on the host path");
      map.map(cst.getResult(),
              arith::ConstantOp::create(rewriter, loc, type, DenseElementsAttr::get(type, typed)));
      continue;
    }
    // tl.device_assert in a combine function (debug kernels; Triton's test_core checks a
    // reduction for overflow so): every lane's condition must hold.
    if (auto check = dyn_cast<AssertOp>(inner)) {
      Value cond = map.lookupOrNull(check.getCondition());
      if (!cond || !isa<VectorType>(cond.getType()))
        return inner.emitError("expected the condition of a device_assert in a combine region "
                               "to be computed in the region");
      emitAssertFailure(rewriter, loc, check,
                        LLVM::vector_reduce_and::create(rewriter, loc, rewriter.getI1Type(), cond));
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
    if (isLargeTile(srcTy)) {
      FailureOr<SmallVector<Value>> buffers = halveInMemory(rewriter, op, adaptor, shape, n);
      if (failed(buffers))
        return failure();
      if (n > kMaxRegisterTile) { // the reduced axis is gone, the result still large
        rewriter.replaceOp(op, *buffers);
        return success();
      }
      for (auto [v, src] : llvm::zip(*buffers, op.getSrcs()))
        cur.push_back(unpack(rewriter, loc, fromTileBuffer(rewriter, loc, v, n, elementOf(src))));
    } else {
      for (Value v : adaptor.getSrcs())
        cur.push_back(unpack(rewriter, loc, v));
    }
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
        results.push_back(
            pack(rewriter, loc, getTypeConverter()->convertType(res.getType()), chunks));
      } else {
        Value zero = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI32Type(),
                                              rewriter.getI32IntegerAttr(0));
        results.push_back(LLVM::ExtractElementOp::create(rewriter, loc, chunks[0], zero));
      }
    }
    rewriter.replaceOp(op, results);
    return success();
  }

  Type elementOf(Value v) const {
    return getTypeConverter()->convertType(getElementTypeOrSelf(v.getType()));
  }

  /// The halving steps of a large tile in memory, each one loop over the chunks of its result
  /// (as the register path: the lower and upper halves of the axis combined), until the tile
  /// fits in registers or the axis is gone; returns the buffers, `shape` and `n` updated.
  FailureOr<SmallVector<Value>> halveInMemory(ConversionPatternRewriter &rewriter, ReduceOp op,
                                              OpAdaptor adaptor, SmallVector<int64_t> &shape,
                                              int64_t &n) const {
    Location loc = op.getLoc();
    unsigned axis = op.getAxis();
    SmallVector<Value> buffers(adaptor.getSrcs());
    bool failedCombine = false;
    while (shape[axis] > 1 && n > kMaxRegisterTile) {
      SmallVector<int64_t> half = shape;
      half[axis] /= 2;
      SmallVector<int64_t> strides = getStrides(shape);
      int64_t upper = half[axis] * strides[axis], h = n / 2;
      SmallVector<Value> next;
      for (Value src : op.getSrcs())
        next.push_back(allocTileBuffer(rewriter, loc, op, h, elementOf(src)));
      forEachChunk(rewriter, loc, h, [&](OpBuilder &b, Location l, Value c) {
        SmallVector<Value> args;
        for (int upperHalf = 0; upperHalf < 2; ++upperHalf)
          for (auto [buf, src] : llvm::zip(buffers, op.getSrcs()))
            args.push_back(
                gatherPermuted(b, l, buf, elementOf(src), c, half, strides, upperHalf ? upper : 0));
        auto combined =
            applyCombine(rewriter, op, op.getCombineOp(), *getTypeConverter(), args, kChunk);
        if (failed(combined)) {
          failedCombine = true;
          return;
        }
        for (auto [buf, v] : llvm::zip(next, *combined))
          storeTileChunk(b, l, buf, c, v);
      });
      if (failedCombine)
        return failure();
      buffers = std::move(next);
      shape = half;
      n = h;
    }
    return buffers;
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
    if (isLargeTile(srcTy))
      return lowerLarge(rewriter, op, adaptor, len, stride);
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
          cur[i][c] =
              arith::SelectOp::create(rewriter, loc, keepMask, cur[i][c], (*combined)[i][c]);
      }
    }
    SmallVector<Value> results;
    for (auto [chunks, res] : llvm::zip(cur, op.getResults()))
      results.push_back(
          pack(rewriter, loc, getTypeConverter()->convertType(res.getType()), chunks));
    rewriter.replaceOp(op, results);
    return success();
  }

  /// Hillis-Steele on a large tile in memory: each step one loop over chunks, from the
  /// buffers of the step before into new ones; lanes without a partner `d` away keep theirs.
  LogicalResult lowerLarge(ConversionPatternRewriter &rewriter, ScanOp op, OpAdaptor adaptor,
                           int64_t len, int64_t stride) const {
    Location loc = op.getLoc();
    int64_t n = cast<RankedTensorType>(op.getSrcs()[0].getType()).getNumElements();
    bool reverse = op.getReverse();
    SmallVector<Type> elems;
    for (Value src : op.getSrcs())
      elems.push_back(getTypeConverter()->convertType(getElementTypeOrSelf(src.getType())));
    SmallVector<Value> buffers(adaptor.getSrcs());
    auto vecTy = VectorType::get({kChunk}, rewriter.getI32Type());
    auto cst = [&](OpBuilder &b, Location l, int64_t v) -> Value {
      return arith::ConstantOp::create(b, l, vecTy,
                                       DenseElementsAttr::get(vecTy, b.getI32IntegerAttr(v)));
    };
    bool failedCombine = false;
    for (int64_t d = 1; d < len && !failedCombine; d *= 2) {
      SmallVector<Value> next;
      for (Type elem : elems)
        next.push_back(allocTileBuffer(rewriter, loc, op, n, elem));
      forEachChunk(rewriter, loc, n, [&](OpBuilder &b, Location l, Value c) {
        Value lanes = getChunkLanes(b, l, c);
        Value coord = arith::RemUIOp::create(
            b, l, arith::DivUIOp::create(b, l, lanes, cst(b, l, stride)), cst(b, l, len));
        Value has =
            reverse ? arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult,
                                            arith::AddIOp::create(b, l, coord, cst(b, l, d)),
                                            cst(b, l, len))
                    : arith::CmpIOp::create(b, l, arith::CmpIPredicate::uge, coord, cst(b, l, d));
        Value moved = reverse
                          ? arith::AddIOp::create(b, l, lanes, cst(b, l, d * stride)).getResult()
                          : arith::SubIOp::create(b, l, lanes, cst(b, l, d * stride)).getResult();
        Value from = arith::SelectOp::create(b, l, has, moved, lanes);
        SmallVector<Value> args, cur;
        for (auto [buf, elem] : llvm::zip(buffers, elems))
          args.push_back(gatherElements(b, l, buf, elem, from));
        for (auto [buf, elem] : llvm::zip(buffers, elems))
          cur.push_back(loadTileChunk(b, l, buf, elem, c));
        args.append(cur.begin(), cur.end());
        auto combined =
            applyCombine(rewriter, op, op.getCombineOp(), *getTypeConverter(), args, kChunk);
        if (failed(combined)) {
          failedCombine = true;
          return;
        }
        for (auto [buf, v, old] : llvm::zip(next, *combined, cur))
          storeTileChunk(b, l, buf, c, arith::SelectOp::create(b, l, has, v, old));
      });
      buffers = std::move(next);
    }
    if (failedCombine)
      return failure();
    rewriter.replaceOp(op, buffers);
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
    // Large operands are buffers already (LargeTileToHost.cpp).
    if (isLargeTile(aTy))
      aBuf = adaptor.getA();
    else
      LLVM::StoreOp::create(rewriter, loc, adaptor.getA(), aBuf);
    if (isLargeTile(bTy))
      bBuf = adaptor.getB();
    else
      LLVM::StoreOp::create(rewriter, loc, adaptor.getB(), bBuf);
    // The accumulator lives in memory too, one row at a time in registers:
    //   for i: row = acc[i, :]; for kk: row += a[i, kk] * b[kk, :]; acc[i, :] = row
    // (contiguous vector loads of b's rows, code size independent of the tile).
    Type accTy = getTypeConverter()->convertType(cTy);
    Value accBuf;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPointToStart(&func.getFunctionBody().front());
      Value one = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI64Type(),
                                           rewriter.getI64IntegerAttr(1));
      accBuf = LLVM::AllocaOp::create(rewriter, loc, ptrTy, accTy, one, 64);
    }
    bool largeAcc = isLargeTile(cTy);
    if (largeAcc) {
      accBuf = allocTileBuffer(rewriter, loc, op, m * n, accElem);
      Value bytes = LLVM::ConstantOp::create(
          rewriter, loc, rewriter.getI64Type(),
          rewriter.getI64IntegerAttr(m * n * std::max(1u, accElem.getIntOrFloatBitWidth() / 8)));
      LLVM::MemcpyOp::create(rewriter, loc, accBuf, adaptor.getC(), bytes, /*isVolatile=*/false);
    } else {
      LLVM::StoreOp::create(rewriter, loc, adaptor.getC(), accBuf);
    }
    Type inElem = aTy.getElementType();
    int64_t w = std::min<int64_t>(n, kChunk);
    auto rowTy = VectorType::get({w}, accElem);
    auto inRowTy = VectorType::get({w}, inElem);
    unsigned accAlign = std::max(1u, accElem.getIntOrFloatBitWidth() / 8);
    unsigned inAlign = std::max(1u, inElem.getIntOrFloatBitWidth() / 8);
    auto cst = [&](OpBuilder &b, Location l, int64_t v) -> Value {
      return arith::ConstantOp::create(b, l, b.getI32IntegerAttr(int32_t(v)));
    };
    auto at = [&](OpBuilder &b, Location l, Value base, Type elem, Value index) -> Value {
      return LLVM::GEPOp::create(b, l, ptrTy, elem, base, ValueRange{index});
    };
    auto extend = [&](OpBuilder &b, Location l, Value v, Type to) -> Value {
      if (getElementTypeOrSelf(v.getType()) == accElem)
        return v;
      if (isFloat)
        return arith::ExtFOp::create(b, l, to, v);
      return arith::ExtSIOp::create(b, l, to, v);
    };
    // Columns [colStart, colStart + cols) of row i: held in registers over the loop over K.
    // A small tile's whole row is one such group; a large accumulator's row is a loop over
    // groups of one chunk (its row of up to 2^20 lanes would not fit in registers, nor its
    // unrolled code in LLVM's compile time).
    int64_t cols = largeAcc ? w : n;
    auto rowGroup = [&](OpBuilder &b, Location l, Value i, Value colStart) {
      Value rowStart =
          arith::AddIOp::create(b, l, arith::MulIOp::create(b, l, i, cst(b, l, n)), colStart);
      SmallVector<Value> row;
      for (int64_t c = 0; c < cols; c += w)
        row.push_back(LLVM::LoadOp::create(
            b, l, rowTy,
            at(b, l, accBuf, accElem, arith::AddIOp::create(b, l, rowStart, cst(b, l, c))),
            accAlign));
      Value aRow = arith::MulIOp::create(b, l, i, cst(b, l, k));
      auto kLoop = scf::ForOp::create(
          b, l, cst(b, l, 0), cst(b, l, k), cst(b, l, 1), row,
          [&](OpBuilder &kb, Location kl, Value kk, ValueRange iters) {
            Value aScalar = LLVM::LoadOp::create(
                kb, kl, inElem, at(kb, kl, aBuf, inElem, arith::AddIOp::create(kb, kl, aRow, kk)),
                inAlign);
            Value aVec = splat(kb, kl, aScalar, inRowTy);
            if (tf32)
              aVec = roundToTF32(kb, kl, aVec);
            aVec = extend(kb, kl, aVec, rowTy);
            Value bRow = arith::AddIOp::create(
                kb, kl, arith::MulIOp::create(kb, kl, kk, cst(kb, kl, n)), colStart);
            SmallVector<Value> next;
            for (auto [ci, acc] : llvm::enumerate(iters)) {
              Value bv = LLVM::LoadOp::create(
                  kb, kl, inRowTy,
                  at(kb, kl, bBuf, inElem,
                     arith::AddIOp::create(kb, kl, bRow, cst(kb, kl, int64_t(ci) * w))),
                  inAlign);
              if (tf32)
                bv = roundToTF32(kb, kl, bv);
              bv = extend(kb, kl, bv, rowTy);
              next.push_back(isFloat ? Value(math::FmaOp::create(kb, kl, aVec, bv, acc))
                                     : Value(arith::AddIOp::create(
                                           kb, kl, arith::MulIOp::create(kb, kl, aVec, bv), acc)));
            }
            scf::YieldOp::create(kb, kl, next);
          });
      for (auto [ci, v] : llvm::enumerate(kLoop.getResults()))
        LLVM::StoreOp::create(b, l, v,
                              at(b, l, accBuf, accElem,
                                 arith::AddIOp::create(b, l, rowStart, cst(b, l, int64_t(ci) * w))),
                              accAlign);
      if (largeAcc)
        disableUnrolling(kLoop);
    };
    auto rows = scf::ForOp::create(
        rewriter, loc, cst(rewriter, loc, 0), cst(rewriter, loc, m), cst(rewriter, loc, 1),
        ValueRange{}, [&](OpBuilder &b, Location l, Value i, ValueRange) {
          if (cols == n) {
            rowGroup(b, l, i, cst(b, l, 0));
          } else {
            auto groups =
                scf::ForOp::create(b, l, cst(b, l, 0), cst(b, l, n), cst(b, l, cols), ValueRange{},
                                   [&](OpBuilder &gb, Location gl, Value colStart, ValueRange) {
                                     rowGroup(gb, gl, i, colStart);
                                     scf::YieldOp::create(gb, gl);
                                   });
            disableUnrolling(groups);
          }
          scf::YieldOp::create(b, l);
        });
    if (largeAcc)
      disableUnrolling(rows);
    rewriter.replaceOp(
        op, largeAcc ? accBuf : LLVM::LoadOp::create(rewriter, loc, accTy, accBuf).getResult());
    return success();
  }
};

} // namespace

void kiln::host::populateReduceOpToHostPatterns(TypeConverter &converter,
                                                RewritePatternSet &patterns) {
  patterns.add<ReduceConversion, ScanConversion, DotConversion>(converter, patterns.getContext());
}
