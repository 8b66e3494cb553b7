//===- DebugOpToLLVM.cpp - device_print, device_assert, debug_barrier -----===//
//
// This file lowers kiln.print and kiln.assert for the GPU, as Triton does, through the CUDA
// device runtime's `vprintf(format, args)` and `__assertfail(message, file, line, function,
// charSize)` (ptxas resolves both).
// - print: every element of a tile is printed once, by its owner thread (replicas skip), as
//   "pid (x, y, z) idx (i, j) <prefix><value>"; scalars and prefix-only prints come from
//   thread 0. Floats print through %f as doubles (hex: their bits), narrow integers widen to
//   32 bits, pointers as 0x%llx. The argument block is an alloca in the entry block.
// - assert: a thread whose owned elements are not all true calls __assertfail with the
//   message and the op's file and line; the kernel then traps, and the launch's next
//   synchronization reports "device-side assert triggered".
// - barrier (tl.debug_barrier): the target's CTA barrier (bar.sync 0).
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace kiln;

namespace {

/// A generic pointer to a NUL-terminated constant string.
Value stringPtr(OpBuilder &b, Location loc, Operation *at, StringRef text) {
  return getStringConstant(b, loc, at, text, "__kiln_str_");
}

/// Runs `body` where `pred` holds (always when `pred` is null).
void emitIf(ConversionPatternRewriter &rewriter, Location loc, Value pred,
            function_ref<void()> body) {
  if (!pred) {
    body();
    return;
  }
  Block *current = rewriter.getInsertionBlock();
  Block *after = rewriter.splitBlock(current, rewriter.getInsertionPoint());
  Block *then = rewriter.createBlock(after);
  rewriter.setInsertionPointToEnd(current);
  LLVM::CondBrOp::create(rewriter, loc, pred, then, after);
  rewriter.setInsertionPointToEnd(then);
  body();
  LLVM::BrOp::create(rewriter, loc, after);
  rewriter.setInsertionPointToStart(after);
}

Value isThreadZero(OpBuilder &b, Location loc, const TargetInfo &target) {
  return LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, target.getThreadId(b, loc),
                              i32Const(b, loc, 0));
}

struct PrintOpLowering final : ConvertOpToLLVMPattern<PrintOp> {
  PrintOpLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}

  /// The printf conversion and the value to pass for one element.
  std::pair<std::string, Value> formatValue(OpBuilder &b, Location loc, Value v, bool hex) const {
    Type t = v.getType();
    MLIRContext *ctx = b.getContext();
    if (isa<LLVM::LLVMPointerType>(t))
      return {"0x%llx", LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), v)};
    if (auto f = dyn_cast<FloatType>(t)) {
      if (hex) {
        Type bits = IntegerType::get(ctx, f.getWidth());
        Value i = LLVM::BitcastOp::create(b, loc, bits, v);
        if (f.getWidth() == 64)
          return {"0x%llx", i};
        return {"0x%x", LLVM::ZExtOp::create(b, loc, b.getI32Type(), i)};
      }
      Value d = f.getWidth() == 64 ? v : LLVM::FPExtOp::create(b, loc, b.getF64Type(), v);
      return {"%f", d};
    }
    unsigned width = t.getIntOrFloatBitWidth();
    if (width == 64)
      return {hex ? "0x%llx" : "%lld", v};
    if (width < 32)
      v = width == 1 ? Value(LLVM::ZExtOp::create(b, loc, b.getI32Type(), v))
                     : Value(LLVM::SExtOp::create(b, loc, b.getI32Type(), v));
    return {hex ? "0x%x" : "%d", v};
  }

  void emitPrintf(ConversionPatternRewriter &rewriter, Location loc, Operation *op,
                  StringRef format, ArrayRef<Value> args) const {
    MLIRContext *ctx = rewriter.getContext();
    auto ptrTy = LLVM::LLVMPointerType::get(ctx);
    auto vprintf =
        getOrInsertFunction(rewriter, op, "vprintf",
                            LLVM::LLVMFunctionType::get(rewriter.getI32Type(), {ptrTy, ptrTy}));
    SmallVector<Type> fields;
    for (Value a : args)
      fields.push_back(a.getType());
    auto structTy = LLVM::LLVMStructType::getLiteral(ctx, fields);
    Value buffer;
    {
      OpBuilder::InsertionGuard guard(rewriter);
      auto func = op->getParentOfType<FunctionOpInterface>();
      rewriter.setInsertionPointToStart(&func.getFunctionBody().front());
      Value one = LLVM::ConstantOp::create(rewriter, loc, rewriter.getI64Type(),
                                           rewriter.getI64IntegerAttr(1));
      buffer = LLVM::AllocaOp::create(rewriter, loc, ptrTy, structTy, one, 8);
    }
    for (auto [i, a] : llvm::enumerate(args)) {
      Value field = LLVM::GEPOp::create(rewriter, loc, ptrTy, structTy, buffer,
                                        ArrayRef<LLVM::GEPArg>{0, int32_t(i)});
      LLVM::StoreOp::create(rewriter, loc, a, field);
    }
    LLVM::CallOp::create(rewriter, loc, vprintf,
                         ValueRange{stringPtr(rewriter, loc, op, format), buffer});
  }

  LogicalResult matchAndRewrite(PrintOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    SmallVector<Value> pid;
    for (unsigned axis = 0; axis < 3; ++axis)
      pid.push_back(target.getProgramId(rewriter, loc, axis));
    std::string prefix = op.getPrefix().str();
    // printf-escape the user's text.
    std::string escaped;
    for (char c : prefix) {
      escaped += c;
      if (c == '%')
        escaped += '%';
    }
    bool hex = op.getHex();
    if (adaptor.getArgs().empty()) {
      emitIf(rewriter, loc, isThreadZero(rewriter, loc, target),
             [&] { emitPrintf(rewriter, loc, op, "pid (%d, %d, %d) " + escaped + "\n", pid); });
      rewriter.eraseOp(op);
      return success();
    }
    for (auto [orig, v] : llvm::zip(op.getArgs(), adaptor.getArgs())) {
      auto tile = dyn_cast<RankedTensorType>(orig.getType());
      if (!tile) {
        emitIf(rewriter, loc, isThreadZero(rewriter, loc, target), [&] {
          auto [spec, value] = formatValue(rewriter, loc, v, hex);
          SmallVector<Value> args(pid);
          args.push_back(value);
          emitPrintf(rewriter, loc, op, "pid (%d, %d, %d) " + escaped + spec + "\n", args);
        });
        continue;
      }
      Value owner = emitOwnerPredicate(rewriter, loc, tile, target);
      SmallVector<Value> elems = unpackStruct(rewriter, loc, v);
      auto coords = emitElementCoordinates(rewriter, loc, tile, target);
      emitIf(rewriter, loc, owner, [&] {
        for (auto [e, c] : llvm::zip(elems, coords)) {
          auto [spec, value] = formatValue(rewriter, loc, e, hex);
          std::string format = "pid (%d, %d, %d) idx (";
          for (size_t d = 0; d < c.size(); ++d)
            format += d ? ", %d" : "%d";
          format += ") " + escaped + spec + "\n";
          SmallVector<Value> args(pid);
          args.append(c.begin(), c.end());
          args.push_back(value);
          emitPrintf(rewriter, loc, op, format, args);
        }
      });
    }
    rewriter.eraseOp(op);
    return success();
  }
  const TargetInfo &target;
};

