//===- LayoutConversionToLLVM.cpp - Moving tiles between threads ----------===//
//
// This file lowers the ops that move elements between threads: kiln_gpu.convert_layout,
// kiln.trans and kiln.reshape. Each goes through the shared scratch pool (SharedScratch.cpp):
//   [a barrier, when earlier reads of those bytes may be outstanding]; every thread stores
//   each element it owns of the source at the element's row-major index in the *result*
//   (trans permutes the coordinates first; reshape keeps the row-major index); barrier; every
//   thread loads the elements it owns of the result.
// Indices are padded by one element every 32 (index + index / 32), so that threads of a warp
// walking a column of a row-major tile (stride a multiple of 32 elements) hit distinct banks.
// Replicated elements are stored by all their owners with the same value. A 2-D conversion
// wide enough moves one band of columns at a time instead (convertInColumnBands: a band's
// scratch, rows padded by 16 bytes, each thread's runs of columns as vector accesses), so a
// dot's accumulator on its way to a coalesced store needs 16 KiB, not the whole tile.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

Value linearIndex(OpBuilder &b, Location loc, ArrayRef<Value> coords, ArrayRef<int64_t> strides) {
  Value index = i32Const(b, loc, 0);
  for (auto [c, s] : llvm::zip(coords, strides))
    index = LLVM::AddOp::create(b, loc, index, LLVM::MulOp::create(b, loc, c, i32Const(b, loc, s)));
  return index;
}

Value padded(OpBuilder &b, Location loc, Value index) {
  return LLVM::AddOp::create(b, loc, index,
                             LLVM::LShrOp::create(b, loc, index, i32Const(b, loc, 5)));
}

/// Moves `src` (laid out as `srcType`) to `dstType` through shared memory; `dstIndex` maps
/// the coordinates of a source element to its row-major index in the result.
Value convertThroughShared(ConversionPatternRewriter &rewriter, Location loc, Operation *op,
                           Value src, RankedTensorType srcType, RankedTensorType dstType,
                           const TypeConverter &converter, const SharedScratch &scratch,
                           const TargetInfo &target,
                           function_ref<Value(OpBuilder &, ArrayRef<Value>)> dstIndex) {
  Type elem = converter.convertType(dstType.getElementType());
  // Booleans travel as bytes.
  Type memElem = elem.isInteger(1) ? Type(rewriter.getI8Type()) : elem;
  Value buffer = scratch.getPart(rewriter, loc, op, 0); // n + n / 32 + 1 elements
  auto ptr3 = LLVM::LLVMPointerType::get(rewriter.getContext(), 3);
  auto address = [&](Value index) {
    return LLVM::GEPOp::create(rewriter, loc, ptr3, memElem, buffer,
                               ValueRange{padded(rewriter, loc, index)});
  };

  if (scratch.needsBarrierBefore(op))
    target.barrier(rewriter, loc);
  SmallVector<Value> values = unpackStruct(rewriter, loc, src);
  auto srcCoords = emitElementCoordinates(rewriter, loc, srcType, target);
  for (auto [v, coords] : llvm::zip(values, srcCoords)) {
    Value stored = memElem == elem ? v : LLVM::ZExtOp::create(rewriter, loc, memElem, v);
    LLVM::StoreOp::create(rewriter, loc, stored, address(dstIndex(rewriter, coords)));
  }
  target.barrier(rewriter, loc);
  SmallVector<int64_t> dstStrides = getRowMajorStrides(dstType.getShape());
  SmallVector<Value> results;
  for (auto &coords : emitElementCoordinates(rewriter, loc, dstType, target)) {
    Value v = LLVM::LoadOp::create(rewriter, loc, memElem,
                                   address(linearIndex(rewriter, loc, coords, dstStrides)));
    results.push_back(memElem == elem ? v : LLVM::TruncOp::create(rewriter, loc, elem, v));
  }
  return packStruct(rewriter, loc, converter.convertType(dstType), results);
}

/// Registers of `type`'s layout grouped into runs a thread may move with one vector access:
/// `width` consecutive columns of one row (the same repetitions, a sizePerThread block's
/// columns elem..elem + width - 1), each run listed by its registers in column order.
SmallVector<SmallVector<unsigned, 8>> columnRuns(ArrayRef<kgpu::ElemPos> pos, unsigned width) {
  DenseMap<std::tuple<unsigned, unsigned, unsigned, unsigned>, unsigned> at;
  for (auto [i, p] : llvm::enumerate(pos))
    at[{p.rep[0], p.elem[0], p.rep[1], p.elem[1]}] = i;
  SmallVector<SmallVector<unsigned, 8>> runs;
  for (const kgpu::ElemPos &p : pos) {
    if (p.elem[1] % width != 0)
      continue;
    SmallVector<unsigned, 8> run;
    for (unsigned k = 0; k < width; ++k)
      run.push_back(at.lookup({p.rep[0], p.elem[0], p.rep[1], p.elem[1] + k}));
    runs.push_back(std::move(run));
  }
  return runs;
}

