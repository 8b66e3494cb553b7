//===- MemoryOpToLLVM.cpp - addptr, load and store to LLVM ----------------===//
//
// This file implements the lowering of pointer arithmetic and masked global memory access.
// Owned elements are grouped into vectors along the layout's fastest dimension; a group is as
// wide as the per-thread block, the pointer's contiguity and alignment and the mask's constancy
// all allow, and at most 128 bits (PTX ISA 9.7.9.8: ld/st .v4.b32). Unmasked, unmodified
// accesses are plain LLVM vector loads/stores; the others go through the target's predicated
// access, so masked-out lanes never touch memory.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

/// Widest access, in bits.
constexpr unsigned kMaxAccessBits = 128;

struct AddPtrOpLowering final : ConvertOpToLLVMPattern<AddPtrOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(AddPtrOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto ptrType = cast<PointerType>(getElementTypeOrSelf(op.getType()));
    Type elemType = getTypeConverter()->convertType(ptrType.getPointeeType());
    Type llvmPtr = LLVM::LLVMPointerType::get(getContext(), 1);
    SmallVector<Value> ptrs = unpackStruct(rewriter, loc, adaptor.getPtr());
    SmallVector<Value> offs = unpackStruct(rewriter, loc, adaptor.getOffset());
    SmallVector<Value> out;
    for (auto [p, o] : llvm::zip(ptrs, offs))
      out.push_back(LLVM::GEPOp::create(rewriter, loc, llvmPtr, elemType, p, ValueRange{o}));
    rewriter.replaceOp(
        op, packStruct(rewriter, loc, getTypeConverter()->convertType(op.getType()), out));
    return success();
  }
};

/// kiln.ptr_cast, per owned element: inttoptr / ptrtoint; a pointer to a pointer keeps the
/// value (global pointers are one LLVM type whatever they point to).
struct PtrCastOpLowering final : ConvertOpToLLVMPattern<PtrCastOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(PtrCastOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type to = getTypeConverter()->convertType(getElementTypeOrSelf(op.getType()));
    bool toPtr = isa<LLVM::LLVMPointerType>(to);
    bool fromPtr = isa<PointerType>(getElementTypeOrSelf(op.getSrc().getType()));
    SmallVector<Value> out;
    for (Value v : unpackStruct(rewriter, loc, adaptor.getSrc())) {
      if (toPtr && !fromPtr)
        out.push_back(LLVM::IntToPtrOp::create(rewriter, loc, to, v));
      else if (!toPtr)
        out.push_back(LLVM::PtrToIntOp::create(rewriter, loc, to, v));
      else
        out.push_back(v);
    }
    rewriter.replaceOp(
        op, packStruct(rewriter, loc, getTypeConverter()->convertType(op.getType()), out));
    return success();
  }
};

/// How a memory op's owned elements split into vector accesses.
struct AccessPlan {
  unsigned vec = 1;      ///< elements per access
  unsigned elemBits = 0; ///< bits per element in memory (i1 is stored as a byte)
  unsigned wordBits = 0; ///< register word size of the access
  unsigned numWords = 0; ///< words per access
};

AccessPlan planAccess(Value ptr, Value mask, const AxisInfoAnalysis &axis) {
  AccessPlan plan;
  Type pointee = cast<PointerType>(getElementTypeOrSelf(ptr.getType())).getPointeeType();
  plan.elemBits = isa<PointerType>(pointee) ? 64 : std::max(8u, pointee.getIntOrFloatBitWidth());
  if (auto type = dyn_cast<RankedTensorType>(ptr.getType())) {
    unsigned fast = kgpu::getOrder(type.getEncoding())[0];
    unsigned spt =
        std::min<int64_t>(kgpu::getSizePerThread(type.getEncoding())[fast], type.getDimSize(fast));
    plan.vec = std::min(spt, axis.getPtrVectorWidth(ptr, fast, kMaxAccessBits));
    if (mask)
      plan.vec = std::min<int64_t>(plan.vec, axis.getMaskConstancy(mask, fast));
    plan.vec = std::max(1u, plan.vec);
  }
  unsigned bits = plan.vec * plan.elemBits;
  plan.wordBits = plan.elemBits == 64 ? 64 : std::min(bits, 32u);
  plan.numWords = bits / plan.wordBits;
  return plan;
}

AccessModifiers modifiersOf(std::optional<CacheModifier> cache, std::optional<EvictionPolicy> evict,
                            bool isVolatile) {
  AccessModifiers mods;
  if (cache && *cache != CacheModifier::none)
    mods.cache = stringifyCacheModifier(*cache);
  if (evict && *evict != EvictionPolicy::normal)
    mods.eviction = stringifyEvictionPolicy(*evict);
  mods.isVolatile = isVolatile;
  return mods;
}

/// Integer type of `bits`.
Type intTy(OpBuilder &b, unsigned bits) { return b.getIntegerType(bits); }

