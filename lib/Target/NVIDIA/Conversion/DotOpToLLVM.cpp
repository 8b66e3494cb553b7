//===- DotOpToLLVM.cpp - kiln.dot on tensor cores (mma.sync) and FMA ------===//
//
// This file lowers kiln.dot for the GPU. Both operands go to shared memory first (each thread
// stores the elements it owns; A row-major as [M][K + 8], B transposed as [N][K + 8], so that
// every fragment register is one aligned 32-bit load and the 8-element pad spreads the rows
// over the banks; the buffers are the op's parts of the shared scratch pool, preceded by a
// barrier where SharedScratch's analysis asks for one), then a barrier.
//
// Tensor cores (f16/bf16 -> f32 with mma.sync.m16n8k16; f32 as tf32 with m16n8k8; int8 ->
// int32 with m16n8k32): the accumulator's layout is getMmaAccumulatorLayout, a blocked layout
// whose lane pattern is the mma C fragment's (lane = 4 * row + column pair), the same for the
// three shapes. A warp owns rows w_m*8 + [0, 8) of every 8*W_m-row band and columns
// w_n*8 + [0, 8) of every 8*W_n-column band; two row bands (2p, 2p+1) form the 16 rows of one
// mma (C rows g and g + 8), each column band its 8 columns. The A fragment is loaded for
// exactly those rows, so no data moves for C. A fragment register is 32 bits of one row of A
// (or one column of B), E = 4 / element bytes consecutive k: k = E * (lane % 4) and, for the
// second register of each pair, 4E further (PTX ISA 9.7.14.5.8 and .5.10); one mma covers
// 8E k. In bytes the three shapes load the same words.
//
// Anything else (f16 accumulators, fp32 with inputPrecision = ieee or tf32x3, int8 with K not
// a multiple of 32, layouts too small for the warps) multiplies on the CUDA cores: every
// thread accumulates its own elements over K from shared memory.
//
//===----------------------------------------------------------------------===//

#include "WgmmaLayout.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "llvm/Support/MathExtras.h"

#include <atomic>
#include <cmath>
#include <map>

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

/// How an accumulator layout of getMmaAccumulatorLayout tiles a dot with mma.sync: warps
/// (wm x wn), 8-row bands per warp (mReps, even: pairs make one mma's 16 rows), 8-column
/// bands (nReps), elements per 32-bit fragment register (E) and k per mma (kStep = 8E).
struct MmaGeometry {
  MmaGeometry(kgpu::BlockedEncodingAttr layout, RankedTensorType cTy, Type inElem)
      : wm(layout.getWarpsPerCTA()[0]), wn(layout.getWarpsPerCTA()[1]),
        mReps(cTy.getDimSize(0) / (8 * wm)), nReps(cTy.getDimSize(1) / (8 * wn)),
        E(32 / inElem.getIntOrFloatBitWidth()), kStep(8 * E) {}
  int64_t wm, wn, mReps, nReps, E, kStep;
};

/// The A fragment registers {a0, a1, a2, a3} of row bands (2p, 2p + 1) at k-step kk, and the
/// B registers {b0, b1} of every column band at kk.
using LoadAFn = function_ref<std::array<Value, 4>(int64_t p, int64_t kk)>;
using LoadBFn = function_ref<SmallVector<std::array<Value, 2>>(int64_t kk)>;

