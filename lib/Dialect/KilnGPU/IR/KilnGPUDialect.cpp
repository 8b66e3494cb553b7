//===- KilnGPUDialect.cpp - kiln_gpu layouts ------------------------------===//
//
// This file implements the kiln_gpu dialect: verification of blocked and slice layouts, and the
// static enumeration of the elements each thread owns, which the lowering to LLVM uses to
// turn a tile into per-thread registers.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Dialect/KilnGPU/IR/Dialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"

using namespace mlir;
using namespace kiln::gpu;

#include "kiln/Dialect/KilnGPU/IR/KilnGPUDialect.cpp.inc"

#define GET_ATTRDEF_CLASSES
#include "kiln/Dialect/KilnGPU/IR/KilnGPUAttrs.cpp.inc"

#define GET_TYPEDEF_CLASSES
#include "kiln/Dialect/KilnGPU/IR/KilnGPUTypes.cpp.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/KilnGPU/IR/KilnGPUOps.cpp.inc"

namespace {
/// Prints layouts as #blocked, #blocked1, #slice, ... aliases at the top of the module.
struct KilnGPUOpAsmInterface final : OpAsmDialectInterface {
  using OpAsmDialectInterface::OpAsmDialectInterface;
  AliasResult getAlias(Attribute attr, raw_ostream &os) const override {
    if (isa<BlockedEncodingAttr>(attr)) {
      os << "blocked";
      return AliasResult::FinalAlias;
    }
    if (isa<SliceEncodingAttr>(attr)) {
      os << "slice";
      return AliasResult::FinalAlias;
    }
    return AliasResult::NoAlias;
  }
};
} // namespace

void KilnGPUDialect::initialize() {
  addInterfaces<KilnGPUOpAsmInterface>();
  addAttributes<
#define GET_ATTRDEF_LIST
#include "kiln/Dialect/KilnGPU/IR/KilnGPUAttrs.cpp.inc"
      >();
  addTypes<
#define GET_TYPEDEF_LIST
#include "kiln/Dialect/KilnGPU/IR/KilnGPUTypes.cpp.inc"
      >();
  addOperations<
#define GET_OP_LIST
#include "kiln/Dialect/KilnGPU/IR/KilnGPUOps.cpp.inc"
      >();
}

LogicalResult BlockedEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError,
                                          ArrayRef<unsigned> sizePerThread,
                                          ArrayRef<unsigned> threadsPerWarp,
                                          ArrayRef<unsigned> warpsPerCTA, ArrayRef<unsigned> order,
                                          bool wgmma) {
  size_t rank = order.size();
  if (rank == 0 || sizePerThread.size() != rank || threadsPerWarp.size() != rank ||
      warpsPerCTA.size() != rank)
    return emitError() << "expected sizePerThread, threadsPerWarp, warpsPerCTA and order of one "
                          "non-zero rank, found ranks "
                       << sizePerThread.size() << ", " << threadsPerWarp.size() << ", "
                       << warpsPerCTA.size() << ", " << rank;
  unsigned threads = 1;
  for (size_t d = 0; d < rank; ++d) {
    if (!llvm::isPowerOf2_32(sizePerThread[d]) || !llvm::isPowerOf2_32(threadsPerWarp[d]) ||
        !llvm::isPowerOf2_32(warpsPerCTA[d]))
      return emitError() << "expected powers of two in dimension " << d;
    threads *= threadsPerWarp[d];
  }
  if (threads != kWarpSize)
    return emitError() << "expected threadsPerWarp to multiply to " << kWarpSize << ", found "
                       << threads;
  SmallVector<bool> seen(rank, false);
  for (unsigned d : order) {
    if (d >= rank || seen[d])
      return emitError() << "expected order to be a permutation of [0, " << rank << ")";
    seen[d] = true;
  }
  if (wgmma && (rank != 2 || order[0] != 1 || sizePerThread[0] != 1 || threadsPerWarp[0] != 8 ||
                warpsPerCTA[1] != 1 || warpsPerCTA[0] % 4 != 0))
    return emitError() << "expected the wgmma accumulator layout to have rank 2, order [1, 0], "
                          "sizePerThread [1, _], threadsPerWarp [8, _] and warpsPerCTA [4k, 1]";
  return success();
}

