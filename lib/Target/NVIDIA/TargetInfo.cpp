//===- TargetInfo.cpp - NVIDIA hooks of the GPU lowering ------------------===//
//
// This file implements TargetInfo for PTX: special registers through NVVM ops, predicated
// global accesses as inline PTX (so that a masked-out lane issues no memory transaction), and
// 2^x through ex2.approx.ftz.f32 (PTX ISA 9.7.3.22; max relative error 2^-22; results below
// 2^-126 flush to zero, as Triton's exp and exp2 do: the non-ftz form costs a compare and two
// multiplies around each MUFU.EX2 to produce subnormals).
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/TargetInfo.h"
#include "kiln/Dialect/KilnGPU/IR/Dialect.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace kiln;

namespace {

/// Inline-asm register constraint and register type of a word (PTX has no 8-bit registers:
/// byte accesses use 16-bit ones, PTX ISA 5.2.2).
std::pair<StringRef, unsigned> regFor(unsigned wordBits) {
  switch (wordBits) {
  case 64:
    return {"l", 64};
  case 32:
    return {"r", 32};
  default:
    return {"h", 16};
  }
}

/// "ld.global" / "st.global" with its qualifiers; `.v2`/`.v4` and the type are appended. An
/// eviction policy is an L2 cache hint (`.L2::cache_hint` with a policy operand made by
/// createpolicy, PTX ISA 9.7.9.17 and 9.7.9.19), which combines with a cache operator.
std::string accessOpcode(StringRef base, unsigned numWords, unsigned wordBits,
                         const AccessModifiers &mods) {
  std::string s = base.str();
  s += mods.isVolatile ? ".volatile.global" : ".global";
  if (!mods.cache.empty())
    s += "." + mods.cache.str();
  if (!mods.eviction.empty())
    s += ".L2::cache_hint";
  if (numWords > 1)
    s += ".v" + std::to_string(numWords);
  return s + ".b" + std::to_string(wordBits);
}

/// Wraps `access` (which ends in "]" or "}" before its ';') in a scope creating the L2
/// eviction policy it uses, when there is one.
std::string withPolicy(std::string access, const AccessModifiers &mods) {
  if (mods.eviction.empty())
    return access;
  // "evict_first" -> L2::evict_first; the policy covers the whole access (fraction 1.0).
  access.insert(access.rfind(';'), ", %kiln_policy");
  return "{\n\t.reg .b64 %kiln_policy;\n\tcreatepolicy.fractional.L2::" + mods.eviction.str() +
         ".b64 %kiln_policy, 1.0;\n\t" + access + "\n\t}";
}

Value i64Const(OpBuilder &b, Location loc, int64_t v) {
  return LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(v));
}

/// shfl.sync.bfly.b32 over the full warp; c = 0x1f: the whole warp is one segment.
Value shfl32(OpBuilder &b, Location loc, Value v, unsigned laneMask) {
  Value full = i32Const(b, loc, -1);
  Value offset = i32Const(b, loc, laneMask);
  Value clamp = i32Const(b, loc, 0x1f);
  return NVVM::ShflOp::create(b, loc, b.getI32Type(), full, v, offset, clamp, NVVM::ShflKind::bfly,
                              UnitAttr());
}

class NVIDIATargetInfo final : public TargetInfo {
public:
  Value getProgramId(OpBuilder &b, Location loc, unsigned axis) const override {
    Type i32 = b.getI32Type();
    switch (axis) {
    case 0:
      return NVVM::BlockIdXOp::create(b, loc, i32);
    case 1:
      return NVVM::BlockIdYOp::create(b, loc, i32);
    default:
      return NVVM::BlockIdZOp::create(b, loc, i32);
    }
  }

  Value getNumPrograms(OpBuilder &b, Location loc, unsigned axis) const override {
    Type i32 = b.getI32Type();
    switch (axis) {
    case 0:
      return NVVM::GridDimXOp::create(b, loc, i32);
    case 1:
      return NVVM::GridDimYOp::create(b, loc, i32);
    default:
      return NVVM::GridDimZOp::create(b, loc, i32);
    }
  }