struct AssertOpLowering final : ConvertOpToLLVMPattern<AssertOp> {
  AssertOpLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}
  LogicalResult matchAndRewrite(AssertOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    Value all;
    for (Value c : unpackStruct(rewriter, loc, adaptor.getCondition()))
      all = all ? Value(LLVM::AndOp::create(rewriter, loc, all, c)) : c;
    Value failed = LLVM::XOrOp::create(
        rewriter, loc, all,
        LLVM::ConstantOp::create(rewriter, loc, rewriter.getI1Type(), rewriter.getBoolAttr(true)));
    std::string file = "<unknown>", function = "<kernel>";
    unsigned line = 0;
    if (auto f = loc->findInstanceOf<FileLineColLoc>()) {
      file = f.getFilename().str();
      line = f.getLine();
    }
    if (auto func = op->getParentOfType<FunctionOpInterface>())
      function = func.getName().str();
    auto ptrTy = LLVM::LLVMPointerType::get(ctx);
    auto assertfail =
        getOrInsertFunction(rewriter, op, "__assertfail",
                            LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx),
                                                        {ptrTy, ptrTy, rewriter.getI32Type(), ptrTy,
                                                         rewriter.getI64Type()}));
    emitIf(rewriter, loc, failed, [&] {
      LLVM::CallOp::create(rewriter, loc, assertfail,
                           ValueRange{stringPtr(rewriter, loc, op, op.getMessage()),
                                      stringPtr(rewriter, loc, op, file),
                                      i32Const(rewriter, loc, line),
                                      stringPtr(rewriter, loc, op, function),
                                      LLVM::ConstantOp::create(rewriter, loc, rewriter.getI64Type(),
                                                               rewriter.getI64IntegerAttr(1))});
    });
    rewriter.eraseOp(op);
    return success();
  }
  const TargetInfo &target;
};

struct BarrierOpLowering final : ConvertOpToLLVMPattern<BarrierOp> {
  BarrierOpLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}
  LogicalResult matchAndRewrite(BarrierOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    target.barrier(rewriter, op.getLoc());
    rewriter.eraseOp(op);
    return success();
  }
  const TargetInfo &target;
};

} // namespace

void kiln::populateDebugOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                         RewritePatternSet &patterns, const TargetInfo &target) {
  patterns.add<PrintOpLowering, AssertOpLowering, BarrierOpLowering>(converter, target);
}
