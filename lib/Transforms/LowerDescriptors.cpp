//===- LowerDescriptors.cpp - Tensor descriptor accesses as masked loads ---===//
//
// This file implements -kiln-lower-descriptors (see Passes.td): every kiln.descriptor_load and
// kiln.descriptor_store left in the kernel becomes the masked kiln.load / kiln.store of the
// block it names. The block's element (i0, .., i{r-1}) is at
//   base + sum_d (offset_d + i_d) * stride_d      (stride_{r-1} = 1)
// and takes part where 0 <= offset_d + i_d < shape_d for every d; a load reads zero elsewhere.
// A block's unit dimensions ([1, BLOCK_N, BLOCK_K] of a 3-D expert-weight descriptor) are
// not tile dimensions of the access: their one position is a scalar, and the tile without
// them is loaded and reshaped to the block (a reshape back, as the kernel usually writes one,
// folds away), so a dot reading it sees a 2-D load it can pipeline.
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

SmallVector<int64_t> kiln::getDescriptorTileShape(ArrayRef<int64_t> block) {
  SmallVector<int64_t> tile;
  for (int64_t d : block)
    if (d != 1)
      tile.push_back(d);
  if (tile.empty())
    tile.push_back(1);
  return tile;
}

std::pair<Value, Value> kiln::emitDescriptorBlockAddress(OpBuilder &b, Location loc,
                                                         RankedTensorType blockType, Value base,
                                                         ValueRange offsets, ValueRange shape,
                                                         ValueRange strides) {
  ArrayRef<int64_t> block = blockType.getShape();
  int64_t rank = block.size();
  SmallVector<int64_t> tile = getDescriptorTileShape(block);
  int64_t tileRank = tile.size();
  // The block's dimensions the tile keeps (all but unit ones; the last if all are unit).
  SmallVector<int64_t> kept;
  for (int64_t d = 0; d < rank; ++d)
    if (block[d] != 1 || (tileRank == 1 && tile[0] == 1 && d == rank - 1))
      kept.push_back(d);
  Type i32 = b.getI32Type(), i64 = b.getI64Type();
  auto full = [&](Type elem) { return RankedTensorType::get(tile, elem); };
  auto splat = [&](Value v, RankedTensorType t) { return SplatOp::create(b, loc, t, v); };
  auto inBounds = [&](Value pos, Value extent, Type t) {
    auto zero = arith::ConstantIntOp::create(b, loc, i32, 0);
    Value lo = isa<RankedTensorType>(t) ? Value(splat(zero, cast<RankedTensorType>(t))) : zero;
    Value hi = isa<RankedTensorType>(t) ? Value(splat(extent, cast<RankedTensorType>(t))) : extent;
    return arith::AndIOp::create(b, loc,
                                 arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, pos, lo),
                                 arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, pos, hi));
  };
  Value offset, mask, scalarOffset, scalarInside;
  for (int64_t d = 0; d < rank; ++d) {
    auto at = llvm::find(kept, d);
    if (at == kept.end()) {
      // A unit dimension the tile drops: its one position is the offset itself.
      Value inside = inBounds(offsets[d], shape[d], i32);
      scalarInside =
          scalarInside ? arith::AndIOp::create(b, loc, scalarInside, inside).getResult() : inside;
      Value term = arith::ExtSIOp::create(b, loc, i64, offsets[d]);
      term = arith::MulIOp::create(b, loc, term, strides[d]); // (d is not the last)
      scalarOffset =
          scalarOffset ? arith::AddIOp::create(b, loc, scalarOffset, term).getResult() : term;
      continue;
    }
    int64_t t = at - kept.begin(); // its place in the tile
    // offset_d + arange(0, block_d), laid along tile dimension t and broadcast to the tile.
    auto lineType = RankedTensorType::get({block[d]}, i32);
    Value pos =
        arith::AddIOp::create(b, loc, MakeRangeOp::create(b, loc, lineType, 0, uint32_t(block[d])),
                              splat(offsets[d], lineType));
    SmallVector<int64_t> shapeNow{block[d]};
    for (int64_t e = t - 1; e >= 0; --e) { // tile dimensions before t
      shapeNow.insert(shapeNow.begin(), 1);
      pos = ExpandDimsOp::create(b, loc, RankedTensorType::get(shapeNow, i32), pos, 0u);
    }
    for (int64_t e = t + 1; e < tileRank; ++e) { // tile dimensions after t
      shapeNow.push_back(1);
      pos = ExpandDimsOp::create(b, loc, RankedTensorType::get(shapeNow, i32), pos,
                                 uint32_t(shapeNow.size() - 1));
    }
    if (tileRank > 1)
      pos = BroadcastOp::create(b, loc, full(i32), pos);
    // 0 <= pos < shape_d
    Value inside = inBounds(pos, shape[d], full(i32));
    mask = mask ? arith::AndIOp::create(b, loc, mask, inside).getResult() : inside;
    // pos * stride_d in elements, 64-bit (the last dimension is contiguous).
    Value term = arith::ExtSIOp::create(b, loc, full(i64), pos);
    if (d + 1 < rank)
      term = arith::MulIOp::create(b, loc, term, splat(strides[d], full(i64)));
    offset = offset ? arith::AddIOp::create(b, loc, offset, term).getResult() : term;
  }
  if (scalarOffset)
    offset = arith::AddIOp::create(b, loc, offset, splat(scalarOffset, full(i64)));
  if (scalarInside)
    mask = arith::AndIOp::create(b, loc, mask, splat(scalarInside, full(b.getI1Type())));
  Type ptrTile = RankedTensorType::get(tile, base.getType());
  Value ptrs =
      AddPtrOp::create(b, loc, ptrTile, splat(base, cast<RankedTensorType>(ptrTile)), offset);
  return {ptrs, mask};
}