LogicalResult SliceEncodingAttr::verify(function_ref<InFlightDiagnostic()> emitError, unsigned dim,
                                        Attribute parent) {
  unsigned rank;
  if (auto blocked = dyn_cast<BlockedEncodingAttr>(parent))
    rank = blocked.getRank();
  else if (auto slice = dyn_cast<SliceEncodingAttr>(parent))
    rank = getKeptDims(slice).size();
  else
    return emitError() << "expected a blocked or slice parent layout, found " << parent;
  if (dim >= rank)
    return emitError() << "expected dim < parent rank " << rank << ", found " << dim;
  if (rank < 2)
    return emitError() << "expected a parent of rank >= 2";
  return success();
}

OpFoldResult ConvertLayoutOp::fold(FoldAdaptor adaptor) {
  if (getSrc().getType() == getType())
    return getSrc();
  return {};
}

//===----------------------------------------------------------------------===//
// Layout queries
//===----------------------------------------------------------------------===//

BlockedEncodingAttr kiln::gpu::getRootBlocked(Attribute layout) {
  while (auto slice = dyn_cast_or_null<SliceEncodingAttr>(layout))
    layout = slice.getParent();
  return dyn_cast_or_null<BlockedEncodingAttr>(layout);
}

SmallVector<unsigned> kiln::gpu::getKeptDims(Attribute layout) {
  if (auto blocked = dyn_cast<BlockedEncodingAttr>(layout))
    return llvm::to_vector(llvm::seq<unsigned>(0, blocked.getRank()));
  auto slice = cast<SliceEncodingAttr>(layout);
  SmallVector<unsigned> kept = getKeptDims(slice.getParent());
  kept.erase(kept.begin() + slice.getDim());
  return kept;
}

SmallVector<unsigned> kiln::gpu::getOrder(Attribute layout) {
  BlockedEncodingAttr root = getRootBlocked(layout);
  SmallVector<unsigned> kept = getKeptDims(layout);
  SmallVector<unsigned> order;
  for (unsigned rootDim : root.getOrder()) {
    auto it = llvm::find(kept, rootDim);
    if (it != kept.end())
      order.push_back(it - kept.begin());
  }
  return order;
}

SmallVector<unsigned> kiln::gpu::getSizePerThread(Attribute layout) {
  BlockedEncodingAttr root = getRootBlocked(layout);
  SmallVector<unsigned> spt;
  for (unsigned d : getKeptDims(layout))
    spt.push_back(root.getSizePerThread()[d]);
  return spt;
}

SmallVector<ElemPos> kiln::gpu::getThreadElements(Attribute layout, ArrayRef<int64_t> shape) {
  BlockedEncodingAttr root = getRootBlocked(layout);
  SmallVector<unsigned> kept = getKeptDims(layout);
  unsigned rank = kept.size();
  // Per kept dimension: repetitions of the layout tile and elements per contiguous block.
  SmallVector<unsigned> reps(rank), spt(rank);
  for (unsigned i = 0; i < rank; ++i) {
    unsigned d = kept[i];
    int64_t tile = int64_t(root.getSizePerThread()[d]) * root.getThreadsPerWarp()[d] *
                   root.getWarpsPerCTA()[d];
    reps[i] = std::max<int64_t>(1, shape[i] / tile);
    // A dimension smaller than one thread's block holds only `shape` distinct elements.
    spt[i] = std::min<int64_t>(root.getSizePerThread()[d], shape[i]);
  }
  SmallVector<unsigned> order = getOrder(layout);
  // Enumerate: repetitions outermost (slowest dimension first), then the sizePerThread block,
  // with order[0] fastest inside each level.
  SmallVector<ElemPos> out;
  unsigned total = 1;
  for (unsigned i = 0; i < rank; ++i)
    total *= reps[i] * spt[i];
  out.reserve(total);
  SmallVector<unsigned, 4> rep(rank, 0), elem(rank, 0);
  unsigned numReps = 1, numElems = 1;
  for (unsigned i = 0; i < rank; ++i) {
    numReps *= reps[i];
    numElems *= spt[i];
  }
  for (unsigned r = 0; r < numReps; ++r) {
    unsigned rr = r;
    for (unsigned k = 0; k < rank; ++k) {
      unsigned d = order[k];
      rep[d] = rr % reps[d];
      rr /= reps[d];
    }
    for (unsigned e = 0; e < numElems; ++e) {
      unsigned ee = e;
      for (unsigned k = 0; k < rank; ++k) {
        unsigned d = order[k];
        elem[d] = ee % spt[d];
        ee /= spt[d];
      }
      out.push_back(ElemPos{rep, elem});
    }
  }
  return out;
}

