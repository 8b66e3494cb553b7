//===- SharedRingToLLVM.cpp - Shared rings filled by cp.async -------------===//
//
// This file lowers the ops -kiln-pipeline-dot-operands creates around a dot's operands:
//   - local_alloc: a ring of slots in the kernel's dynamic shared memory, at the byte offset
//     -kiln-convert-to-llvm assigned (kiln_gpu.offset); slots are 1024-byte aligned.
//   - async_copy: every thread copies the elements it owns into the slot with cp.async (4, 8
//     or 16 bytes by the pointers' proven contiguity; src-size 0 zero-fills masked-off
//     elements), at the wgmma operand layout of the slot (WgmmaLayout.h); narrower elements
//     go through registers with a predicated load and a shared store. 8-bit elements whose
//     pointers run along M or N into a K-major slot (a row-major int8/fp8 B: wgmma reads
//     8-bit operands K-major only) are loaded 4 rows of K at a time when the layout gives each
//     thread 4 consecutive k (-kiln-assign-layouts does), transposed in registers in 4 x 4
//     byte blocks, and stored 4 k per 32-bit shared store.
//   - async_commit / async_wait: cp.async.commit_group / cp.async.wait_group N, then (sm_90a) a
//     proxy fence (wgmma reads what the copies wrote) and a barrier.
//   - mbarrier_alloc / mbarrier_expect / mbarrier_arrive / mbarrier_wait: barriers in static
//     shared memory (init by thread 0 for 1 or `arrivals` arrivals, arrive.expect_tx by thread
//     0, arrive by the first lane of each warp, try_wait.parity by all or by thread 0 alone).
//   - async_arrive / proxy_fence: cp.async.mbarrier.arrive.noinc (each thread's arrival once
//     its copies have landed) and fence.proxy.async, for cp.async rings that complete on
//     barriers instead of a wait and a CTA barrier.
//   - tma_copy: thread 0 issues cp.async.bulk.tensor for each box of the block
//     (nvidia::getTensorMapBox with the rows kiln_gpu.tma_box_rows gives the map), completing on
//     the slot's barrier (rows in their natural order: the wgmma accumulator layout reads
//     A's rows where the tensor has them). barrier: bar.sync.
//   - tma_store: every thread writes its elements into the one-slot buffer, proxy fence and
//     barrier, thread 0 issues cp.async.bulk.tensor (shared -> global) per box and waits until
//     the copies have read the buffer, barrier.
//
//===----------------------------------------------------------------------===//

#include "WgmmaLayout.h"
#include "kiln/Target/NVIDIA/TensorMap.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

#include <map>

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

/// The dynamic shared memory every ring lives in.
constexpr llvm::StringLiteral kDynamicSharedSymbol = "__kiln_dynamic_smem";

/// Void inline PTX with side effects.
void emitAsm(OpBuilder &b, Location loc, StringRef asmStr, StringRef constraints = "",
             ValueRange args = {}) {
  emitInlineAsm(b, loc, LLVM::LLVMVoidType::get(b.getContext()), args, asmStr, constraints,
                /*sideEffects=*/true);
}

struct LocalAllocLowering final : ConvertOpToLLVMPattern<kgpu::LocalAllocOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;

  LogicalResult matchAndRewrite(kgpu::LocalAllocOp op, OpAdaptor,
                                ConversionPatternRewriter &b) const override {
    auto offset = op->getAttrOfType<IntegerAttr>(kSharedOffsetAttr);
    if (!offset)
      return op.emitOpError("has no shared memory offset (run -kiln-convert-to-llvm)");
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    auto module = op->getParentOfType<ModuleOp>();
    auto global = module.lookupSymbol<LLVM::GlobalOp>(kDynamicSharedSymbol);
    if (!global) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      // extern .shared .align 1024 .b8 __kiln_dynamic_smem[]: sized at launch.
      global = LLVM::GlobalOp::create(b, loc, LLVM::LLVMArrayType::get(b.getI8Type(), 0),
                                      /*isConstant=*/false, LLVM::Linkage::External,
                                      kDynamicSharedSymbol, Attribute(), /*alignment=*/1024,
                                      /*addrSpace=*/3);
    }
    Value base = LLVM::AddressOfOp::create(b, loc, global);
    auto ptr3 = LLVM::LLVMPointerType::get(ctx, 3);
    Value at = LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), base,
                                   ArrayRef<LLVM::GEPArg>{int32_t(offset.getInt())});
    b.replaceOp(op, at);
    return success();
  }
};

struct AsyncCopyLowering final : ConvertOpToLLVMPattern<kgpu::AsyncCopyOp> {
  AsyncCopyLowering(const LLVMTypeConverter &converter, const AxisInfoAnalysis &axis,
                    const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), axis(axis), target(target) {}