  Value getThreadId(OpBuilder &b, Location loc) const override {
    return NVVM::ThreadIdXOp::create(b, loc, b.getI32Type());
  }

  SmallVector<Value> emitLoad(OpBuilder &b, Location loc, Value ptr, Value pred, unsigned wordBits,
                              unsigned numWords, ValueRange other,
                              const AccessModifiers &mods) const override {
    auto [reg, regBits] = regFor(wordBits);
    Type regTy = b.getIntegerType(regBits);
    std::string asmStr, constraints;
    SmallVector<Value> operands;
    // Operands: outputs $0..$n-1, then pred, address, other words.
    unsigned idx = numWords;
    std::string predRef;
    if (pred) {
      predRef = "@$" + std::to_string(idx++) + " ";
      operands.push_back(pred);
    }
    unsigned addrIdx = idx++;
    operands.push_back(ptr);
    for (unsigned k = 0; k < numWords; ++k)
      constraints += (k ? ",=" : "=") + reg.str();
    if (pred)
      constraints += ",b";
    constraints += ",l";
    // Lanes that do not load keep `other`: move it in first, then load under the predicate.
    for (unsigned k = 0; k < other.size(); ++k) {
      Value w = other[k];
      if (regBits != wordBits)
        w = LLVM::ZExtOp::create(b, loc, regTy, w);
      operands.push_back(w);
      constraints += "," + reg.str();
      asmStr += "mov.b" + std::to_string(regBits) + " $" + std::to_string(k) + ", $" +
                std::to_string(idx++) + ";\n\t";
    }
    asmStr += predRef + accessOpcode("ld", numWords, wordBits, mods) + " ";
    std::string outs;
    for (unsigned k = 0; k < numWords; ++k)
      outs += (k ? ", $" : "$") + std::to_string(k);
    asmStr += numWords > 1 ? "{ " + outs + " }" : outs;
    asmStr += ", [ $" + std::to_string(addrIdx) + " + 0 ];";
    asmStr = withPolicy(asmStr, mods);
    Type resTy = numWords == 1 ? regTy
                               : Type(LLVM::LLVMStructType::getLiteral(
                                     b.getContext(), SmallVector<Type>(numWords, regTy)));
    auto asmOp = LLVM::InlineAsmOp::create(b, loc, resTy, operands, asmStr, constraints,
                                           /*has_side_effects=*/true, /*is_align_stack=*/false,
                                           LLVM::tailcallkind::TailCallKind::None,
                                           LLVM::AsmDialectAttr(), ArrayAttr());
    SmallVector<Value> words = unpackStruct(b, loc, asmOp.getResult(0));
    if (regBits != wordBits)
      for (Value &w : words)
        w = LLVM::TruncOp::create(b, loc, b.getIntegerType(wordBits), w);
    return words;
  }

  void emitStore(OpBuilder &b, Location loc, Value ptr, Value pred, unsigned wordBits,
                 ValueRange words, const AccessModifiers &mods) const override {
    auto [reg, regBits] = regFor(wordBits);
    Type regTy = b.getIntegerType(regBits);
    SmallVector<Value> operands;
    std::string constraints, asmStr;
    unsigned idx = 0;
    if (pred) {
      asmStr += "@$" + std::to_string(idx++) + " ";
      operands.push_back(pred);
      constraints += "b,";
    }
    unsigned addrIdx = idx++;
    operands.push_back(ptr);
    constraints += "l";
    std::string ins;
    for (unsigned k = 0; k < words.size(); ++k) {
      Value w = words[k];
      if (regBits != wordBits)
        w = LLVM::ZExtOp::create(b, loc, regTy, w);
      operands.push_back(w);
      constraints += "," + reg.str();
      ins += (k ? ", $" : "$") + std::to_string(idx++);
    }
    asmStr += accessOpcode("st", words.size(), wordBits, mods) + " [ $" + std::to_string(addrIdx) +
              " + 0 ], " + (words.size() > 1 ? "{ " + ins + " }" : ins) + ";";
    asmStr = withPolicy(asmStr, mods);
    LLVM::InlineAsmOp::create(b, loc, TypeRange(), operands, asmStr, constraints,
                              /*has_side_effects=*/true, /*is_align_stack=*/false,
                              LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(),
                              ArrayAttr());
  }

