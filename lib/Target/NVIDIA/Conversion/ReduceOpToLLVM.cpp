//===- ReduceOpToLLVM.cpp - kiln.reduce to LLVM ---------------------------===//
//
// This file implements the lowering of kiln.reduce on laid-out tiles in three steps:
//  1. in thread: the owned elements that differ only along the axis are combined in order;
//  2. in warp: butterfly shuffles over the lane bits of the axis (log2 of the lanes that hold
//     distinct elements; lanes beyond them replicate and end with the same total);
//  3. across warps (when several warps hold distinct parts of the axis): each warp writes its
//     partial to shared memory at [result position][warp], a barrier, every thread reads the
//     partials of its positions back and combines them in warp order. The partials live in the
//     shared scratch pool (SharedScratch.cpp sizes them and says whether a barrier must come
//     first, because earlier reads of the same bytes may be outstanding).
// The combine region is cloned for every step, so any user combine function works, with
// several operands (argmax) as well.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

/// Applies the combine region of `op` to accumulators `acc` and new values `next`.
SmallVector<Value> combine(ConversionPatternRewriter &rewriter, ReduceOp op, ArrayRef<Value> acc,
                           ArrayRef<Value> next) {
  return applyCombineRegion(rewriter, op.getCombineOp(), acc, next);
}

struct ReduceOpLowering final : ConvertOpToLLVMPattern<ReduceOp> {
  ReduceOpLowering(const LLVMTypeConverter &converter, const SharedScratch &scratch,
                   const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), scratch(scratch), target(target) {}

