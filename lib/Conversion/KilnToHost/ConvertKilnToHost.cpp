//===- ConvertKilnToHost.cpp - The -kiln-convert-to-host pass --------------===//
//
// This file implements -kiln-convert-to-host, the first step of the CPU path: it checks the
// kernels, appends the program id, grid, context and scratch arguments to every kernel,
// converts tiles to vectors in one dialect conversion (kiln ops to LLVM and vector-typed
// arith/math; scf keeps its structure with converted types; large tiles become buffers and
// loops over chunks, LargeTileToHost.cpp), approximates exp/log/erf/tanh with vectorizable
// polynomials, places the large tiles' buffers in the scratch memory, and adds each kernel's
// host entry function, which allocates that memory (see KilnToHost.h for the ABI).
// The upstream scf/arith/math/vector/cf/func -> LLVM passes finish the lowering.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Conversion/KilnToHost.h"
#include "kiln/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Func/Transforms/FuncConversions.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/SCF/Transforms/Patterns.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace kiln {
#define GEN_PASS_DEF_KILNCONVERTTOHOST
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::host;

namespace {

/// Appends the ExtraArg arguments to `func`.
void addExtraArgs(func::FuncOp func) {
  MLIRContext *ctx = func.getContext();
  Type i32 = IntegerType::get(ctx, 32);
  SmallVector<Type> types(kContext, i32);
  types.push_back(LLVM::LLVMPointerType::get(ctx)); // kContext
  types.push_back(LLVM::LLVMPointerType::get(ctx)); // kScratch
  unsigned n = func.getNumArguments();
  SmallVector<unsigned> indices(kNumExtraArgs, n);
  SmallVector<DictionaryAttr> attrs(kNumExtraArgs, DictionaryAttr::get(ctx));
  SmallVector<Location> locs(kNumExtraArgs, func.getLoc());
  (void)func.insertArguments(indices, types, attrs, locs);
}

/// Declares (once) the C library's function `name` of type `type`.
LLVM::LLVMFuncOp declareLibc(OpBuilder &b, ModuleOp module, StringRef name,
                             LLVM::LLVMFunctionType type) {
  if (auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
    return fn;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  return LLVM::LLVMFuncOp::create(b, module.getLoc(), name, type);
}

/// func.func @k.host_entry(%params, %grid, %begin: i64, %end: i64, %ctx): loads the
/// kernel's arguments from the packed parameters, then calls the kernel for every linear
/// program id in [begin, end). A kernel with large tiles gets `scratchBytes` of scratch
/// memory, allocated once per call (the kernel's stack would not hold tiles of megabytes,
/// on any thread of the grid).
void buildEntry(OpBuilder &b, func::FuncOp kernel, ArrayRef<Type> paramTypes,
                int64_t scratchBytes) {
  MLIRContext *ctx = b.getContext();
  Location loc = kernel.getLoc();
  auto ptrTy = LLVM::LLVMPointerType::get(ctx);
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto type = b.getFunctionType({ptrTy, ptrTy, i64, i64, ptrTy}, {});
  b.setInsertionPointAfter(kernel);
  auto entry = func::FuncOp::create(b, loc, getEntryName(kernel.getSymName()), type);
  Block *body = entry.addEntryBlock();
  b.setInsertionPointToStart(body);
  Value params = body->getArgument(0), grid = body->getArgument(1);
  SmallVector<Value> args;
  for (auto [i, t] : llvm::enumerate(paramTypes)) {
    Value slot =
        LLVM::GEPOp::create(b, loc, ptrTy, ptrTy, params, ArrayRef<LLVM::GEPArg>{int32_t(i)});
    Value p = LLVM::LoadOp::create(b, loc, ptrTy, slot);
    args.push_back(LLVM::LoadOp::create(b, loc, t, p));
  }
  SmallVector<Value> dims;
  for (int32_t d = 0; d < 3; ++d) {
    Value p = LLVM::GEPOp::create(b, loc, ptrTy, i32, grid, ArrayRef<LLVM::GEPArg>{d});
    dims.push_back(LLVM::LoadOp::create(b, loc, i32, p));
  }
  auto module = kernel->getParentOfType<ModuleOp>();
  Value scratch = LLVM::ZeroOp::create(b, loc, ptrTy);
  if (scratchBytes > 0) {
    auto malloc = declareLibc(b, module, "malloc", LLVM::LLVMFunctionType::get(ptrTy, {i64}));
    Value size = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(scratchBytes));
    scratch = LLVM::CallOp::create(b, loc, malloc, ValueRange{size}).getResult();
  }
  Value gx = arith::ExtUIOp::create(b, loc, i64, dims[0]);
  Value gy = arith::ExtUIOp::create(b, loc, i64, dims[1]);
  Value one = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1));
  scf::ForOp::create(b, loc, body->getArgument(2), body->getArgument(3), one, ValueRange{},
                     [&](OpBuilder &lb, Location l, Value id, ValueRange) {
                       Value x = arith::RemUIOp::create(lb, l, id, gx);
                       Value rest = arith::DivUIOp::create(lb, l, id, gx);
                       Value y = arith::RemUIOp::create(lb, l, rest, gy);
                       Value z = arith::DivUIOp::create(lb, l, rest, gy);
                       SmallVector<Value> callArgs(args);
                       for (Value v : {x, y, z})
                         callArgs.push_back(arith::TruncIOp::create(lb, l, i32, v));
                       callArgs.append(dims.begin(), dims.end());
                       callArgs.push_back(body->getArgument(4));
                       callArgs.push_back(scratch);
                       func::CallOp::create(lb, l, kernel, callArgs);
                       scf::YieldOp::create(lb, l);
                     });
  if (scratchBytes > 0) {
    auto free = declareLibc(b, module, "free",
                            LLVM::LLVMFunctionType::get(LLVM::LLVMVoidType::get(ctx), {ptrTy}));
    LLVM::CallOp::create(b, loc, free, ValueRange{scratch});
  }
  func::ReturnOp::create(b, loc);
}