  LogicalResult matchAndRewrite(kgpu::AsyncCopyOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    auto alloc = op.getBuffer().getDefiningOp<kgpu::LocalAllocOp>();
    if (!alloc)
      return op.emitOpError("expected a ring from kiln_gpu.local_alloc");
    Location loc = op.getLoc();
    OperandLayout layout = getRingOperandLayout(alloc);
    bool isA = alloc.getOperand() == 0;
    RankedTensorType ptrTy = op.getPtr().getType();
    int64_t eb = layout.elemBytes;

    // Elements per copy: a run along the pointers' fastest dimension, which must also be the
    // slot's contiguous one.
    unsigned fast = kgpu::getOrder(ptrTy.getEncoding())[0];
    unsigned kDim = op.getPtrKDim(isA), mnDim = 1 - kDim;
    unsigned vec = getAccessVectorWidth(op.getPtr(), op.getMask(), axis);
    if (eb == 1 && layout.kMajor && fast == mnDim && vec >= 4 &&
        kgpu::getSizePerThread(ptrTy.getEncoding())[kDim] % 4 == 0 && ptrTy.getRank() == 2) {
      copyTransposed(b, op, adaptor, alloc, layout, std::min(vec, 16u), mnDim, kDim);
      b.eraseOp(op);
      return success();
    }
    if (fast != (layout.kMajor ? kDim : mnDim))
      vec = 1;
    int64_t bytes = vec * eb;

    auto [slotBase, ptrs, masks, coords] = unpackCopy(b, op, adaptor, alloc);
    auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
    Type elem = getTypeConverter()->convertType(alloc.getResult().getType().getElementType());
    // Each copy's swizzled address; those a constant step from the first copy's (rows 8
    // apart, whole swizzle blocks along the contiguous dimension: every copy of a thread in
    // the usual layouts) as that address plus an immediate.
    auto steps = getElementCoordinateSteps(ptrTy);
    Value firstDst;
    for (size_t i = 0; i < ptrs.size(); i += vec) {
      Value mn = coords[i][mnDim], k = coords[i][kDim];
      std::optional<int64_t> step;
      if (steps && firstDst)
        step = layout.getConstantStep((*steps)[i][mnDim] - (*steps)[0][mnDim],
                                      (*steps)[i][kDim] - (*steps)[0][kDim]);
      Value dst = step ? LLVM::AddOp::create(b, loc, firstDst, i32Const(b, loc, *step))
                       : LLVM::AddOp::create(b, loc, slotBase, layout.emitOffset(b, loc, mn, k));
      if (i == 0)
        firstDst = dst;
      if (bytes >= 4) {
        // .cg (L2 only) takes 16 bytes; smaller copies go through L1 (.ca).
        std::string asmStr = std::string("cp.async.") + (bytes == 16 ? "cg" : "ca") +
                             ".shared.global [$0], [$1], " + std::to_string(bytes) + ", $2;";
        Value srcSize = i32Const(b, loc, bytes);
        if (!masks.empty())
          srcSize = LLVM::SelectOp::create(b, loc, masks[i], srcSize, i32Const(b, loc, 0));
        emitAsm(b, loc, asmStr, "r,l,r", {dst, ptrs[i], srcSize});
        continue;
      }
      // A 1- or 2-byte element: through a register (zero where masked off).
      for (unsigned j = 0; j < vec; ++j) {
        unsigned bits = eb * 8;
        Value zero = LLVM::ConstantOp::create(b, loc, b.getIntegerType(bits),
                                              b.getIntegerAttr(b.getIntegerType(bits), 0));
        Value word = target.emitLoad(b, loc, ptrs[i + j], masks.empty() ? Value() : masks[i + j],
                                     bits, 1, {zero}, AccessModifiers())[0];
        Value at =
            j == 0 ? dst : LLVM::AddOp::create(b, loc, dst, i32Const(b, loc, j * eb)).getResult();
        Value p = LLVM::IntToPtrOp::create(b, loc, ptr3, at);
        LLVM::StoreOp::create(b, loc, LLVM::BitcastOp::create(b, loc, elem, word), p);
      }
    }
    b.eraseOp(op);
    return success();
  }

  /// What a copy's threads work from: the slot's shared address (i32), and per owned element
  /// its pointer, its mask bit (none without a mask) and its coordinates in the block.
  struct CopyOperands {
    Value slotBase;
    SmallVector<Value> ptrs, masks;
    SmallVector<SmallVector<Value, 4>> coords;
  };
  CopyOperands unpackCopy(ConversionPatternRewriter &b, kgpu::AsyncCopyOp op, OpAdaptor adaptor,
                          kgpu::LocalAllocOp alloc) const {
    Location loc = op.getLoc();
    CopyOperands c;
    c.slotBase = emitSlotAddress(b, loc, adaptor.getBuffer(), adaptor.getSlot(),
                                 alloc.getResult().getType());
    c.ptrs = unpackStruct(b, loc, adaptor.getPtr());
    if (adaptor.getMask())
      c.masks = unpackStruct(b, loc, adaptor.getMask());
    c.coords = emitElementCoordinates(b, loc, op.getPtr().getType(), target);
    return c;
  }

