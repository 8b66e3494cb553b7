//===- ScanOpToLLVM.cpp - kiln.scan on the GPU ----------------------------===//
//
// This file lowers kiln.scan (inclusive prefix scans along one axis, any combine region, any
// number of operands, forward or reverse) for the GPU, Hillis-Steele through shared memory:
// for d = 1, 2, 4, ... < the axis length, every thread publishes its elements at their
// row-major index (padded by index / 32), a barrier, then combines each element with the one
// d before it along the axis (d after it when reversed), where there is one, a barrier. After
// log2(n) rounds each element holds the combination of its whole prefix (suffix), in order:
// combine(earlier, later) for forward scans, combine(later, earlier) for reverse ones, as
// Triton's (flip, scan, flip) defines them. Replicated elements are computed identically by
// all their owners. Simple and general; a warp-shuffle version is the faster follow-up. The
// buffers are parts of the shared scratch pool; the first round's leading barrier is there
// only when SharedScratch's analysis finds earlier reads of those bytes outstanding.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"

using namespace mlir;
using namespace kiln;

namespace {

struct ScanOpLowering final : ConvertOpToLLVMPattern<ScanOp> {
  ScanOpLowering(const LLVMTypeConverter &converter, const SharedScratch &scratch,
                 const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), scratch(scratch), target(target) {}

  LogicalResult matchAndRewrite(ScanOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(op.getSrcs()[0].getType());
    unsigned axis = op.getAxis();
    bool reverse = op.getReverse();
    ArrayRef<int64_t> shape = type.getShape();
    int64_t len = shape[axis];
    int64_t stride = 1;
    for (unsigned d = axis + 1; d < shape.size(); ++d)
      stride *= shape[d];

    unsigned numOperands = op.getSrcs().size();
    SmallVector<SmallVector<Value>> vals;
    SmallVector<Type> elems, memElems;
    SmallVector<Value> buffers;
    for (unsigned k = 0; k < numOperands; ++k) {
      vals.push_back(unpackStruct(rewriter, loc, adaptor.getSrcs()[k]));
      Type elem = getTypeConverter()->convertType(
          cast<RankedTensorType>(op.getSrcs()[k].getType()).getElementType());
      Type mem = elem.isInteger(1) ? Type(rewriter.getI8Type()) : elem;
      elems.push_back(elem);
      memElems.push_back(mem);
      if (len > 1) // n + n / 32 + 1 elements; a scan of length 1 moves nothing
        buffers.push_back(scratch.getPart(rewriter, loc, op, k));
    }
    auto coords = emitElementCoordinates(rewriter, loc, type, target);
    SmallVector<int64_t> strides = getRowMajorStrides(shape);
    SmallVector<Value> index;
    for (auto &c : coords) {
      Value idx = i32Const(rewriter, loc, 0);
      for (auto [v, s] : llvm::zip(c, strides))
        idx = LLVM::AddOp::create(
            rewriter, loc, idx, LLVM::MulOp::create(rewriter, loc, v, i32Const(rewriter, loc, s)));
      index.push_back(idx);
    }
    auto ptr3 = LLVM::LLVMPointerType::get(rewriter.getContext(), 3);
    auto address = [&](unsigned k, Value idx) {
      Value padded = LLVM::AddOp::create(
          rewriter, loc, idx, LLVM::LShrOp::create(rewriter, loc, idx, i32Const(rewriter, loc, 5)));
      return LLVM::GEPOp::create(rewriter, loc, ptr3, memElems[k], buffers[k], ValueRange{padded});
    };

    for (int64_t d = 1; d < len; d *= 2) {
      if (d > 1 || scratch.needsBarrierBefore(op))
        target.barrier(rewriter, loc);
      for (unsigned k = 0; k < numOperands; ++k)
        for (auto [v, idx] : llvm::zip(vals[k], index)) {
          Value m =
              memElems[k] == elems[k] ? v : LLVM::ZExtOp::create(rewriter, loc, memElems[k], v);
          LLVM::StoreOp::create(rewriter, loc, m, address(k, idx));
        }
      target.barrier(rewriter, loc);
      for (size_t e = 0; e < index.size(); ++e) {
        Value c = coords[e][axis];
        // Is there an element d before (after) along the axis? Its index, else our own.
        Value has = reverse ? LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::slt, c,
                                                   i32Const(rewriter, loc, len - d))
                            : LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::sge, c,
                                                   i32Const(rewriter, loc, d));
        Value offset = i32Const(rewriter, loc, (reverse ? 1 : -1) * d * stride);
        Value other = LLVM::SelectOp::create(
            rewriter, loc, has, LLVM::AddOp::create(rewriter, loc, index[e], offset), index[e]);
        SmallVector<Value> neighbor, self;
        for (unsigned k = 0; k < numOperands; ++k) {
          Value v = LLVM::LoadOp::create(rewriter, loc, memElems[k], address(k, other));
          if (memElems[k] != elems[k])
            v = LLVM::TruncOp::create(rewriter, loc, elems[k], v);
          neighbor.push_back(v);
          self.push_back(vals[k][e]);
        }
        SmallVector<Value> combined =
            applyCombineRegion(rewriter, op.getCombineOp(), neighbor, self);
        for (unsigned k = 0; k < numOperands; ++k)
          vals[k][e] = LLVM::SelectOp::create(rewriter, loc, has, combined[k], vals[k][e]);
      }
    }
    SmallVector<Value> results;
    for (unsigned k = 0; k < numOperands; ++k)
      results.push_back(packStruct(
          rewriter, loc, getTypeConverter()->convertType(op->getResult(k).getType()), vals[k]));
    rewriter.replaceOp(op, results);
    return success();
  }
  const SharedScratch &scratch;
  const TargetInfo &target;
};

} // namespace

void kiln::populateScanOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                        RewritePatternSet &patterns, const SharedScratch &scratch,
                                        const TargetInfo &target) {
  patterns.add<ScanOpLowering>(converter, scratch, target);
}
