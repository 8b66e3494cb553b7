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

#include "kiln/Conversion/KilnToLLVM.h"

#include "mlir/Conversion/LLVMCommon/Pattern.h"
#include "llvm/Support/MathExtras.h"

#include <atomic>
#include <cmath>
#include <map>

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {

bool usesTensorCores(DotOp op) {
  Type ea = op.getA().getType().getElementType();
  Type ec = op.getC().getType().getElementType();
  if (ea.isInteger(8))
    return ec.isInteger(32) && op.getA().getType().getDimSize(1) % 32 == 0;
  if (!ec.isF32())
    return false;
  return ea.isF16() || ea.isBF16() ||
         (ea.isF32() && op.getInputPrecision() == InputPrecision::tf32);
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
    bool mma = usesTensorCores(op) &&
               layout == getMmaAccumulatorLayout(ctx, cTy.getShape(), numWarps);
    if (mma)
      lowerMma(rewriter, loc, op, layout, aBuf, bBuf, at, acc);
    else
      lowerFma(rewriter, loc, op, aBuf, bBuf, at, acc, K);
    rewriter.replaceOp(op, packStruct(rewriter, loc, getTypeConverter()->convertType(cTy), acc));
    return success();
  }

  /// mma.sync over the accumulator layout (see the file comment).
  void lowerMma(ConversionPatternRewriter &b, Location loc, DotOp op,
                kgpu::BlockedEncodingAttr layout, Value aBuf, Value bBuf,
                function_ref<Value(OpBuilder &, Value, Value, Value)> at,
                SmallVector<Value> &acc) const {
    auto cTy = cast<RankedTensorType>(op.getC().getType());
    Type inElem = op.getA().getType().getElementType();
    int64_t K = op.getA().getType().getDimSize(1);
    bool tf32 = inElem.isF32(), int8 = inElem.isInteger(8);
    // E elements of one row (A) or column (B) per 32-bit fragment register.
    int64_t E = 32 / inElem.getIntOrFloatBitWidth(), kStep = 8 * E;
    unsigned wm = layout.getWarpsPerCTA()[0], wn = layout.getWarpsPerCTA()[1];
    int64_t mReps = cTy.getDimSize(0) / (8 * wm), nReps = cTy.getDimSize(1) / (8 * wn);
    Type i32 = b.getI32Type(), f32 = b.getF32Type(), accElem = int8 ? i32 : f32;

    // Where each accumulator element of this thread lives in the struct.
    std::map<std::tuple<unsigned, unsigned, unsigned>, unsigned> slot;
    for (auto [i, pos] : llvm::enumerate(kgpu::getThreadElements(layout, cTy.getShape())))
      slot[{pos.rep[0], pos.rep[1], pos.elem[1]}] = i;

    ThreadIds ids = emitThreadIds(b, loc, layout, target);
    Value g = ids.lane[0], tig = ids.lane[1]; // lane = 4 * g + tig
    Value rowInBand = LLVM::AddOp::create(
        b, loc, LLVM::MulOp::create(b, loc, ids.warp[0], i32Const(b, loc, 8)), g);
    Value colInBand = LLVM::AddOp::create(
        b, loc, LLVM::MulOp::create(b, loc, ids.warp[1], i32Const(b, loc, 8)), g);
    Value tigE = LLVM::MulOp::create(b, loc, tig, i32Const(b, loc, E));
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

    std::string shape = "m16n8k" + std::to_string(kStep);
    std::string types = inElem.isF16()    ? "f32.f16.f16.f32"
                        : inElem.isBF16() ? "f32.bf16.bf16.f32"
                        : int8            ? "s32.s8.s8.s32"
                                          : "f32.tf32.tf32.f32";
    std::string asmStr = "mma.sync.aligned." + shape + ".row.col." + types +
                         " {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};";
    std::string constraints = int8 ? "=r,=r,=r,=r,r,r,r,r,r,r,0,1,2,3"
                                   : "=f,=f,=f,=f,r,r,r,r,r,r,0,1,2,3";
    auto resTy = LLVM::LLVMStructType::getLiteral(b.getContext(),
                                                  {accElem, accElem, accElem, accElem});

    for (int64_t kk = 0; kk < K; kk += kStep) {
      // B fragments per column band j: k = kk + E * tig (.. + E - 1), and 4E further.
      SmallVector<std::array<Value, 2>> bFrag;
      for (int64_t j = 0; j < nReps; ++j) {
        Value n = add(colInBand, j * 8 * wn);
        Value k0 = add(tigE, kk);
        bFrag.push_back({fragment(bBuf, n, k0), fragment(bBuf, n, add(k0, 4 * E))});
      }
      for (int64_t p = 0; p < mReps / 2; ++p) {
        Value r0 = add(rowInBand, 2 * p * 8 * wm), r1 = add(rowInBand, (2 * p + 1) * 8 * wm);
        Value k0 = add(tigE, kk), k1 = add(k0, 4 * E);
        std::array<Value, 4> aFrag = {fragment(aBuf, r0, k0), fragment(aBuf, r1, k0),
                                      fragment(aBuf, r0, k1), fragment(aBuf, r1, k1)};
        for (int64_t j = 0; j < nReps; ++j) {
          unsigned c0 = slot.at({unsigned(2 * p), unsigned(j), 0u});
          unsigned c1 = slot.at({unsigned(2 * p), unsigned(j), 1u});
          unsigned c2 = slot.at({unsigned(2 * p + 1), unsigned(j), 0u});
          unsigned c3 = slot.at({unsigned(2 * p + 1), unsigned(j), 1u});
          SmallVector<Value> args{aFrag[0], aFrag[1], aFrag[2], aFrag[3], bFrag[j][0],
                                  bFrag[j][1], acc[c0],  acc[c1],  acc[c2],  acc[c3]};
          Value d = emitInlineAsm(b, loc, resTy, args, asmStr, constraints,
                                  /*sideEffects=*/false);
          for (auto [i, c] : llvm::enumerate(std::array<unsigned, 4>{c0, c1, c2, c3}))
            acc[c] = LLVM::ExtractValueOp::create(b, loc, d, i);
        }
      }
    }
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
      next.push_back(isFloat ? Value(LLVM::FMAOp::create(b, loc, x, y, a))
                             : Value(LLVM::AddOp::create(
                                   b, loc, LLVM::MulOp::create(b, loc, x, y), a)));
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

} // namespace

kgpu::BlockedEncodingAttr kiln::getMmaAccumulatorLayout(MLIRContext *ctx,
                                                        ArrayRef<int64_t> shape,
                                                        unsigned numWarps) {
  int64_t M = shape[0], N = shape[1];
  // Each warp computes an (M / W_m) x (N / W_n) region; per k-step it loads (rows + columns) / 4
  // fragment registers from shared memory, least for square regions. Among the warp grids
  // the tile allows (16-row and 8-column blocks per warp), take the squarest, then more warps
  // along M.
  kgpu::BlockedEncodingAttr best;
  double bestSkew = 0;
  for (unsigned wm = numWarps; wm >= 1; wm /= 2) {
    unsigned wn = numWarps / wm;
    if (M % (16 * int64_t(wm)) == 0 && N % (8 * int64_t(wn)) == 0) {
      double skew = std::fabs(std::log2(double(M) / wm) - std::log2(double(N) / wn));
      if (!best || skew < bestSkew) {
        best = kgpu::BlockedEncodingAttr::get(ctx, {1, 2}, {8, 4}, {wm, wn}, {1, 0},
                                              /*wgmma=*/false);
        bestSkew = skew;
      }
    }
    if (wm == 1)
      break;
  }
  return best;
}

bool kiln::usesMmaLayout(DotOp op) {
  // fp8 dots left by -kiln-expand-fp8 are wgmma's (the others became f16 dots).
  return usesTensorCores(op) ||
         isFp8Type(op.getA().getType().getElementType());
}

void kiln::populateDotOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                       RewritePatternSet &patterns,
                                       const SharedScratch &scratch, const TargetInfo &target) {
  patterns.add<DotOpLowering>(converter, scratch, target);
}
