//===- MemoryOpToHost.cpp - Loads, stores, atomics, print, assert, host ----===//
//
// This file lowers kiln's memory and debugging ops for the host backend.
// - Loads and stores of tiles split the tile into runs the axis analysis proves contiguous
//   (along the last dimension) and use one llvm.intr.masked.load/store per run; without such
//   runs, a masked gather/scatter. Masked-out lanes never touch memory; a load gives `other`
//   there (zero without it). Scalars branch on their mask.
// - Atomics run lane by lane in an scf.for, each unmasked lane one llvm.atomicrmw/cmpxchg,
//   sequentially consistent with the requested ordering.
// - In debug mode every access first hands its addresses and mask to the runtime's check,
//   which masks off (and reports) lanes outside the launch's buffers.
// - kiln.print and kiln.assert call the runtime through the context's function table.
// Booleans live in memory as bytes, as in Triton.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/KilnToHost.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::host;

namespace {

Type i8Ty(OpBuilder &b) { return b.getI8Type(); }

/// The type an element has in memory: i1 is stored as i8.
Type memoryType(Type elem) {
  if (elem.isInteger(1))
    return IntegerType::get(elem.getContext(), 8);
  return elem;
}

Type withElement(Type type, Type elem) {
  if (auto v = dyn_cast<VectorType>(type))
    return VectorType::get(v.getShape(), elem);
  return elem;
}

unsigned byteSize(Type t) {
  if (isa<LLVM::LLVMPointerType>(t))
    return 8;
  return std::max(1u, t.getIntOrFloatBitWidth() / 8);
}

Value zeroOf(OpBuilder &b, Location loc, Type type) {
  return LLVM::ZeroOp::create(b, loc, type);
}

Value allTrue(OpBuilder &b, Location loc, int64_t n) {
  auto type = VectorType::get({n}, b.getI1Type());
  return arith::ConstantOp::create(b, loc, type, DenseElementsAttr::get(type, true));
}

/// An alloca of `type` in the entry block of the enclosing function.
Value entryAlloca(OpBuilder &b, Location loc, Operation *at, Type type) {
  OpBuilder::InsertionGuard guard(b);
  auto func = at->getParentOfType<FunctionOpInterface>();
  b.setInsertionPointToStart(&func.getFunctionBody().front());
  Value one = LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(1));
  return LLVM::AllocaOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()), type, one,
                                /*alignment=*/64);
}

Value i32Val(OpBuilder &b, Location loc, int64_t v) {
  return LLVM::ConstantOp::create(b, loc, b.getI32Type(), b.getI32IntegerAttr(v));
}
Value i64Val(OpBuilder &b, Location loc, int64_t v) {
  return LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(v));
}

/// Debug mode: asks the runtime to check the unmasked lanes of `ptrs`; returns the mask with
/// the lanes outside every buffer cleared. `mask` may be null (all lanes) for scalars.
Value checkAccess(OpBuilder &b, Location loc, Operation *op, Value ptrs, Value mask,
                  unsigned elemBytes, bool isStore) {
  auto vecTy = dyn_cast<VectorType>(ptrs.getType());
  int64_t n = vecTy ? vecTy.getNumElements() : 1;
  Type maskMemTy = vecTy ? Type(VectorType::get({n}, i8Ty(b))) : i8Ty(b);
  Value ptrBuf = entryAlloca(b, loc, op, ptrs.getType());
  Value maskBuf = entryAlloca(b, loc, op, maskMemTy);
  LLVM::StoreOp::create(b, loc, ptrs, ptrBuf);
  Value m = mask ? mask
                 : (vecTy ? allTrue(b, loc, n)
                          : LLVM::ConstantOp::create(b, loc, b.getI1Type(), b.getBoolAttr(true))
                                .getResult());
  LLVM::StoreOp::create(b, loc, LLVM::ZExtOp::create(b, loc, maskMemTy, m), maskBuf);
  callRuntime(b, loc, op, kCheckAccess,
              {getExtraArg(op, kPidX), getExtraArg(op, kPidY), getExtraArg(op, kPidZ),
               getStringPtr(b, loc, op, formatSite(loc)), ptrBuf, maskBuf, i64Val(b, loc, n),
               i64Val(b, loc, elemBytes), i32Val(b, loc, isStore)});
  Value checked = LLVM::LoadOp::create(b, loc, maskMemTy, maskBuf);
  return LLVM::TruncOp::create(b, loc, m.getType(), checked);
}