/// Whether the pointer `v` may hold an address the kernel made from an integer (kiln.ptr_cast
/// of an i64, tutorial 08's loaded operand addresses) or loaded from memory: following
/// pointer arithmetic, shape ops, selects and loop-carried values back to their start.
bool fromComputedAddress(Value v, llvm::SmallPtrSetImpl<Value> &seen) {
  if (!v || !seen.insert(v).second)
    return false;
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto loop = dyn_cast_or_null<scf::ForOp>(arg.getOwner()->getParentOp());
    if (!loop || arg.getArgNumber() == 0)
      return false;
    unsigned i = arg.getArgNumber() - 1;
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    return fromComputedAddress(loop.getInitArgs()[i], seen) ||
           fromComputedAddress(yield.getOperand(i), seen);
  }
  Operation *def = v.getDefiningOp();
  if (auto c = dyn_cast<PtrCastOp>(def))
    return !isa<PointerType>(getElementTypeOrSelf(c.getSrc().getType())) ||
           fromComputedAddress(c.getSrc(), seen);
  if (isa<LoadOp>(def))
    return true; // a pointer read from memory
  if (isa<AddPtrOp, SplatOp, BroadcastOp, ExpandDimsOp, ReshapeOp, TransOp>(def))
    return fromComputedAddress(def->getOperand(0), seen);
  if (auto sel = dyn_cast<arith::SelectOp>(def))
    return fromComputedAddress(sel.getTrueValue(), seen) ||
           fromComputedAddress(sel.getFalseValue(), seen);
  if (auto forOp = dyn_cast<scf::ForOp>(def)) {
    unsigned i = cast<OpResult>(v).getResultNumber();
    return fromComputedAddress(forOp.getInitArgs()[i], seen) ||
           fromComputedAddress(forOp.getBody()->getTerminator()->getOperand(i), seen);
  }
  if (auto ifOp = dyn_cast<scf::IfOp>(def)) {
    unsigned i = cast<OpResult>(v).getResultNumber();
    for (Region *r : {&ifOp.getThenRegion(), &ifOp.getElseRegion()})
      if (!r->empty() && fromComputedAddress(r->front().getTerminator()->getOperand(i), seen))
        return true;
  }
  return false;
}

/// Marks (kUncheckedAccessAttr) the loads, stores and atomics whose addresses the kernel
/// computed from integers or read from memory: no buffer argument holds them, so the bounds
/// check (MemoryOpToHost.cpp) cannot know their bounds and leaves them alone.
void markComputedAddressAccesses(ModuleOp module) {
  module.walk([](Operation *op) {
    Value ptr;
    if (auto load = dyn_cast<LoadOp>(op))
      ptr = load.getPtr();
    else if (auto store = dyn_cast<StoreOp>(op))
      ptr = store.getPtr();
    else if (auto rmw = dyn_cast<AtomicRMWOp>(op))
      ptr = rmw.getPtr();
    else if (auto cas = dyn_cast<AtomicCASOp>(op))
      ptr = cas.getPtr();
    llvm::SmallPtrSet<Value, 16> seen;
    if (ptr && fromComputedAddress(ptr, seen))
      op->setAttr(kUncheckedAccessAttr, UnitAttr::get(op->getContext()));
  });
}