Value kiln::emitDescriptorBlockLoad(OpBuilder &b, Location loc, RankedTensorType blockType,
                                    Value base, ValueRange offsets, ValueRange shape,
                                    ValueRange strides) {
  auto [ptrs, mask] = emitDescriptorBlockAddress(b, loc, blockType, base, offsets, shape, strides);
  auto tileType = RankedTensorType::get(cast<RankedTensorType>(ptrs.getType()).getShape(),
                                        blockType.getElementType());
  Value zero = arith::ConstantOp::create(b, loc, tileType, b.getZeroAttr(tileType));
  Value v = LoadOp::create(b, loc, ptrs, mask, zero);
  if (tileType != blockType)
    v = ReshapeOp::create(b, loc, blockType, v);
  return v;
}

void kiln::emitDescriptorBlockStore(OpBuilder &b, Location loc, Value value, Value base,
                                    ValueRange offsets, ValueRange shape, ValueRange strides) {
  auto blockType = cast<RankedTensorType>(value.getType());
  auto [ptrs, mask] = emitDescriptorBlockAddress(b, loc, blockType, base, offsets, shape, strides);
  auto tileType = RankedTensorType::get(cast<RankedTensorType>(ptrs.getType()).getShape(),
                                        blockType.getElementType());
  if (tileType != blockType)
    value = ReshapeOp::create(b, loc, tileType, value);
  StoreOp::create(b, loc, ptrs, value, mask, CacheModifierAttr(), EvictionPolicyAttr());
}

Value kiln::lowerDescriptorLoad(DescriptorLoadOp load) {
  OpBuilder b(load);
  Value v = emitDescriptorBlockLoad(b, load.getLoc(), load.getType(), load.getBase(),
                                    load.getOffsets(), load.getShape(), load.getStrides());
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
      emitDescriptorBlockStore(b, loc, store.getValue(), store.getBase(), store.getOffsets(),
                               store.getShape(), store.getStrides());
      op->erase();
    }
  }
};

} // namespace