  /// The transposing copy of 8-bit elements (see the file comment): for each run of `vec`
  /// bytes along `mnDim` and 4 consecutive k a thread owns, 4 predicated loads of `vec`
  /// bytes (zero where masked off), byte shuffles that turn 4 rows of 4 columns into 4
  /// columns of 4 rows, and one 32-bit shared store per column.
  void copyTransposed(ConversionPatternRewriter &b, kgpu::AsyncCopyOp op, OpAdaptor adaptor,
                      kgpu::LocalAllocOp alloc, const OperandLayout &layout, unsigned vec,
                      unsigned mnDim, unsigned kDim) const {
    Location loc = op.getLoc();
    RankedTensorType ptrTy = op.getPtr().getType();
    Type i32 = b.getI32Type(), i8 = b.getI8Type();
    auto v4 = VectorType::get({4}, i8);
    auto [slotBase, ptrs, masks, coords] = unpackCopy(b, op, adaptor, alloc);
    auto positions = kgpu::getThreadElements(ptrTy.getEncoding(), ptrTy.getShape());
    std::map<std::array<unsigned, 4>, size_t> index;
    auto key = [](const kgpu::ElemPos &p) {
      return std::array<unsigned, 4>{p.rep[0], p.rep[1], p.elem[0], p.elem[1]};
    };
    for (auto [i, p] : llvm::enumerate(positions))
      index[key(p)] = i;
    auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
    Value zero = i32Const(b, loc, 0);
    auto shuffle = [&](Value x, Value y, ArrayRef<int32_t> mask) -> Value {
      return LLVM::ShuffleVectorOp::create(b, loc, x, y, mask);
    };
    for (auto [i, p] : llvm::enumerate(positions)) {
      if (p.elem[kDim] % 4 != 0 || p.elem[mnDim] % vec != 0)
        continue;
      // Rows k .. k + 3 of this run: vec / 4 words each.
      SmallVector<SmallVector<Value>> rows;
      for (unsigned r = 0; r < 4; ++r) {
        kgpu::ElemPos q = p;
        q.elem[kDim] += r;
        size_t j = index.at(key(q));
        rows.push_back(target.emitLoad(b, loc, ptrs[j], masks.empty() ? Value() : masks[j], 32,
                                       vec / 4, SmallVector<Value>(vec / 4, zero),
                                       AccessModifiers()));
      }
      for (unsigned w = 0; w < vec / 4; ++w) {
        SmallVector<Value> r4;
        for (unsigned r = 0; r < 4; ++r)
          r4.push_back(LLVM::BitcastOp::create(b, loc, v4, rows[r][w]));
        // [r0.b0 r1.b0 r0.b1 r1.b1], [r2.b0 r3.b0 r2.b1 r3.b1], then the same for bytes 2, 3.
        Value lo01 = shuffle(r4[0], r4[1], {0, 4, 1, 5});
        Value lo23 = shuffle(r4[2], r4[3], {0, 4, 1, 5});
        Value hi01 = shuffle(r4[0], r4[1], {2, 6, 3, 7});
        Value hi23 = shuffle(r4[2], r4[3], {2, 6, 3, 7});
        std::array<Value, 4> cols = {
            shuffle(lo01, lo23, {0, 1, 4, 5}), shuffle(lo01, lo23, {2, 3, 6, 7}),
            shuffle(hi01, hi23, {0, 1, 4, 5}), shuffle(hi01, hi23, {2, 3, 6, 7})};
        for (unsigned c = 0; c < 4; ++c) {
          kgpu::ElemPos q = p;
          q.elem[mnDim] += 4 * w + c;
          size_t j = index.at(key(q));
          Value off = layout.emitOffset(b, loc, coords[j][mnDim], coords[j][kDim]);
          Value at = LLVM::AddOp::create(b, loc, slotBase, off);
          Value dst = LLVM::IntToPtrOp::create(b, loc, ptr3, at);
          LLVM::StoreOp::create(b, loc, LLVM::BitcastOp::create(b, loc, i32, cols[c]), dst,
                                /*alignment=*/4);
        }
      }
    }
  }

  const AxisInfoAnalysis &axis;
  const TargetInfo &target;
};