/// acc += A @ B with one mma.sync per (row-band pair, column band, k-step), the accumulator
/// elements staying in `acc` (the struct order of `layout`).
void emitMmaSync(OpBuilder &b, Location loc, kgpu::BlockedEncodingAttr layout, RankedTensorType cTy,
                 Type inElem, int64_t K, SmallVector<Value> &acc, LoadAFn loadA, LoadBFn loadB) {
  MmaGeometry geo(layout, cTy, inElem);
  bool int8 = inElem.isInteger(8);
  Type accElem = int8 ? Type(b.getI32Type()) : Type(b.getF32Type());
  // Where each accumulator element of this thread lives in the struct.
  std::map<std::tuple<unsigned, unsigned, unsigned>, unsigned> slot;
  for (auto [i, pos] : llvm::enumerate(kgpu::getThreadElements(layout, cTy.getShape())))
    slot[{pos.rep[0], pos.rep[1], pos.elem[1]}] = i;

  std::string shape = "m16n8k" + std::to_string(geo.kStep);
  std::string types = inElem.isF16()    ? "f32.f16.f16.f32"
                      : inElem.isBF16() ? "f32.bf16.bf16.f32"
                      : int8            ? "s32.s8.s8.s32"
                                        : "f32.tf32.tf32.f32";
  std::string asmStr = "mma.sync.aligned." + shape + ".row.col." + types +
                       " {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};";
  std::string constraints =
      int8 ? "=r,=r,=r,=r,r,r,r,r,r,r,0,1,2,3" : "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3";
  auto resTy =
      LLVM::LLVMStructType::getLiteral(b.getContext(), {accElem, accElem, accElem, accElem});

  for (int64_t kk = 0; kk < K; kk += geo.kStep) {
    SmallVector<std::array<Value, 2>> bFrag = loadB(kk);
    for (int64_t p = 0; p < geo.mReps / 2; ++p) {
      std::array<Value, 4> aFrag = loadA(p, kk);
      for (int64_t j = 0; j < geo.nReps; ++j) {
        unsigned c0 = slot.at({unsigned(2 * p), unsigned(j), 0u});
        unsigned c1 = slot.at({unsigned(2 * p), unsigned(j), 1u});
        unsigned c2 = slot.at({unsigned(2 * p + 1), unsigned(j), 0u});
        unsigned c3 = slot.at({unsigned(2 * p + 1), unsigned(j), 1u});
        SmallVector<Value> args{aFrag[0],    aFrag[1], aFrag[2], aFrag[3], bFrag[j][0],
                                bFrag[j][1], acc[c0],  acc[c1],  acc[c2],  acc[c3]};
        Value d = emitInlineAsm(b, loc, resTy, args, asmStr, constraints,
                                /*sideEffects=*/false);
        for (auto [i, c] : llvm::enumerate(std::array<unsigned, 4>{c0, c1, c2, c3}))
          acc[c] = LLVM::ExtractValueOp::create(b, loc, d, i);
      }
    }
  }
}

struct DotOpLowering final : ConvertOpToLLVMPattern<DotOp> {
  DotOpLowering(const LLVMTypeConverter &converter, const SharedScratch &scratch,
                const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), scratch(scratch), target(target) {}

  LogicalResult matchAndRewrite(DotOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = rewriter.getContext();
    RankedTensorType aTy = op.getA().getType(), bTy = op.getB().getType();
    auto cTy = cast<RankedTensorType>(op.getC().getType());
    int64_t K = aTy.getDimSize(1);
    Type inElem = aTy.getElementType();
    if (isFp8Type(inElem))
      return op.emitOpError("expected an fp8 dot on wgmma (run -kiln-expand-fp8 first: it "
                            "widens the others to f16)");
    // Booleans are not dot inputs; i8 and floats are stored as they are.
    int64_t stride = getDotSharedStride(K, inElem.getIntOrFloatBitWidth() / 8);
    // A [M][stride] and B [N][stride] elements: parts 0 and 1 of the op's shared scratch.
    Value aBuf = scratch.getPart(rewriter, loc, op, 0);
    Value bBuf = scratch.getPart(rewriter, loc, op, 1);
    auto ptr3 = LLVM::LLVMPointerType::get(ctx, 3);
    auto at = [&](OpBuilder &b, Value buf, Value row, Value col) -> Value {
      Value idx = LLVM::AddOp::create(
          b, loc, LLVM::MulOp::create(b, loc, row, i32Const(b, loc, stride)), col);
      return LLVM::GEPOp::create(b, loc, ptr3, inElem, buf, ValueRange{idx});
    };

    // 1. Operands to shared memory (B transposed).
    if (scratch.needsBarrierBefore(op))
      target.barrier(rewriter, loc);
    for (auto [v, c] : llvm::zip(unpackStruct(rewriter, loc, adaptor.getA()),
                                 emitElementCoordinates(rewriter, loc, aTy, target)))
      LLVM::StoreOp::create(rewriter, loc, v, at(rewriter, aBuf, c[0], c[1]));
    for (auto [v, c] : llvm::zip(unpackStruct(rewriter, loc, adaptor.getB()),
                                 emitElementCoordinates(rewriter, loc, bTy, target)))
      LLVM::StoreOp::create(rewriter, loc, v, at(rewriter, bBuf, c[1], c[0]));
    target.barrier(rewriter, loc);

    SmallVector<Value> acc = unpackStruct(rewriter, loc, adaptor.getC());
    auto layout = dyn_cast_or_null<kgpu::BlockedEncodingAttr>(cTy.getEncoding());
    unsigned numWarps = 1;
    for (unsigned w : layout.getWarpsPerCTA())
      numWarps *= w;
    bool mma =
        hasMmaSyncTypes(op) && layout == getMmaAccumulatorLayout(ctx, cTy.getShape(), numWarps);
    if (mma)
      lowerMma(rewriter, loc, op, layout, aBuf, bBuf, at, acc);
    else
      lowerFma(rewriter, loc, op, aBuf, bBuf, at, acc, K);
    rewriter.replaceOp(op, packStruct(rewriter, loc, getTypeConverter()->convertType(cTy), acc));
    return success();
  }