std::optional<ColumnBands> kiln::gpu::planColumnBands(RankedTensorType src, RankedTensorType dst) {
  // Bytes of one band (without its padding).
  constexpr int64_t kBandBytes = 16 * 1024;
  if (src.getRank() != 2 || src.getShape() != dst.getShape() ||
      !src.getElementType().isIntOrFloat())
    return std::nullopt;
  ArrayRef<int64_t> shape = src.getShape();
  int64_t period = 1;
  for (Attribute layout : {src.getEncoding(), dst.getEncoding()}) {
    auto blocked = dyn_cast_or_null<BlockedEncodingAttr>(layout);
    if (!blocked)
      return std::nullopt;
    int64_t tile[2];
    for (unsigned d = 0; d < 2; ++d) {
      tile[d] = int64_t(blocked.getSizePerThread()[d]) * blocked.getThreadsPerWarp()[d] *
                blocked.getWarpsPerCTA()[d];
      if (tile[d] > shape[d])
        return std::nullopt; // wraps around: owners replicate
    }
    period = std::max(period, tile[1]);
  }
  int64_t bytes = std::max<int64_t>(1, src.getElementTypeBitWidth() / 8);
  int64_t width = period;
  while (width * 2 < shape[1] && shape[0] * width * 2 * bytes <= kBandBytes)
    width *= 2;
  if (width >= shape[1] || shape[0] * width * bytes > 2 * kBandBytes)
    return std::nullopt;
  return ColumnBands{width, shape[1] / width, width + std::max<int64_t>(1, 16 / bytes)};
}

unsigned kiln::gpu::getElemsPerThread(RankedTensorType type) {
  if (!type.getEncoding())
    return type.getNumElements();
  return getThreadElements(type.getEncoding(), type.getShape()).size();
}

//===----------------------------------------------------------------------===//
// Shared rings and the ops on them
//===----------------------------------------------------------------------===//

LogicalResult SharedBufferType::verify(function_ref<InFlightDiagnostic()> emitError,
                                       ArrayRef<int64_t> shape, Type elementType) {
  if (shape.size() != 3)
    return emitError() << "expected [slots, rows, columns], found " << shape.size()
                       << " dimensions";
  for (int64_t d : shape)
    if (d <= 0)
      return emitError() << "expected positive dimensions, found " << d;
  if (!elementType.isIntOrFloat())
    return emitError() << "expected an integer or float element type, found " << elementType;
  return success();
}

LogicalResult LocalAllocOp::verify() {
  auto type = getResult().getType();
  for (int64_t d : type.getTileShape())
    if (!llvm::isPowerOf2_64(d))
      return emitOpError("expected power-of-two tile dimensions, found ")
             << type.getTileShape()[0] << "x" << type.getTileShape()[1];
  return success();
}