/// Packs `elems` (scalars of one type) into words of `wordBits`.
SmallVector<Value> toWords(OpBuilder &b, Location loc, ArrayRef<Value> elems, unsigned elemBits,
                           unsigned wordBits) {
  SmallVector<Value> words;
  unsigned perWord = wordBits / elemBits;
  for (unsigned w = 0; w < elems.size() / perWord; ++w) {
    // Floats go into a vector of their own type (<2 x bf16> for a 32-bit word), which LLVM's
    // SLP vectorizer takes as it is for packed math (sub.bf16x2, ...) on the values stored.
    Type t0 = elems[w * perWord].getType();
    if (perWord > 1 && isa<FloatType>(t0)) {
      Value v = LLVM::UndefOp::create(b, loc, VectorType::get({(int64_t)perWord}, t0));
      for (unsigned k = 0; k < perWord; ++k)
        v = LLVM::InsertElementOp::create(b, loc, v, elems[w * perWord + k], i32Const(b, loc, k));
      words.push_back(LLVM::BitcastOp::create(b, loc, intTy(b, wordBits), v));
      continue;
    }
    SmallVector<Value> ints;
    for (unsigned k = 0; k < perWord; ++k) {
      Value e = elems[w * perWord + k];
      Type t = e.getType();
      if (isa<LLVM::LLVMPointerType>(t))
        e = LLVM::PtrToIntOp::create(b, loc, intTy(b, 64), e);
      else if (t.isInteger(1))
        e = LLVM::ZExtOp::create(b, loc, intTy(b, 8), e);
      else if (!isa<IntegerType>(t))
        e = LLVM::BitcastOp::create(b, loc, intTy(b, elemBits), e);
      ints.push_back(e);
    }
    if (perWord == 1) {
      words.push_back(ints[0]);
      continue;
    }
    auto vecTy = VectorType::get({(int64_t)perWord}, intTy(b, elemBits));
    Value v = LLVM::UndefOp::create(b, loc, vecTy);
    for (unsigned k = 0; k < perWord; ++k)
      v = LLVM::InsertElementOp::create(b, loc, v, ints[k], i32Const(b, loc, k));
    words.push_back(LLVM::BitcastOp::create(b, loc, intTy(b, wordBits), v));
  }
  return words;
}

/// Unpacks words of `wordBits` into scalars of `elemType` (the converted element type).
SmallVector<Value> fromWords(OpBuilder &b, Location loc, ArrayRef<Value> words, Type elemType,
                             unsigned elemBits, unsigned wordBits) {
  SmallVector<Value> out;
  unsigned perWord = wordBits / elemBits;
  for (Value w : words) {
    // Floats come out of a vector of their own type (see toWords).
    if (perWord > 1 && isa<FloatType>(elemType)) {
      Value v = LLVM::BitcastOp::create(b, loc, VectorType::get({(int64_t)perWord}, elemType), w);
      for (unsigned k = 0; k < perWord; ++k)
        out.push_back(LLVM::ExtractElementOp::create(b, loc, v, i32Const(b, loc, k)));
      continue;
    }
    SmallVector<Value> ints;
    if (perWord == 1) {
      ints.push_back(w);
    } else {
      auto vecTy = VectorType::get({(int64_t)perWord}, intTy(b, elemBits));
      Value v = LLVM::BitcastOp::create(b, loc, vecTy, w);
      for (unsigned k = 0; k < perWord; ++k)
        ints.push_back(LLVM::ExtractElementOp::create(b, loc, v, i32Const(b, loc, k)));
    }
    for (Value e : ints) {
      if (isa<LLVM::LLVMPointerType>(elemType))
        e = LLVM::IntToPtrOp::create(b, loc, elemType, e);
      else if (elemType.isInteger(1))
        e = LLVM::ICmpOp::create(
            b, loc, LLVM::ICmpPredicate::ne, e,
            LLVM::ConstantOp::create(b, loc, e.getType(), b.getIntegerAttr(e.getType(), 0)));
      else if (!isa<IntegerType>(elemType))
        e = LLVM::BitcastOp::create(b, loc, elemType, e);
      out.push_back(e);
    }
  }
  return out;
}

/// Plain LLVM access is enough when nothing is masked or modified.
bool isPlain(Value mask, const AccessModifiers &mods, Type elemType) {
  return !mask && mods.cache.empty() && mods.eviction.empty() && !mods.isVolatile &&
         !elemType.isInteger(1);
}

struct LoadOpLowering final : ConvertOpToLLVMPattern<LoadOp> {
  LoadOpLowering(const LLVMTypeConverter &converter, const AxisInfoAnalysis &axis,
                 const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), axis(axis), target(target) {}