/// Lanes [start, start + n) of `v`.
Value slice(OpBuilder &b, Location loc, Value v, int64_t start, int64_t n) {
  SmallVector<int32_t> idx;
  for (int64_t i = 0; i < n; ++i)
    idx.push_back(int32_t(start + i));
  return shuffle(b, loc, v, idx);
}

/// The concatenation of equally sized vectors (a power-of-two count).
Value concat(OpBuilder &b, Location loc, SmallVector<Value> parts) {
  while (parts.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i < parts.size(); i += 2) {
      int64_t n = cast<VectorType>(parts[i].getType()).getNumElements();
      SmallVector<int32_t> idx;
      for (int64_t j = 0; j < 2 * n; ++j)
        idx.push_back(int32_t(j));
      next.push_back(LLVM::ShuffleVectorOp::create(b, loc, parts[i], parts[i + 1], idx));
    }
    parts = std::move(next);
  }
  return parts.front();
}

/// Elements of the last dimension that form contiguous runs in memory (1: none proven).
int64_t contiguousRun(const AxisInfoAnalysis &axis, Value ptr) {
  auto type = dyn_cast<RankedTensorType>(ptr.getType());
  if (!type)
    return 1;
  unsigned last = type.getRank() - 1;
  const AxisInfo &info = axis.get(ptr);
  if (info.getRank() != type.getRank())
    return 1;
  int64_t run = std::min<int64_t>(info.contiguity[last], type.getDimSize(last));
  return run >= 2 && type.getDimSize(last) % run == 0 ? run : 1;
}

struct LoadConversion : OpConversionPattern<LoadOp> {
  LoadConversion(TypeConverter &tc, MLIRContext *ctx, const AxisInfoAnalysis &axis,
                 const HostLoweringOptions &options)
      : OpConversionPattern(tc, ctx), axis(axis), options(options) {}

  LogicalResult matchAndRewrite(LoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type resTy = getTypeConverter()->convertType(op.getType());
    Type elem = getElementTypeOrSelf(resTy);
    Type memElem = memoryType(elem);
    Type memTy = withElement(resTy, memElem);
    unsigned align = byteSize(memElem);
    Value ptrs = adaptor.getPtr(), mask = adaptor.getMask(), other = adaptor.getOther();
    auto fromMemory = [&](Value v) -> Value {
      return memElem == elem ? v : LLVM::TruncOp::create(rewriter, loc, withElement(v.getType(), elem), v).getResult();
    };
    Value otherMem = other ? (memElem == elem ? other
                                              : LLVM::ZExtOp::create(rewriter, loc, memTy, other)
                                                    .getResult())
                           : zeroOf(rewriter, loc, memTy);

    auto vecTy = dyn_cast<VectorType>(resTy);
    if (!vecTy) {
      if (options.debug)
        mask = checkAccess(rewriter, loc, op, ptrs, mask, align, /*isStore=*/false);
      if (!mask) {
        rewriter.replaceOp(op, fromMemory(LLVM::LoadOp::create(rewriter, loc, memElem, ptrs,
                                                               align, op.getIsVolatile())));
        return success();
      }
      auto ifOp = scf::IfOp::create(
          rewriter, loc, mask,
          [&](OpBuilder &b, Location l) {
            Value v = LLVM::LoadOp::create(b, l, memElem, ptrs, align, op.getIsVolatile());
            scf::YieldOp::create(b, l, v);
          },
          [&](OpBuilder &b, Location l) { scf::YieldOp::create(b, l, otherMem); });
      rewriter.replaceOp(op, fromMemory(ifOp.getResult(0)));
      return success();
    }

    int64_t n = vecTy.getNumElements();
    if (!mask)
      mask = allTrue(rewriter, loc, n);
    if (options.debug)
      mask = checkAccess(rewriter, loc, op, ptrs, mask, align, /*isStore=*/false);
    int64_t run = contiguousRun(axis, op.getPtr());
    Value result;
    if (run >= 2) {
      SmallVector<Value> parts;
      auto partTy = VectorType::get({run}, memElem);
      for (int64_t start = 0; start < n; start += run) {
        Value base = LLVM::ExtractElementOp::create(rewriter, loc, ptrs, i32Val(rewriter, loc, start));
        parts.push_back(LLVM::MaskedLoadOp::create(
            rewriter, loc, partTy, base, slice(rewriter, loc, mask, start, run),
            slice(rewriter, loc, otherMem, start, run), align));
      }
      result = concat(rewriter, loc, parts);
    } else {
      result = LLVM::masked_gather::create(rewriter, loc, memTy, ptrs, mask,
                                           ValueRange{otherMem}, align);
    }
    rewriter.replaceOp(op, fromMemory(result));
    return success();
  }

