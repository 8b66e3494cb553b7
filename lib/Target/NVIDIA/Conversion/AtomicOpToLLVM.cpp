//===- AtomicOpToLLVM.cpp - atomic_rmw and atomic_cas to LLVM -------------===//
//
// This file implements the lowering of Kiln's atomics to PTX `atom` (PTX ISA 9.7.13.5):
// one atomic per owned element, predicated by the mask and by the owner predicate so that an
// element replicated across threads is updated once. A scalar atomic runs on thread 0 and
// its old value reaches every thread through shared memory. 8- and 16-bit read-modify-writes,
// which `atom` mostly lacks, are relaxed LLVM atomicrmw instructions behind a branch on the
// predicate, between fences that give them the op's semantics: LLVM's atomic expansion makes
// them compare-and-swap loops on the aligned 32-bit word around the element where PTX has no
// native form, and uses atom.add.noftz.f16/.bf16 or a 32-bit and/or/xor where it has one
// (forms NVPTX emits without ordering, hence the fences).
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

/// ".b32" style suffix and inline-asm register class for a scalar type, given how the op
/// interprets it (`kind`: 'b' bits, 's' signed, 'u' unsigned, 'f' float).
std::pair<std::string, std::string> ptxType(Type t, char kind) {
  unsigned bits = isa<LLVM::LLVMPointerType>(t) ? 64 : t.getIntOrFloatBitWidth();
  std::string reg = isa<FloatType>(t) ? (bits == 64 ? "d" : "f")
                    : bits == 64      ? "l"
                    : bits == 16      ? "h"
                                      : "r";
  return {std::string(".") + kind + std::to_string(bits), reg};
}

/// PTX operation and type interpretation of an RMW kind.
std::pair<StringRef, char> ptxOp(RMWKind kind, Type elem) {
  switch (kind) {
  case RMWKind::and_:
    return {"and", 'b'};
  case RMWKind::or_:
    return {"or", 'b'};
  case RMWKind::xor_:
    return {"xor", 'b'};
  case RMWKind::add:
    return {"add", 'u'};
  case RMWKind::fadd:
    return {"add", 'f'};
  case RMWKind::max:
    return {"max", isa<FloatType>(elem) ? 'f' : 's'};
  case RMWKind::min:
    return {"min", isa<FloatType>(elem) ? 'f' : 's'};
  case RMWKind::umax:
    return {"max", 'u'};
  case RMWKind::umin:
    return {"min", 'u'};
  case RMWKind::xchg:
    return {"exch", 'b'};
  }
  return {"", 'b'};
}

std::string semScope(MemSemantic sem, MemScope scope) {
  return "." + stringifyMemSemantic(sem).str() + "." + stringifyMemScope(scope).str();
}

/// One predicated atomic; `operands` follow the address. Returns the old value.
Value emitAtom(OpBuilder &b, Location loc, Type resultType, StringRef opcode, Value pred, Value ptr,
               ArrayRef<Value> operands, StringRef reg) {
  std::string asmStr, constraints = "=" + reg.str();
  SmallVector<Value> args;
  unsigned idx = 1;
  if (pred) {
    asmStr += "@$" + std::to_string(idx++) + " ";
    constraints += ",b";
    args.push_back(pred);
  }
  asmStr += opcode.str() + " $0, [ $" + std::to_string(idx++) + " + 0 ]";
  constraints += ",l";
  args.push_back(ptr);
  for (Value v : operands) {
    asmStr += ", $" + std::to_string(idx++);
    constraints += "," + reg.str();
    args.push_back(v);
  }
  asmStr += ";";
  return emitInlineAsm(b, loc, resultType, args, asmStr, constraints, /*sideEffects=*/true);
}

/// NVPTX's synchronization scope names: "block" (cta), "device" (gpu), "" (system).
StringRef llvmSyncScope(MemScope scope) {
  switch (scope) {
  case MemScope::cta:
    return "block";
  case MemScope::gpu:
    return "device";
  case MemScope::sys:
    return "";
  }
  return "";
}