/// Moves a 2-D tile from `srcType` to `dstType` through shared memory one band of columns
/// at a time (kgpu::planColumnBands): per band, [a barrier]; every thread stores the elements
/// it owns of the band's columns (row r at r * rowStride); barrier; every thread loads the
/// band's elements it owns in the result. A layout's column period divides the band width,
/// so which band a register falls in is known statically; each thread's run of consecutive
/// columns (sizePerThread, up to 16 bytes) moves as one vector access.
Value convertInColumnBands(ConversionPatternRewriter &rewriter, Location loc, Operation *op,
                           Value src, RankedTensorType srcType, RankedTensorType dstType,
                           const kgpu::ColumnBands &bands, const TypeConverter &converter,
                           const SharedScratch &scratch, const TargetInfo &target) {
  Type elem = converter.convertType(dstType.getElementType());
  Type memElem = elem.isInteger(1) ? Type(rewriter.getI8Type()) : elem;
  unsigned elemBytes = std::max(1u, memElem.getIntOrFloatBitWidth() / 8);
  Value buffer = scratch.getPart(rewriter, loc, op, 0); // rows * rowStride elements
  auto ptr3 = LLVM::LLVMPointerType::get(rewriter.getContext(), 3);
  ArrayRef<int64_t> shape = dstType.getShape();

  struct Side {
    SmallVector<kgpu::ElemPos> pos;
    SmallVector<SmallVector<Value, 4>> coords;
    SmallVector<SmallVector<unsigned, 8>> runs;
    int64_t tile1 = 0;
    unsigned width = 1;
  };
  auto side = [&](RankedTensorType type) {
    Side s;
    auto blocked = cast<kgpu::BlockedEncodingAttr>(type.getEncoding());
    s.pos = kgpu::getThreadElements(blocked, shape);
    s.coords = emitElementCoordinates(rewriter, loc, type, target);
    s.tile1 = int64_t(blocked.getSizePerThread()[1]) * blocked.getThreadsPerWarp()[1] *
              blocked.getWarpsPerCTA()[1];
    unsigned spt = std::min<int64_t>(blocked.getSizePerThread()[1], shape[1]);
    s.width = std::max(1u, std::min(spt, 16 / elemBytes));
    s.runs = columnRuns(s.pos, s.width);
    return s;
  };
  Side from = side(srcType), to = side(dstType);
  auto band = [&](const Side &s, unsigned reg) {
    return (int64_t(s.pos[reg].rep[1]) * s.tile1 + s.pos[reg].elem[1]) / bands.width;
  };
  // The address of (row, col) in band `b`.
  auto address = [&](ArrayRef<Value> coords, int64_t b) {
    Value row =
        LLVM::MulOp::create(rewriter, loc, coords[0], i32Const(rewriter, loc, bands.rowStride));
    Value col =
        LLVM::SubOp::create(rewriter, loc, coords[1], i32Const(rewriter, loc, b * bands.width));
    Value index = LLVM::AddOp::create(rewriter, loc, row, col);
    return LLVM::GEPOp::create(rewriter, loc, ptr3, memElem, buffer, ValueRange{index});
  };
  auto vecType = [&](unsigned width) -> Type {
    return width == 1 ? memElem : VectorType::get({int64_t(width)}, memElem);
  };

  SmallVector<Value> values = unpackStruct(rewriter, loc, src);
  SmallVector<Value> results(to.pos.size());
  for (int64_t b = 0; b < bands.count; ++b) {
    if (b > 0 || scratch.needsBarrierBefore(op))
      target.barrier(rewriter, loc);
    for (const auto &run : from.runs) {
      if (band(from, run[0]) != b)
        continue;
      Value stored;
      for (auto [k, reg] : llvm::enumerate(run)) {
        Value v = values[reg];
        if (memElem != elem)
          v = LLVM::ZExtOp::create(rewriter, loc, memElem, v);
        if (run.size() == 1) {
          stored = v;
          break;
        }
        if (!stored)
          stored = LLVM::PoisonOp::create(rewriter, loc, vecType(run.size()));
        stored = LLVM::InsertElementOp::create(rewriter, loc, stored, v,
                                               i32Const(rewriter, loc, int64_t(k)));
      }
      LLVM::StoreOp::create(rewriter, loc, stored, address(from.coords[run[0]], b),
                            run.size() * elemBytes);
    }
    target.barrier(rewriter, loc);
    for (const auto &run : to.runs) {
      if (band(to, run[0]) != b)
        continue;
      Value loaded = LLVM::LoadOp::create(rewriter, loc, vecType(run.size()),
                                          address(to.coords[run[0]], b), run.size() * elemBytes);
      for (auto [k, reg] : llvm::enumerate(run)) {
        Value v = run.size() == 1
                      ? loaded
                      : Value(LLVM::ExtractElementOp::create(rewriter, loc, loaded,
                                                             i32Const(rewriter, loc, int64_t(k))));
        results[reg] = memElem == elem ? v : LLVM::TruncOp::create(rewriter, loc, elem, v);
      }
    }
  }
  return packStruct(rewriter, loc, converter.convertType(dstType), results);
}