LogicalResult AsyncCopyOp::verify() {
  auto buffer = getBuffer().getType();
  auto ptr = getPtr().getType();
  SmallVector<int64_t> expected(buffer.getTileShape());
  if (getTransposed())
    std::reverse(expected.begin(), expected.end());
  if (ptr.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError("expected a pointer tile of the ")
           << (getTransposed() ? "transposed " : "") << "slot's shape [" << expected[0] << ", "
           << expected[1] << "], found " << ptr;
  auto pointer = dyn_cast<kiln::PointerType>(ptr.getElementType());
  if (!pointer || pointer.getPointeeType() != buffer.getElementType())
    return emitOpError("expected pointers to ")
           << buffer.getElementType() << ", found " << ptr.getElementType();
  if (getMask()) {
    auto mask = cast<RankedTensorType>(getMask().getType());
    if (mask.getShape() != ptr.getShape() || !mask.getElementType().isInteger(1))
      return emitOpError("expected an i1 mask of the pointers' shape, found ") << mask;
  }
  return success();
}

LogicalResult MBarrierWaitOp::verify() {
  if (getWholeWarp() && !getPred())
    return emitOpError("expected a predicate with whole_warp (warp 0 waits where it holds)");
  return success();
}

LogicalResult NamedBarrierOp::verify() {
  int64_t n = getThreads(), warp = kWarpSize;
  if (n < warp || n > 1024 || n % warp)
    return emitOpError("expected a thread count from 32 to 1024, a multiple of 32, found ") << n;
  return success();
}

LogicalResult SetMaxRegistersOp::verify() {
  int64_t n = getCount();
  if (n < 24 || n > 256 || n % 8)
    return emitOpError("expected a register count from 24 to 256, a multiple of 8, found ") << n;
  return success();
}

LogicalResult TmaCopyOp::verify() {
  auto buffer = getBuffer().getType();
  size_t rank = buffer.getTileShape().size();
  if (getCoords().size() < rank || getCoords().size() > 5)
    return emitOpError("expected ")
           << rank << " to 5 coordinates for a slot of rank " << rank
           << " (the block's outer dimensions, beyond the slot's, being 1), found "
           << getCoords().size();
  if (getBarriers().getType().getCount() != buffer.getNumSlots())
    return emitOpError("expected one barrier per slot (")
           << buffer.getNumSlots() << "), found " << getBarriers().getType().getCount();
  return success();
}

LogicalResult SharedDotOp::verify() {
  auto b = getB().getType();
  auto c = cast<RankedTensorType>(getC().getType());
  auto aRing = dyn_cast<SharedBufferType>(getA().getType());
  auto aTile = dyn_cast<RankedTensorType>(getA().getType());
  if (aRing && !getASlot())
    return emitOpError("expected a slot for A read from a ring");
  if (aTile && getASlot())
    return emitOpError("expected no slot for A in registers");
  if (aTile && aTile.getRank() != 2)
    return emitOpError("expected A in registers to be a 2-D tile, found ") << aTile;
  ArrayRef<int64_t> as = aRing ? aRing.getTileShape() : aTile.getShape();
  // B's K x N: the slot's shape, or its transpose with b_transposed.
  SmallVector<int64_t, 2> bs(b.getTileShape());
  if (getBTransposed())
    std::swap(bs[0], bs[1]);
  if (c.getRank() != 2 || as[1] != bs[0] || c.getDimSize(0) != as[0] || c.getDimSize(1) != bs[1])
    return emitOpError("expected A (M x K), B (K x N) and C (M x N), found ")
           << as[0] << "x" << as[1] << ", " << bs[0] << "x" << bs[1]
           << (getBTransposed() ? " (the slot transposed)" : "") << " and " << c;
  Type e = aRing ? aRing.getElementType() : aTile.getElementType();
  bool fp8 = isa<Float8E4M3FNType, Float8E5M2Type>(e);
  bool floats = (e.isF16() || e.isBF16() || fp8) && c.getElementType().isF32();
  bool int8 = e.isInteger(8) && c.getElementType().isInteger(32);
  if (e != b.getElementType() || !(floats || int8))
    return emitOpError("expected f16, bf16 or fp8 operands of one type and f32 accumulators, "
                       "or i8 operands and i32 accumulators, found ")
           << e << ", " << b.getElementType() << " and " << c.getElementType();
  if (int8 || fp8) {
    // wgmma reads 8-bit operands K-major from shared memory only.
    if (aTile)
      return emitOpError("expected an 8-bit A from a ring, found A in registers");
    if (getBTransposed())
      return emitOpError("expected 8-bit B read as its ring holds it (K-major), found "
                         "b_transposed");
    for (Value ring : {Value(getA()), Value(getB())})
      if (auto alloc = ring.getDefiningOp<LocalAllocOp>();
          alloc && !alloc.getKMajor().value_or(true))
        return emitOpError("expected 8-bit rings contiguous along K (k_major), found ")
               << alloc.getResult().getType() << " with k_major = false";
  }
  if (getA().getDefiningOp<LocalAllocOp>() &&
      getA().getDefiningOp<LocalAllocOp>().getOperand() != 0)
    return emitOpError("expected A from a ring allocated for operand 0");
  if (getB().getDefiningOp<LocalAllocOp>() &&
      getB().getDefiningOp<LocalAllocOp>().getOperand() != 1)
    return emitOpError("expected B from a ring allocated for operand 1");
  return success();
}

unsigned kiln::gpu::getDistinctWarpsAlongAxis(RankedTensorType type, unsigned axis) {
  Attribute layout = type.getEncoding();
  BlockedEncodingAttr root = getRootBlocked(layout);
  unsigned rootAxis = getKeptDims(layout)[axis];
  int64_t extent = type.getDimSize(axis);
  int64_t perThread = std::min<int64_t>(root.getSizePerThread()[rootAxis], extent);
  int64_t perWarp = perThread * root.getThreadsPerWarp()[rootAxis];
  return std::min<int64_t>(root.getWarpsPerCTA()[rootAxis], std::max<int64_t>(1, extent / perWarp));
}
