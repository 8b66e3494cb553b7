//===- WgmmaDotToLLVM.cpp - kiln.dot on Hopper tensor cores (wgmma) -------===//
//
// This file lowers kiln.dot with wgmma.mma_async (sm_90a) when -kiln-assign-layouts gave the
// accumulator the warpgroup layout (getWgmmaAccumulatorLayout: the mma C-fragment lane pattern,
// sizePerThread [1, 2], threadsPerWarp [8, 4], all warps along M). Otherwise the dot goes to
// DotOpToLLVM.cpp (mma.sync or FMA).
//
// Operands. Each thread stores the elements it owns to shared memory in one of wgmma's
// canonical swizzled layouts (PTX ISA 9.7.15.5.1.2), in 16-byte vectors where its registers
// hold runs along the layout's contiguous dimension:
//   - K-major (A row-major, B transposed): rows of S bytes (S = 128, 64 or 32: the swizzle
//     width, K * elemBytes capped at 128), the K extent cut into blocks of S bytes; byte
//     (mn, k) at (k / kb) * (MN * S) + mn * S + (k % kb) * elemBytes, kb = S / elemBytes.
//   - MN-major (A column-major, B row-major, 16-bit types only): the same with MN and K
//     swapped: (mn / nb) * (K * S) + k * S + (mn % nb) * elemBytes.
// and the swizzle: byte offset o becomes o ^ (((o >> 7) & (S / 16 - 1)) << 4), relative to a
// 1024-byte aligned buffer. Descriptors: K-major SBO = 8 * S (8-row groups), LBO unused;
// MN-major LBO = K * S (the next S bytes of MN), SBO = 8 * S (the next 8 k).
//
// Rows. The accumulator layout (getWgmmaAccumulatorLayout) is the blocked layout of wgmma's
// D fragment registers with the wgmma flag: its rows are where wgmma computes them (warp
// 4g + v owns rows 16v + [0, 16) of each 64-row block of warpgroup g; the warpgroups take
// the blocks in turn), so A sits in shared memory in its natural row order and no data moves
// for C.
//
// Sequence: barrier (the previous dot's reads are done), stores, fence.proxy.async (generic
// writes become visible to the tensor cores), barrier, wgmma.fence, one wgmma per (64-row
// block, N chunk of at most 256, k16 step), commit, wait (the accumulators pass through the
// wait so nothing reads them earlier).
//
//===----------------------------------------------------------------------===//

#include "WgmmaLayout.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"

#include <atomic>
#include <functional>
#include <map>

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

bool isSixteenBit(Type t) { return t.isF16() || t.isBF16(); }

/// Whether the element type is 8 bits wide: wgmma reads such operands K-major only and A from
/// shared memory only (its register fragments are not the accumulator's layout).
bool isEightBit(Type t) { return t.getIntOrFloatBitWidth() == 8; }

/// Bytes per element of a dot operand.
int64_t elementBytes(Type t) { return t.getIntOrFloatBitWidth() / 8; }

/// Whether a constant accumulator is zero (float or integer).
bool isZeroAccumulator(Value c) {
  return matchPattern(c, m_AnyZeroFloat()) || matchPattern(c, m_Zero());
}

} // namespace

