//===- DotLayouts.cpp - Which engine runs a dot, and its layouts ----------===//
//
// This file implements the dot decisions of DotLayouts.h: mma.sync and wgmma eligibility and
// the accumulator layouts of each.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/KilnGPU/IR/DotLayouts.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

namespace {
bool isSixteenBit(Type t) { return t.isF16() || t.isBF16(); }

/// Bytes per element of a dot operand.
int64_t elementBytes(Type t) { return t.getIntOrFloatBitWidth() / 8; }
} // namespace

bool kiln::hasMmaSyncTypes(DotOp op) {
  Type ea = op.getA().getType().getElementType();
  Type ec = op.getC().getType().getElementType();
  if (ea.isInteger(8))
    return ec.isInteger(32) && op.getA().getType().getDimSize(1) % 32 == 0;
  if (!ec.isF32())
    return false;
  return ea.isF16() || ea.isBF16() ||
         (ea.isF32() && op.getInputPrecision() == InputPrecision::tf32);
}

bool kiln::takesMmaAccumulatorLayout(DotOp op) {
  // fp8 dots left by -kiln-expand-fp8 are wgmma's (the others became f16 dots).
  return hasMmaSyncTypes(op) || isFp8Type(op.getA().getType().getElementType());
}

kgpu::BlockedEncodingAttr kiln::getMmaAccumulatorLayout(MLIRContext *ctx, ArrayRef<int64_t> shape,
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

kgpu::BlockedEncodingAttr kiln::getWgmmaAccumulatorLayout(MLIRContext *ctx, ArrayRef<int64_t> shape,
                                                          unsigned numWarps) {
  // Every warpgroup multiplies whole 64-row blocks: M a multiple of 16 rows per warp.
  if (numWarps % 4 != 0 || shape.size() != 2 || shape[0] % (16 * int64_t(numWarps)) != 0 ||
      shape[1] % 8 != 0)
    return {};
  return kgpu::BlockedEncodingAttr::get(ctx, {1, 2}, {8, 4}, {numWarps, 1}, {1, 0},
                                        /*wgmma=*/true);
}

bool kiln::wgmmaSupports(Type in, Type acc, int64_t K) {
  if (isSixteenBit(in))
    return acc.isF32() && K % 16 == 0;
  if (isFp8Type(in))
    return acc.isF32() && K % 32 == 0;
  return in.isInteger(8) && acc.isInteger(32) && K % 32 == 0;
}

bool kiln::fitsWgmma(DotOp op) {
  Type a = op.getA().getType().getElementType();
  auto c = cast<RankedTensorType>(op.getC().getType()).getElementType();
  return a == op.getB().getType().getElementType() &&
         wgmmaSupports(a, c, op.getA().getType().getDimSize(1)) &&
         (op.getA().getType().getNumElements() + op.getB().getType().getNumElements()) *
                 elementBytes(a) <=
             kWgmmaOperandBytes;
}

bool kiln::lowersToWgmma(DotOp op) {
  auto module = op->getParentOfType<ModuleOp>();
  if (!module || !module->hasAttr(kgpu::kWgmmaAttr))
    return false;
  RankedTensorType aTy = op.getA().getType(), bTy = op.getB().getType();
  auto cTy = cast<RankedTensorType>(op.getC().getType());
  if (aTy.getElementType() != bTy.getElementType() ||
      !wgmmaSupports(aTy.getElementType(), cTy.getElementType(), aTy.getDimSize(1)))
    return false;
  auto numWarps = module->getAttrOfType<IntegerAttr>(kgpu::kNumWarpsAttr);
  if (!numWarps || cTy.getEncoding() != getWgmmaAccumulatorLayout(op.getContext(), cTy.getShape(),
                                                                  numWarps.getInt()))
    return false;
  int64_t bytes =
      (aTy.getNumElements() + bTy.getNumElements()) * elementBytes(aTy.getElementType());
  return bytes <= kWgmmaOperandBytes;
}

std::optional<int64_t> kiln::getDotReductionDim(Value tile) {
  std::optional<int64_t> kDim;
  auto read = [&](Value v, DotOp dot, bool transposed) {
    if (dot.getA() == dot.getB() || (dot.getA() != v && dot.getB() != v))
      return false;
    int64_t k = (dot.getA() == v) != transposed ? 1 : 0;
    if (kDim && *kDim != k)
      return false;
    kDim = k;
    return true;
  };
  for (Operation *user : tile.getUsers()) {
    if (auto dot = dyn_cast<DotOp>(user)) {
      if (!read(tile, dot, /*transposed=*/false))
        return std::nullopt;
      continue;
    }
    auto trans = dyn_cast<TransOp>(user);
    if (!trans || trans->use_empty())
      return std::nullopt;
    bool transposed = trans.getOrder()[0] == 1;
    for (Operation *u : trans->getUsers()) {
      auto dot = dyn_cast<DotOp>(u);
      if (!dot || !read(trans.getResult(), dot, transposed))
        return std::nullopt;
    }
  }
  return kDim;
}

int64_t kiln::getSharedSlotBytes(kgpu::SharedBufferType type) {
  int64_t bytes = type.getElementType().getIntOrFloatBitWidth() / 8;
  for (int64_t d : type.getTileShape())
    bytes *= d;
  return llvm::alignTo(bytes, 1024);
}