  const AxisInfoAnalysis &axis;
  const HostLoweringOptions &options;
};

struct StoreConversion : OpConversionPattern<StoreOp> {
  StoreConversion(TypeConverter &tc, MLIRContext *ctx, const AxisInfoAnalysis &axis,
                  const HostLoweringOptions &options)
      : OpConversionPattern(tc, ctx), axis(axis), options(options) {}

  LogicalResult matchAndRewrite(StoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value ptrs = adaptor.getPtr(), value = adaptor.getValue(), mask = adaptor.getMask();
    Type elem = getElementTypeOrSelf(value.getType());
    Type memElem = memoryType(elem);
    if (memElem != elem)
      value = LLVM::ZExtOp::create(rewriter, loc, withElement(value.getType(), memElem), value);
    unsigned align = byteSize(memElem);

    auto vecTy = dyn_cast<VectorType>(value.getType());
    if (!vecTy) {
      if (options.debug)
        mask = checkAccess(rewriter, loc, op, ptrs, mask, align, /*isStore=*/true);
      if (!mask) {
        LLVM::StoreOp::create(rewriter, loc, value, ptrs, align);
      } else {
        scf::IfOp::create(rewriter, loc, mask, [&](OpBuilder &b, Location l) {
          LLVM::StoreOp::create(b, l, value, ptrs, align);
          scf::YieldOp::create(b, l);
        });
      }
      rewriter.eraseOp(op);
      return success();
    }

    int64_t n = vecTy.getNumElements();
    if (!mask)
      mask = allTrue(rewriter, loc, n);
    if (options.debug)
      mask = checkAccess(rewriter, loc, op, ptrs, mask, align, /*isStore=*/true);
    int64_t run = contiguousRun(axis, op.getPtr());
    if (run >= 2) {
      for (int64_t start = 0; start < n; start += run) {
        Value base = LLVM::ExtractElementOp::create(rewriter, loc, ptrs, i32Val(rewriter, loc, start));
        LLVM::MaskedStoreOp::create(rewriter, loc, slice(rewriter, loc, value, start, run), base,
                                    slice(rewriter, loc, mask, start, run), align);
      }
    } else {
      LLVM::masked_scatter::create(rewriter, loc, value, ptrs, mask, align);
    }
    rewriter.eraseOp(op);
    return success();
  }

  const AxisInfoAnalysis &axis;
  const HostLoweringOptions &options;
};

LLVM::AtomicOrdering toOrdering(MemSemantic sem) {
  switch (sem) {
  case MemSemantic::relaxed:
    return LLVM::AtomicOrdering::monotonic;
  case MemSemantic::acquire:
    return LLVM::AtomicOrdering::acquire;
  case MemSemantic::release:
    return LLVM::AtomicOrdering::release;
  case MemSemantic::acq_rel:
    return LLVM::AtomicOrdering::acq_rel;
  }
  return LLVM::AtomicOrdering::acq_rel;
}

LLVM::AtomicOrdering failureOrdering(MemSemantic sem) {
  switch (sem) {
  case MemSemantic::relaxed:
  case MemSemantic::release:
    return LLVM::AtomicOrdering::monotonic;
  default:
    return LLVM::AtomicOrdering::acquire;
  }
}

LLVM::AtomicBinOp toBinOp(RMWKind kind, Type elem) {
  bool isFloat = isa<FloatType>(elem);
  switch (kind) {
  case RMWKind::and_:
    return LLVM::AtomicBinOp::_and;
  case RMWKind::or_:
    return LLVM::AtomicBinOp::_or;
  case RMWKind::xor_:
    return LLVM::AtomicBinOp::_xor;
  case RMWKind::add:
    return isFloat ? LLVM::AtomicBinOp::fadd : LLVM::AtomicBinOp::add;
  case RMWKind::fadd:
    return LLVM::AtomicBinOp::fadd;
  case RMWKind::max:
    return isFloat ? LLVM::AtomicBinOp::fmax : LLVM::AtomicBinOp::max;
  case RMWKind::min:
    return isFloat ? LLVM::AtomicBinOp::fmin : LLVM::AtomicBinOp::min;
  case RMWKind::umax:
    return LLVM::AtomicBinOp::umax;
  case RMWKind::umin:
    return LLVM::AtomicBinOp::umin;
  case RMWKind::xchg:
    return LLVM::AtomicBinOp::xchg;
  }
  return LLVM::AtomicBinOp::xchg;
}