  LogicalResult matchAndRewrite(ReduceOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto srcType = cast<RankedTensorType>(op.getSrcs()[0].getType());
    Attribute layout = srcType.getEncoding();
    if (!layout)
      return rewriter.notifyMatchFailure(op, "operand has no layout");
    unsigned axis = op.getAxis(), numOperands = op.getSrcs().size();
    ArrayRef<int64_t> shape = srcType.getShape();
    SmallVector<kgpu::ElemPos> elems = kgpu::getThreadElements(layout, shape);
    SmallVector<SmallVector<Value>> fields;
    for (Value src : adaptor.getSrcs())
      fields.push_back(unpackStruct(rewriter, loc, src));

    // 1. In thread.
    llvm::StringMap<unsigned> groupIndex;
    SmallVector<SmallVector<Value>> acc; // per group, per operand
    SmallVector<unsigned> firstElem;     // an element of each group (for its coordinates)
    for (auto [i, pos] : llvm::enumerate(elems)) {
      SmallVector<Value> vals;
      for (unsigned k = 0; k < numOperands; ++k)
        vals.push_back(fields[k][i]);
      auto [it, inserted] = groupIndex.try_emplace(getElemPosKey(pos, axis), acc.size());
      if (inserted) {
        acc.push_back(vals);
        firstElem.push_back(i);
      } else {
        acc[it->second] = combine(rewriter, op, acc[it->second], vals);
      }
    }

    // 2. In warp: lanes along the axis that hold distinct elements.
    kgpu::BlockedEncodingAttr root = kgpu::getRootBlocked(layout);
    unsigned rootAxis = kgpu::getKeptDims(layout)[axis];
    unsigned spt = root.getSizePerThread()[rootAxis], tpw = root.getThreadsPerWarp()[rootAxis];
    unsigned laneStride = 1;
    for (unsigned d : root.getOrder()) {
      if (d == rootAxis)
        break;
      laneStride *= root.getThreadsPerWarp()[d];
    }
    int64_t perThread = std::min<int64_t>(spt, shape[axis]);
    unsigned distinctLanes = std::min<int64_t>(tpw, std::max<int64_t>(1, shape[axis] / perThread));
    for (unsigned m = 1; m < distinctLanes; m <<= 1)
      for (auto &a : acc) {
        SmallVector<Value> other;
        for (Value v : a)
          other.push_back(target.shuffleXor(rewriter, loc, v, m * laneStride));
        a = combine(rewriter, op, a, other);
      }

    // 3. Across warps.
    unsigned distinctWarps = kgpu::getDistinctWarpsAlongAxis(srcType, axis);
    if (distinctWarps > 1) {
      auto coords = emitElementCoordinates(rewriter, loc, srcType, target);
      kiln::ThreadIds ids = emitThreadIds(rewriter, loc, root, target);
      // Warps beyond the distinct ones replicate a lower warp: they write the same values.
      Value warpAlongAxis = LLVM::AndOp::create(rewriter, loc, ids.warp[rootAxis],
                                                i32Const(rewriter, loc, distinctWarps - 1));
      SmallVector<Value> linear;
      for (unsigned g = 0; g < acc.size(); ++g) {
        Value lin = i32Const(rewriter, loc, 0);
        for (unsigned d = 0; d < shape.size(); ++d)
          if (d != axis)
            lin = LLVM::AddOp::create(
                rewriter, loc,
                LLVM::MulOp::create(rewriter, loc, lin, i32Const(rewriter, loc, shape[d])),
                coords[firstElem[g]][d]);
        linear.push_back(
            LLVM::MulOp::create(rewriter, loc, lin, i32Const(rewriter, loc, distinctWarps)));
      }
      Type ptrTy = LLVM::LLVMPointerType::get(getContext(), 3);
      SmallVector<Value> buffers; // [positions][distinctWarps] partials per operand
      for (unsigned k = 0; k < numOperands; ++k)
        buffers.push_back(scratch.getPart(rewriter, loc, op, k));
      if (scratch.needsBarrierBefore(op))
        target.barrier(rewriter, loc);
      for (unsigned g = 0; g < acc.size(); ++g)
        for (unsigned k = 0; k < numOperands; ++k) {
          Value idx = LLVM::AddOp::create(rewriter, loc, linear[g], warpAlongAxis);
          Value p = LLVM::GEPOp::create(rewriter, loc, ptrTy, acc[g][k].getType(), buffers[k],
                                        ValueRange{idx});
          LLVM::StoreOp::create(rewriter, loc, acc[g][k], p);
        }
      target.barrier(rewriter, loc);
      for (unsigned g = 0; g < acc.size(); ++g) {
        SmallVector<Value> total;
        for (unsigned w = 0; w < distinctWarps; ++w) {
          SmallVector<Value> part;
          for (unsigned k = 0; k < numOperands; ++k) {
            Type elemTy = acc[g][k].getType();
            Value idx = LLVM::AddOp::create(rewriter, loc, linear[g], i32Const(rewriter, loc, w));
            Value p =
                LLVM::GEPOp::create(rewriter, loc, ptrTy, elemTy, buffers[k], ValueRange{idx});
            part.push_back(LLVM::LoadOp::create(rewriter, loc, elemTy, p));
          }
          total = w == 0 ? part : combine(rewriter, op, total, part);
        }
        acc[g] = total;
      }
    }

    // Results: a scalar from a 1-D operand, else the sliced tile.
    SmallVector<Value> results;
    for (unsigned k = 0; k < numOperands; ++k) {
      auto resType = dyn_cast<RankedTensorType>(op->getResult(k).getType());
      if (!resType) {
        results.push_back(acc[0][k]);
        continue;
      }
      SmallVector<Value> out;
      for (const kgpu::ElemPos &p :
           kgpu::getThreadElements(resType.getEncoding(), resType.getShape())) {
        kgpu::ElemPos full = p;
        full.rep.insert(full.rep.begin() + axis, 0);
        full.elem.insert(full.elem.begin() + axis, 0);
        auto it = groupIndex.find(getElemPosKey(full, axis));
        if (it == groupIndex.end())
          return rewriter.notifyMatchFailure(op, "result element not owned by this thread");
        out.push_back(acc[it->second][k]);
      }
      results.push_back(packStruct(rewriter, loc, getTypeConverter()->convertType(resType), out));
    }
    rewriter.replaceOp(op, results);
    return success();
  }
  const SharedScratch &scratch;
  const TargetInfo &target;
};

} // namespace

void kiln::populateReduceOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                          RewritePatternSet &patterns, const SharedScratch &scratch,
                                          const TargetInfo &target) {
  patterns.add<ReduceOpLowering>(converter, scratch, target);
}