/// A relaxed `atomicrmw` of `val` at `ptr` where `pred` holds (always without one);
/// elsewhere the result is zero. The op's fences order it (see the file comment).
Value emitPredicatedRMW(ConversionPatternRewriter &rewriter, Location loc, AtomicRMWOp op,
                        Value pred, Value ptr, Value val) {
  auto rmw = [&]() -> Value {
    return LLVM::AtomicRMWOp::create(rewriter, loc, getLLVMAtomicBinOp(op.getKind(), val.getType()),
                                     ptr, val, LLVM::AtomicOrdering::monotonic,
                                     llvmSyncScope(op.getScope()))
        .getResult();
  };
  if (!pred)
    return rmw();
  Type type = val.getType();
  Block *current = rewriter.getInsertionBlock();
  Block *join = rewriter.splitBlock(current, rewriter.getInsertionPoint());
  join->addArgument(type, loc);
  Block *body = rewriter.createBlock(join);
  rewriter.setInsertionPointToEnd(current);
  Value zero = LLVM::ZeroOp::create(rewriter, loc, type);
  LLVM::CondBrOp::create(rewriter, loc, pred, body, ValueRange{}, join, ValueRange{zero});
  rewriter.setInsertionPointToEnd(body);
  LLVM::BrOp::create(rewriter, loc, ValueRange{rmw()}, join);
  rewriter.setInsertionPointToStart(join);
  return join->getArgument(0);
}

/// Runs `emit(pred)` for every owned element of a tile, or on thread 0 for a scalar (whose
/// result is then shared through shared memory), and replaces `op` with the results.
template <typename OpTy>
LogicalResult lowerAtomic(OpTy op, Value ptrs, Value mask, const TypeConverter *converter,
                          const SharedScratch &scratch, const TargetInfo &target,
                          ConversionPatternRewriter &rewriter,
                          function_ref<Value(unsigned i, Value pred, Value ptr)> emit) {
  Location loc = op.getLoc();
  Type elemType = converter->convertType(getElementTypeOrSelf(op.getType()));
  if (auto type = dyn_cast<RankedTensorType>(op.getType())) {
    Value owner = emitOwnerPredicate(rewriter, loc, type, target);
    SmallVector<Value> ptrFields = unpackStruct(rewriter, loc, ptrs);
    SmallVector<Value> maskFields;
    if (mask)
      maskFields = unpackStruct(rewriter, loc, mask);
    SmallVector<Value> out;
    for (unsigned i = 0; i < ptrFields.size(); ++i) {
      Value pred = owner;
      if (mask)
        pred =
            pred ? Value(LLVM::AndOp::create(rewriter, loc, pred, maskFields[i])) : maskFields[i];
      out.push_back(emit(i, pred, ptrFields[i]));
    }
    rewriter.replaceOp(op, packStruct(rewriter, loc, converter->convertType(type), out));
    return success();
  }
  Value tid = target.getThreadId(rewriter, loc);
  Value pred =
      LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::eq, tid, i32Const(rewriter, loc, 0));
  if (mask)
    pred = LLVM::AndOp::create(rewriter, loc, pred, mask);
  Value old = emit(0, pred, ptrs);
  // Thread 0 publishes the old value; every thread reads it after the barrier.
  Value buffer = scratch.getPart(rewriter, loc, op, 0);
  if (scratch.needsBarrierBefore(op))
    target.barrier(rewriter, loc);
  Block *current = rewriter.getInsertionBlock();
  Block *after = rewriter.splitBlock(current, rewriter.getInsertionPoint());
  Block *store = rewriter.createBlock(after);
  rewriter.setInsertionPointToEnd(current);
  Value isZero =
      LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::eq, tid, i32Const(rewriter, loc, 0));
  LLVM::CondBrOp::create(rewriter, loc, isZero, store, after);
  rewriter.setInsertionPointToEnd(store);
  LLVM::StoreOp::create(rewriter, loc, old, buffer);
  LLVM::BrOp::create(rewriter, loc, after);
  rewriter.setInsertionPointToStart(after);
  target.barrier(rewriter, loc);
  Value shared = LLVM::LoadOp::create(rewriter, loc, elemType, buffer);
  rewriter.replaceOp(op, shared);
  return success();
}