/// An op without operands or results as one fixed PTX instruction (async_commit,
/// proxy_fence).
template <typename OpT> struct FixedAsmLowering final : ConvertOpToLLVMPattern<OpT> {
  FixedAsmLowering(const LLVMTypeConverter &converter, StringRef text)
      : ConvertOpToLLVMPattern<OpT>(converter), text(text) {}
  LogicalResult matchAndRewrite(OpT op, typename OpT::Adaptor,
                                ConversionPatternRewriter &b) const override {
    emitAsm(b, op.getLoc(), text);
    b.eraseOp(op);
    return success();
  }
  std::string text;
};

struct AsyncWaitLowering final : ConvertOpToLLVMPattern<kgpu::AsyncWaitOp> {
  AsyncWaitLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}
  LogicalResult matchAndRewrite(kgpu::AsyncWaitOp op, OpAdaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    emitAsm(b, loc, "cp.async.wait_group " + std::to_string(op.getPending()) + ";");
    // wgmma reads shared memory through the async proxy; ldmatrix (the mma.sync path of
    // targets without wgmma, which have no such fence) through the generic one.
    auto module = op->getParentOfType<ModuleOp>();
    if (module && module->hasAttr(kgpu::kWgmmaAttr))
      emitAsm(b, loc, "fence.proxy.async.shared::cta;");
    target.barrier(b, loc);
    b.eraseOp(op);
    return success();
  }
  const TargetInfo &target;
};

/// Emits `body` in a block entered only where `cond` holds, then goes on after it.
void emitIf(ConversionPatternRewriter &b, Location loc, Value cond,
            llvm::function_ref<void()> body) {
  Block *current = b.getInsertionBlock();
  Block *after = b.splitBlock(current, b.getInsertionPoint());
  Block *then = b.createBlock(after);
  b.setInsertionPointToEnd(current);
  LLVM::CondBrOp::create(b, loc, cond, then, after);
  b.setInsertionPointToEnd(then);
  body();
  LLVM::BrOp::create(b, loc, after);
  b.setInsertionPointToStart(after);
}

/// The first warp of the warpgroup that executes `op`: 0, or a warp-specialized kernel's
/// producer warpgroup (kLeaderWarpAttr).
unsigned getLeaderWarp(Operation *op) {
  auto attr = op->getAttrOfType<IntegerAttr>(kgpu::kLeaderWarpAttr);
  return attr ? unsigned(attr.getInt()) : 0;
}

/// The barrier an op emits: over the program's threads where the op is marked
/// kAllThreadsAttr (a warp-specialized kernel's code both roles run), else target.barrier.
void emitBarrierOf(Operation *op, ConversionPatternRewriter &b, Location loc,
                   const TargetInfo &target) {
  if (op->hasAttr(kgpu::kAllThreadsAttr))
    NVVM::Barrier0Op::create(b, loc);
  else
    target.barrier(b, loc);
}

/// Emits `body` in a block that only thread 0 of warp `leaderWarp` enters, and only where
/// `cond` holds: a real branch, so that the other warps skip the code instead of running it
/// predicated off.
void emitOnThreadZero(ConversionPatternRewriter &b, Location loc, const TargetInfo &target,
                      Value cond, llvm::function_ref<void()> body, unsigned leaderWarp = 0) {
  Value first = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, target.getThreadId(b, loc),
                                     i32Const(b, loc, int32_t(leaderWarp * kgpu::kWarpSize)));
  if (cond)
    first = LLVM::AndOp::create(b, loc, first, cond);
  emitIf(b, loc, first, body);
}

/// thread_id / 32, read once at the kernel's entry from lane 0 (emitEntryUniformWarpId).
Value emitUniformWarp(OpBuilder &b, Location loc, const TargetInfo &target) {
  return emitEntryUniformWarpId(b, loc, b.getStringAttr("thread_id / 32"), [&](OpBuilder &entry) {
    return LLVM::LShrOp::create(entry, loc, target.getThreadId(entry, loc),
                                i32Const(entry, loc, llvm::Log2_32(kgpu::kWarpSize)));
  });
}

/// Emits `body` in a block that warp `leaderWarp` (0 but in a warp-specialized kernel's
/// producer) enters, all its lanes, and only where `cond` (if any) holds. The warp id is read once,
/// at the top of the kernel, from lane 0 (emitUniformWarp): ptxas knows the branch to be
/// warp-uniform, so the code around it stays on the uniform datapath.
void emitOnWarpZero(ConversionPatternRewriter &b, Location loc, const TargetInfo &target,
                    Value cond, llvm::function_ref<void()> body, unsigned leaderWarp = 0) {
  Value warp = emitUniformWarp(b, loc, target);
  Value first = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, warp,
                                     i32Const(b, loc, int32_t(leaderWarp)));
  if (cond)
    first = LLVM::AndOp::create(b, loc, first, cond);
  emitIf(b, loc, first, body);
}