  /// mma.sync over the accumulator layout with fragments from the padded buffers (see the
  /// file comment).
  void lowerMma(ConversionPatternRewriter &b, Location loc, DotOp op,
                kgpu::BlockedEncodingAttr layout, Value aBuf, Value bBuf,
                function_ref<Value(OpBuilder &, Value, Value, Value)> at,
                SmallVector<Value> &acc) const {
    auto cTy = cast<RankedTensorType>(op.getC().getType());
    Type inElem = op.getA().getType().getElementType();
    int64_t K = op.getA().getType().getDimSize(1);
    bool tf32 = inElem.isF32();
    MmaGeometry geo(layout, cTy, inElem);
    Type i32 = b.getI32Type(), f32 = b.getF32Type();

    ThreadIds ids = emitThreadIds(b, loc, layout, target);
    Value g = ids.lane[0], tig = ids.lane[1]; // lane = 4 * g + tig
    Value rowInBand = LLVM::AddOp::create(
        b, loc, LLVM::MulOp::create(b, loc, ids.warp[0], i32Const(b, loc, 8)), g);
    Value colInBand = LLVM::AddOp::create(
        b, loc, LLVM::MulOp::create(b, loc, ids.warp[1], i32Const(b, loc, 8)), g);
    Value tigE = LLVM::MulOp::create(b, loc, tig, i32Const(b, loc, geo.E));
    auto add = [&](Value v, int64_t c) -> Value {
      return c == 0 ? v : LLVM::AddOp::create(b, loc, v, i32Const(b, loc, c)).getResult();
    };
    // One 32-bit fragment register: E elements at (row, col) .. (row, col + E - 1), or one
    // f32 rounded to tf32.
    auto fragment = [&](Value buf, Value row, Value col) -> Value {
      Value p = at(b, buf, row, col);
      if (!tf32)
        return LLVM::LoadOp::create(b, loc, i32, p);
      Value x = LLVM::LoadOp::create(b, loc, f32, p);
      return emitInlineAsm(b, loc, i32, {x}, "cvt.rna.tf32.f32 $0, $1;", "=r,f",
                           /*sideEffects=*/false);
    };
    // B fragments per column band j: k = kk + E * tig (.. + E - 1), and 4E further.
    auto loadB = [&](int64_t kk) {
      SmallVector<std::array<Value, 2>> frags;
      for (int64_t j = 0; j < geo.nReps; ++j) {
        Value n = add(colInBand, j * 8 * geo.wn);
        Value k0 = add(tigE, kk);
        frags.push_back({fragment(bBuf, n, k0), fragment(bBuf, n, add(k0, 4 * geo.E))});
      }
      return frags;
    };
    auto loadA = [&](int64_t p, int64_t kk) -> std::array<Value, 4> {
      Value r0 = add(rowInBand, 2 * p * 8 * geo.wm), r1 = add(rowInBand, (2 * p + 1) * 8 * geo.wm);
      Value k0 = add(tigE, kk), k1 = add(k0, 4 * geo.E);
      return {fragment(aBuf, r0, k0), fragment(aBuf, r1, k0), fragment(aBuf, r0, k1),
              fragment(aBuf, r1, k1)};
    };
    emitMmaSync(b, loc, layout, cTy, inElem, K, acc, loadA, loadB);
  }

