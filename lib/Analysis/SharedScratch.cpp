//===- SharedScratch.cpp - Shared-memory scratch: allocation and barriers -===//
//
// This file implements kiln::SharedScratch, the plan of the static shared memory that ops use
// only while they run: cross-warp reductions (partials), scans, layout conversions, trans and
// reshape (the tile in transit), scalar atomics (the old value, published by thread 0) and
// mma.sync/FMA dots (both operands). Each such op writes its scratch, passes a barrier of its
// own, then reads it; nothing of it is live once the op is done. So every op reuses one pool,
// `__kiln_scratch`, and what remains to decide is where the barriers go.
//
// Allocation. An op's parts (one per operand of a reduction or a scan, A and B of a dot) lie
// one after another, 16-byte aligned. Ops of at most kSmallBytes alternate, in program order,
// between two slots, so that consecutive small ops (LayerNorm's two reductions) do not share
// bytes; larger ones use slot 0. The pool is slot 0 (the largest op) plus, when used, slot 1.
//
// Barriers. A forward data-flow analysis over each function's blocks (the IR is in CFG form)
// tracks which slots may still be read by some thread since the last barrier. An op whose
// slot is among them starts with a barrier; its own internal barrier then retires everything
// before it, and its final reads leave its slot outstanding. Predecessors join by union, so a
// loop's back edge carries the last op's reads to the first op of the next iteration. Calls,
// and ops with regions holding scratch ops, are treated as leaving every slot outstanding.
//
//===----------------------------------------------------------------------===//

#include "kiln/Analysis/SharedScratch.h"
#include "kiln/Dialect/KilnGPU/IR/DotLayouts.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include "mlir/Interfaces/CallInterfaces.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

/// Ops whose scratch is at most this many bytes alternate between two slots.
constexpr int64_t kSmallBytes = 2048;
/// Alignment of parts and slots.
constexpr int64_t kAlign = 16;
/// The pool's symbol.
constexpr llvm::StringLiteral kPoolName = "__kiln_scratch";

/// Bytes one element of `t` takes in shared memory (booleans as bytes, pointers as 8).
int64_t storageBytes(Type t) {
  if (isa<PointerType>(t) || t.isIndex())
    return 8;
  return std::max<int64_t>(1, llvm::divideCeil(t.getIntOrFloatBitWidth(), 8));
}

/// Elements of the buffer a tile of `n` elements passes through (padded by one every 32).
int64_t paddedElements(int64_t n) { return n + n / 32 + 1; }

using SlotMask = unsigned;
constexpr SlotMask kAllSlots = 3;

} // namespace

int64_t kiln::getConversionScratchBytes(RankedTensorType src, RankedTensorType dst) {
  if (auto bands = kgpu::planColumnBands(src, dst)) // one band at a time
    return dst.getDimSize(0) * bands->rowStride * storageBytes(dst.getElementType());
  return paddedElements(dst.getNumElements()) * storageBytes(dst.getElementType());
}

SmallVector<int64_t> kiln::getScratchParts(Operation *op) {
  SmallVector<int64_t> parts;
  if (auto reduce = dyn_cast<ReduceOp>(op)) {
    auto type = cast<RankedTensorType>(reduce.getSrcs()[0].getType());
    unsigned axis = reduce.getAxis();
    unsigned warps = kgpu::getDistinctWarpsAlongAxis(type, axis);
    if (warps <= 1)
      return parts; // shuffles only
    int64_t positions = type.getNumElements() / type.getDimSize(axis);
    for (Value src : reduce.getSrcs())
      parts.push_back(positions * warps *
                      storageBytes(cast<RankedTensorType>(src.getType()).getElementType()));
  } else if (auto scan = dyn_cast<ScanOp>(op)) {
    auto type = cast<RankedTensorType>(scan.getSrcs()[0].getType());
    if (type.getDimSize(scan.getAxis()) <= 1)
      return parts;
    for (Value src : scan.getSrcs())
      parts.push_back(paddedElements(type.getNumElements()) *
                      storageBytes(cast<RankedTensorType>(src.getType()).getElementType()));
  } else if (isa<kgpu::ConvertLayoutOp, TransOp, ReshapeOp>(op)) {
    auto src = cast<RankedTensorType>(op->getOperand(0).getType());
    auto dst = cast<RankedTensorType>(op->getResult(0).getType());
    if (isa<kgpu::ConvertLayoutOp>(op) && src == dst)
      return parts; // no data moves
    parts.push_back(isa<kgpu::ConvertLayoutOp>(op) ? getConversionScratchBytes(src, dst)
                                                   : paddedElements(dst.getNumElements()) *
                                                         storageBytes(dst.getElementType()));
  } else if (isa<AtomicRMWOp, AtomicCASOp>(op)) {
    Type result = op->getResult(0).getType();
    if (!isa<RankedTensorType>(result)) // a scalar: thread 0 shares the old value
      parts.push_back(storageBytes(result));
  } else if (auto dot = dyn_cast<DotOp>(op)) {
    if (lowersToWgmma(dot))
      return parts; // operand buffers of its own, live across the asynchronous wgmmas
    RankedTensorType a = dot.getA().getType(), b = dot.getB().getType();
    int64_t elem = storageBytes(a.getElementType());
    int64_t stride = getDotSharedStride(a.getDimSize(1), elem);
    parts.push_back(a.getDimSize(0) * stride * elem);
    parts.push_back(b.getDimSize(1) * stride * elem);
  }
  return parts;
}

