//===- LowerDescriptors.cpp - Tensor descriptor accesses as masked loads ---===//
//
// This file implements -kiln-lower-descriptors (see Passes.td): every kiln.descriptor_load and
// kiln.descriptor_store left in the kernel becomes the masked kiln.load / kiln.store of the
// block it names. The block's element (i0, .., i{r-1}) is at
//   base + sum_d (offset_d + i_d) * stride_d      (stride_{r-1} = 1)
// and takes part where 0 <= offset_d + i_d < shape_d for every d; a load reads zero elsewhere.
// On sm_90a -kiln-pipeline-dot-operands runs first and turns the loads that feed dots into
// tensor-memory-accelerator copies; what remains, and everything on other targets, is lowered
// here, so the semantics of a descriptor access are the same on every path. With tma-stores
// (sm_90a), a 2-D f16/bf16 store instead becomes kiln_gpu.tma_store through a one-slot shared
// buffer (its box rows noted for the host, see LoopSlices.h): at the kernel's top level
// always, inside loops (a persistent kernel's epilogue) when the buffer fits beside the rings.
//
//===----------------------------------------------------------------------===//

#include "LoopSlices.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Dialect/KilnGPU/IR/Dialect.h"
#include "kiln/Dialect/KilnGPU/IR/DotLayouts.h"
#include "kiln/Passes.h"
#include "kiln/Target/NVIDIA/TensorMap.h"
#include "kiln/Transforms/DescriptorAccess.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"

namespace kiln {
#define GEN_PASS_DEF_KILNLOWERDESCRIPTORS
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;

std::pair<Value, Value> kiln::emitDescriptorBlockAddress(OpBuilder &b, Location loc,
                                                         RankedTensorType blockType, Value base,
                                                         ValueRange offsets, ValueRange shape,
                                                         ValueRange strides) {
  ArrayRef<int64_t> block = blockType.getShape();
  int64_t rank = block.size();
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto full = [&](Type elem) { return RankedTensorType::get(block, elem); };
  auto splat = [&](Value v, RankedTensorType t) { return SplatOp::create(b, loc, t, v); };
  Value offset, mask;
  for (int64_t d = 0; d < rank; ++d) {
    // offset_d + arange(0, block_d), laid along dimension d and broadcast to the block.
    auto lineType = RankedTensorType::get({block[d]}, i32);
    Value pos =
        arith::AddIOp::create(b, loc, MakeRangeOp::create(b, loc, lineType, 0, uint32_t(block[d])),
                              splat(offsets[d], lineType));
    SmallVector<int64_t> shapeNow{block[d]};
    for (int64_t e = d - 1; e >= 0; --e) { // dimensions before d
      shapeNow.insert(shapeNow.begin(), 1);
      pos = ExpandDimsOp::create(b, loc, RankedTensorType::get(shapeNow, i32), pos, 0u);
    }
    for (int64_t e = d + 1; e < rank; ++e) { // dimensions after d
      shapeNow.push_back(1);
      pos = ExpandDimsOp::create(b, loc, RankedTensorType::get(shapeNow, i32), pos,
                                 uint32_t(shapeNow.size() - 1));
    }
    if (rank > 1)
      pos = BroadcastOp::create(b, loc, full(i32), pos);
    // 0 <= pos < shape_d
    Value inside = arith::AndIOp::create(
        b, loc,
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, pos,
                              splat(arith::ConstantIntOp::create(b, loc, i32, 0), full(i32))),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, pos, splat(shape[d], full(i32))));
    mask = mask ? arith::AndIOp::create(b, loc, mask, inside).getResult() : inside;
    // pos * stride_d in elements, 64-bit (the last dimension is contiguous).
    Value term = arith::ExtSIOp::create(b, loc, full(i64), pos);
    if (d + 1 < rank)
      term = arith::MulIOp::create(b, loc, term, splat(strides[d], full(i64)));
    offset = offset ? arith::AddIOp::create(b, loc, offset, term).getResult() : term;
  }
  Type ptrTile = RankedTensorType::get(block, base.getType());
  Value ptrs =
      AddPtrOp::create(b, loc, ptrTile, splat(base, cast<RankedTensorType>(ptrTile)), offset);
  return {ptrs, mask};
}

Value kiln::lowerDescriptorLoad(DescriptorLoadOp load) {
  OpBuilder b(load);
  Location loc = load.getLoc();
  RankedTensorType type = load.getType();
  auto [ptrs, mask] = emitDescriptorBlockAddress(b, loc, type, load.getBase(), load.getOffsets(),
                                                 load.getShape(), load.getStrides());
  Value zero = arith::ConstantOp::create(b, loc, type, b.getZeroAttr(type));
  Value v = LoadOp::create(b, loc, ptrs, mask, zero);
  load.replaceAllUsesWith(v);
  load->erase();
  return v;
}