/// Runs `perLane(b, ptr, operands...)` for every lane whose mask is set, in order, and
/// returns the vector of its results (zero for masked-out lanes). Scalars: one guarded call.
Value forEachLane(OpBuilder &b, Location loc, Type resTy, Value ptrs, Value mask,
                  ArrayRef<Value> operands,
                  function_ref<Value(OpBuilder &, Location, Value, ArrayRef<Value>)> perLane) {
  Type elem = getElementTypeOrSelf(resTy);
  auto guarded = [&](OpBuilder &ob, Location l, Value m, Value ptr, ArrayRef<Value> ops) {
    if (!m)
      return perLane(ob, l, ptr, ops);
    auto ifOp = scf::IfOp::create(
        ob, l, m,
        [&](OpBuilder &ib, Location il) { scf::YieldOp::create(ib, il, perLane(ib, il, ptr, ops)); },
        [&](OpBuilder &ib, Location il) { scf::YieldOp::create(ib, il, zeroOf(ib, il, elem)); });
    return ifOp.getResult(0);
  };
  auto vecTy = dyn_cast<VectorType>(resTy);
  if (!vecTy)
    return guarded(b, loc, mask, ptrs, operands);
  Value lb = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
  Value ub = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(vecTy.getNumElements()));
  Value step = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(1));
  auto loop = scf::ForOp::create(
      b, loc, lb, ub, step, ValueRange{zeroOf(b, loc, resTy)},
      [&](OpBuilder &lb_, Location l, Value i, ValueRange iters) {
        Value m = mask ? LLVM::ExtractElementOp::create(lb_, l, mask, i).getResult() : Value();
        Value ptr = LLVM::ExtractElementOp::create(lb_, l, ptrs, i);
        SmallVector<Value> ops;
        for (Value o : operands)
          ops.push_back(LLVM::ExtractElementOp::create(lb_, l, o, i));
        Value r = guarded(lb_, l, m, ptr, ops);
        scf::YieldOp::create(lb_, l, LLVM::InsertElementOp::create(lb_, l, iters[0], r, i).getResult());
      });
  return loop.getResult(0);
}

struct AtomicRMWConversion : OpConversionPattern<AtomicRMWOp> {
  AtomicRMWConversion(TypeConverter &tc, MLIRContext *ctx, const HostLoweringOptions &options)
      : OpConversionPattern(tc, ctx), options(options) {}
  LogicalResult matchAndRewrite(AtomicRMWOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type resTy = getTypeConverter()->convertType(op.getType());
    Type elem = getElementTypeOrSelf(resTy);
    Value mask = adaptor.getMask();
    if (options.debug) {
      if (!mask && isa<VectorType>(resTy))
        mask = allTrue(rewriter, loc, getNumElements(resTy));
      mask = checkAccess(rewriter, loc, op, adaptor.getPtr(), mask, byteSize(elem), true);
    }
    LLVM::AtomicBinOp bin = toBinOp(op.getKind(), elem);
    LLVM::AtomicOrdering ordering = toOrdering(op.getSem());
    Value r = forEachLane(rewriter, loc, resTy, adaptor.getPtr(), mask, {adaptor.getVal()},
                          [&](OpBuilder &b, Location l, Value ptr, ArrayRef<Value> ops) {
                            return LLVM::AtomicRMWOp::create(b, l, bin, ptr, ops[0], ordering)
                                .getResult();
                          });
    rewriter.replaceOp(op, r);
    return success();
  }
  const HostLoweringOptions &options;
};

