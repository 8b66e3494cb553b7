//===- TypeConverter.cpp - Kiln types to LLVM, tile <-> registers ---------===//
//
// This file implements the Kiln LLVM type converter, the struct pack/unpack helpers, and the
// computation of each owned element's coordinates from the thread id under a blocked or slice
// layout:  coord_d = (rep * T_d + (warp_d * tpw_d + lane_d) * spt_d + e) mod shape_d.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/KilnToLLVM.h"

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

KilnLLVMTypeConverter::KilnLLVMTypeConverter(MLIRContext *ctx) : LLVMTypeConverter(ctx) {
  addConversion([ctx](PointerType) -> Type {
    // Global memory is address space 1 in NVPTX.
    return LLVM::LLVMPointerType::get(ctx, 1);
  });
  addConversion([this, ctx](RankedTensorType type) -> std::optional<Type> {
    if (!type.getEncoding())
      return std::nullopt;
    Type elem = convertType(type.getElementType());
    if (!elem)
      return std::nullopt;
    unsigned n = kgpu::getElemsPerThread(type);
    return LLVM::LLVMStructType::getLiteral(ctx, SmallVector<Type>(n, elem));
  });
}

SmallVector<Value> kiln::unpackStruct(OpBuilder &b, Location loc, Value value) {
  auto st = dyn_cast<LLVM::LLVMStructType>(value.getType());
  if (!st)
    return {value};
  SmallVector<Value> fields;
  for (unsigned i = 0, e = st.getBody().size(); i < e; ++i)
    fields.push_back(LLVM::ExtractValueOp::create(b, loc, value, i));
  return fields;
}

Value kiln::packStruct(OpBuilder &b, Location loc, Type structType, ValueRange fields) {
  if (!isa<LLVM::LLVMStructType>(structType))
    return fields.front();
  Value result = LLVM::UndefOp::create(b, loc, structType);
  for (auto [i, f] : llvm::enumerate(fields))
    result = LLVM::InsertValueOp::create(b, loc, result, f, i);
  return result;
}

Value kiln::i32Const(OpBuilder &b, Location loc, int64_t v) {
  return LLVM::ConstantOp::create(b, loc, b.getI32Type(), b.getI32IntegerAttr(v));
}

SmallVector<SmallVector<Value, 4>>
kiln::emitElementCoordinates(OpBuilder &b, Location loc, RankedTensorType type,
                             const TargetInfo &target) {
  Attribute layout = type.getEncoding();
  kgpu::BlockedEncodingAttr root = kgpu::getRootBlocked(layout);
  SmallVector<unsigned> kept = kgpu::getKeptDims(layout);
  ArrayRef<int64_t> shape = type.getShape();
  unsigned rootRank = root.getRank();

  // Split the thread id into lane and warp, then each over the root dims fastest-first.
  Value tid = target.getThreadId(b, loc);
  Value warpSize = i32Const(b, loc, kgpu::kWarpSize);
  Value lane = LLVM::URemOp::create(b, loc, tid, warpSize);
  Value warp = LLVM::UDivOp::create(b, loc, tid, warpSize);
  SmallVector<Value> laneIdx(rootRank), warpIdx(rootRank);
  for (unsigned d : root.getOrder()) {
    Value tpw = i32Const(b, loc, root.getThreadsPerWarp()[d]);
    Value wpc = i32Const(b, loc, root.getWarpsPerCTA()[d]);
    laneIdx[d] = LLVM::URemOp::create(b, loc, lane, tpw);
    lane = LLVM::UDivOp::create(b, loc, lane, tpw);
    warpIdx[d] = LLVM::URemOp::create(b, loc, warp, wpc);
    warp = LLVM::UDivOp::create(b, loc, warp, wpc);
  }
  // Thread-dependent base of each kept dim: (warp_d * tpw_d + lane_d) * spt_d.
  SmallVector<Value> base(kept.size());
  SmallVector<int64_t> tile(kept.size());
  for (auto [i, d] : llvm::enumerate(kept)) {
    unsigned spt = root.getSizePerThread()[d], tpw = root.getThreadsPerWarp()[d];
    tile[i] = int64_t(spt) * tpw * root.getWarpsPerCTA()[d];
    Value w = LLVM::MulOp::create(b, loc, warpIdx[d], i32Const(b, loc, tpw));
    Value t = LLVM::AddOp::create(b, loc, w, laneIdx[d]);
    base[i] = LLVM::MulOp::create(b, loc, t, i32Const(b, loc, spt));
  }
  SmallVector<SmallVector<Value, 4>> coords;
  for (const kgpu::ElemPos &pos : kgpu::getThreadElements(layout, shape)) {
    SmallVector<Value, 4> c;
    for (unsigned i = 0; i < kept.size(); ++i) {
      int64_t offset = int64_t(pos.rep[i]) * tile[i] + pos.elem[i];
      Value v = LLVM::AddOp::create(b, loc, base[i], i32Const(b, loc, offset));
      // A tile narrower than the layout wraps around (replicated ownership); shapes are
      // powers of two so the modulo is a mask.
      if (tile[i] > shape[i])
        v = LLVM::AndOp::create(b, loc, v, i32Const(b, loc, shape[i] - 1));
      c.push_back(v);
    }
    coords.push_back(std::move(c));
  }
  return coords;
}