namespace {

/// The dimension a laid-out operand's registers are contiguous along (its order's first),
/// or -1 when its layout is not a plain blocked layout.
int contiguousDim(RankedTensorType t) {
  auto blocked = dyn_cast_or_null<kgpu::BlockedEncodingAttr>(t.getEncoding());
  return blocked ? int(blocked.getOrder()[0]) : -1;
}

/// wgmma.wait_group `pending` with every accumulator register in `acc` passing through it, so
/// that no use of them moves above the wait.
void emitWgmmaWait(OpBuilder &b, Location loc, SmallVector<Value> &acc, unsigned pending = 0) {
  if (acc.empty())
    return;
  Type accElem = acc.front().getType();
  std::string constraints;
  for (unsigned i = 0; i < acc.size(); ++i)
    constraints += accElem.isF32() ? "=f," : "=r,";
  for (unsigned i = 0; i < acc.size(); ++i)
    constraints += std::to_string(i) + (i + 1 < acc.size() ? "," : "");
  auto resTy =
      LLVM::LLVMStructType::getLiteral(b.getContext(), SmallVector<Type>(acc.size(), accElem));
  Value d = emitInlineAsm(b, loc, resTy, acc,
                          "wgmma.wait_group.sync.aligned " + std::to_string(pending) + ";",
                          constraints, true);
  for (unsigned i = 0; i < acc.size(); ++i)
    acc[i] = LLVM::ExtractValueOp::create(b, loc, d, i);
}

/// Issues this warpgroup's wgmmas of C += A @ B, A (M x K) and B (K x N) in shared memory at
/// `aBase` / `bBase` (i32 shared addresses) under `aL` / `bL`, `acc` the registers of C under
/// `layout` (getWgmmaAccumulatorLayout), then waits until at most `pending` wgmma groups are
/// in flight (with 0 the accumulators pass through the wait; see the file comment). With
/// `zeroAcc` C is known to be zero: the first wgmma of each accumulator block overwrites it
/// (scale-d = 0), so no register is zeroed first. `accumulate` (i1, when given) is the first
/// wgmma's scale-d at run time: false overwrites C.
/// The warp id of the accumulator layout read from lane 0 (emitEntryUniformWarpId): the
/// descriptors made from it live in uniform registers, as Triton's do, instead of being moved
/// into them (R2UR) before every wgmma of every iteration (tutorial 06's forward at D 64: 8
/// R2UR and 15 MOV more an iteration than Triton). Read once per warp count along M.
Value emitUniformWarpId(OpBuilder &b, Location loc, kgpu::BlockedEncodingAttr layout,
                        const TargetInfo &target) {
  return emitEntryUniformWarpId(b, loc, b.getI32IntegerAttr(layout.getWarpsPerCTA()[0]),
                                [&](OpBuilder &entry) {
                                  // Thread ids of the accumulator layout: warp w, lane = 4 *
                                  // row + column pair.
                                  return emitThreadIds(entry, loc, layout, target).warp[0];
                                });
}

void emitWgmmas(OpBuilder &b, Location loc, const TargetInfo &target,
                kgpu::BlockedEncodingAttr layout, ArrayRef<int64_t> shape, Type inElem,
                const OperandLayout &aL, Value aBase, const OperandLayout &bL, Value bBase,
                SmallVector<Value> &acc, unsigned pending = 0,
                function_ref<std::array<Value, 4>(int64_t, int64_t)> aFragment = nullptr,
                bool zeroAcc = false, Value accumulate = nullptr, bool aOnce = false,
                bool bOnce = false) {
  MLIRContext *ctx = b.getContext();
  bool integer = inElem.isInteger(8);
  Type accElem = integer ? Type(b.getI32Type()) : Type(b.getF32Type());
  int64_t M = shape[0], N = shape[1], K = aL.k;
  // One wgmma covers 32 bytes of K: k16 for 16-bit elements, k32 for 8-bit ones.
  int64_t kStep = 32 / aL.elemBytes;
  unsigned W = layout.getWarpsPerCTA()[0];
  int64_t blocksPerGroup = M / (16 * W);
  std::map<std::tuple<unsigned, unsigned, unsigned>, unsigned> slot;
  for (auto [i, pos] : llvm::enumerate(kgpu::getThreadElements(layout, shape)))
    slot[{pos.rep[0], pos.rep[1], pos.elem[1]}] = i;
  Value warp = emitUniformWarpId(b, loc, layout, target);
  Value group = LLVM::LShrOp::create(b, loc, warp, i32Const(b, loc, 2));
  // The warpgroups take the 64-row blocks in turn (the rows of the wgmma accumulator layout):
  // block mb of warpgroup g is rows 64 * (mb * G + g). The first shared row of this
  // warpgroup's blocks, in bytes for a K-major A (S per row); an M-major A moves by whole
  // S-byte-wide column blocks (64 rows each).
  int64_t groups = W / 4;
  Value groupRow = LLVM::MulOp::create(b, loc, group, i32Const(b, loc, 64));
  Value aRowBytes =
      aL.kMajor
          ? LLVM::MulOp::create(b, loc, groupRow, i32Const(b, loc, aL.swizzle)).getResult()
          : LLVM::MulOp::create(b, loc, LLVM::LShrOp::create(b, loc, groupRow, i32Const(b, loc, 6)),
                                i32Const(b, loc, K * aL.swizzle))
                .getResult();
  int64_t nInstr = std::min<int64_t>(N, 256);
  std::string types = inElem.isF16()                  ? "f32.f16.f16"
                      : inElem.isBF16()               ? "f32.bf16.bf16"
                      : isa<Float8E4M3FNType>(inElem) ? "f32.e4m3.e4m3"
                      : isa<Float8E5M2Type>(inElem)   ? "f32.e5m2.e5m2"
                                                      : "s32.s8.s8";
  // Only 16-bit operands have transpose flags (8-bit ones are K-major).
  bool transposable = isSixteenBit(inElem);
  Value one = i32Const(b, loc, 1);  // scale-d: accumulate
  Value zero = i32Const(b, loc, 0); // scale-d: overwrite
  if (zeroAcc)
    for (Value &v : acc)
      v = LLVM::UndefOp::create(b, loc, accElem);
  Value firstScale = zeroAcc ? zero : one;
  if (accumulate && !zeroAcc)
    firstScale = LLVM::ZExtOp::create(b, loc, b.getI32Type(), accumulate);
  // A fragments from registers are all packed before the fence: a register written between
  // wgmmas makes ptxas inject a warpgroup.arrive before the next one.
  std::map<std::pair<int64_t, int64_t>, std::array<Value, 4>> aRegs;
  if (aFragment)
    for (int64_t mb = 0; mb < blocksPerGroup; ++mb)
      for (int64_t kk = 0; kk < K; kk += kStep)
        aRegs[{mb, kk}] = aFragment(mb, kk);
  // Descriptors: the operands' first elements once, then a constant add per sub-matrix.
  Value aDesc = aFragment ? Value() : aL.emitBaseDescriptor(b, loc, aBase, aRowBytes);
  Value bDesc = bL.emitBaseDescriptor(b, loc, bBase, Value());
  emitInlineAsm(b, loc, LLVM::LLVMVoidType::get(ctx), {}, "wgmma.fence.sync.aligned;", "", true);
  for (int64_t mb = 0; mb < blocksPerGroup; ++mb) {
    for (int64_t n0 = 0; n0 < N; n0 += nInstr) {
      // This instruction's accumulator registers, in D-fragment order.
      SmallVector<unsigned> regs;
      for (int64_t i = 0; i < nInstr / 2; ++i)
        regs.push_back(slot.at(
            {unsigned(2 * mb + ((i >> 1) & 1)), unsigned(n0 / 8 + (i >> 2)), unsigned(i & 1)}));
      unsigned n = regs.size();
      // Operands: n outputs, n tied accumulator inputs, then A (a descriptor, or four
      // registers of two 16-bit elements each), B's descriptor and scale-d.
      unsigned aCount = aFragment ? 4 : 1;
      auto num = [](unsigned i) { return "$" + std::to_string(i); };
      std::string aText = num(2 * n);
      if (aFragment)
        aText = "{" + num(2 * n) + ", " + num(2 * n + 1) + ", " + num(2 * n + 2) + ", " +
                num(2 * n + 3) + "}";
      // A descriptor of a one-slot buffer (aOnce, bOnce: filled once, read in a loop) gets
      // its sub-matrix offset added inside the asm (da, db), which LLVM does not hoist: hoisted,
      // the descriptors of every sub-matrix of such a buffer stayed live across the loop, and
      // ptxas kept them in vector registers, moved into uniform ones (R2UR) before every wgmma
      // (tutorial 06's backward at D 64: 69 R2UR and 44 bytes of spills, against 47 and none
      // with each descriptor made beside its wgmma; ptxas 13.0).
      auto offsetsIn = [&](int64_t aUnits, int64_t bUnits) {
        std::string s;
        if (aUnits)
          s += ".reg .b64 da;\nadd.s64 da, " + num(2 * n) + ", " + std::to_string(aUnits) + ";\n";
        if (bUnits)
          s += ".reg .b64 db;\nadd.s64 db, " + num(2 * n + aCount) + ", " + std::to_string(bUnits) +
               ";\n";
        return s;
      };
      std::string asmStr = "{\n.reg .pred p;\n@OFFSETS@setp.ne.b32 p, " + num(2 * n + aCount + 1) +
                           ", 0;\nwgmma.mma_async.sync.aligned.m64n" + std::to_string(nInstr) +
                           "k" + std::to_string(kStep) + "." + types + " {";
      std::string constraints;
      for (unsigned i = 0; i < n; ++i) {
        asmStr += (i ? ", " : "") + num(i);
        constraints += integer ? "=r," : "=f,";
      }
      // Floats: the input scales (1) and, for 16-bit types, the transpose flags (A in
      // registers has none, only B). Integers have neither.
      asmStr += "}, " + aText + ", @B@, p";
      if (!integer)
        asmStr += ", 1, 1";
      if (transposable)
        asmStr += ", " + (aFragment ? std::string() : std::string(aL.kMajor ? "0" : "1") + ", ") +
                  (bL.kMajor ? "0" : "1");
      asmStr += ";\n}";
      for (unsigned i = 0; i < n; ++i)
        constraints += std::to_string(i) + ",";
      constraints += aFragment ? "r,r,r,r,l,r" : "l,l,r";
      auto resTy = LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(n, accElem));
      for (int64_t kk = 0; kk < K; kk += kStep) {
        SmallVector<Value> args;
        for (unsigned r : regs)
          args.push_back(acc[r]);
        int64_t aUnits = aOnce && !aFragment ? aL.unitsAt(mb * groups * 64, kk) : 0;
        int64_t bUnits = bOnce ? bL.unitsAt(n0, kk) : 0;
        if (aFragment)
          llvm::append_range(args, aRegs.at({mb, kk}));
        else
          args.push_back(aOnce ? aDesc : aL.descriptorAt(b, loc, aDesc, mb * groups * 64, kk));
        args.push_back(bOnce ? bDesc : bL.descriptorAt(b, loc, bDesc, n0, kk));
        args.push_back(kk == 0 ? firstScale : one);
        std::string text = asmStr;
        text.replace(text.find("@OFFSETS@"), 9, offsetsIn(aUnits, bUnits));
        if (aUnits)
          text.replace(text.find("}, " + aText + ", @B@"), 3 + aText.size(), "}, da");
        text.replace(text.find("@B@"), 3, bUnits ? "db" : num(2 * n + aCount));
        Value d = emitInlineAsm(b, loc, resTy, args, text, constraints, true);
        for (auto [i, r] : llvm::enumerate(regs))
          acc[r] = LLVM::ExtractValueOp::create(b, loc, d, i);
      }
    }
  }
  emitInlineAsm(b, loc, LLVM::LLVMVoidType::get(ctx), {}, "wgmma.commit_group.sync.aligned;", "",
                true);
  // 3. Wait, with every accumulator passing through so no use moves above it.
  if (pending > 0) {
    emitInlineAsm(b, loc, LLVM::LLVMVoidType::get(ctx), {},
                  "wgmma.wait_group.sync.aligned " + std::to_string(pending) + ";", "", true);
    return;
  }
  emitWgmmaWait(b, loc, acc);
}

