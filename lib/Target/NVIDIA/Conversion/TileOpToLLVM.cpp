//===- TileOpToLLVM.cpp - Grid, range and shape ops to LLVM ---------------===//
//
// This file implements the lowering of program_id, num_programs, make_range, splat, broadcast
// and expand_dims. Broadcast and expand_dims move no data: under the shared root layout, each
// owned element of the result is an owned element of the source, found statically by its
// (repetition, element) position. (Ops that move data between threads are in
// LayoutConversionToLLVM.cpp.)
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

/// Maps each owned element of `dst` to the index of the owned element of `src` it reads,
/// given how a dst position maps to a src position.
FailureOr<SmallVector<unsigned>>
mapElements(RankedTensorType src, RankedTensorType dst,
            function_ref<kgpu::ElemPos(const kgpu::ElemPos &)> toSrc) {
  llvm::StringMap<unsigned> srcIndex;
  for (auto [i, p] : llvm::enumerate(kgpu::getThreadElements(src.getEncoding(), src.getShape())))
    srcIndex.try_emplace(getElemPosKey(p), i);
  SmallVector<unsigned> map;
  for (const kgpu::ElemPos &p : kgpu::getThreadElements(dst.getEncoding(), dst.getShape())) {
    auto it = srcIndex.find(getElemPosKey(toSrc(p)));
    if (it == srcIndex.end())
      return failure();
    map.push_back(it->second);
  }
  return map;
}

template <typename OpTy> struct GridOpLowering final : ConvertOpToLLVMPattern<OpTy> {
  GridOpLowering(const LLVMTypeConverter &converter, const TargetInfo &target, bool isId)
      : ConvertOpToLLVMPattern<OpTy>(converter), target(target), isId(isId) {}
  LogicalResult matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    unsigned axis = static_cast<unsigned>(op.getAxis());
    Value v = isId ? target.getProgramId(rewriter, op.getLoc(), axis)
                   : target.getNumPrograms(rewriter, op.getLoc(), axis);
    rewriter.replaceOp(op, v);
    return success();
  }
  const TargetInfo &target;
  bool isId;
};

struct MakeRangeOpLowering final : ConvertOpToLLVMPattern<MakeRangeOp> {
  MakeRangeOpLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}
  LogicalResult matchAndRewrite(MakeRangeOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto coords = emitElementCoordinates(rewriter, loc, op.getType(), target);
    SmallVector<Value> fields;
    Value start = i32Const(rewriter, loc, op.getStart());
    for (auto &c : coords)
      fields.push_back(LLVM::AddOp::create(rewriter, loc, c[0], start));
    rewriter.replaceOp(
        op, packStruct(rewriter, loc, getTypeConverter()->convertType(op.getType()), fields));
    return success();
  }
  const TargetInfo &target;
};

struct SplatOpLowering final : ConvertOpToLLVMPattern<SplatOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(SplatOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type structType = getTypeConverter()->convertType(op.getType());
    if (!structType)
      return rewriter.notifyMatchFailure(op, "tile has no layout");
    unsigned n = kgpu::getElemsPerThread(op.getType());
    SmallVector<Value> fields(n, adaptor.getSrc());
    rewriter.replaceOp(op, packStruct(rewriter, op.getLoc(), structType, fields));
    return success();
  }
};

/// Shared by broadcast and expand_dims: gather source fields into the result's order.
LogicalResult rewriteAsGather(Operation *op, Value srcStruct, RankedTensorType src,
                              RankedTensorType dst, ArrayRef<unsigned> map,
                              const TypeConverter *converter, ConversionPatternRewriter &rewriter) {
  SmallVector<Value> srcFields = unpackStruct(rewriter, op->getLoc(), srcStruct);
  SmallVector<Value> fields;
  for (unsigned i : map)
    fields.push_back(srcFields[i]);
  rewriter.replaceOp(op, packStruct(rewriter, op->getLoc(), converter->convertType(dst), fields));
  return success();
}

struct BroadcastOpLowering final : ConvertOpToLLVMPattern<BroadcastOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(BroadcastOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType src = op.getSrc().getType(), dst = op.getType();
    if (src.getEncoding() != dst.getEncoding())
      return rewriter.notifyMatchFailure(op, "source and result layouts differ");
    // A stretched dimension has one element in the source: repetition 0, element 0.
    auto map = mapElements(src, dst, [&](const kgpu::ElemPos &p) {
      kgpu::ElemPos q = p;
      for (unsigned d = 0; d < q.rep.size(); ++d)
        if (src.getDimSize(d) == 1)
          q.rep[d] = q.elem[d] = 0;
      return q;
    });
    if (failed(map))
      return rewriter.notifyMatchFailure(op, "element not owned by the same thread");
    return rewriteAsGather(op, adaptor.getSrc(), src, dst, *map, getTypeConverter(), rewriter);
  }
};

struct ExpandDimsOpLowering final : ConvertOpToLLVMPattern<ExpandDimsOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(ExpandDimsOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    RankedTensorType src = op.getSrc().getType(), dst = op.getType();
    auto slice = dyn_cast_or_null<kgpu::SliceEncodingAttr>(src.getEncoding());
    unsigned axis = op.getAxis();
    if (!slice || slice.getDim() != axis || slice.getParent() != dst.getEncoding())
      return rewriter.notifyMatchFailure(op, "source layout is not the slice of the result's");
    // The new unit dimension has one element per thread: drop it to find the source.
    auto map = mapElements(src, dst, [&](const kgpu::ElemPos &p) {
      kgpu::ElemPos q = p;
      q.rep.erase(q.rep.begin() + axis);
      q.elem.erase(q.elem.begin() + axis);
      return q;
    });
    if (failed(map))
      return rewriter.notifyMatchFailure(op, "element not owned by the same thread");
    return rewriteAsGather(op, adaptor.getSrc(), src, dst, *map, getTypeConverter(), rewriter);
  }
};

} // namespace

void kiln::populateTileOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                        RewritePatternSet &patterns, const TargetInfo &target) {
  patterns.add<GridOpLowering<ProgramIdOp>>(converter, target, /*isId=*/true);
  patterns.add<GridOpLowering<NumProgramsOp>>(converter, target, /*isId=*/false);
  patterns.add<MakeRangeOpLowering>(converter, target);
  patterns.add<SplatOpLowering, BroadcastOpLowering, ExpandDimsOpLowering>(converter);
}