struct AtomicCASConversion : OpConversionPattern<AtomicCASOp> {
  AtomicCASConversion(TypeConverter &tc, MLIRContext *ctx, const HostLoweringOptions &options)
      : OpConversionPattern(tc, ctx), options(options) {}
  LogicalResult matchAndRewrite(AtomicCASOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type resTy = getTypeConverter()->convertType(op.getType());
    Type elem = getElementTypeOrSelf(resTy);
    Value mask;
    if (options.debug)
      mask = checkAccess(rewriter, loc, op, adaptor.getPtr(),
                         isa<VectorType>(resTy) ? allTrue(rewriter, loc, getNumElements(resTy))
                                                : Value(),
                         byteSize(elem), true);
    // cmpxchg takes integers: floats go through their bits.
    Type intElem = isa<FloatType>(elem) ? Type(rewriter.getIntegerType(elem.getIntOrFloatBitWidth()))
                                        : elem;
    LLVM::AtomicOrdering onSuccess = toOrdering(op.getSem()), onFailure = failureOrdering(op.getSem());
    Value r = forEachLane(
        rewriter, loc, resTy, adaptor.getPtr(), mask, {adaptor.getCmp(), adaptor.getVal()},
        [&](OpBuilder &b, Location l, Value ptr, ArrayRef<Value> ops) -> Value {
          Value cmp = ops[0], val = ops[1];
          if (intElem != elem) {
            cmp = LLVM::BitcastOp::create(b, l, intElem, cmp);
            val = LLVM::BitcastOp::create(b, l, intElem, val);
          }
          auto x = LLVM::AtomicCmpXchgOp::create(b, l, ptr, cmp, val, onSuccess, onFailure);
          Value old = LLVM::ExtractValueOp::create(b, l, x, 0);
          if (intElem != elem)
            old = LLVM::BitcastOp::create(b, l, elem, old);
          return old;
        });
    rewriter.replaceOp(op, r);
    return success();
  }
  const HostLoweringOptions &options;
};

//===----------------------------------------------------------------------===//
// Debugging
//===----------------------------------------------------------------------===//

int32_t printKind(Type t) {
  if (isa<LLVM::LLVMPointerType>(t))
    return kPrintPtr;
  if (t.isF16())
    return kPrintF16;
  if (t.isBF16())
    return kPrintBF16;
  if (t.isF32())
    return kPrintF32;
  if (t.isF64())
    return kPrintF64;
  switch (t.getIntOrFloatBitWidth()) {
  case 1:
    return kPrintI1;
  case 8:
    return kPrintI8;
  case 16:
    return kPrintI16;
  case 32:
    return kPrintI32;
  default:
    return kPrintI64;
  }
}

struct PrintConversion : OpConversionPattern<PrintOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PrintOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value prefix = getStringPtr(rewriter, loc, op, op.getPrefix());
    SmallVector<Value> pid{getExtraArg(op, kPidX), getExtraArg(op, kPidY),
                           getExtraArg(op, kPidZ)};
    auto ptrTy = LLVM::LLVMPointerType::get(getContext());
    auto emit = [&](Value data, int32_t kind, int64_t n) {
      callRuntime(rewriter, loc, op, kPrint,
                  {pid[0], pid[1], pid[2], prefix, data, i32Val(rewriter, loc, kind),
                   i64Val(rewriter, loc, n), i32Val(rewriter, loc, op.getHex() ? 1 : 0)});
    };
    if (adaptor.getArgs().empty())
      emit(LLVM::ZeroOp::create(rewriter, loc, ptrTy), kPrintI32, 0);
    for (Value v : adaptor.getArgs()) {
      Type elem = getElementTypeOrSelf(v.getType());
      int32_t kind = printKind(elem);
      if (elem.isInteger(1))
        v = LLVM::ZExtOp::create(rewriter, loc, withElement(v.getType(), i8Ty(rewriter)), v);
      Value buf = entryAlloca(rewriter, loc, op, v.getType());
      LLVM::StoreOp::create(rewriter, loc, v, buf);
      emit(buf, kind, getNumElements(v.getType()));
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct AssertConversion : OpConversionPattern<AssertOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AssertOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value cond = adaptor.getCondition();
    if (isa<VectorType>(cond.getType()))
      cond = LLVM::vector_reduce_and::create(rewriter, loc, rewriter.getI1Type(), cond);
    Value failed = LLVM::XOrOp::create(
        rewriter, loc, cond,
        LLVM::ConstantOp::create(rewriter, loc, rewriter.getI1Type(), rewriter.getBoolAttr(true)));
    scf::IfOp::create(rewriter, loc, failed, [&](OpBuilder &b, Location l) {
      callRuntime(b, l, op, kAssertFail,
                  {getExtraArg(op, kPidX), getExtraArg(op, kPidY), getExtraArg(op, kPidZ),
                   getStringPtr(b, l, op, op.getMessage()),
                   getStringPtr(b, l, op, formatSite(loc))});
      scf::YieldOp::create(b, l);
    });
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void kiln::host::populateMemoryOpToHostPatterns(TypeConverter &converter,
                                                RewritePatternSet &patterns,
                                                const AxisInfoAnalysis &axis,
                                                const HostLoweringOptions &options) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<LoadConversion, StoreConversion>(converter, ctx, axis, options);
  patterns.add<AtomicRMWConversion, AtomicCASConversion>(converter, ctx, options);
  patterns.add<PrintConversion, AssertConversion>(converter, ctx);
}