/// wgmma A fragments from the registers of an M x K tile under the accumulator layout of an
/// M x K dot: for m64nNk16 the A fragment has the D fragment's lane pattern, so register r of
/// the fragment of 64-row block `mb` and k16 step `kk` holds rows g (+ 8: the next
/// repetition) and columns kk + 2 * (lane % 4) (+ 8) of the tile, two 16-bit elements.
class RegisterFragments {
public:
  RegisterFragments(OpBuilder &b, Location loc, Value packed, RankedTensorType type)
      : vals(unpackStruct(b, loc, packed)), elem(type.getElementType()) {
    for (auto [i, pos] :
         llvm::enumerate(kgpu::getThreadElements(type.getEncoding(), type.getShape())))
      slot[{pos.rep[0], pos.rep[1], pos.elem[1]}] = i;
  }

  std::array<Value, 4> get(OpBuilder &b, Location loc, int64_t mb, int64_t kk) const {
    auto pair = VectorType::get({2}, elem);
    std::array<Value, 4> regs;
    for (unsigned r = 0; r < 4; ++r) {
      unsigned rep0 = unsigned(2 * mb + (r & 1)), rep1 = unsigned(kk / 8 + (r >> 1));
      Value v = LLVM::UndefOp::create(b, loc, pair);
      for (unsigned e = 0; e < 2; ++e)
        v = LLVM::InsertElementOp::create(b, loc, v, vals[slot.at({rep0, rep1, e})],
                                          i32Const(b, loc, e));
      regs[r] = LLVM::BitcastOp::create(b, loc, b.getI32Type(), v);
    }
    return regs;
  }

private:
  SmallVector<Value> vals;
  Type elem;
  std::map<std::tuple<unsigned, unsigned, unsigned>, unsigned> slot;
};