  /// CUDA cores: acc[i][j] += sum_k a[i][k] * b[k][j], per owned element, from shared memory.
  void lowerFma(ConversionPatternRewriter &b, Location loc, DotOp op, Value aBuf, Value bBuf,
                function_ref<Value(OpBuilder &, Value, Value, Value)> at, SmallVector<Value> &acc,
                int64_t K) const {
    auto cTy = cast<RankedTensorType>(op.getC().getType());
    Type inElem = op.getA().getType().getElementType();
    Type accElem = cTy.getElementType();
    bool isFloat = isa<FloatType>(accElem);
    auto coords = emitElementCoordinates(b, loc, cTy, target);
    // A loop over K keeps the code small; each step updates every owned element.
    Value lb = i32Const(b, loc, 0), ub = i32Const(b, loc, K), one = i32Const(b, loc, 1);
    Block *before = b.getInsertionBlock();
    Block *after = b.splitBlock(before, b.getInsertionPoint());
    SmallVector<Type> accTypes;
    for (Value v : acc)
      accTypes.push_back(v.getType());
    SmallVector<Type> iterTypes{b.getI32Type()};
    iterTypes.append(accTypes.begin(), accTypes.end());
    Block *header = b.createBlock(after, iterTypes, SmallVector<Location>(iterTypes.size(), loc));
    Block *body = b.createBlock(after);
    Block *exit = b.createBlock(after, accTypes, SmallVector<Location>(accTypes.size(), loc));

    b.setInsertionPointToEnd(before);
    SmallVector<Value> init{lb};
    init.append(acc.begin(), acc.end());
    LLVM::BrOp::create(b, loc, init, header);

    b.setInsertionPointToEnd(header);
    Value k = header->getArgument(0);
    Value more = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::slt, k, ub);
    LLVM::CondBrOp::create(b, loc, more, body, ValueRange{}, exit,
                           header->getArguments().drop_front());

    b.setInsertionPointToEnd(body);
    auto extend = [&](Value v) -> Value {
      if (inElem == accElem)
        return v;
      if (isFloat)
        return LLVM::FPExtOp::create(b, loc, accElem, v);
      return LLVM::SExtOp::create(b, loc, accElem, v);
    };
    SmallVector<Value> next{LLVM::AddOp::create(b, loc, k, one)};
    for (auto [i, c] : llvm::enumerate(coords)) {
      Value x = extend(LLVM::LoadOp::create(b, loc, inElem, at(b, aBuf, c[0], k)));
      Value y = extend(LLVM::LoadOp::create(b, loc, inElem, at(b, bBuf, c[1], k)));
      Value a = header->getArgument(i + 1);
      next.push_back(
          isFloat ? Value(LLVM::FMAOp::create(b, loc, x, y, a))
                  : Value(LLVM::AddOp::create(b, loc, LLVM::MulOp::create(b, loc, x, y), a)));
    }
    LLVM::BrOp::create(b, loc, next, header);

    b.setInsertionPointToEnd(exit);
    LLVM::BrOp::create(b, loc, ValueRange{}, after);
    for (unsigned i = 0; i < acc.size(); ++i)
      acc[i] = exit->getArgument(i);
    b.setInsertionPointToStart(after);
  }

  const SharedScratch &scratch;
  const TargetInfo &target;
};

/// Reads the fragments of one operand of a shared_dot from its ring slot with ldmatrix.
/// Lane l gives the address of row l % 8 of matrix q = l / 8. K-major slots (A row-major, B
/// transposed) hold a matrix's rows as 16-byte chunks along K: row mn, k .. k + 16 bytes.
/// MN-major slots (16-bit only) hold them along M or N, read with .trans: row k, mn .. mn + 8.
/// Either way thread t receives the 32 bits at (mn = t / 4, k = (t % 4) * 32 bits), an A or B
/// fragment register of mma.sync. Which matrix a lane addresses: `mnSel` (0 or 1) picks its
/// row or column band, `kSel` the 16-byte half of the k-step.
struct LdMatrixReader {
  LdMatrixReader(OpBuilder &b, Location loc, OperandLayout layout, Value slotBase, Value warpMN,
                 int64_t bandStride, Value row, Value mnSel, Value kSel)
      : layout(layout), slotBase(slotBase) {
    auto mul = [&](Value v, int64_t c) {
      return LLVM::MulOp::create(b, loc, v, i32Const(b, loc, c)).getResult();
    };
    auto add = [&](Value x, Value y) { return LLVM::AddOp::create(b, loc, x, y).getResult(); };
    int64_t chunk = 16 / layout.elemBytes; // elements per 16-byte row of a matrix
    mnLane = add(mul(warpMN, 8), mul(mnSel, bandStride));
    kLane = mul(kSel, chunk);
    if (layout.kMajor)
      mnLane = add(mnLane, row);
    else
      kLane = add(kLane, row);
  }

