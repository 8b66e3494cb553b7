//===- ExternOpToLLVM.cpp - extern_elementwise, registers, grid control ---===//
//
// This file lowers kiln.extern_elementwise to one call of its function per owned element (a
// declared llvm.func; libdevice's `__nv_*` functions are linked and inlined by the PTX
// emitter), kiln.inline_asm_elementwise to one llvm.inline_asm per `pack` owned elements,
// kiln.globaltimer and kiln.smid to the PTX special registers %globaltimer and %smid
// (PTX ISA 10.18, 10.7), and kiln.grid_dependency to griddepcontrol (PTX ISA 9.7.13.x, sm_90;
// the PTX emitter drops it for older targets, where it has no meaning).
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace kiln;

namespace {

struct ExternElementwiseOpLowering final : ConvertOpToLLVMPattern<ExternElementwiseOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(ExternElementwiseOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type resultType = getTypeConverter()->convertType(op.getType());
    Type scalarType = getTypeConverter()->convertType(getElementTypeOrSelf(op.getType()));
    SmallVector<SmallVector<Value>> fields;
    SmallVector<Type> argTypes;
    for (auto [orig, conv] : llvm::zip(op.getSrcs(), adaptor.getSrcs())) {
      fields.push_back(unpackStruct(rewriter, loc, conv));
      argTypes.push_back(getTypeConverter()->convertType(getElementTypeOrSelf(orig.getType())));
    }
    auto fnType = LLVM::LLVMFunctionType::get(scalarType, argTypes);
    LLVM::LLVMFuncOp fn = getOrInsertFunction(rewriter, op, op.getSymbol(), fnType);
    if (fn.getFunctionType() != fnType)
      return rewriter.notifyMatchFailure(op, "the symbol is declared with another type");
    SmallVector<Value> results;
    for (size_t i = 0; i < fields.front().size(); ++i) {
      SmallVector<Value> args;
      for (auto &f : fields)
        args.push_back(f[i]);
      results.push_back(LLVM::CallOp::create(rewriter, loc, fn, args).getResult());
    }
    rewriter.replaceOp(op, packStruct(rewriter, loc, resultType, results));
    return success();
  }
};