/// Emits `body` in a block that one lane of warp `leaderWarp` enters (elect.sync), only where
/// `cond` (if any) holds. The warp-uniform branch first: ptxas then keeps the code that issues TMA
/// copies (their tensor map and coordinates are uniform registers) on the uniform datapath, where a
/// branch on thread 0 alone made it wrap each copy in a loop over the active lanes' values and
/// move the map's address to uniform registers on every issue. `cond` must hold in all lanes of
/// the warp or none (elect.sync wants the whole warp): a scalar of the program does.
void emitOnElectedLane(ConversionPatternRewriter &b, Location loc, const TargetInfo &target,
                       Value cond, llvm::function_ref<void()> body, unsigned leaderWarp = 0) {
  emitOnWarpZero(
      b, loc, target, cond,
      [&] { emitIf(b, loc, NVVM::ElectSyncOp::create(b, loc, b.getI1Type(), Value()), body); },
      leaderWarp);
}

/// The rows of the TMA boxes of tensor map argument `desc`, as the host encodes them
/// (kTmaBoxRowsAttr); 0 when `desc` is not such an argument.
unsigned getTmaBoxRows(Operation *op, Value desc) {
  auto arg = dyn_cast<BlockArgument>(desc);
  auto rows = op->getParentOfType<ModuleOp>()->getAttrOfType<DenseI32ArrayAttr>(kTmaBoxRowsAttr);
  if (!arg || !rows || int64_t(arg.getArgNumber()) >= rows.size())
    return 0;
  return unsigned(rows[arg.getArgNumber()]);
}

/// How a 2-D block in a one-operand slot splits into TMA boxes: `strips` strips of
/// `boxInner` elements along the block's last dimension (`stripBytes` apart in the slot, rows
/// of `rowBytes`), each `groups` boxes of `boxRows` rows.
struct BoxGrid {
  int64_t boxInner, boxRows, groups, strips, rowBytes, stripBytes;
  BoxGrid(ArrayRef<int64_t> tile, const nvidia::TensorMapBox &box, const OperandLayout &layout)
      : boxInner(box.dims[0]), boxRows(box.dims[1]), groups(tile[0] / boxRows),
        strips(tile[1] / boxInner), rowBytes(layout.swizzle), stripBytes(tile[0] * layout.swizzle) {
  }
  /// The byte offset in the slot of the box at `strip`, rows `row` on.
  int64_t slotOffset(int64_t strip, int64_t row) const {
    return strip * stripBytes + row * rowBytes;
  }
  /// The tensor coordinates (innermost, outermost) of the box at `strip`, rows `row` on, of
  /// the block at `coords` (outermost first).
  std::pair<Value, Value> coordsOf(OpBuilder &b, Location loc, ValueRange coords, int64_t strip,
                                   int64_t row) const {
    return {LLVM::AddOp::create(b, loc, coords[1], i32Const(b, loc, strip * boxInner)),
            LLVM::AddOp::create(b, loc, coords[0], i32Const(b, loc, row))};
  }
  /// Calls `copy(slot address, inner, outer)` for each box of the block at `coords`: the
  /// box's address in the slot at `slotBase` and its tensor coordinates.
  void forEachBox(OpBuilder &b, Location loc, Value slotBase, ValueRange coords,
                  llvm::function_ref<void(Value, Value, Value)> copy) const {
    for (int64_t strip = 0; strip < strips; ++strip)
      for (int64_t g = 0; g < groups; ++g) {
        int64_t row = g * boxRows;
        Value at = LLVM::AddOp::create(b, loc, slotBase, i32Const(b, loc, slotOffset(strip, row)));
        auto [inner, outer] = coordsOf(b, loc, coords, strip, row);
        copy(at, inner, outer);
      }
  }
};

/// The i32 shared address of barrier `slot` of `barriers` (8 bytes each).
Value barrierAddress(OpBuilder &b, Location loc, Value barriers, Value slot) {
  Value base = LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), barriers);
  return LLVM::AddOp::create(b, loc, base, LLVM::MulOp::create(b, loc, slot, i32Const(b, loc, 8)));
}

struct MBarrierAllocLowering final : ConvertOpToLLVMPattern<kgpu::MBarrierAllocOp> {
  MBarrierAllocLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}
  LogicalResult matchAndRewrite(kgpu::MBarrierAllocOp op, OpAdaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto module = op->getParentOfType<ModuleOp>();
    int64_t count = op.getType().getCount();
    // Static shared memory of its own: the barriers never share bytes with rings or scratch.
    std::string name;
    for (unsigned i = 0;; ++i)
      if (!module.lookupSymbol(name = "__kiln_mbarriers_" + std::to_string(i)))
        break;
    LLVM::GlobalOp global;
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      global = LLVM::GlobalOp::create(b, loc, LLVM::LLVMArrayType::get(b.getI64Type(), count),
                                      /*isConstant=*/false, LLVM::Linkage::Internal, name,
                                      Attribute(), /*alignment=*/8, /*addrSpace=*/3);
    }
    Value bars = LLVM::AddressOfOp::create(b, loc, global);
    // Thread 0 initializes each barrier for its arrivals (the expect_tx of a group, or one
    // per warp).
    Value first = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, target.getThreadId(b, loc),
                                       i32Const(b, loc, 0));
    std::string init =
        "@$0 mbarrier.init.shared::cta.b64 [$1], " + std::to_string(op.getArrivals()) + ";";
    for (int64_t i = 0; i < count; ++i)
      emitAsm(b, loc, init, "b,r", {first, barrierAddress(b, loc, bars, i32Const(b, loc, i))});
    emitAsm(b, loc, "fence.mbarrier_init.release.cluster;");
    emitBarrierOf(op, b, loc, target);
    b.replaceOp(op, bars);
    return success();
  }
  const TargetInfo &target;
};