  /// Shared pointer to this lane's row of the matrix whose first element is (mn0, k0)
  /// further along (mn0 a multiple of 8 rows, k0 of the k-step). The swizzle XORs a row's
  /// 16-byte chunk with the row's bits above 128 bytes, which only the lane's position inside
  /// an 8 x 128-byte block decides: K-major, 8-row and whole-block steps add plain offsets, so
  /// only k0 within a block needs its own computation; MN-major, k0 is a multiple of 8 rows
  /// and mn0 needs its own. The plain part is a constant GEP offset (ldmatrix's immediate).
  Value address(OpBuilder &b, Location loc, int64_t mn0, int64_t k0) {
    int64_t kb = layout.blockElems(), key, linear;
    if (layout.kMajor) {
      key = k0 % kb;
      linear = mn0 * layout.swizzle + (k0 / kb) * layout.mn * layout.swizzle;
    } else {
      key = mn0;
      linear = k0 * layout.swizzle;
    }
    auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
    Value &base = bases[key];
    if (!base) {
      Value mn = mnLane, k = kLane;
      Value c = i32Const(b, loc, key);
      if (layout.kMajor)
        k = LLVM::AddOp::create(b, loc, k, c);
      else
        mn = LLVM::AddOp::create(b, loc, mn, c);
      // The lane's offset does not change from one iteration to the next (LICM hoists it);
      // the slot's address does.
      Value at = LLVM::AddOp::create(b, loc, slotBase, layout.emitOffset(b, loc, mn, k));
      base = LLVM::IntToPtrOp::create(b, loc, ptr3, at);
    }
    if (!linear)
      return base;
    return LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), base,
                               ArrayRef<LLVM::GEPArg>{int32_t(linear)});
  }

  /// ldmatrix of `count` (2 or 4) 8x8 matrices at (mn0, k0): `count` 32-bit registers.
  SmallVector<Value> load(OpBuilder &b, Location loc, int64_t mn0, int64_t k0, unsigned count) {
    MLIRContext *ctx = b.getContext();
    Type i32 = b.getI32Type();
    Value ptr = address(b, loc, mn0, k0);
    SmallVector<Type> fields(count, i32);
    auto resTy = LLVM::LLVMStructType::getLiteral(ctx, fields);
    Value m = NVVM::LdMatrixOp::create(
        b, loc, resTy, ptr, count, layout.kMajor ? NVVM::MMALayout::row : NVVM::MMALayout::col,
        NVVM::LdStMatrixShapeAttr::get(ctx, 8, 8), NVVM::LdStMatrixEltType::B16);
    SmallVector<Value> regs;
    for (unsigned i = 0; i < count; ++i)
      regs.push_back(LLVM::ExtractValueOp::create(b, loc, m, i));
    return regs;
  }

  OperandLayout layout;
  Value slotBase, mnLane, kLane;
  llvm::DenseMap<int64_t, Value> bases;
};

/// kiln_gpu.shared_dot under the mma.sync accumulator layout (targets without wgmma): both
/// operands are in their rings' slots (async_wait made them visible), in the swizzled layouts
/// of WgmmaLayout.h, and reach the mma.sync fragments through ldmatrix: per k-step one x4
/// per pair of row bands of A (a0..a3) and one x4 per two column bands of B (b0, b1 of each;
/// an x2 for a last odd band).
struct SharedMmaDotLowering final : ConvertOpToLLVMPattern<kgpu::SharedDotOp> {
  SharedMmaDotLowering(const LLVMTypeConverter &converter, const TargetInfo &target)
      : ConvertOpToLLVMPattern(converter), target(target) {}