  LogicalResult matchAndRewrite(LoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type elemType = getTypeConverter()->convertType(getElementTypeOrSelf(op.getType()));
    AccessPlan plan = planAccess(op.getPtr(), op.getMask(), axis);
    AccessModifiers mods = modifiersOf(op.getCache(), op.getEvict(), op.getIsVolatile());
    SmallVector<Value> ptrs = unpackStruct(rewriter, loc, adaptor.getPtr());
    SmallVector<Value> masks, others;
    if (adaptor.getMask())
      masks = unpackStruct(rewriter, loc, adaptor.getMask());
    if (adaptor.getOther())
      others = unpackStruct(rewriter, loc, adaptor.getOther());
    SmallVector<Value> out;
    for (unsigned i = 0; i < ptrs.size(); i += plan.vec) {
      if (isPlain(op.getMask(), mods, elemType)) {
        unsigned align = plan.vec * plan.elemBits / 8;
        if (plan.vec == 1) {
          out.push_back(LLVM::LoadOp::create(rewriter, loc, elemType, ptrs[i], align));
          continue;
        }
        auto vecTy = VectorType::get({(int64_t)plan.vec}, elemType);
        Value v = LLVM::LoadOp::create(rewriter, loc, vecTy, ptrs[i], align);
        for (unsigned k = 0; k < plan.vec; ++k)
          out.push_back(
              LLVM::ExtractElementOp::create(rewriter, loc, v, i32Const(rewriter, loc, k)));
        continue;
      }
      SmallVector<Value> otherWords;
      if (!others.empty())
        otherWords = toWords(rewriter, loc, ArrayRef<Value>(others).slice(i, plan.vec),
                             plan.elemBits, plan.wordBits);
      Value pred = masks.empty() ? Value() : masks[i];
      SmallVector<Value> words = target.emitLoad(rewriter, loc, ptrs[i], pred, plan.wordBits,
                                                 plan.numWords, otherWords, mods);
      llvm::append_range(out,
                         fromWords(rewriter, loc, words, elemType, plan.elemBits, plan.wordBits));
    }
    rewriter.replaceOp(
        op, packStruct(rewriter, loc, getTypeConverter()->convertType(op.getType()), out));
    return success();
  }
  const AxisInfoAnalysis &axis;
  const TargetInfo &target;
};

struct StoreOpLowering final : ConvertOpToLLVMPattern<StoreOp> {
  StoreOpLowering(const LLVMTypeConverter &converter, const AxisInfoAnalysis &axis,
                  const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), axis(axis), target(target) {}

  LogicalResult matchAndRewrite(StoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type elemType = getTypeConverter()->convertType(getElementTypeOrSelf(op.getValue().getType()));
    AccessPlan plan = planAccess(op.getPtr(), op.getMask(), axis);
    AccessModifiers mods = modifiersOf(op.getCache(), op.getEvict(), false);
    SmallVector<Value> ptrs = unpackStruct(rewriter, loc, adaptor.getPtr());
    SmallVector<Value> values = unpackStruct(rewriter, loc, adaptor.getValue());
    SmallVector<Value> masks;
    if (adaptor.getMask())
      masks = unpackStruct(rewriter, loc, adaptor.getMask());
    // Every thread holds a scalar, and a replicated tile element sits in several threads: only
    // one of them stores it (thread 0 for scalars), as Triton does; the others would write the
    // same bytes to the same address again.
    Value owner;
    if (auto type = dyn_cast<RankedTensorType>(op.getPtr().getType()))
      owner = emitOwnerPredicate(rewriter, loc, type, target);
    else
      owner = LLVM::ICmpOp::create(rewriter, loc, LLVM::ICmpPredicate::eq,
                                   target.getThreadId(rewriter, loc), i32Const(rewriter, loc, 0));
    for (unsigned i = 0; i < ptrs.size(); i += plan.vec) {
      ArrayRef<Value> group = ArrayRef<Value>(values).slice(i, plan.vec);
      if (!owner && isPlain(op.getMask(), mods, elemType)) {
        unsigned align = plan.vec * plan.elemBits / 8;
        if (plan.vec == 1) {
          LLVM::StoreOp::create(rewriter, loc, group[0], ptrs[i], align);
          continue;
        }
        auto vecTy = VectorType::get({(int64_t)plan.vec}, elemType);
        Value v = LLVM::UndefOp::create(rewriter, loc, vecTy);
        for (unsigned k = 0; k < plan.vec; ++k)
          v = LLVM::InsertElementOp::create(rewriter, loc, v, group[k], i32Const(rewriter, loc, k));
        LLVM::StoreOp::create(rewriter, loc, v, ptrs[i], align);
        continue;
      }
      Value pred = masks.empty() ? Value() : masks[i];
      if (owner)
        pred = pred ? Value(LLVM::AndOp::create(rewriter, loc, pred, owner)) : owner;
      target.emitStore(rewriter, loc, ptrs[i], pred, plan.wordBits,
                       toWords(rewriter, loc, group, plan.elemBits, plan.wordBits), mods);
    }
    rewriter.eraseOp(op);
    return success();
  }
  const AxisInfoAnalysis &axis;
  const TargetInfo &target;
};

} // namespace

void kiln::populateMemoryOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                          RewritePatternSet &patterns,
                                          const AxisInfoAnalysis &axisInfo,
                                          const TargetInfo &target) {
  patterns.add<AddPtrOpLowering, PtrCastOpLowering>(converter);
  patterns.add<LoadOpLowering, StoreOpLowering>(converter, axisInfo, target);
}

unsigned kiln::getAccessVectorWidth(Value ptr, Value mask, const AxisInfoAnalysis &axis) {
  return planAccess(ptr, mask, axis).vec;
}