struct MBarrierExpectLowering final : ConvertOpToLLVMPattern<kgpu::MBarrierExpectOp> {
  MBarrierExpectLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}
  LogicalResult matchAndRewrite(kgpu::MBarrierExpectOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value bar = barrierAddress(b, loc, adaptor.getBarriers(), adaptor.getSlot());
    emitOnThreadZero(
        b, loc, target, adaptor.getPred(),
        [&] {
          emitAsm(b, loc,
                  op.getNoArrive() ? "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;"
                                   : "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;",
                  "r,r", {bar, i32Const(b, loc, op.getBytes())});
        },
        getLeaderWarp(op));
    b.eraseOp(op);
    return success();
  }
  const TargetInfo &target;
};

struct MBarrierArriveLowering final : ConvertOpToLLVMPattern<kgpu::MBarrierArriveOp> {
  MBarrierArriveLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}
  LogicalResult matchAndRewrite(kgpu::MBarrierArriveOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value lane = LLVM::AndOp::create(b, loc, target.getThreadId(b, loc),
                                     i32Const(b, loc, kgpu::kWarpSize - 1));
    Value first = LLVM::AndOp::create(
        b, loc, LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::eq, lane, i32Const(b, loc, 0)),
        adaptor.getPred());
    emitAsm(b, loc, "@$0 mbarrier.arrive.shared::cta.b64 _, [$1];", "b,r",
            {first, barrierAddress(b, loc, adaptor.getBarriers(), adaptor.getSlot())});
    b.eraseOp(op);
    return success();
  }
  const TargetInfo &target;
};

struct AsyncArriveLowering final : ConvertOpToLLVMPattern<kgpu::AsyncArriveOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(kgpu::AsyncArriveOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    emitAsm(b, loc, "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", "r",
            {barrierAddress(b, loc, adaptor.getBarriers(), adaptor.getSlot())});
    b.eraseOp(op);
    return success();
  }
};

struct MBarrierWaitLowering final : ConvertOpToLLVMPattern<kgpu::MBarrierWaitOp> {
  MBarrierWaitLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}
  LogicalResult matchAndRewrite(kgpu::MBarrierWaitOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value bar = barrierAddress(b, loc, adaptor.getBarriers(), adaptor.getSlot());
    // try_wait suspends for a while before it fails; spin until the phase completes.
    auto spin = [&] {
      emitAsm(b, loc,
              "{\n.reg .pred done;\nwait${:uid}:\n"
              "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
              "@!done bra.uni wait${:uid};\n}",
              "r,r", {bar, adaptor.getPhase()});
    };
    if (adaptor.getPred() && op.getWholeWarp())
      emitOnWarpZero(b, loc, target, adaptor.getPred(), spin, getLeaderWarp(op));
    else if (adaptor.getPred())
      emitOnThreadZero(b, loc, target, adaptor.getPred(), spin, getLeaderWarp(op));
    else
      spin();
    b.eraseOp(op);
    return success();
  }
  const TargetInfo &target;
};