  LogicalResult matchAndRewrite(kgpu::SharedDotOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &b) const override {
    Location loc = op.getLoc();
    MLIRContext *ctx = b.getContext();
    auto cTy = cast<RankedTensorType>(op.getC().getType());
    auto module = op->getParentOfType<ModuleOp>();
    auto numWarps = module->getAttrOfType<IntegerAttr>(kgpu::kNumWarpsAttr);
    auto layout = dyn_cast_or_null<kgpu::BlockedEncodingAttr>(cTy.getEncoding());
    if (!numWarps || !layout ||
        layout != getMmaAccumulatorLayout(ctx, cTy.getShape(), numWarps.getInt()))
      return failure(); // wgmma's (WgmmaDotToLLVM.cpp)
    if (op.getBTransposed())
      return op.emitOpError("expected B read as its ring holds it on the mma.sync path, found "
                            "b_transposed (wgmma only)");
    auto aAlloc = op.getA().getDefiningOp<kgpu::LocalAllocOp>();
    auto bAlloc = op.getB().getDefiningOp<kgpu::LocalAllocOp>();
    if (!aAlloc || !bAlloc)
      return op.emitOpError("expected A and B from kiln_gpu.local_alloc rings on the mma.sync "
                            "path (A in registers needs wgmma)");
    Type inElem = bAlloc.getResult().getType().getElementType();
    if (!inElem.isF16() && !inElem.isBF16() && !inElem.isInteger(8))
      return op.emitOpError("expected f16, bf16 or i8 rings on the mma.sync path, found ")
             << inElem;
    OperandLayout aL = getRingOperandLayout(aAlloc), bL = getRingOperandLayout(bAlloc);
    if (inElem.isInteger(8) && (!aL.kMajor || !bL.kMajor))
      return op.emitOpError("expected 8-bit rings contiguous along K");
    auto slotAddress = [&](Value ring, Value slot, kgpu::LocalAllocOp alloc) {
      return emitSlotAddress(b, loc, ring, slot, alloc.getResult().getType());
    };
    Value aBase = slotAddress(adaptor.getA(), adaptor.getASlot(), aAlloc);
    Value bBase = slotAddress(adaptor.getB(), adaptor.getBSlot(), bAlloc);

    MmaGeometry geo(layout, cTy, inElem);
    ThreadIds ids = emitThreadIds(b, loc, layout, target);
    auto c = [&](int64_t v) { return i32Const(b, loc, v); };
    Value lane =
        LLVM::AddOp::create(b, loc, LLVM::MulOp::create(b, loc, ids.lane[0], c(4)), ids.lane[1]);
    Value row = LLVM::AndOp::create(b, loc, lane, c(7));
    Value q0 = LLVM::AndOp::create(b, loc, LLVM::LShrOp::create(b, loc, lane, c(3)), c(1));
    Value q1 = LLVM::LShrOp::create(b, loc, lane, c(4));
    // A: matrices (band 2p, k), (2p + 1, k), (2p, k + half), (2p + 1, k + half).
    LdMatrixReader aReader(b, loc, aL, aBase, ids.warp[0], 8 * geo.wm, row, q0, q1);
    // B: matrices (band j, k), (j, k + half), (j + 1, k), (j + 1, k + half); the x2 of a
    // last odd band takes the first two.
    LdMatrixReader bReader(b, loc, bL, bBase, ids.warp[1], 8 * geo.wn, row, q1, q0);
    LdMatrixReader bSingle(b, loc, bL, bBase, ids.warp[1], 8 * geo.wn, row, c(0), q0);

    auto loadA = [&](int64_t p, int64_t kk) -> std::array<Value, 4> {
      SmallVector<Value> r = aReader.load(b, loc, 2 * p * 8 * geo.wm, kk, 4);
      return {r[0], r[1], r[2], r[3]};
    };
    auto loadB = [&](int64_t kk) {
      SmallVector<std::array<Value, 2>> frags;
      for (int64_t j = 0; j < geo.nReps; j += 2) {
        bool pair = j + 1 < geo.nReps;
        SmallVector<Value> r =
            (pair ? bReader : bSingle).load(b, loc, j * 8 * geo.wn, kk, pair ? 4 : 2);
        frags.push_back({r[0], r[1]});
        if (pair)
          frags.push_back({r[2], r[3]});
      }
      return frags;
    };
    SmallVector<Value> acc = unpackStruct(b, loc, adaptor.getC());
    if (Value accumulate = adaptor.getAccumulate())
      for (Value &v : acc)
        v = LLVM::SelectOp::create(
            b, loc, accumulate, v,
            LLVM::ConstantOp::create(b, loc, v.getType(), b.getZeroAttr(v.getType())));
    int64_t K = bAlloc.getResult().getType().getTileShape()[0];
    emitMmaSync(b, loc, layout, cTy, inElem, K, acc, loadA, loadB);
    b.replaceOp(op, packStruct(b, loc, getTypeConverter()->convertType(cTy), acc));
    return success();
  }

  const TargetInfo &target;
};

} // namespace

void kiln::populateDotOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                       RewritePatternSet &patterns, const SharedScratch &scratch,
                                       const TargetInfo &target) {
  patterns.add<DotOpLowering>(converter, scratch, target);
  patterns.add<SharedMmaDotLowering>(converter, target);
}