/// Whether `op`'s A already is in wgmma's A-fragment registers (no shared copy).
bool aFromRegisters(DotOp op) {
  RankedTensorType aTy = op.getA().getType();
  auto cTy = cast<RankedTensorType>(op.getC().getType());
  auto layout = cast<kgpu::BlockedEncodingAttr>(cTy.getEncoding());
  return !isEightBit(aTy.getElementType()) &&
         aTy.getEncoding() == getWgmmaAccumulatorLayout(op.getContext(),
                                                        {aTy.getDimSize(0), aTy.getDimSize(1)},
                                                        layout.getWarpsPerCTA()[0]);
}

} // namespace

int64_t kiln::getWgmmaHoistedBufferBytes(DotOp op) {
  if (!lowersToWgmma(op) || !op->hasAttr(kInvariantAAttr) || aFromRegisters(op))
    return 0;
  RankedTensorType aTy = op.getA().getType(), bTy = op.getB().getType();
  int64_t eb = elementBytes(aTy.getElementType());
  return (aTy.getDimSize(0) + bTy.getDimSize(1)) * aTy.getDimSize(1) * eb;
}

namespace {

struct WgmmaDotLowering final : ConvertOpToLLVMPattern<DotOp> {
  WgmmaDotLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter, /*benefit=*/2), target(target) {}

