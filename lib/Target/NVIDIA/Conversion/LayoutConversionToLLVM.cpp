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
// Replicated elements are stored by all their owners with the same value.
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