struct ConvertLayoutOpLowering final : ConvertOpToLLVMPattern<kgpu::ConvertLayoutOp> {
  ConvertLayoutOpLowering(const LLVMTypeConverter &converter, const SharedScratch &scratch,
                          const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), scratch(scratch), target(target) {}
  LogicalResult matchAndRewrite(kgpu::ConvertLayoutOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto srcType = cast<RankedTensorType>(op.getSrc().getType());
    auto dstType = cast<RankedTensorType>(op.getType());
    if (srcType == dstType) {
      rewriter.replaceOp(op, adaptor.getSrc());
      return success();
    }
    if (auto bands = kgpu::planColumnBands(srcType, dstType)) {
      rewriter.replaceOp(op, convertInColumnBands(rewriter, op.getLoc(), op, adaptor.getSrc(),
                                                  srcType, dstType, *bands, *getTypeConverter(),
                                                  scratch, target));
      return success();
    }
    SmallVector<int64_t> strides = getRowMajorStrides(dstType.getShape());
    rewriter.replaceOp(op, convertThroughShared(rewriter, op.getLoc(), op, adaptor.getSrc(),
                                                srcType, dstType, *getTypeConverter(), scratch,
                                                target, [&](OpBuilder &b, ArrayRef<Value> c) {
                                                  return linearIndex(b, op.getLoc(), c, strides);
                                                }));
    return success();
  }
  const SharedScratch &scratch;
  const TargetInfo &target;
};

struct TransOpLowering final : ConvertOpToLLVMPattern<TransOp> {
  TransOpLowering(const LLVMTypeConverter &converter, const SharedScratch &scratch,
                  const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), scratch(scratch), target(target) {}
  LogicalResult matchAndRewrite(TransOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto srcType = cast<RankedTensorType>(op.getSrc().getType());
    auto dstType = cast<RankedTensorType>(op.getType());
    ArrayRef<int32_t> order = op.getOrder();
    SmallVector<int64_t> strides = getRowMajorStrides(dstType.getShape());
    // Result dimension i is source dimension order[i].
    rewriter.replaceOp(op, convertThroughShared(rewriter, op.getLoc(), op, adaptor.getSrc(),
                                                srcType, dstType, *getTypeConverter(), scratch,
                                                target, [&](OpBuilder &b, ArrayRef<Value> c) {
                                                  SmallVector<Value> permuted;
                                                  for (int32_t d : order)
                                                    permuted.push_back(c[d]);
                                                  return linearIndex(b, op.getLoc(), permuted,
                                                                     strides);
                                                }));
    return success();
  }
  const SharedScratch &scratch;
  const TargetInfo &target;
};

struct ReshapeOpLowering final : ConvertOpToLLVMPattern<ReshapeOp> {
  ReshapeOpLowering(const LLVMTypeConverter &converter, const SharedScratch &scratch,
                    const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), scratch(scratch), target(target) {}
  LogicalResult matchAndRewrite(ReshapeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto srcType = cast<RankedTensorType>(op.getSrc().getType());
    auto dstType = cast<RankedTensorType>(op.getType());
    // Row-major order is kept: the source's row-major index is the result's.
    SmallVector<int64_t> strides = getRowMajorStrides(srcType.getShape());
    rewriter.replaceOp(op, convertThroughShared(rewriter, op.getLoc(), op, adaptor.getSrc(),
                                                srcType, dstType, *getTypeConverter(), scratch,
                                                target, [&](OpBuilder &b, ArrayRef<Value> c) {
                                                  return linearIndex(b, op.getLoc(), c, strides);
                                                }));
    return success();
  }
  const SharedScratch &scratch;
  const TargetInfo &target;
};

} // namespace

void kiln::populateLayoutConversionToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                                  RewritePatternSet &patterns,
                                                  const SharedScratch &scratch,
                                                  const TargetInfo &target) {
  patterns.add<ConvertLayoutOpLowering, TransOpLowering, ReshapeOpLowering>(converter, scratch,
                                                                            target);
}