  /// A values whose stores into the hoisted pool are emitted (once for every dot of a value,
  /// which share the bytes; planned offsets only).
  mutable llvm::DenseSet<Value> storedA;

  LogicalResult matchAndRewrite(DotOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    if (!lowersToWgmma(op))
      return failure();
    static std::atomic<unsigned> counter{0};
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    auto &b = rewriter;
    RankedTensorType aTy = op.getA().getType(), bTy = op.getB().getType();
    auto cTy = cast<RankedTensorType>(op.getC().getType());
    int64_t M = aTy.getDimSize(0), K = aTy.getDimSize(1), N = bTy.getDimSize(1);
    Type inElem = aTy.getElementType();
    const int64_t eb = elementBytes(inElem);
    bool eightBit = isEightBit(inElem);
    auto layout = cast<kgpu::BlockedEncodingAttr>(cTy.getEncoding());

    // A whose registers already are wgmma's A fragments (the accumulator layout of an M x K
    // 16-bit tile: a previous dot's result, as flash attention's p) feeds the wgmmas directly.
    bool aInRegisters = aFromRegisters(op);

    // Shared layouts: each operand contiguous along the dimension its registers are (8-bit
    // operands K-major whatever their registers: wgmma reads them no other way).
    OperandLayout aL{M, K, /*kMajor=*/eightBit || contiguousDim(aTy) != 0, 0, eb, 0};
    aL.swizzle = swizzleFor(aL.contiguousExtent(), eb);
    int64_t aBytes = aInRegisters ? 0 : M * K * eb;
    OperandLayout bL{N, K, /*kMajor=*/eightBit || contiguousDim(bTy) != 1, 0, eb, aBytes};
    bL.swizzle = swizzleFor(bL.contiguousExtent(), eb);
    if (!bL.kMajor && bL.swizzle == 0) // N = 8: too narrow for an N-major swizzle
      bL.kMajor = true, bL.swizzle = swizzleFor(K, eb);
    int64_t bytes = aBytes + N * K * eb;
    auto i8 = IntegerType::get(ctx, 8);
    // A dot whose A is stored where it is defined (kInvariantAAttr) has its bytes in the
    // hoisted pool at the offset assignWgmmaBufferOffsets gave it: dots of one A value share
    // them, values live at the same time get disjoint ones. The other dots share one pool:
    // each stores its operands after a barrier and waits for its wgmmas (wait_group 0) before
    // it ends, so the previous user is done with the bytes.
    bool ownBuffer = !aInRegisters && op->hasAttr(kInvariantAAttr);
    auto offsetAttr = op->getAttrOfType<IntegerAttr>(kWgmmaBufferOffsetAttr);
    int64_t offset = ownBuffer && offsetAttr ? offsetAttr.getInt() : 0;
    auto bufferAt = [&](OpBuilder &ob) -> Value {
      if (!ownBuffer)
        return getSharedPoolBuffer(ob, loc, op, i8, unsigned(bytes), "__kiln_wgmma_smem_pool",
                                   1024);
      if (!offsetAttr) // (not planned: a buffer of its own)
        return getSharedBuffer(ob, loc, op, i8, unsigned(bytes),
                               "__kiln_wgmma_smem_" + std::to_string(counter++), 1024);
      Value pool = getSharedPoolBuffer(ob, loc, op, i8, unsigned(offset + bytes),
                                       "__kiln_wgmma_smem_hoisted", 1024);
      return LLVM::GEPOp::create(ob, loc, pool.getType(), i8, pool,
                                 ArrayRef<LLVM::GEPArg>{int32_t(offset)});
    };
    Value buf = bufferAt(b);
    Value base = LLVM::PtrToIntOp::create(b, loc, b.getI32Type(), buf);
    auto ptr3 = LLVM::LLVMPointerType::get(ctx, 3);

    // 1. Operands to shared memory. An A that does not change inside the dot's loop
    // (kInvariantAAttr) is stored once, where it is defined; only this dot reads its buffer,
    // and the barriers below order those stores before the first wgmma.
    if (!aInRegisters && op->hasAttr(kInvariantAAttr) &&
        (!offsetAttr || storedA.insert(op.getA()).second)) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointAfterValue(adaptor.getA());
      Value hoistedBuf = bufferAt(b);
      // Another pass of an enclosing loop may still be reading the previous A.
      target.barrier(b, loc);
      storeOperand(b, loc, hoistedBuf, ptr3, adaptor.getA(), aTy, aL, /*isA=*/true);
    }
    target.barrier(b, loc);
    if (!aInRegisters && !op->hasAttr(kInvariantAAttr))
      storeOperand(b, loc, buf, ptr3, adaptor.getA(), aTy, aL, /*isA=*/true);
    storeOperand(b, loc, buf, ptr3, adaptor.getB(), bTy, bL, /*isA=*/false);
    emitInlineAsm(b, loc, LLVM::LLVMVoidType::get(ctx), {}, "fence.proxy.async.shared::cta;", "",
                  true);
    target.barrier(b, loc);

