//===- Common.cpp - What the GPU and host lowerings share -----------------===//
//
// This file implements the kernel checks, strides, string constants and combine-region
// application that -kiln-convert-to-llvm and -kiln-convert-to-host share.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "mlir/Dialect/Arith/IR/Arith.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/xxhash.h"

using namespace mlir;

LogicalResult kiln::checkKernels(ModuleOp module) {
  bool ok = true;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isDeclaration()) {
      func.emitError() << "expected a kernel definition, found a declaration of '"
                       << func.getSymName() << "'";
      ok = false;
      continue;
    }
    if (func.getNumResults() != 0) {
      func.emitError() << "expected kernel '" << func.getSymName()
                       << "' to return nothing (outputs are written through pointers), found "
                       << func.getNumResults() << " results";
      ok = false;
    }
    for (BlockArgument arg : func.getArguments()) {
      if (isa<RankedTensorType>(arg.getType())) {
        emitError(arg.getLoc()) << "expected kernel argument #" << arg.getArgNumber() << " of '"
                                << func.getSymName() << "' to be a scalar or a pointer, found "
                                << arg.getType();
        ok = false;
      }
      Attribute div = func.getArgAttr(arg.getArgNumber(), kDivisibilityAttr);
      if (!div)
        continue;
      auto intAttr = dyn_cast<IntegerAttr>(div);
      int64_t v = intAttr ? intAttr.getValue().getSExtValue() : 0;
      if (!intAttr || v <= 0 || !llvm::isPowerOf2_64(v) || v > (int64_t(1) << 30) ||
          !isa<IntegerType, PointerType>(arg.getType())) {
        emitError(arg.getLoc()) << "expected " << kDivisibilityAttr << " of kernel argument #"
                                << arg.getArgNumber()
                                << " to be a power of two in [1, 2^30] on an integer or "
                                   "pointer argument, found "
                                << div << " on " << arg.getType();
        ok = false;
      }
    }
  }
  module.walk([&](Operation *op) {
    for (Type t : op->getResultTypes())
      if (isa<TensorType>(t) && !hasTileShape(t)) {
        op->emitError() << "expected a tile with static power-of-two dimensions, found " << t;
        ok = false;
        return;
      }
    if (isa<func::CallOp>(op)) {
      op->emitError("calls are not supported in kernels (functions are inlined by the front end)");
      ok = false;
    }
  });
  return success(ok);
}

SmallVector<int64_t> kiln::getRowMajorStrides(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int i = int(shape.size()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

LLVM::LLVMFuncOp kiln::getOrInsertFunction(OpBuilder &b, Operation *at, StringRef name,
                                           LLVM::LLVMFunctionType type) {
  auto module = at->getParentOfType<ModuleOp>();
  if (auto f = module.lookupSymbol<LLVM::LLVMFuncOp>(name))
    return f;
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(module.getBody());
  return LLVM::LLVMFuncOp::create(b, at->getLoc(), name, type);
}

Value kiln::getStringConstant(OpBuilder &b, Location loc, Operation *at, StringRef text,
                              StringRef prefix) {
  auto module = at->getParentOfType<ModuleOp>();
  std::string name = (prefix + llvm::utohexstr(llvm::xxh3_64bits(text))).str();
  auto global = module.lookupSymbol<LLVM::GlobalOp>(name);
  if (!global) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    std::string data = text.str();
    data.push_back('\0');
    auto type = LLVM::LLVMArrayType::get(b.getI8Type(), data.size());
    global = LLVM::GlobalOp::create(b, loc, type, /*isConstant=*/true, LLVM::Linkage::Internal,
                                    name, b.getStringAttr(data));
  }
  return LLVM::AddressOfOp::create(b, loc, global);
}

SmallVector<Value> kiln::applyCombineRegion(OpBuilder &b, Region &region, ArrayRef<Value> acc,
                                            ArrayRef<Value> next) {
  Block &block = region.front();
  IRMapping map;
  unsigned n = acc.size();
  for (unsigned i = 0; i < n; ++i) {
    map.map(block.getArgument(i), acc[i]);
    map.map(block.getArgument(n + i), next[i]);
  }
  for (Operation &inner : block.without_terminator())
    b.clone(inner, map);
  SmallVector<Value> out;
  for (Value v : block.getTerminator()->getOperands())
    out.push_back(map.lookupOrDefault(v));
  return out;
}

LogicalResult kiln::checkGPUSupport(ModuleOp module) {
  bool ok = succeeded(checkKernels(module));
  module.walk([&](Operation *op) {
    if (auto cst = dyn_cast<arith::ConstantOp>(op))
      if (isa<DenseElementsAttr>(cst.getValue()) && !isa<SplatElementsAttr>(cst.getValue())) {
        op->emitError() << "non-splat tile constants are not supported on the GPU path yet";
        ok = false;
        return;
      }
  });
  return success(ok);
}

LLVM::AtomicBinOp kiln::getLLVMAtomicBinOp(RMWKind kind, Type elem) {
  bool isFloat = isa<FloatType>(elem);
  switch (kind) {
  case RMWKind::and_:
    return LLVM::AtomicBinOp::_and;
  case RMWKind::or_:
    return LLVM::AtomicBinOp::_or;
  case RMWKind::xor_:
    return LLVM::AtomicBinOp::_xor;
  case RMWKind::add:
  case RMWKind::fadd:
    return isFloat ? LLVM::AtomicBinOp::fadd : LLVM::AtomicBinOp::add;
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