struct TmaCopyLowering final : ConvertOpToLLVMPattern<kgpu::TmaCopyOp> {
  TmaCopyLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}

  LogicalResult matchAndRewrite(kgpu::TmaCopyOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    auto alloc = op.getBuffer().getDefiningOp<kgpu::LocalAllocOp>();
    if (!alloc)
      return op.emitOpError("expected a ring from kiln_gpu.local_alloc");
    Location loc = op.getLoc();
    unsigned boxRows = getTmaBoxRows(op, op.getDesc());
    if (!boxRows)
      return op.emitOpError("expected a tensor map argument with its box rows in ")
             << kTmaBoxRowsAttr;
    kgpu::SharedBufferType type = alloc.getResult().getType();
    if (type.getTileShape().size() != 2)
      return op.emitOpError("expected a ring of 2-D slots");
    OperandLayout layout = getRingOperandLayout(alloc);
    // The block as the descriptor names it: rows along the slot's contiguous dimension (K of a
    // K-major slot, else M or N), so a K-major B or an M-major A is the transpose of its block.
    SmallVector<int64_t, 2> block = layout.kMajor ? SmallVector<int64_t, 2>{layout.mn, layout.k}
                                                  : SmallVector<int64_t, 2>{layout.k, layout.mn};
    auto box = nvidia::getTensorMapBox({block[0], block[1]}, unsigned(layout.elemBytes), boxRows);
    // The slot's rows run along the block's last dimension in strips of S bytes; a box is
    // `boxRows` rows of one strip.
    if (!box || box->swizzleBytes != layout.swizzle)
      return op.emitOpError("expected a slot in the layout of the TMA boxes of its block");
    BoxGrid grid(block, *box, layout);
    // A tensor of more dimensions: its outer coordinates (the block is 1 along them) follow
    // the slot's two, innermost first, as cp.async.bulk.tensor.Nd takes them.
    ValueRange coords = adaptor.getCoords();
    size_t outer = coords.size() - 2;
    std::string text = "cp.async.bulk.tensor." + std::to_string(coords.size()) +
                       "d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3";
    std::string constraints = "r,l,r,r,r";
    for (size_t i = 0; i < outer; ++i) {
      text += ", $" + std::to_string(5 + i);
      constraints += ",r";
    }
    text += "}], [$4];";

    // One lane of warp 0 (or of a warp-specialized kernel's producer) issues every box, each
    // at constant offsets from the slot and the block.
    Value slotBase = emitSlotAddress(b, loc, adaptor.getBuffer(), adaptor.getSlot(), type);
    Value map = LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), adaptor.getDesc());
    Value bar = barrierAddress(b, loc, adaptor.getBarriers(), adaptor.getSlot());
    emitOnElectedLane(
        b, loc, target, adaptor.getPred(),
        [&] {
          grid.forEachBox(b, loc, slotBase, coords.take_back(2),
                          [&](Value dst, Value inner, Value rows) {
                            SmallVector<Value> args{dst, map, inner, rows, bar};
                            for (size_t i = 0; i < outer; ++i)
                              args.push_back(coords[outer - 1 - i]);
                            emitAsm(b, loc, text, constraints, args);
                          });
        },
        getLeaderWarp(op));
    b.eraseOp(op);
    return success();
  }
  const TargetInfo &target;
};

struct TmaStoreLowering final : ConvertOpToLLVMPattern<kgpu::TmaStoreOp> {
  TmaStoreLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}

  LogicalResult matchAndRewrite(kgpu::TmaStoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    auto alloc = op.getBuffer().getDefiningOp<kgpu::LocalAllocOp>();
    unsigned boxRows = getTmaBoxRows(op, op.getDesc());
    if (!alloc || !boxRows)
      return op.emitOpError("expected a buffer from kiln_gpu.local_alloc and a tensor map "
                            "argument with its box rows in ")
             << kTmaBoxRowsAttr;
    Location loc = op.getLoc();
    auto valueType = cast<RankedTensorType>(op.getValue().getType());
    kgpu::SharedBufferType type = alloc.getResult().getType();
    ArrayRef<int64_t> tile = type.getTileShape();
    OperandLayout layout = getRingOperandLayout(alloc); // K x N, contiguous along N
    auto box = nvidia::getTensorMapBox({tile[0], tile[1]}, unsigned(layout.elemBytes), boxRows);
    if (!box || layout.kMajor || box->swizzleBytes != layout.swizzle)
      return op.emitOpError("expected a buffer in the layout of the TMA boxes of its block");
    Value base = LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), adaptor.getBuffer());

    // Every thread writes its elements where the boxes read them: runs of a thread's
    // elements along the columns (consecutive in register order) as one vector store of up
    // to 16 bytes, which stays inside one 16-byte chunk of the swizzle.
    SmallVector<Value> elems = unpackStruct(b, loc, adaptor.getValue());
    auto coords = emitElementCoordinates(b, loc, valueType, target);
    auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
    Attribute encoding = valueType.getEncoding();
    int64_t vec = 1;
    if (kgpu::getOrder(encoding)[0] == 1)
      vec = std::min<int64_t>(
          {int64_t(kgpu::getSizePerThread(encoding)[1]), 16 / layout.elemBytes, tile[1]});
    Type elemType = elems.front().getType();
    auto vecType = VectorType::get({vec}, elemType);
    for (size_t i = 0; i + vec <= elems.size(); i += vec) {
      Value offset = layout.emitOffset(b, loc, /*mnPos=*/coords[i][1], /*kPos=*/coords[i][0]);
      Value addr = LLVM::AddOp::create(b, loc, base, offset);
      Value p = LLVM::IntToPtrOp::create(b, loc, ptr3, addr);
      Value v = elems[i];
      if (vec > 1) {
        v = LLVM::UndefOp::create(b, loc, vecType);
        for (int64_t j = 0; j < vec; ++j)
          v = LLVM::InsertElementOp::create(b, loc, v, elems[i + j], i32Const(b, loc, j));
      }
      LLVM::StoreOp::create(b, loc, v, p, /*alignment=*/unsigned(vec * layout.elemBytes));
    }
    // The TMA (async proxy) reads what the threads wrote.
    emitAsm(b, loc, "fence.proxy.async.shared::cta;");
    target.barrier(b, loc);
    BoxGrid grid(tile, *box, layout);
    Value map = LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), adaptor.getDesc());
    emitOnElectedLane(b, loc, target, Value(), [&] {
      grid.forEachBox(b, loc, base, adaptor.getCoords(), [&](Value src, Value inner, Value outer) {
        emitAsm(b, loc,
                "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];",
                "l,r,r,r", {map, inner, outer, src});
      });
      emitAsm(b, loc, "cp.async.bulk.commit_group;");
      // The buffer may be reused (or the program end) once the copies have read it.
      emitAsm(b, loc, "cp.async.bulk.wait_group.read 0;");
    });
    target.barrier(b, loc);
    b.eraseOp(op);
    return success();
  }
  const TargetInfo &target;
};