/// kiln.inline_asm_elementwise: each thread runs the asm once per `pack` of the elements it
/// owns (the last group filled up with undefined values, whose results are dropped). A value
/// narrower than 32 bits travels as vectors of getInlineAsmElementsPerRegister elements, one
/// per register; the asm's outputs come back as one value, or a struct of them.
struct InlineAsmElementwiseOpLowering final : ConvertOpToLLVMPattern<InlineAsmElementwiseOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  /// The registers of one invocation for a value of element type `elem` (kiln type), in
  /// order: the number of elements each holds, and its LLVM type.
  SmallVector<std::pair<unsigned, Type>> registers(Type elem, unsigned pack) const {
    Type llvmElem = getTypeConverter()->convertType(elem);
    unsigned per = getInlineAsmElementsPerRegister(elem, pack);
    SmallVector<std::pair<unsigned, Type>> regs;
    for (unsigned j = 0; j < pack; j += per) {
      unsigned n = std::min(per, pack - j);
      regs.push_back({n, per == 1 ? llvmElem : Type(VectorType::get({n}, llvmElem))});
    }
    return regs;
  }

  LogicalResult matchAndRewrite(InlineAsmElementwiseOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    unsigned pack = op.getPack();
    SmallVector<SmallVector<Value>> ins;
    for (Value v : adaptor.getSrcs())
      ins.push_back(unpackStruct(rewriter, loc, v));
    SmallVector<Type> resultTypes;
    SmallVector<Type> outRegTypes;
    SmallVector<SmallVector<std::pair<unsigned, Type>>> outRegs;
    for (Value r : op.getResults()) {
      resultTypes.push_back(getTypeConverter()->convertType(r.getType()));
      outRegs.push_back(registers(getElementTypeOrSelf(r.getType()), pack));
      for (auto [n, type] : outRegs.back())
        outRegTypes.push_back(type);
    }
    auto firstStruct = dyn_cast<LLVM::LLVMStructType>(resultTypes.front());
    size_t owned = firstStruct ? firstStruct.getBody().size() : 1;
    Type asmType = outRegTypes.size() == 1
                       ? outRegTypes.front()
                       : Type(LLVM::LLVMStructType::getLiteral(getContext(), outRegTypes));

    SmallVector<SmallVector<Value>> outs(op.getNumResults());
    for (size_t base = 0; base < owned; base += pack) {
      // Inputs: element base + j of each operand, or undefined past the owned ones.
      SmallVector<Value> operands;
      for (auto [src, fields] : llvm::zip(op.getSrcs(), ins)) {
        unsigned j = 0;
        for (auto [n, type] : registers(getElementTypeOrSelf(src.getType()), pack)) {
          auto element = [&, &fields = fields](size_t i, Type t) -> Value {
            return i < owned ? fields[i] : Value(LLVM::UndefOp::create(rewriter, loc, t));
          };
          auto vecType = dyn_cast<VectorType>(type);
          if (!vecType) {
            operands.push_back(element(base + j, type));
          } else {
            Value reg = LLVM::UndefOp::create(rewriter, loc, type);
            for (unsigned k = 0; k < n; ++k)
              reg = LLVM::InsertElementOp::create(rewriter, loc, reg,
                                                  element(base + j + k, vecType.getElementType()),
                                                  i32Const(rewriter, loc, k));
            operands.push_back(reg);
          }
          j += n;
        }
      }
      auto asmOp = LLVM::InlineAsmOp::create(
          rewriter, loc, asmType, operands, op.getAsmString(), op.getConstraints(),
          /*has_side_effects=*/!op.getPure(), /*is_align_stack=*/false,
          LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
      SmallVector<Value> regs = unpackStruct(rewriter, loc, asmOp.getResult(0));
      // Outputs: register by register, element by element, the owned ones kept.
      unsigned next = 0;
      for (auto [r, resultRegs] : llvm::enumerate(outRegs)) {
        unsigned j = 0;
        for (auto [n, type] : resultRegs) {
          Value reg = regs[next++];
          for (unsigned k = 0; k < n; ++k) {
            if (base + j + k >= owned)
              break;
            outs[r].push_back(isa<VectorType>(type)
                                  ? Value(LLVM::ExtractElementOp::create(
                                        rewriter, loc, reg, i32Const(rewriter, loc, k)))
                                  : reg);
          }
          j += n;
        }
      }
    }
    SmallVector<Value> results;
    for (auto [type, fields] : llvm::zip(resultTypes, outs))
      results.push_back(packStruct(rewriter, loc, type, fields));
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct GlobalTimerOpLowering final : ConvertOpToLLVMPattern<GlobalTimerOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(GlobalTimerOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, NVVM::GlobalTimerOp::create(rewriter, op.getLoc(), op.getType()));
    return success();
  }
};

struct SmIdOpLowering final : ConvertOpToLLVMPattern<SmIdOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(SmIdOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, NVVM::SmIdOp::create(rewriter, op.getLoc(), op.getType()));
    return success();
  }
};

struct GridDependencyOpLowering final : ConvertOpToLLVMPattern<GridDependencyOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(GridDependencyOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    auto kind = op.getKind() == GridDependencyKind::wait
                    ? NVVM::GridDepActionKind::wait
                    : NVVM::GridDepActionKind::launch_dependents;
    NVVM::GriddepcontrolOp::create(rewriter, op.getLoc(), kind);
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void kiln::populateExternOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                          RewritePatternSet &patterns) {
  patterns.add<ExternElementwiseOpLowering, InlineAsmElementwiseOpLowering, GlobalTimerOpLowering,
               SmIdOpLowering, GridDependencyOpLowering>(converter);
}