/// `type` (a tile or a scalar) with element type `element`.
Type withElement(Type type, Type element) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return tensor.clone(element);
  return element;
}

/// The constant `attr` in the shape of `type` (a tile: splat; a scalar: itself).
Value constantLike(OpBuilder &b, Location loc, Type type, TypedAttr attr) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return arith::ConstantOp::create(b, loc,
                                     DenseElementsAttr::get(tensor.clone(attr.getType()), attr));
  return arith::ConstantOp::create(b, loc, attr);
}

/// Rewrites f64 -> bf16 truncations (tiles or scalars) as f64 -> f32 -> bf16: LLVM calls
/// __truncdfbf2 for the direct one, which neither libgcc nor the process may have. Exact: the
/// f32 step rounds to odd (round to nearest, then step toward zero if that overshot, then set
/// the lowest bit if inexact), and an f32 carries enough extra bits that rounding it to
/// nearest-even bf16 then equals rounding the f64 directly.
void splitTruncF64ToBF16(ModuleOp module) {
  SmallVector<arith::TruncFOp> truncs;
  module.walk([&](arith::TruncFOp op) {
    if (getElementTypeOrSelf(op.getIn().getType()).isF64() &&
        getElementTypeOrSelf(op.getType()).isBF16())
      truncs.push_back(op);
  });
  for (arith::TruncFOp op : truncs) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    Type type = op.getIn().getType();
    auto like = [&](Type element) { return withElement(type, element); };
    auto constant = [&](TypedAttr attr) { return constantLike(b, loc, type, attr); };
    Value x = op.getIn();
    Value near = arith::TruncFOp::create(b, loc, like(b.getF32Type()), x);
    Value back = arith::ExtFOp::create(b, loc, type, near);
    Value bits = arith::BitcastOp::create(b, loc, like(b.getI32Type()), near);
    Value inexact = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, back, x);
    Value overshot =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, math::AbsFOp::create(b, loc, back),
                              math::AbsFOp::create(b, loc, x));
    Value one = constant(b.getI32IntegerAttr(1));
    Value down = arith::SubIOp::create(b, loc, bits, one);
    Value towardZero = arith::SelectOp::create(b, loc, overshot, down, bits);
    Value odd = arith::OrIOp::create(b, loc, towardZero, one);
    Value rounded = arith::SelectOp::create(b, loc, inexact, odd, bits);
    Value f32 = arith::BitcastOp::create(b, loc, like(b.getF32Type()), rounded);
    op.getInMutable().assign(f32);
  }
}

/// Compares, maxima and minima of bf16 values (tiles or scalars) in f32, widened and narrowed
/// by integer ops: the bf16 bits are the f32's upper half, so both steps are exact (NaNs and
/// signed zeros included; a result is one of the operands or a NaN) and stay vector code.
/// Left to LLVM, an fcmp or maximum of <N x bfloat> on x86 without AVX512-BF16 was legalized
/// element by element: a bf16 tl.topk over 512 columns took 114 s to compile (the machine
/// scheduler on the blocks that made), fp16 9 s.
void widenBF16CompareOps(ModuleOp module) {
  SmallVector<Operation *> ops;
  module.walk([&](Operation *op) {
    if (isa<arith::CmpFOp, arith::MaximumFOp, arith::MinimumFOp, arith::MaxNumFOp,
            arith::MinNumFOp>(op) &&
        getElementTypeOrSelf(op->getOperand(0).getType()).isBF16())
      ops.push_back(op);
  });
  for (Operation *op : ops) {
    OpBuilder b(op);
    Location loc = op->getLoc();
    Type type = op->getOperand(0).getType();
    auto like = [&](Type element) { return withElement(type, element); };
    Value sixteen = constantLike(b, loc, type, b.getI32IntegerAttr(16));
    auto widen = [&](Value x) -> Value {
      Value bits = arith::BitcastOp::create(b, loc, like(b.getI16Type()), x);
      Value wide = arith::ExtUIOp::create(b, loc, like(b.getI32Type()), bits);
      Value high = arith::ShLIOp::create(b, loc, wide, sixteen);
      return arith::BitcastOp::create(b, loc, like(b.getF32Type()), high);
    };
    Value lhs = widen(op->getOperand(0)), rhs = widen(op->getOperand(1));
    if (isa<arith::CmpFOp>(op)) {
      op->setOperands({lhs, rhs});
      continue;
    }
    // The f32 result's upper half: the operand it is, or a NaN.
    OperationState state(loc, op->getName(), ValueRange{lhs, rhs}, {like(b.getF32Type())},
                         op->getAttrs());
    Value wide = b.create(state)->getResult(0);
    Value bits = arith::BitcastOp::create(b, loc, like(b.getI32Type()), wide);
    Value high = arith::ShRUIOp::create(b, loc, bits, sixteen);
    Value narrow = arith::TruncIOp::create(b, loc, like(b.getI16Type()), high);
    op->getResult(0).replaceAllUsesWith(arith::BitcastOp::create(b, loc, type, narrow));
    op->erase();
  }
}