  Value shuffleXor(OpBuilder &b, Location loc, Value v, unsigned laneMask) const override {
    Type type = v.getType();
    unsigned bits = isa<LLVM::LLVMPointerType>(type) ? 64 : type.getIntOrFloatBitWidth();
    Type i32 = b.getI32Type();
    if (bits == 64) {
      // Two 32-bit shuffles of the halves (shfl.sync moves 32 bits, PTX ISA 9.7.8.6).
      Type i64 = b.getI64Type();
      Value w = isa<LLVM::LLVMPointerType>(type) ? Value(LLVM::PtrToIntOp::create(b, loc, i64, v))
                                                 : Value(LLVM::BitcastOp::create(b, loc, i64, v));
      Value lo = LLVM::TruncOp::create(b, loc, i32, w);
      Value hi =
          LLVM::TruncOp::create(b, loc, i32, LLVM::LShrOp::create(b, loc, w, i64Const(b, loc, 32)));
      lo = shfl32(b, loc, lo, laneMask);
      hi = shfl32(b, loc, hi, laneMask);
      Value r = LLVM::OrOp::create(
          b, loc, LLVM::ZExtOp::create(b, loc, i64, lo),
          LLVM::ShlOp::create(b, loc, LLVM::ZExtOp::create(b, loc, i64, hi), i64Const(b, loc, 32)));
      if (isa<LLVM::LLVMPointerType>(type))
        return LLVM::IntToPtrOp::create(b, loc, type, r);
      return LLVM::BitcastOp::create(b, loc, type, r);
    }
    // Narrower values travel in the low bits of a 32-bit register.
    Value w = v;
    if (!type.isInteger(32)) {
      Type ib = b.getIntegerType(bits);
      if (!isa<IntegerType>(type))
        w = LLVM::BitcastOp::create(b, loc, ib, w);
      if (bits < 32)
        w = LLVM::ZExtOp::create(b, loc, i32, w);
    }
    w = shfl32(b, loc, w, laneMask);
    if (type.isInteger(32))
      return w;
    if (bits < 32)
      w = LLVM::TruncOp::create(b, loc, b.getIntegerType(bits), w);
    if (!isa<IntegerType>(type))
      w = LLVM::BitcastOp::create(b, loc, type, w);
    return w;
  }

  /// bar.sync 0 over the program's threads; in a warp-specialized kernel (kConsumerWarpsAttr
  /// on the module) named barrier 1 over the consumer warps' threads, which are the only ones
  /// to reach the ops that emit it (see emitAllThreadsBarrier for the others).
  void barrier(OpBuilder &b, Location loc) const override {
    auto module = b.getInsertionBlock()->getParentOp()->getParentOfType<ModuleOp>();
    auto consumers =
        module ? module->getAttrOfType<IntegerAttr>(kiln::gpu::kConsumerWarpsAttr) : IntegerAttr();
    if (!consumers) {
      NVVM::Barrier0Op::create(b, loc);
      return;
    }
    Type i32 = b.getI32Type();
    Value id = LLVM::ConstantOp::create(b, loc, i32, b.getI32IntegerAttr(1));
    Value threads = LLVM::ConstantOp::create(
        b, loc, i32, b.getI32IntegerAttr(int32_t(consumers.getInt() * kiln::gpu::kWarpSize)));
    NVVM::BarrierOp::create(b, loc, Type(), id, threads, NVVM::BarrierReductionAttr(), Value());
  }

  Value emitExp2Approx(OpBuilder &b, Location loc, Value x) const override {
    auto asmOp = LLVM::InlineAsmOp::create(
        b, loc, b.getF32Type(), ValueRange{x}, "ex2.approx.ftz.f32 $0, $1;", "=f,f",
        /*has_side_effects=*/false, /*is_align_stack=*/false,
        LLVM::tailcallkind::TailCallKind::None, LLVM::AsmDialectAttr(), ArrayAttr());
    return asmOp.getResult(0);
  }
};

} // namespace

const TargetInfo &kiln::getNVIDIATargetInfo() {
  static const NVIDIATargetInfo info;
  return info;
}