struct AtomicRMWOpLowering final : ConvertOpToLLVMPattern<AtomicRMWOp> {
  AtomicRMWOpLowering(const LLVMTypeConverter &converter, const SharedScratch &scratch,
                      const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), scratch(scratch), target(target) {}
  LogicalResult matchAndRewrite(AtomicRMWOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type elem = getTypeConverter()->convertType(getElementTypeOrSelf(op.getType()));
    unsigned bits = elem.getIntOrFloatBitWidth();
    SmallVector<Value> vals = unpackStruct(rewriter, op.getLoc(), adaptor.getVal());
    if (bits < 32) {
      // release: earlier accesses before every element's update; acquire: later ones after.
      MemSemantic sem = op.getSem();
      StringRef scope = llvmSyncScope(op.getScope());
      if (sem == MemSemantic::release || sem == MemSemantic::acq_rel)
        LLVM::FenceOp::create(rewriter, op.getLoc(), LLVM::AtomicOrdering::release, scope);
      Location loc = op.getLoc();
      LogicalResult lowered =
          lowerAtomic(op, adaptor.getPtr(), adaptor.getMask(), getTypeConverter(), scratch, target,
                      rewriter, [&](unsigned i, Value pred, Value ptr) {
                        return emitPredicatedRMW(rewriter, loc, op, pred, ptr, vals[i]);
                      });
      if (sem == MemSemantic::acquire || sem == MemSemantic::acq_rel)
        LLVM::FenceOp::create(rewriter, loc, LLVM::AtomicOrdering::acquire, scope);
      return lowered;
    }
    auto [opName, kind] = ptxOp(op.getKind(), elem);
    auto [typeSuffix, reg] = ptxType(elem, kind);
    std::string opcode =
        "atom" + semScope(op.getSem(), op.getScope()) + ".global." + opName.str() + typeSuffix;
    return lowerAtomic(op, adaptor.getPtr(), adaptor.getMask(), getTypeConverter(), scratch, target,
                       rewriter, [&](unsigned i, Value pred, Value ptr) {
                         return emitAtom(rewriter, op.getLoc(), elem, opcode, pred, ptr, {vals[i]},
                                         reg);
                       });
  }
  const SharedScratch &scratch;
  const TargetInfo &target;
};

struct AtomicCASOpLowering final : ConvertOpToLLVMPattern<AtomicCASOp> {
  AtomicCASOpLowering(const LLVMTypeConverter &converter, const SharedScratch &scratch,
                      const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), scratch(scratch), target(target) {}
  LogicalResult matchAndRewrite(AtomicCASOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Type elem = getTypeConverter()->convertType(getElementTypeOrSelf(op.getType()));
    unsigned bits = isa<LLVM::LLVMPointerType>(elem) ? 64 : elem.getIntOrFloatBitWidth();
    if (bits != 16 && bits != 32 && bits != 64)
      return op.emitError("atomic_cas on ")
             << bits << "-bit elements is not supported (16, 32 and 64 bits are, as in Triton)";
    // cas compares bits: move floats through integer registers.
    Type bitsType = rewriter.getIntegerType(bits);
    auto [typeSuffix, reg] = ptxType(bitsType, 'b');
    std::string opcode = "atom" + semScope(op.getSem(), op.getScope()) + ".global.cas" + typeSuffix;
    Location loc = op.getLoc();
    auto toBits = [&](Value v) -> Value {
      if (isa<LLVM::LLVMPointerType>(v.getType()))
        return LLVM::PtrToIntOp::create(rewriter, loc, bitsType, v);
      return isa<IntegerType>(v.getType())
                 ? v
                 : Value(LLVM::BitcastOp::create(rewriter, loc, bitsType, v));
    };
    SmallVector<Value> cmps = unpackStruct(rewriter, loc, adaptor.getCmp());
    SmallVector<Value> vals = unpackStruct(rewriter, loc, adaptor.getVal());
    return lowerAtomic(op, adaptor.getPtr(), Value(), getTypeConverter(), scratch, target, rewriter,
                       [&](unsigned i, Value pred, Value ptr) -> Value {
                         Value old = emitAtom(rewriter, loc, bitsType, opcode, pred, ptr,
                                              {toBits(cmps[i]), toBits(vals[i])}, reg);
                         if (isa<LLVM::LLVMPointerType>(elem))
                           return LLVM::IntToPtrOp::create(rewriter, loc, elem, old);
                         return isa<IntegerType>(elem)
                                    ? old
                                    : Value(LLVM::BitcastOp::create(rewriter, loc, elem, old));
                       });
  }
  const SharedScratch &scratch;
  const TargetInfo &target;
};

} // namespace

void kiln::populateAtomicOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                          RewritePatternSet &patterns, const SharedScratch &scratch,
                                          const TargetInfo &target) {
  patterns.add<AtomicRMWOpLowering, AtomicCASOpLowering>(converter, scratch, target);
}