    // 2. The wgmmas of this warpgroup.
    SmallVector<Value> acc = unpackStruct(b, loc, adaptor.getC());
    std::optional<RegisterFragments> aRegs;
    if (aInRegisters)
      aRegs.emplace(b, loc, adaptor.getA(), aTy);
    auto aFragment = [&](int64_t mb, int64_t kk) { return aRegs->get(b, loc, mb, kk); };
    emitWgmmas(b, loc, target, layout, cTy.getShape(), inElem, aL, base, bL, base, acc,
               /*pending=*/0,
               aRegs ? function_ref<std::array<Value, 4>(int64_t, int64_t)>(aFragment) : nullptr,
               isZeroAccumulator(op.getC()));
    b.replaceOp(op, packStruct(b, loc, getTypeConverter()->convertType(cTy), acc));
    return success();
  }

  /// Stores the elements of `value` (laid out as `type`) this thread owns at their shared
  /// positions under `layout`, 16 bytes at a time where the registers hold runs along the
  /// layout's contiguous dimension. Tiles replicated over threads store the same bytes twice,
  /// which is harmless.
  void storeOperand(OpBuilder &b, Location loc, Value buf, Type ptr3, Value value,
                    RankedTensorType type, const OperandLayout &layout, bool isA) const {
    SmallVector<Value> vals = unpackStruct(b, loc, value);
    auto coords = emitElementCoordinates(b, loc, type, target);
    unsigned mnDim = isA ? 0 : 1, kDim = isA ? 1 : 0;
    unsigned majorDim = layout.kMajor ? kDim : mnDim;
    // Runs: elements that differ only by their in-thread index along the major dimension.
    int64_t run = 1;
    if (auto blocked = dyn_cast_or_null<kgpu::BlockedEncodingAttr>(type.getEncoding())) {
      int64_t spt = blocked.getSizePerThread()[majorDim];
      int64_t tile =
          spt * blocked.getThreadsPerWarp()[majorDim] * blocked.getWarpsPerCTA()[majorDim];
      if (blocked.getOrder()[0] == majorDim && tile <= type.getDimSize(majorDim))
        run = std::min<int64_t>(16 / layout.elemBytes, spt);
    }
    auto positions = kgpu::getThreadElements(type.getEncoding(), type.getShape());
    Type elem =
        vals.empty() ? type.getElementType() : vals.front().getType(); // converted (fp8: i8)
    for (size_t i = 0; i < vals.size();) {
      size_t len = 1;
      if (run > 1 && positions[i].elem[majorDim] % run == 0 && i + run <= vals.size()) {
        len = run;
        for (size_t j = 1; j < size_t(run); ++j) {
          const kgpu::ElemPos &p = positions[i + j], &q = positions[i];
          bool next = p.rep == q.rep && p.elem[majorDim] == q.elem[majorDim] + j;
          for (unsigned d = 0; d < p.elem.size(); ++d)
            if (d != majorDim && p.elem[d] != q.elem[d])
              next = false;
          if (!next) {
            len = 1;
            break;
          }
        }
      }
      Value mn = coords[i][mnDim], k = coords[i][kDim];
      Value off = layout.emitOffset(b, loc, mn, k);
      Value ptr = LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), buf, ValueRange{off});
      if (len == 1) {
        LLVM::StoreOp::create(b, loc, vals[i], ptr);
      } else {
        auto vecTy = VectorType::get({int64_t(len)}, elem);
        Value vec = LLVM::UndefOp::create(b, loc, vecTy);
        for (size_t j = 0; j < len; ++j)
          vec = LLVM::InsertElementOp::create(b, loc, vec, vals[i + j], i32Const(b, loc, j));
        LLVM::StoreOp::create(b, loc, vec, ptr, /*alignment=*/len * layout.elemBytes);
      }
      i += len;
    }
  }

  const TargetInfo &target;
};