struct KilnConvertToHostPass final : kiln::impl::KilnConvertToHostBase<KilnConvertToHostPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *ctx = &getContext();
    if (failed(checkKernels(module)))
      return signalPassFailure();
    routeF64ErfThroughLibdevice(module);
    if (failed(checkExternFunctions(module)))
      return signalPassFailure();
    splitTruncF64ToBF16(module);
    widenBF16CompareOps(module);
    markComputedAddressAccesses(module);
    markLargeYields(module);

    SmallVector<func::FuncOp> kernels(module.getOps<func::FuncOp>());
    for (func::FuncOp func : kernels) {
      for (unsigned i = 0; i < func.getNumArguments(); ++i)
        func.removeArgAttr(i, kDivisibilityAttr);
      addExtraArgs(func);
    }
    // The user's hints are not facts here: every access is exact (AxisInfo.h).
    AxisInfoAnalysis axis(module, /*trustHints=*/false);

    HostTypeConverter converter(ctx);
    HostLoweringOptions options;
    options.debug = debug;
    RewritePatternSet patterns(ctx);
    populateTileOpToHostPatterns(converter, patterns);
    populateLargeTileToHostPatterns(converter, patterns);
    populateMemoryOpToHostPatterns(converter, patterns, axis, options);
    populateReduceOpToHostPatterns(converter, patterns);
    populateExternOpToHostPatterns(converter, patterns);
    populateFunctionOpInterfaceTypeConversionPattern<func::FuncOp>(patterns, converter);
    populateReturnOpTypeConversionPattern(patterns, converter);

    ConversionTarget target(*ctx);
    target.addIllegalDialect<KilnDialect>();
    target.addLegalDialect<LLVM::LLVMDialect, vector::VectorDialect>();
    target.addDynamicallyLegalDialect<arith::ArithDialect, math::MathDialect>(
        [&](Operation *op) { return converter.isLegal(op); });
    target.addDynamicallyLegalOp<func::FuncOp>([&](func::FuncOp op) {
      return converter.isSignatureLegal(op.getFunctionType()) && converter.isLegal(&op.getBody());
    });
    target.addDynamicallyLegalOp<func::ReturnOp>(
        [&](func::ReturnOp op) { return converter.isLegal(op); });
    target.addLegalOp<ModuleOp, UnrealizedConversionCastOp>();
    scf::populateSCFStructuralTypeConversionsAndLegality(converter, patterns, target);
    if (failed(applyPartialConversion(module, target, std::move(patterns))))
      return signalPassFailure();

    // exp, log, erf, tanh on vectors: polynomials LLVM vectorizes, instead of libm per lane.
    RewritePatternSet math(ctx);
    auto approximated = [](StringRef name) {
      name.consume_front("math.");
      return llvm::is_contained({"exp", "exp2", "log", "log2", "log1p", "erf", "tanh", "expm1"},
                                name);
    };
    populateMathF32ExpansionPatterns(math, approximated);
    populateMathPolynomialApproximationPatterns(math, approximated);
    if (failed(applyPatternsGreedily(module, std::move(math))))
      return signalPassFailure();

    OpBuilder b(ctx);
    for (func::FuncOp kernel : kernels) {
      SmallVector<Type> params(kernel.getFunctionType().getInputs().drop_back(kNumExtraArgs));
      buildEntry(b, kernel, params, placeTileBuffers(kernel));
      // Only the entry is a symbol of the object: the kernel is inlined into its loop.
      kernel.setPrivate();
      kernel->setAttr("llvm.linkage", LLVM::LinkageAttr::get(ctx, LLVM::Linkage::Internal));
    }
  }
};

} // namespace
