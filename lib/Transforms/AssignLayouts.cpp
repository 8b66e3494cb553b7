//===- AssignLayouts.cpp - Choose a layout for every tile -----------------===//
//
// This file implements -kiln-assign-layouts. Tiles that must share a layout (operands and
// results of elementwise ops, the operands of a memory op, loop-carried values) form groups;
// `expand_dims` and `reduce` tie a rank-r group to a slice of a rank-(r+1) group. Each root
// group gets one blocked layout chosen from the axis analysis of its largest memory access,
// so that a warp's accesses are coalesced and each thread's are as wide as proven safe.
//
//===----------------------------------------------------------------------===//

#include "kiln/Analysis/AxisInfo.h"
#include "kiln/Analysis/SharedScratch.h"
#include "kiln/Conversion/Common.h"
#include "kiln/Dialect/KilnGPU/IR/DotLayouts.h"
#include "kiln/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "kiln-assign-layouts"

namespace kiln {
#define GEN_PASS_DEF_KILNASSIGNLAYOUTS
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using kiln::gpu::BlockedEncodingAttr;
using kiln::gpu::SliceEncodingAttr;

namespace {

/// Largest access one thread issues, in bits (ld.global.v4.b32, PTX ISA 9.7.9.8).
constexpr unsigned kMaxAccessBits = 128;

/// Union-find over tile values.
class ValueGroups {
public:
  Value find(Value v) {
    auto it = parent.find(v);
    if (it == parent.end()) {
      parent[v] = v;
      order.push_back(v);
      return v;
    }
    if (it->second == v)
      return v;
    Value root = find(it->second);
    parent[v] = root;
    return root;
  }
  void unite(Value a, Value b) {
    Value ra = find(a), rb = find(b);
    if (ra != rb)
      parent[rb] = ra;
  }
  /// Every value seen, in first-seen order (deterministic output).
  ArrayRef<Value> values() const { return order; }

private:
  DenseMap<Value, Value> parent;
  SmallVector<Value> order;
};

bool isTile(Value v) { return isa<RankedTensorType>(v.getType()); }

/// Unites every tile among `values`.
void uniteAll(ValueGroups &groups, ValueRange values) {
  Value first;
  for (Value v : values) {
    if (!isTile(v))
      continue;
    if (!first)
      first = v;
    else
      groups.unite(first, v);
  }
}

/// A requirement `sliced = slice(axis, layout of full)`.
struct SliceEdge {
  Value sliced, full;
  unsigned axis;
  Operation *op;
};

/// Ops that are free to recompute per use: their result is a pure function of the thread's
/// position and of scalars.
bool isCheapToRecompute(Operation *op) {
  if (!op || op->getNumRegions() != 0 || op->getNumResults() != 1 || !isPure(op))
    return false;
  if (isa<MakeRangeOp, SplatOp, arith::ConstantOp>(op))
    return true;
  if (!isa<arith::ArithDialect, math::MathDialect>(op->getDialect()) &&
      !isa<ExpandDimsOp, BroadcastOp, AddPtrOp>(op))
    return false;
  return llvm::all_of(op->getOperands(),
                      [](Value v) { return !isTile(v) || isCheapToRecompute(v.getDefiningOp()); });
}

/// Gives every expand_dims and broadcast a private copy of a cheap source computation, and
/// every memory access a private copy of cheap pointers and masks, so that one range used as
/// both `x[:, None]` and `x[None, :]`, one row mask broadcast into tiles of different shapes (a
/// matmul's operand and output masks), or one pointer or mask tile shared by a load and a
/// store of different layouts (flash attention's q load and output store) ties no layouts
/// together. Likewise the offset of a pointer increment (a matmul's A and B pointers advanced by
/// one CSE'd splat of BLOCK_K when both strides along K are 1 must keep their own layouts) and
/// the accumulator of a dot: one zero tile that CSE made both a dot's C and a loop's initial
/// accumulator must not give two dots of different layouts one group.
void rematerializeCheapOperands(func::FuncOp func) {
  SmallVector<std::pair<Operation *, unsigned>> uses;
  func.walk([&](Operation *op) {
    if (isa<ExpandDimsOp, BroadcastOp>(op))
      uses.push_back({op, 0});
    else if (isa<AddPtrOp>(op))
      uses.push_back({op, 1}); // one splat step (BLOCK_K * 1) may advance A's and B's pointers
    else if (auto dot = dyn_cast<DotOp>(op))
      uses.push_back({op, dot.getCMutable().getOperandNumber()});
    else if (auto dot = dyn_cast<kiln::gpu::SharedDotOp>(op))
      uses.push_back({op, dot.getCMutable().getOperandNumber()});
    else if (isa<LoadOp, StoreOp, AtomicRMWOp, AtomicCASOp, kiln::gpu::AsyncCopyOp>(op))
      for (unsigned i = 0; i < op->getNumOperands(); ++i)
        uses.push_back({op, i});
  });
  for (auto [op, index] : uses) {
    Value src = op->getOperand(index);
    // Any shared value up the chain would tie layouts together, so copy the whole chain
    // unless every value in it has this one use (LLVM hoists and merges the copies).
    std::function<bool(Value)> shared = [&](Value v) -> bool {
      if (!isTile(v))
        return false;
      if (!v.hasOneUse())
        return true;
      Operation *def = v.getDefiningOp();
      return def && llvm::any_of(def->getOperands(), shared);
    };
    if (!isCheapToRecompute(src.getDefiningOp()) || !shared(src))
      continue;
    OpBuilder builder(op);
    IRMapping mapping;
    std::function<Value(Value)> clone = [&](Value v) -> Value {
      if (!isTile(v))
        return v;
      if (Value mapped = mapping.lookupOrNull(v))
        return mapped;
      Operation *def = v.getDefiningOp();
      for (Value operand : def->getOperands())
        clone(operand);
      return builder.clone(*def, mapping)->getResult(0);
    };
    op->setOperand(index, clone(src));
  }
}

/// Step 1 of assign: groups the tiles of `func` that must share a layout (operands and
/// results of elementwise and memory ops, loop-carried values, accumulators through dots) and
/// records in `edges` each tile that is the slice of another (expand_dims sources, reduction
/// results).
void groupValues(func::FuncOp func, ValueGroups &groups, SmallVector<SliceEdge> &edges) {
  func.walk([&](Operation *op) -> WalkResult {
    for (Value r : op->getResults())
      if (isTile(r))
        groups.find(r);
    if (auto ed = dyn_cast<ExpandDimsOp>(op)) {
      edges.push_back({ed.getSrc(), ed.getResult(), ed.getAxis(), op});
      return WalkResult::advance();
    }
    if (auto red = dyn_cast<ReduceOp>(op)) {
      uniteAll(groups, red.getSrcs());
      for (Value r : red.getResults())
        if (isTile(r))
          edges.push_back({r, red.getSrcs()[0], red.getAxis(), op});
      return WalkResult::advance();
    }
    if (auto forOp = dyn_cast<scf::ForOp>(op)) {
      auto yield = cast<scf::YieldOp>(forOp.getBody()->getTerminator());
      for (unsigned i = 0; i < forOp.getNumResults(); ++i)
        uniteAll(groups, {forOp.getInitArgs()[i], forOp.getRegionIterArgs()[i], yield.getOperand(i),
                          forOp.getResult(i)});
      return WalkResult::advance();
    }
    if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
      for (unsigned i = 0; i < ifOp.getNumResults(); ++i) {
        SmallVector<Value> vals{ifOp.getResult(i), ifOp.thenYield().getOperand(i)};
        if (!ifOp.getElseRegion().empty())
          vals.push_back(ifOp.elseYield().getOperand(i));
        uniteAll(groups, vals);
      }
      return WalkResult::advance();
    }
    if (auto whileOp = dyn_cast<scf::WhileOp>(op)) {
      auto cond = whileOp.getConditionOp();
      auto yield = whileOp.getYieldOp();
      for (unsigned i = 0; i < whileOp.getInits().size(); ++i)
        uniteAll(groups,
                 {whileOp.getInits()[i], whileOp.getBeforeArguments()[i], yield.getOperand(i)});
      for (unsigned i = 0; i < whileOp.getNumResults(); ++i)
        uniteAll(groups, {cond.getArgs()[i], whileOp.getAfterArguments()[i], whileOp.getResult(i)});
      return WalkResult::advance();
    }
    if (isa<scf::YieldOp, scf::ConditionOp, func::ReturnOp>(op))
      return WalkResult::advance();
    if (auto dot = dyn_cast<DotOp>(op)) {
      // The accumulator carries its layout through the dot (and loops); a and b keep theirs
      // and go through shared memory.
      uniteAll(groups, {dot.getC(), dot.getResult()});
      return WalkResult::advance();
    }
    if (auto dot = dyn_cast<kiln::gpu::SharedDotOp>(op)) {
      // Likewise; an A read from registers gets a layout of its own (see below).
      uniteAll(groups, {dot.getC(), dot.getResult()});
      if (isTile(dot.getA()))
        groups.find(dot.getA());
      return WalkResult::advance();
    }
    if (isa<ReshapeOp, TransOp, kiln::gpu::ConvertLayoutOp>(op)) {
      // Their results get layouts of their own: they move elements between threads through
      // shared memory.
      for (Value r : op->getResults())
        if (isTile(r))
          groups.find(r);
      return WalkResult::advance();
    }
    // Elementwise, memory, scan, broadcast, splat, make_range and everything else: operands
    // and results share one layout. A broadcast keeps its source's layout: the stretched
    // dimension of the source has size 1, so every thread holds its one element there.
    SmallVector<Value> vals(op->getOperands());
    llvm::append_range(vals, op->getResults());
    uniteAll(groups, vals);
    return WalkResult::advance();
  });
}

/// Step 2 of assign: a tile may be the slice of one layout only; the first edge that slices
/// a group from a second layout (or along a second axis), or null. `sliceOf` maps each sliced
/// group's root to its edge.
const SliceEdge *findSliceConflict(ValueGroups &groups, MutableArrayRef<SliceEdge> edges,
                                   DenseMap<Value, SliceEdge *> &sliceOf) {
  for (SliceEdge &edge : edges) {
    Value root = groups.find(edge.sliced);
    auto [it, inserted] = sliceOf.try_emplace(root, &edge);
    if (inserted)
      continue;
    SliceEdge *other = it->second;
    if (other->axis != edge.axis || groups.find(other->full) != groups.find(edge.full))
      return &edge;
  }
  return nullptr;
}

/// Step 2b: a dot's accumulator takes a layout of the dot's own (an mma fragment, or the
/// blocked layout its FMA loop walks), never the slice of another tile's: the edge that slices
/// the group of a dot's accumulator (a reduction's result fed to the dot, or the dot's result
/// expanded into a larger tile, as a batched dot's elements are), or null.
const SliceEdge *findSlicedAccumulator(func::FuncOp func, ValueGroups &groups,
                                       DenseMap<Value, SliceEdge *> &sliceOf) {
  const SliceEdge *found = nullptr;
  func.walk([&](Operation *op) {
    Value c;
    if (auto dot = dyn_cast<DotOp>(op))
      c = dot.getC();
    else if (auto dot = dyn_cast<kiln::gpu::SharedDotOp>(op))
      c = dot.getC();
    if (c && (found = sliceOf.lookup(groups.find(c))))
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  return found;
}

/// The tensor-core accumulator layout of a kiln.dot (the wgmma one where it fits, else the
/// mma.sync one), or null: the dot then runs on CUDA cores in a blocked layout.
Attribute dotAccumulatorLayout(DotOp dot, unsigned numWarps, bool wgmma) {
  if (!takesMmaAccumulatorLayout(dot))
    return {};
  MLIRContext *ctx = dot.getContext();
  ArrayRef<int64_t> shape = dot.getType().getShape();
  if (wgmma && fitsWgmma(dot))
    if (auto layout = getWgmmaAccumulatorLayout(ctx, shape, numWarps))
      return layout;
  return getMmaAccumulatorLayout(ctx, shape, numWarps);
}

/// The groups whose layout will be a tensor-core accumulator's, with that layout (step 3's
/// mmaLayoutOf, less its diagnostics: a shared_dot always takes one or fails there, null
/// here).
DenseMap<Value, Attribute> tensorCoreGroups(func::FuncOp func, ValueGroups &groups,
                                            unsigned numWarps, bool wgmma) {
  DenseMap<Value, Attribute> roots;
  func.walk([&](Operation *op) {
    if (auto dot = dyn_cast<DotOp>(op)) {
      if (Attribute layout = dotAccumulatorLayout(dot, numWarps, wgmma))
        roots.try_emplace(groups.find(dot.getResult()), layout);
    } else if (auto dot = dyn_cast<kiln::gpu::SharedDotOp>(op)) {
      ArrayRef<int64_t> shape = dot.getType().getShape();
      roots.try_emplace(groups.find(dot.getResult()),
                        wgmma ? getWgmmaAccumulatorLayout(op->getContext(), shape, numWarps)
                              : getMmaAccumulatorLayout(op->getContext(), shape, numWarps));
    }
  });
  return roots;
}

/// Threads and blocks one SM runs at most (sm_90).
constexpr int64_t kThreadsPerSM = 2048, kBlocksPerSM = 32;

/// Bytes of the function's dot rings, all counted as if live at once (an upper bound).
int64_t ringBytes(func::FuncOp func) {
  int64_t bytes = 0;
  func.walk([&](kiln::gpu::LocalAllocOp op) {
    bytes +=
        kiln::getSharedSlotBytes(op.getResult().getType()) * op.getResult().getType().getNumSlots();
  });
  return bytes;
}

/// Whether the conversion of an accumulator from `src` to `dst` is worth its shared memory
/// where the fragment layout could store it as it is (column pairs): it must move by column
/// bands (vector accesses: kiln::gpu::planColumnBands), its scratch must fit beside the rings,
/// and it must not cost a block per SM that the rings and the threads leave room for.
bool conversionFits(RankedTensorType src, RankedTensorType dst, int64_t rings, unsigned numWarps) {
  if (!kiln::gpu::planColumnBands(src, dst))
    return false;
  int64_t scratch = kiln::getConversionScratchBytes(src, dst);
  int64_t byThreads =
      std::min<int64_t>(kBlocksPerSM, kThreadsPerSM / (int64_t(numWarps) * kiln::gpu::kWarpSize));
  auto blocksPerSM = [&](int64_t bytes) {
    return std::min(byThreads,
                    kiln::gpu::kSharedBytesPerSM / (bytes + kiln::gpu::kSharedBytesReserved));
  };
  return rings + scratch <= kiln::gpu::kMaxSharedBytes &&
         blocksPerSM(rings + scratch) >= blocksPerSM(rings);
}

/// Step 2c: a 2-D store of a tensor-core accumulator stores through a kiln_gpu.convert_layout:
/// the pointers (and mask) then take a blocked layout of their own, coalesced along the
/// contiguous dimension (a warp writes whole 128-byte lines, 16 bytes a thread, not 8 rows of
/// a thread's column pairs). Always where the fragment layout would write one element at a
/// time (the column pairs a thread holds not proven aligned: a C pointer loaded from a table,
/// an unknown row stride; or memory contiguous down the columns); where it would write pairs,
/// of 16-bit or narrower elements when the conversion fits (conversionFits). A row's pairs,
/// 4 threads', are half a 32-byte sector, 4 bytes a store: 64 stores a thread for a 128 x 256
/// f16 tile against 16 of 16 bytes, and the store queue stalls on them (unsloth's MoE GEMM
/// forward on the H200: 0.94 -> 1.00x Triton with W by the TMA, 0.99 -> 1.08x by pointers). Returns
/// the conversions made; their groups place warps along the rows (`chooseDst`, chooseBlocked's
/// warpsAlongRows), so the conversion moves one band of columns at a time
/// (kiln::gpu::planColumnBands).
SmallVector<Operation *> convertAccumulatorStores(
    func::FuncOp func, ValueGroups &groups, unsigned numWarps, bool wgmma,
    function_ref<Attribute(ArrayRef<int64_t>, Value, const AxisInfoAnalysis &)> chooseDst) {
  DenseMap<Value, Attribute> tensorCore = tensorCoreGroups(func, groups, numWarps, wgmma);
  SmallVector<StoreOp> stores;
  func.walk([&](StoreOp store) {
    auto type = dyn_cast<RankedTensorType>(store.getValue().getType());
    if (type && type.getRank() == 2 && tensorCore.count(groups.find(store.getValue())))
      stores.push_back(store);
  });
  if (stores.empty())
    return {};
  AxisInfoAnalysis axis(func);
  int64_t rings = ringBytes(func);
  // Pair stores stay on the mma.sync path (measured on sm_90 only), and where a
  // warp-specialized loop's consumers run under a register cap (setmaxnreg) that a
  // conversion's live values may pass.
  bool capped = !wgmma || func.walk([](scf::ForOp loop) {
                                return loop->hasAttr(kiln::kWarpSpecializeAttr)
                                           ? WalkResult::interrupt()
                                           : WalkResult::advance();
                              })
                              .wasInterrupted();
  SmallVector<Operation *> converts;
  for (StoreOp store : stores) {
    Value ptr = store.getPtr();
    const AxisInfo &info = axis.get(ptr);
    unsigned fast = info.contiguity[1] >= info.contiguity[0] ? 1 : 0;
    // Less than a 32-byte sector of 16-bit elements in a row: nothing to coalesce.
    if (info.contiguity[fast] < 16)
      continue;
    bool pairs = fast == 1 && axis.getPtrVectorWidth(ptr, 1, kMaxAccessBits) >= 2 &&
                 (!store.getMask() || axis.getMaskConstancy(store.getMask(), 1) >= 2);
    Value value = store.getValue();
    if (pairs) {
      auto type = cast<RankedTensorType>(value.getType());
      // 32-bit pairs fill a sector a row already (4 threads x 8 bytes).
      if (capped || type.getElementTypeBitWidth() >= 32)
        continue;
      Attribute acc = tensorCore.lookup(groups.find(value));
      if (!acc)
        continue;
      auto src = RankedTensorType::get(type.getShape(), type.getElementType(), acc);
      auto dst = RankedTensorType::get(type.getShape(), type.getElementType(),
                                       chooseDst(type.getShape(), ptr, axis));
      if (!conversionFits(src, dst, rings, numWarps))
        continue; // the fragment layout writes whole pairs
    }
    OpBuilder b(store);
    auto cvt = kiln::gpu::ConvertLayoutOp::create(b, store.getLoc(), value.getType(), value);
    store.getValueMutable().assign(cvt);
    converts.push_back(cvt);
  }
  return converts;
}

/// Step 4b: an A read from registers whose group took another layout (a layout from a slice
/// or a conflict) is converted to the wgmma fragment layout.
void convertRegisterOperands(func::FuncOp func, unsigned numWarps) {
  func.walk([&](kiln::gpu::SharedDotOp dot) {
    auto aTy = dyn_cast<RankedTensorType>(dot.getA().getType());
    if (!aTy)
      return;
    auto want = getWgmmaAccumulatorLayout(func.getContext(), aTy.getShape(), numWarps);
    if (aTy.getEncoding() == want)
      return;
    OpBuilder b(dot);
    auto cvt = kiln::gpu::ConvertLayoutOp::create(
        b, dot.getLoc(), RankedTensorType::get(aTy.getShape(), aTy.getElementType(), want),
        dot.getA());
    dot.getAMutable().assign(cvt.getResult());
  });
}

/// Step 5: a dot operand A computed outside the dot's loop need not be restaged every
/// iteration (kInvariantAAttr).
void markLoopInvariantOperands(func::FuncOp func) {
  func.walk([&](DotOp dot) {
    Operation *loop = dot->getParentOp();
    while (loop && !isa<scf::ForOp, scf::WhileOp>(loop) && !isa<func::FuncOp>(loop))
      loop = loop->getParentOp();
    if (!loop || isa<func::FuncOp>(loop))
      return;
    Value a = dot.getA();
    Region *defRegion = a.getParentRegion();
    if (!loop->isAncestor(defRegion->getParentOp()))
      dot->setAttr(kInvariantAAttr, UnitAttr::get(func.getContext()));
  });
}

/// Step 6: a shared ring is stored contiguous along the dimension its copies are coalesced
/// along, so that each thread's cp.async moves whole runs; 8-bit rings along K, the only way
/// wgmma reads them (copies along N then move one element at a time).
void orderSharedRings(func::FuncOp func) {
  MLIRContext *ctx = func.getContext();
  func.walk([&](kiln::gpu::LocalAllocOp alloc) {
    if (alloc.getResult().getType().getElementType().getIntOrFloatBitWidth() == 8) {
      alloc.setKMajorAttr(BoolAttr::get(ctx, true));
      return;
    }
    for (Operation *user : alloc->getUsers())
      if (auto copy = dyn_cast<kiln::gpu::AsyncCopyOp>(user)) {
        unsigned fast = kiln::gpu::getOrder(copy.getPtr().getType().getEncoding())[0];
        // A slot of A is M x K (K is dim 1); one of B is K x N (K is dim 0); the pointers of
        // a transposed copy the other way round.
        unsigned kDim = copy.getPtrKDim(alloc.getOperand() == 0);
        alloc.setKMajorAttr(BoolAttr::get(ctx, fast == kDim));
        break;
      }
  });
}

/// Elements of one tile a thread may hold. Past this, registers spill wholesale and LLVM's
/// optimizer and PTX emission time grows about fourfold per doubling: a masked, strided 2-D
/// copy compiled for sm_90 on 4 warps took 8.6 s at 512 elements per thread, 35 s at 1,024
/// (on the busy 2-core VM) and ran past the fuzzer's 60 s at 4,096 and 8,192. So it is an error
/// at the tile's source line rather than a compile that seems to hang.
constexpr int64_t kMaxElementsPerThread = 1024;

/// Whether `loc` names a source line (constants that canonicalization made or moved may have
/// none; the error goes to an op of the user's).
bool hasSourceLine(Location loc) {
  bool found = false;
  loc->walk([&](Location l) {
    if (isa<FileLineColLoc>(l))
      found = true;
    return found ? WalkResult::interrupt() : WalkResult::advance();
  });
  return found;
}

/// Reports a tile that holds more than kMaxElementsPerThread elements per thread (the first
/// one at a source line, else the first one).
LogicalResult checkTileSizes(ModuleOp module, unsigned numWarps) {
  int64_t threads = int64_t(numWarps) * 32;
  Operation *bad = nullptr;
  RankedTensorType badType;
  module.walk([&](Operation *op) {
    for (Type t : op->getResultTypes())
      if (auto tile = dyn_cast<RankedTensorType>(t);
          tile && tile.hasStaticShape() &&
          tile.getNumElements() / threads > kMaxElementsPerThread) {
        if (!bad || !hasSourceLine(bad->getLoc())) {
          bad = op;
          badType = tile;
        }
        if (hasSourceLine(op->getLoc()))
          return WalkResult::interrupt();
      }
    return WalkResult::advance();
  });
  if (!bad)
    return success();
  std::string shape;
  for (int64_t d : badType.getShape())
    shape += (shape.empty() ? "" : "x") + std::to_string(d);
  bad->emitError() << "a tile of " << shape << " elements is " << badType.getNumElements() / threads
                   << " elements per thread on " << numWarps << " warps; GPU code holds at most "
                   << kMaxElementsPerThread
                   << " per thread (beyond that registers spill wholesale and compiling takes "
                      "minutes): use a smaller block or more warps (num_warps)";
  return failure();
}

struct KilnAssignLayoutsPass final : kiln::impl::KilnAssignLayoutsBase<KilnAssignLayoutsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (numWarps == 0 || !llvm::isPowerOf2_32(numWarps)) {
      module.emitError("expected num-warps to be a power of two, found ") << unsigned(numWarps);
      return signalPassFailure();
    }
    // Fail before choosing layouts for what cannot be lowered, at the user's source line.
    if (failed(checkGPUSupport(module)) || failed(checkTileSizes(module, numWarps)))
      return signalPassFailure();
    module->setAttr(kiln::gpu::kNumWarpsAttr,
                    IntegerAttr::get(IntegerType::get(&getContext(), 32), numWarps));
    if (wgmma)
      module->setAttr(kiln::gpu::kWgmmaAttr, UnitAttr::get(&getContext()));
    for (auto func : module.getOps<func::FuncOp>())
      if (failed(assign(func)))
        return signalPassFailure();
  }

  LogicalResult assign(func::FuncOp func);
  BlockedEncodingAttr chooseBlocked(ArrayRef<int64_t> shape, Value ptr,
                                    const AxisInfoAnalysis &axis, bool warpsAlongRows);
};

/// Gives the slice requirement of `edge` its own tile: a kiln_gpu.convert_layout between the
/// expand_dims and its source, or after the reduction's result.
void insertConversion(const SliceEdge &edge) {
  OpBuilder b(edge.op);
  if (auto ed = dyn_cast<ExpandDimsOp>(edge.op)) {
    Value src = ed.getSrc();
    auto cvt = kiln::gpu::ConvertLayoutOp::create(b, ed.getLoc(), src.getType(), src);
    ed.getSrcMutable().assign(cvt);
    return;
  }
  b.setInsertionPointAfter(edge.op);
  Value sliced = edge.sliced;
  auto cvt = kiln::gpu::ConvertLayoutOp::create(b, edge.op->getLoc(), sliced.getType(), sliced);
  sliced.replaceAllUsesExcept(cvt, cvt);
}

LogicalResult KilnAssignLayoutsPass::assign(func::FuncOp func) {
  rematerializeCheapOperands(func);
  ValueGroups groups;
  SmallVector<SliceEdge> edges;
  DenseMap<Value, SliceEdge *> sliceOf; // sliced group root -> edge
  bool storesChecked = false;
  SmallVector<Operation *> rowConverts; // step 2c's conversions
  // A tile sliced from two different layouts, or a sliced dot accumulator, gets a conversion
  // and the grouping starts over (each round removes one conflict).
  for (unsigned round = 0;; ++round) {
    groups = ValueGroups();
    edges.clear();
    sliceOf.clear();

    groupValues(func, groups, edges);
    const SliceEdge *conflict = findSliceConflict(groups, edges, sliceOf);
    if (!conflict)
      conflict = findSlicedAccumulator(func, groups, sliceOf);
    if (!conflict) {
      SmallVector<Operation *> converts =
          storesChecked ? SmallVector<Operation *>()
                        : convertAccumulatorStores(func, groups, numWarps, wgmma,
                                                   [&](ArrayRef<int64_t> shape, Value ptr,
                                                       const AxisInfoAnalysis &axis) -> Attribute {
                                                     return chooseBlocked(shape, ptr, axis,
                                                                          /*warpsAlongRows=*/true);
                                                   });
      storesChecked = true;
      if (converts.empty())
        break;
      rowConverts.append(converts);
      continue; // group again: the stores' pointers leave the accumulators' groups
    }
    if (round > 4096)
      return conflict->op->emitError("layout assignment does not converge");
    insertConversion(*conflict);
  } // rounds

  // 3. The largest memory access of each group anchors its layout; slice groups resolve
  // after the group they slice.
  AxisInfoAnalysis axis(func);
  llvm::MapVector<Value, Value> anchor; // group root -> pointer tile
  func.walk([&](Operation *op) {
    Value ptr;
    if (auto load = dyn_cast<LoadOp>(op))
      ptr = load.getPtr();
    else if (auto store = dyn_cast<StoreOp>(op))
      ptr = store.getPtr();
    else if (auto rmw = dyn_cast<AtomicRMWOp>(op))
      ptr = rmw.getPtr();
    else if (auto copy = dyn_cast<kiln::gpu::AsyncCopyOp>(op))
      ptr = copy.getPtr();
    if (!ptr || !isTile(ptr))
      return;
    Value root = groups.find(ptr);
    auto numel = [](Value v) { return cast<RankedTensorType>(v.getType()).getNumElements(); };
    auto it = anchor.find(root);
    if (it == anchor.end() || numel(it->second) < numel(ptr))
      anchor[root] = ptr;
  });

  // Accumulators of dots on tensor cores take the mma fragment layout.
  DenseMap<Value, Attribute> mmaLayoutOf; // group root -> layout
  func.walk([&](DotOp dot) {
    if (Attribute layout = dotAccumulatorLayout(dot, numWarps, wgmma))
      mmaLayoutOf.try_emplace(groups.find(dot.getResult()), layout);
  });
  // Dots reading shared rings run on wgmma on sm_90a, else on mma.sync with both operands
  // from rings (-kiln-pipeline-dot-operands checked the shape).
  bool badSharedDot = false;
  func.walk([&](kiln::gpu::SharedDotOp dot) {
    auto type = cast<RankedTensorType>(dot.getType());
    if (!wgmma) {
      auto layout = getMmaAccumulatorLayout(&getContext(), type.getShape(), numWarps);
      if (!layout || isTile(dot.getA())) {
        dot.emitOpError("needs A and B from rings and a tile of at least 16 rows and 8 "
                        "columns per warp on the mma.sync path, found ")
            << type << " with " << unsigned(numWarps) << " warps";
        badSharedDot = true;
        return;
      }
      mmaLayoutOf.try_emplace(groups.find(dot.getResult()), layout);
      return;
    }
    auto layout = getWgmmaAccumulatorLayout(&getContext(), type.getShape(), numWarps);
    if (!layout) {
      dot.emitOpError("needs M a multiple of 16 rows per warp for warpgroup tensor cores, "
                      "found ")
          << type << " with " << unsigned(numWarps) << " warps";
      badSharedDot = true;
      return;
    }
    mmaLayoutOf.try_emplace(groups.find(dot.getResult()), layout);
    // A in registers is read as wgmma A fragments: the accumulator layout of an M x K dot.
    if (isTile(dot.getA())) {
      auto aTy = cast<RankedTensorType>(dot.getA().getType());
      if (auto aLayout = getWgmmaAccumulatorLayout(&getContext(), aTy.getShape(), numWarps))
        mmaLayoutOf.try_emplace(groups.find(dot.getA()), aLayout);
      else {
        dot.emitOpError("needs A in registers to have M a multiple of 16 rows per warp and K "
                        "a multiple of 8, found ")
            << aTy << " with " << unsigned(numWarps) << " warps";
        badSharedDot = true;
      }
    }
  });
  if (badSharedDot)
    return failure();
  DenseMap<Value, Attribute> layoutOf; // group root -> layout
  DenseSet<Value> rowRoots; // the groups step 2c's conversions store: warps along the rows
  for (Operation *cvt : rowConverts)
    rowRoots.insert(groups.find(cvt->getResult(0)));
  std::function<Attribute(Value)> resolve = [&](Value root) -> Attribute {
    if (Attribute done = layoutOf.lookup(root))
      return done;
    Attribute layout;
    if (SliceEdge *edge = sliceOf.lookup(root)) {
      Attribute parent = resolve(groups.find(edge->full));
      layout = SliceEncodingAttr::get(&getContext(), edge->axis, parent);
    } else if (Attribute mma = mmaLayoutOf.lookup(root)) {
      layout = mma;
    } else {
      Value ptr = anchor.lookup(root);
      Value shapeSource = ptr ? ptr : root;
      for (Value v : groups.values())
        if (groups.find(v) == root &&
            cast<RankedTensorType>(v.getType()).getNumElements() >
                cast<RankedTensorType>(shapeSource.getType()).getNumElements())
          shapeSource = v;
      layout = chooseBlocked(cast<RankedTensorType>(shapeSource.getType()).getShape(), ptr, axis,
                             rowRoots.contains(root));
    }
    layoutOf[root] = layout;
    return layout;
  };

  // 4. Rewrite the types.
  for (Value v : groups.values()) {
    auto type = cast<RankedTensorType>(v.getType());
    auto newType =
        RankedTensorType::get(type.getShape(), type.getElementType(), resolve(groups.find(v)));
    v.setType(newType);
    if (auto cst = v.getDefiningOp<arith::ConstantOp>())
      if (auto dense = dyn_cast<DenseElementsAttr>(cst.getValue()))
        cst.setValueAttr(dense.reshape(newType));
  }

  convertRegisterOperands(func, numWarps);
  markLoopInvariantOperands(func);
  orderSharedRings(func);
  return success();
}

BlockedEncodingAttr KilnAssignLayoutsPass::chooseBlocked(ArrayRef<int64_t> shape, Value ptr,
                                                         const AxisInfoAnalysis &axis,
                                                         bool warpsAlongRows) {
  unsigned rank = shape.size();
  // Fastest dimension first: by contiguity of the anchor, the last dimension on ties.
  SmallVector<unsigned> order;
  for (unsigned d = rank; d-- > 0;)
    order.push_back(d);
  unsigned vec = 1;
  int64_t numel = 1;
  for (int64_t d : shape)
    numel *= d;
  unsigned numThreads = numWarps * kiln::gpu::kWarpSize;
  if (ptr) {
    const AxisInfo &info = axis.get(ptr);
    llvm::stable_sort(
        order, [&](unsigned a, unsigned b) { return info.contiguity[a] > info.contiguity[b]; });
    vec = axis.getPtrVectorWidth(ptr, order[0], kMaxAccessBits);
    // A converted accumulator's store: as wide as its mask is constant, no wider (a thread
    // writing a block one element at a time would leave gaps in each warp's row).
    if (warpsAlongRows)
      for (Operation *user : ptr.getUsers())
        if (auto store = dyn_cast<StoreOp>(user); store && store.getMask())
          vec = std::min<int64_t>(
              vec, std::max<int64_t>(1, axis.getMaskConstancy(store.getMask(), order[0])));
    // Leave every thread some work before widening the per-thread block.
    vec = std::min<int64_t>(vec, std::max<int64_t>(1, numel / numThreads));
    vec = std::min<int64_t>(vec, shape[order[0]]);
  }
  SmallVector<unsigned> spt(rank, 1), tpw(rank, 1), wpc(rank, 1);
  spt[order[0]] = vec;
  // 8-bit copies into a K-major ring along M or N (a row-major int8/fp8 B): 4 consecutive k
  // per thread, so the copy transposes 4 x 4 byte blocks in registers and stores 4 bytes at
  // a time (SharedRingToLLVM.cpp).
  if (ptr && rank == 2 && vec >= 4)
    for (Operation *user : ptr.getUsers())
      if (auto copy = dyn_cast<kiln::gpu::AsyncCopyOp>(user)) {
        auto alloc = copy.getBuffer().getDefiningOp<kiln::gpu::LocalAllocOp>();
        unsigned kDim = copy.getPtrKDim(alloc && alloc.getOperand() == 0);
        if (alloc && alloc.getResult().getType().getElementType().getIntOrFloatBitWidth() == 8 &&
            order[0] != kDim && shape[kDim] % 4 == 0 && numel >= int64_t(numThreads) * 4 * 4) {
          spt[kDim] = 4;
          spt[order[0]] = std::max<int64_t>(4, std::min<int64_t>(vec, numel / (numThreads * 4)));
        }
        break;
      }
  // A converted accumulator's store: a warp's lanes span one 128-byte line of a row, not
  // more (as coalesced: each store instruction writes whole lines), so that the conversion's
  // column period stays below the tile's width and it moves one band of columns at a time
  // (kiln::gpu::planColumnBands) through a scratch of 16 KiB, not the whole tile.
  int64_t rowLanes = kiln::gpu::kWarpSize;
  if (warpsAlongRows && ptr && rank == 2)
    if (Type elem = getElementTypeOrSelf(kiln::getPointeeType(ptr.getType()));
        elem && elem.isIntOrFloat())
      rowLanes = std::max<int64_t>(
          1, 128 / (int64_t(spt[order[0]]) * std::max(1u, elem.getIntOrFloatBitWidth() / 8)));
  unsigned lanes = kiln::gpu::kWarpSize;
  for (unsigned d : order) {
    unsigned t = std::min<int64_t>(lanes, std::max<int64_t>(1, shape[d] / spt[d]));
    if (d == order[0])
      t = std::min<int64_t>(t, rowLanes);
    tpw[d] = t;
    lanes /= t;
  }
  tpw[order.back()] *= lanes; // Tile smaller than a warp: replicate along the slowest dim.
  // Warps along the fastest dimension first, or (warpsAlongRows) the slowest first.
  SmallVector<unsigned> warpOrder(order);
  if (warpsAlongRows)
    std::reverse(warpOrder.begin(), warpOrder.end());
  unsigned warps = numWarps;
  for (unsigned d : warpOrder) {
    unsigned w = std::min<int64_t>(warps, std::max<int64_t>(1, shape[d] / (spt[d] * tpw[d])));
    wpc[d] = w;
    warps /= w;
  }
  wpc[warpOrder.back()] *= warps;
  return BlockedEncodingAttr::get(&getContext(), spt, tpw, wpc, order, /*wgmma=*/false);
}

} // namespace
