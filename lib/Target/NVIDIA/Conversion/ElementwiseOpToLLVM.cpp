//===- ElementwiseOpToLLVM.cpp - arith and math on tiles to LLVM ----------===//
//
// This file implements the per-element lowering of arith and math ops on laid-out tiles: the
// op is re-created on each owned element's scalars (the result is legalized by the upstream
// arith/math/libdevice patterns of the same conversion), and splat tile constants become
// repeated scalar constants. Where the axis analysis proves the result constant over aligned
// runs inside a thread's sizePerThread block (`cols < n` with n a multiple of 8: one mask bit
// per 8 columns), each run is computed once and its value reused, so a thread keeps one
// predicate per run instead of one per element. exp and exp2 on f32 use the target's
// ex2.approx (flushing subnormal results to zero), as Triton does: exp(x) = 2^(x * log2(e)).
//
//===----------------------------------------------------------------------===//

#include "kiln/Analysis/AxisInfo.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

/// Any arith/math op with a laid-out tile result: apply it element by element. Its benefit
/// is above the upstream scalar patterns, which would otherwise accept the struct type.
struct ElementwiseOpLowering final : ConversionPattern {
  ElementwiseOpLowering(const TypeConverter &converter, MLIRContext *ctx,
                        const AxisInfoAnalysis &axis)
      : ConversionPattern(converter, MatchAnyOpTypeTag(), /*benefit=*/5, ctx), axis(axis) {}

  /// For each owned element, the owned element whose value it repeats (itself when none):
  /// the first of its aligned constancy run inside the thread's sizePerThread block.
  SmallVector<unsigned> getRepresentatives(Value result, RankedTensorType type) const {
    unsigned n = kgpu::getElemsPerThread(type);
    SmallVector<unsigned> reps = llvm::to_vector(llvm::seq<unsigned>(0, n));
    const AxisInfo &info = axis.get(result);
    if (info.getRank() != unsigned(type.getRank()))
      return reps;
    SmallVector<unsigned> spt = kgpu::getSizePerThread(type.getEncoding());
    SmallVector<int64_t> run(type.getRank(), 1);
    bool any = false;
    for (unsigned d = 0; d < run.size(); ++d) {
      int64_t block = std::min<int64_t>(spt[d], type.getDimSize(d));
      run[d] = std::min<int64_t>(info.constancy[d], block);
      // Runs must tile the block: both are powers of two, the smaller divides the larger.
      if (run[d] < 1 || block % run[d] != 0)
        run[d] = 1;
      any |= run[d] > 1;
    }
    if (!any)
      return reps;
    SmallVector<kgpu::ElemPos> elems = kgpu::getThreadElements(type.getEncoding(), type.getShape());
    llvm::StringMap<unsigned> index;
    for (auto [i, pos] : llvm::enumerate(elems))
      index.try_emplace(getElemPosKey(pos), i);
    for (auto [i, pos] : llvm::enumerate(elems)) {
      kgpu::ElemPos first = pos;
      for (unsigned d = 0; d < first.elem.size(); ++d)
        first.elem[d] -= first.elem[d] % run[d];
      auto it = index.find(getElemPosKey(first));
      if (it != index.end() && it->second < i)
        reps[i] = it->second;
    }
    return reps;
  }

  LogicalResult matchAndRewrite(Operation *op, ArrayRef<Value> operands,
                                ConversionPatternRewriter &rewriter) const override {
    if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) ||
        isa<arith::ConstantOp>(op) || op->getNumResults() != 1 || op->getNumRegions() != 0)
      return rewriter.notifyMatchFailure(op, "not a single-result arith/math op");
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || !type.getEncoding())
      return rewriter.notifyMatchFailure(op, "result is not a laid-out tile");
    Location loc = op->getLoc();
    Type structType = getTypeConverter()->convertType(type);
    Type scalarType = getTypeConverter()->convertType(type.getElementType());
    unsigned n = kgpu::getElemsPerThread(type);
    SmallVector<SmallVector<Value>> fields;
    for (auto [orig, conv] : llvm::zip(op->getOperands(), operands)) {
      if (isa<RankedTensorType>(orig.getType()))
        fields.push_back(unpackStruct(rewriter, loc, conv));
      else
        fields.push_back(SmallVector<Value>(n, conv)); // e.g. arith.select's scalar condition
    }
    SmallVector<unsigned> reps = getRepresentatives(op->getResult(0), type);
    SmallVector<Value> results;
    for (unsigned i = 0; i < n; ++i) {
      if (reps[i] != i) {
        results.push_back(results[reps[i]]);
        continue;
      }
      OperationState state(loc, op->getName());
      for (auto &f : fields)
        state.addOperands(f[i]);
      state.addTypes(scalarType);
      state.addAttributes(op->getAttrs());
      results.push_back(rewriter.create(state)->getResult(0));
    }
    rewriter.replaceOp(op, packStruct(rewriter, loc, structType, results));
    return success();
  }

  const AxisInfoAnalysis &axis;
};

/// Splat tile constants: each owned element is the same scalar constant.
struct TileConstantOpLowering final : ConvertOpToLLVMPattern<arith::ConstantOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(arith::ConstantOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(op.getType());
    if (!type || !type.getEncoding())
      return rewriter.notifyMatchFailure(op, "not a laid-out tile constant");
    auto splat = dyn_cast<SplatElementsAttr>(op.getValue());
    if (!splat)
      return rewriter.notifyMatchFailure(op, "only splat tile constants are lowered");
    Type scalarType = getTypeConverter()->convertType(type.getElementType());
    auto value = splat.getSplatValue<TypedAttr>();
    // fp8 is held as i8 bits.
    if (auto f = dyn_cast<FloatAttr>(value); f && isa<IntegerType>(scalarType))
      value = rewriter.getIntegerAttr(scalarType, f.getValue().bitcastToAPInt());
    Value scalar = LLVM::ConstantOp::create(rewriter, op.getLoc(), scalarType, value);
    SmallVector<Value> fields(kgpu::getElemsPerThread(type), scalar);
    rewriter.replaceOp(
        op, packStruct(rewriter, op.getLoc(), getTypeConverter()->convertType(type), fields));
    return success();
  }
};

/// exp / exp2 on f32 scalars through the target's approximate 2^x.
template <typename OpTy> struct ExpOpLowering final : ConvertOpToLLVMPattern<OpTy> {
  ExpOpLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern<OpTy>(converter, /*benefit=*/10), target(target) {}
  LogicalResult matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!op.getType().isF32())
      return rewriter.notifyMatchFailure(op, "fast path is for f32 scalars");
    Location loc = op.getLoc();
    Value x = adaptor.getOperand();
    if constexpr (std::is_same_v<OpTy, math::ExpOp>) {
      Value log2e = LLVM::ConstantOp::create(rewriter, loc, rewriter.getF32Type(),
                                             rewriter.getF32FloatAttr(llvm::numbers::log2e));
      x = LLVM::FMulOp::create(rewriter, loc, x, log2e);
    }
    rewriter.replaceOp(op, target.emitExp2Approx(rewriter, loc, x));
    return success();
  }
  const TargetInfo &target;
};

} // namespace

void kiln::populateElementwiseOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                               RewritePatternSet &patterns,
                                               const AxisInfoAnalysis &axisInfo,
                                               const TargetInfo &target) {
  patterns.add<ElementwiseOpLowering>(converter, patterns.getContext(), axisInfo);
  patterns.add<TileConstantOpLowering>(converter, /*benefit=*/10);
  patterns.add<ExpOpLowering<math::ExpOp>, ExpOpLowering<math::Exp2Op>>(converter, target);
}