SharedScratch::SharedScratch(ModuleOp module) {
  int64_t slot0 = 0, slot1 = 0;
  auto plan = [&](Operation *op, unsigned &smallCount) {
    SmallVector<int64_t> parts = getScratchParts(op);
    if (parts.empty())
      return;
    Plan p;
    int64_t bytes = 0;
    for (int64_t size : parts) {
      p.partOffsets.push_back(bytes);
      bytes = llvm::alignTo(bytes + size, kAlign);
    }
    p.slot = bytes <= kSmallBytes ? (smallCount++ & 1) : 0;
    (p.slot ? slot1 : slot0) = std::max(p.slot ? slot1 : slot0, bytes);
    plans[op] = std::move(p);
  };
  for (auto func : module.getOps<FunctionOpInterface>()) {
    unsigned smallCount = 0;
    func->walk([&](Operation *op) { plan(op, smallCount); });
  }
  int64_t slot1Offset = llvm::alignTo(slot0, 128);
  int64_t poolBytes = slot1 ? slot1Offset + slot1 : slot0;
  for (auto &[op, p] : plans)
    for (int64_t &off : p.partOffsets)
      off += p.slot ? slot1Offset : 0;

  // Barriers: which slots may have reads outstanding, at each block's entry.
  for (auto func : module.getOps<FunctionOpInterface>()) {
    Region &body = func->getRegion(0);
    if (body.empty())
      continue;
    // Every function with a body becomes a kernel (-kiln-convert-to-llvm marks them all
    // nvvm.kernel): it starts with nothing outstanding.
    SlotMask entry = 0;
    DenseMap<Block *, SlotMask> out;
    auto transfer = [&](Block &block, SlotMask state, bool mark) {
      for (Operation &op : block) {
        auto it = plans.find(&op);
        if (it != plans.end()) {
          SlotMask mine = 1u << it->second.slot;
          if (mark && (state & mine))
            it->second.barrier = true;
          state = mine; // its internal barrier retires the rest; its reads stay outstanding
          continue;
        }
        bool nested = false;
        if (op.getNumRegions())
          op.walk([&](Operation *inner) {
            if (inner != &op && plans.count(inner)) {
              nested = true;
              if (mark)
                plans[inner].barrier = true;
            }
          });
        if (nested || isa<CallOpInterface>(op))
          state = kAllSlots;
      }
      return state;
    };
    auto in = [&](Block &block) {
      if (block.isEntryBlock())
        return entry;
      SlotMask state = 0;
      for (Block *pred : block.getPredecessors())
        state |= out.lookup(pred);
      return state;
    };
    for (bool changed = true; changed;) {
      changed = false;
      for (Block &block : body) {
        SlotMask next = transfer(block, in(block), /*mark=*/false);
        auto [it, inserted] = out.try_emplace(&block, next);
        if (!inserted && it->second != next) {
          it->second = next;
          changed = true;
        } else if (inserted && next) {
          changed = true;
        }
      }
    }
    for (Block &block : body)
      transfer(block, in(block), /*mark=*/true);
  }

  if (poolBytes) {
    OpBuilder b(module.getBodyRegion());
    auto type = LLVM::LLVMArrayType::get(IntegerType::get(module.getContext(), 8), poolBytes);
    // Shared memory is address space 3 in NVPTX; no initializer (PTX .shared has none).
    LLVM::GlobalOp::create(b, module.getLoc(), type, /*isConstant=*/false, LLVM::Linkage::Internal,
                           kPoolName, Attribute(), kAlign,
                           /*addrSpace=*/3);
  }
}

bool SharedScratch::needsBarrierBefore(Operation *op) const {
  auto it = plans.find(op);
  return it != plans.end() && it->second.barrier;
}

Value SharedScratch::getPart(OpBuilder &b, Location loc, Operation *op, unsigned part) const {
  auto it = plans.find(op);
  if (it == plans.end() || part >= it->second.partOffsets.size())
    llvm::report_fatal_error(llvm::Twine("kiln: no shared scratch planned for part ") +
                             llvm::Twine(part) + " of " + op->getName().getStringRef());
  MLIRContext *ctx = b.getContext();
  auto ptr3 = LLVM::LLVMPointerType::get(ctx, 3);
  Value base = LLVM::AddressOfOp::create(b, loc, ptr3, kPoolName);
  int64_t offset = it->second.partOffsets[part];
  if (!offset)
    return base;
  return LLVM::GEPOp::create(b, loc, ptr3, IntegerType::get(ctx, 8), base,
                             ArrayRef<LLVM::GEPArg>{int32_t(offset)});
}