/// kiln_gpu.shared_dot: the operands are already in their rings' slots (async_wait made them
/// visible), so only the wgmmas remain.
struct SharedDotLowering final : ConvertOpToLLVMPattern<kgpu::SharedDotOp> {
  SharedDotLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}

  LogicalResult matchAndRewrite(kgpu::SharedDotOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    auto aTile = dyn_cast<RankedTensorType>(op.getA().getType());
    auto aAlloc = op.getA().getDefiningOp<kgpu::LocalAllocOp>();
    auto bAlloc = op.getB().getDefiningOp<kgpu::LocalAllocOp>();
    if ((!aTile && !aAlloc) || !bAlloc)
      return op.emitOpError("expected rings from kiln_gpu.local_alloc");
    auto cTy = cast<RankedTensorType>(op.getC().getType());
    auto module = op->getParentOfType<ModuleOp>();
    auto numWarps = module->getAttrOfType<IntegerAttr>(kgpu::kNumWarpsAttr);
    auto layout = dyn_cast_or_null<kgpu::BlockedEncodingAttr>(cTy.getEncoding());
    // The mma.sync accumulator layout is DotOpToLLVM.cpp's (ldmatrix and mma.sync).
    if (numWarps && layout &&
        layout == getMmaAccumulatorLayout(b.getContext(), cTy.getShape(), numWarps.getInt()))
      return failure();
    if (!numWarps || !layout ||
        layout != getWgmmaAccumulatorLayout(b.getContext(), cTy.getShape(), numWarps.getInt()))
      return op.emitOpError("expected the warpgroup (wgmma) or the mma.sync accumulator "
                            "layout, found ")
             << cTy;
    if (aTile && aTile.getEncoding() !=
                     getWgmmaAccumulatorLayout(b.getContext(), aTile.getShape(), numWarps.getInt()))
      return op.emitOpError("expected A in registers under the warpgroup accumulator layout "
                            "(run -kiln-assign-layouts), found ")
             << aTile;
    auto isOnce = [](kgpu::LocalAllocOp alloc) {
      return alloc.getResult().getType().getShape()[0] == 1;
    };
    auto slotAddress = [&](Value ring, Value slot, kgpu::LocalAllocOp alloc) {
      return emitSlotAddress(b, loc, ring, slot, alloc.getResult().getType());
    };
    Value bBase = slotAddress(adaptor.getB(), adaptor.getBSlot(), bAlloc);
    OperandLayout bL = getRingOperandLayout(bAlloc);
    if (op.getBTransposed())
      bL = transposedOperand(bL);
    Type inElem = bAlloc.getResult().getType().getElementType();
    SmallVector<Value> acc = unpackStruct(b, loc, adaptor.getC());
    bool zeroAcc = isZeroAccumulator(op.getC());
    if (aTile) {
      // Only A's K extent matters to emitWgmmas when A comes from registers.
      OperandLayout aL{aTile.getDimSize(0), aTile.getDimSize(1), true, 128, 2, 0};
      RegisterFragments aRegs(b, loc, adaptor.getA(), aTile);
      auto aFragment = [&](int64_t mb, int64_t kk) { return aRegs.get(b, loc, mb, kk); };
      emitWgmmas(b, loc, target, layout, cTy.getShape(), inElem, aL, bBase, bL, bBase, acc,
                 op.getPending(), aFragment, zeroAcc, adaptor.getAccumulate(), false,
                 isOnce(bAlloc));
    } else {
      Value aBase = slotAddress(adaptor.getA(), adaptor.getASlot(), aAlloc);
      emitWgmmas(b, loc, target, layout, cTy.getShape(), inElem, getRingOperandLayout(aAlloc),
                 aBase, bL, bBase, acc, op.getPending(), nullptr, zeroAcc, adaptor.getAccumulate(),
                 isOnce(aAlloc), isOnce(bAlloc));
    }
    b.replaceOp(op, packStruct(b, loc, getTypeConverter()->convertType(cTy), acc));
    return success();
  }

  const TargetInfo &target;
};

/// kiln_gpu.dot_wait: wgmma.wait_group `pending` over the accumulator registers.
struct DotWaitLowering final : ConvertOpToLLVMPattern<kgpu::DotWaitOp> {
  using ConvertOpToLLVMPattern::ConvertOpToLLVMPattern;
  LogicalResult matchAndRewrite(kgpu::DotWaitOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    SmallVector<Value> acc = unpackStruct(b, op.getLoc(), adaptor.getSrc());
    emitWgmmaWait(b, op.getLoc(), acc, op.getPending());
    b.replaceOp(op, packStruct(b, op.getLoc(), getTypeConverter()->convertType(op.getType()), acc));
    return success();
  }
};

} // namespace

void kiln::populateWgmmaDotToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                          RewritePatternSet &patterns, const TargetInfo &target) {
  patterns.add<WgmmaDotLowering, SharedDotLowering>(converter, target);
  patterns.add<DotWaitLowering>(converter);
}