struct BarrierLowering final : ConvertOpToLLVMPattern<kgpu::BarrierOp> {
  BarrierLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}
  LogicalResult matchAndRewrite(kgpu::BarrierOp op, OpAdaptor,
                                ConversionPatternRewriter &b) const override {
    emitBarrierOf(op, b, op.getLoc(), target);
    b.eraseOp(op);
    return success();
  }
  const TargetInfo &target;
};

/// bar.sync / bar.arrive on a named barrier (the id a warp-uniform value).
struct NamedBarrierLowering final : ConvertOpToLLVMPattern<kgpu::NamedBarrierOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(kgpu::NamedBarrierOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    Value threads = i32Const(b, loc, int32_t(op.getThreads()));
    // (nvvm.barrier.arrive has no LLVM IR translation in MLIR 22: PTX text.)
    if (op.getArrive())
      emitAsm(b, loc, "bar.arrive $0, $1;", "r,r", {adaptor.getId(), threads});
    else
      NVVM::BarrierOp::create(b, loc, Type(), adaptor.getId(), threads,
                              NVVM::BarrierReductionAttr(), Value());
    b.eraseOp(op);
    return success();
  }
};

/// The warp id, read from lane 0 at the kernel's entry (the one emitOnWarpZero reads).
struct WarpIdLowering final : ConvertOpToLLVMPattern<kgpu::WarpIdOp> {
  WarpIdLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}
  LogicalResult matchAndRewrite(kgpu::WarpIdOp op, OpAdaptor,
                                ConversionPatternRewriter &b) const override {
    b.replaceOp(op, emitUniformWarp(b, op.getLoc(), target));
    return success();
  }
  const TargetInfo &target;
};

struct SetMaxRegistersLowering final : ConvertOpToLLVMPattern<kgpu::SetMaxRegistersOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(kgpu::SetMaxRegistersOp op, OpAdaptor,
                                ConversionPatternRewriter &b) const override {
    emitAsm(b, op.getLoc(),
            std::string("setmaxnreg.") + (op.getIncrease() ? "inc" : "dec") + ".sync.aligned.u32 " +
                std::to_string(op.getCount()) + ";");
    b.eraseOp(op);
    return success();
  }
};

} // namespace

Value kiln::emitSlotAddress(OpBuilder &b, Location loc, Value ring, Value slot,
                            kgpu::SharedBufferType type) {
  return LLVM::AddOp::create(
      b, loc, LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), ring),
      LLVM::MulOp::create(b, loc, slot, i32Const(b, loc, getSharedSlotBytes(type))));
}

void kiln::populateSharedRingToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                            RewritePatternSet &patterns,
                                            const AxisInfoAnalysis &axisInfo,
                                            const TargetInfo &target) {
  patterns
      .add<LocalAllocLowering, AsyncArriveLowering, SetMaxRegistersLowering, NamedBarrierLowering>(
          converter);
  patterns.add<FixedAsmLowering<kgpu::AsyncCommitOp>>(converter, "cp.async.commit_group;");
  patterns.add<FixedAsmLowering<kgpu::ProxyFenceOp>>(converter, "fence.proxy.async.shared::cta;");
  patterns.add<AsyncCopyLowering>(converter, axisInfo, target);
  patterns.add<AsyncWaitLowering, MBarrierAllocLowering, MBarrierExpectLowering,
               MBarrierArriveLowering, MBarrierWaitLowering, TmaCopyLowering, TmaStoreLowering,
               BarrierLowering, WarpIdLowering>(converter, target);
}