namespace {

/// Bytes of shared memory the rings and buffers of `func` take if none shares bytes with
/// another (an upper bound of what -kiln-convert-to-llvm places).
int64_t sharedBytesOfAllocs(func::FuncOp func) {
  int64_t total = 0;
  func.walk([&](kiln::gpu::LocalAllocOp op) {
    kiln::gpu::SharedBufferType t = op.getResult().getType();
    total += kiln::getSharedSlotBytes(t) * t.getNumSlots();
  });
  return total;
}

/// sm_90a: a store of a 2-D f16/bf16 block through a tensor map argument goes through a
/// one-slot shared buffer and TMA stores of whole-block boxes. Outside loops (the kernel's top
/// level, or under an scf.if there) the buffer is allocated at the store (it may take the
/// bytes of rings that are dead by then); inside loops (a persistent matmul's epilogue) it is
/// allocated at the kernel's entry, live beside the loop's rings, and only when they all fit
/// in `budget` bytes.
LogicalResult storeThroughTma(OpBuilder &b, DescriptorStoreOp store, int64_t budget) {
  auto func = store->getParentOfType<func::FuncOp>();
  auto arg = dyn_cast<BlockArgument>(store.getDesc());
  auto type = cast<RankedTensorType>(store.getValue().getType());
  Type elem = type.getElementType();
  if (!func || !arg || arg.getOwner() != &func.getBody().front() || type.getRank() != 2 ||
      (!elem.isF16() && !elem.isBF16()))
    return failure();
  int32_t rows = int32_t(std::min<int64_t>(256, type.getDimSize(0)));
  if (!nvidia::getTensorMapBox({type.getDimSize(0), type.getDimSize(1)}, 2, unsigned(rows)))
    return failure();
  MLIRContext *ctx = b.getContext();
  // A slot laid out as a ring of B (K x N, contiguous along N): the boxes' layout.
  auto bufferType =
      kiln::gpu::SharedBufferType::get(ctx, {1, type.getDimSize(0), type.getDimSize(1)}, elem);
  // Not in a loop (at the top level, or under scf.if only): the buffer is allocated at the
  // store, once.
  bool nested = store->getParentOfType<scf::ForOp>() || store->getParentOfType<scf::WhileOp>();
  if (nested && sharedBytesOfAllocs(func) + kiln::getSharedSlotBytes(bufferType) > budget)
    return failure();
  OpBuilder::InsertionGuard guard(b);
  if (nested)
    b.setInsertionPointToStart(&func.getBody().front());
  Value buffer = kiln::gpu::LocalAllocOp::create(b, store.getLoc(), bufferType,
                                                 b.getI32IntegerAttr(1), b.getBoolAttr(false));
  b.setInsertionPoint(store);
  kiln::gpu::TmaStoreOp::create(b, store.getLoc(), store.getDesc(), store.getOffsets(),
                                store.getValue(), buffer);
  noteTmaBoxRows(func, arg.getArgNumber(), rows);
  return success();
}

struct KilnLowerDescriptorsPass
    : public kiln::impl::KilnLowerDescriptorsBase<KilnLowerDescriptorsPass> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<Operation *> accesses;
    getOperation()->walk([&](Operation *op) {
      if (isa<DescriptorLoadOp, DescriptorStoreOp>(op))
        accesses.push_back(op);
    });
    for (Operation *op : accesses) {
      OpBuilder b(op);
      Location loc = op->getLoc();
      if (auto store = dyn_cast<DescriptorStoreOp>(op);
          store && tmaStores && succeeded(storeThroughTma(b, store, sharedBudget))) {
        op->erase();
        continue;
      }
      if (auto load = dyn_cast<DescriptorLoadOp>(op)) {
        (void)lowerDescriptorLoad(load);
        continue;
      }
      auto store = cast<DescriptorStoreOp>(op);
      auto type = cast<RankedTensorType>(store.getValue().getType());
      auto [ptrs, mask] = emitDescriptorBlockAddress(
          b, loc, type, store.getBase(), store.getOffsets(), store.getShape(), store.getStrides());
      StoreOp::create(b, loc, ptrs, store.getValue(), mask, CacheModifierAttr(),
                      EvictionPolicyAttr());
      op->erase();
    }
  }
};

} // namespace
