//===- TypeConverter.cpp - Kiln types to LLVM, tile <-> registers ---------===//
//
// This file implements the Kiln LLVM type converter, the struct pack/unpack helpers, and the
// computation of each owned element's coordinates from the thread id under a blocked or slice
// layout:  coord_d = (rep * T_d + (warp_d * tpw_d + lane_d) * spt_d + e) mod shape_d, the
// rows then moved where wgmma puts them under the wgmma accumulator layout
// (emitWgmmaAccumulatorRow).
//
//===----------------------------------------------------------------------===//

#include "WgmmaLayout.h"
#include "kiln/Target/NVIDIA/KilnToLLVM.h"

using namespace mlir;
using namespace kiln;
namespace kgpu = kiln::gpu;

KilnLLVMTypeConverter::KilnLLVMTypeConverter(MLIRContext *ctx) : LLVMTypeConverter(ctx) {
  // A shared ring is the shared-memory address of its first slot.
  addConversion(
      [ctx](kgpu::SharedBufferType) -> Type { return LLVM::LLVMPointerType::get(ctx, 3); });
  // Transaction barriers: the shared-memory address of the first.
  addConversion([ctx](kgpu::MBarriersType) -> Type { return LLVM::LLVMPointerType::get(ctx, 3); });
  // A tensor map parameter is passed by value (.param .align 64 .b8 [128], see
  // ConvertKilnToLLVM.cpp); the kernel sees the generic address of its bytes.
  addConversion([ctx](TensorMapType) -> Type { return LLVM::LLVMPointerType::get(ctx); });
  // fp8 is bits to LLVM (-kiln-expand-fp8 left only loads, stores, constants, bitcasts and
  // wgmma operands).
  addConversion([ctx](Float8E4M3FNType) -> Type { return IntegerType::get(ctx, 8); });
  addConversion([ctx](Float8E5M2Type) -> Type { return IntegerType::get(ctx, 8); });
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

ThreadIds kiln::emitThreadIds(OpBuilder &b, Location loc, kgpu::BlockedEncodingAttr root,
                              const TargetInfo &target) {
  // Split the thread id into lane and warp, then each over the dims fastest-first.
  Value tid = target.getThreadId(b, loc);
  Value warpSize = i32Const(b, loc, kgpu::kWarpSize);
  Value lane = LLVM::URemOp::create(b, loc, tid, warpSize);
  Value warp = LLVM::UDivOp::create(b, loc, tid, warpSize);
  ThreadIds ids;
  ids.lane.resize(root.getRank());
  ids.warp.resize(root.getRank());
  for (unsigned d : root.getOrder()) {
    Value tpw = i32Const(b, loc, root.getThreadsPerWarp()[d]);
    Value wpc = i32Const(b, loc, root.getWarpsPerCTA()[d]);
    ids.lane[d] = LLVM::URemOp::create(b, loc, lane, tpw);
    lane = LLVM::UDivOp::create(b, loc, lane, tpw);
    ids.warp[d] = LLVM::URemOp::create(b, loc, warp, wpc);
    warp = LLVM::UDivOp::create(b, loc, warp, wpc);
  }
  return ids;
}

Value kiln::emitInlineAsm(OpBuilder &b, Location loc, Type resultType, ValueRange args,
                          StringRef asmStr, StringRef constraints, bool sideEffects) {
  auto op =
      LLVM::InlineAsmOp::create(b, loc, resultType, args, asmStr, constraints, sideEffects,
                                /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
                                LLVM::AsmDialectAttr(), ArrayAttr());
  return op.getNumResults() ? op.getResult(0) : Value();
}

Value kiln::emitEntryUniformWarpId(OpBuilder &b, Location loc, Attribute kind,
                                   llvm::function_ref<Value(OpBuilder &)> makeWarpId) {
  constexpr llvm::StringLiteral kMark = "kiln_gpu.uniform_warp_id";
  auto func = b.getInsertionBlock()->getParent()->getParentOfType<FunctionOpInterface>();
  Block &entry = func.getFunctionBody().front();
  for (Operation &op : entry)
    if (op.getAttr(kMark) == kind)
      return op.getResult(0);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&entry);
  Value warp = emitInlineAsm(b, loc, b.getI32Type(), makeWarpId(b),
                             "shfl.sync.idx.b32 $0, $1, 0, 31, -1;", "=r,r", /*sideEffects=*/false);
  warp.getDefiningOp()->setAttr(kMark, kind);
  return warp;
}

Value kiln::getSharedBuffer(OpBuilder &b, Location loc, Operation *op, Type elemType,
                            unsigned count, StringRef name, unsigned alignment) {
  auto module = op->getParentOfType<ModuleOp>();
  auto arrayType = LLVM::LLVMArrayType::get(elemType, count);
  auto global = module.lookupSymbol<LLVM::GlobalOp>(name);
  if (!global) {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    // Shared memory is address space 3 in NVPTX; no initializer (PTX .shared has none).
    global =
        LLVM::GlobalOp::create(b, loc, arrayType, /*isConstant=*/false, LLVM::Linkage::Internal,
                               name, Attribute(), alignment, /*addrSpace=*/3);
  }
  return LLVM::AddressOfOp::create(b, loc, global);
}

Value kiln::getSharedPoolBuffer(OpBuilder &b, Location loc, Operation *op, Type elemType,
                                unsigned count, StringRef name, unsigned alignment) {
  auto module = op->getParentOfType<ModuleOp>();
  if (auto global = module.lookupSymbol<LLVM::GlobalOp>(name)) {
    auto array = cast<LLVM::LLVMArrayType>(global.getGlobalType());
    if (array.getNumElements() < count)
      global.setGlobalType(LLVM::LLVMArrayType::get(elemType, count));
    return LLVM::AddressOfOp::create(b, loc, global);
  }
  return getSharedBuffer(b, loc, op, elemType, count, name, alignment);
}

std::string kiln::getElemPosKey(const kgpu::ElemPos &pos, int skipDim) {
  std::string key;
  for (unsigned d = 0; d < pos.rep.size(); ++d)
    if (int(d) != skipDim)
      key += std::to_string(pos.rep[d]) + "," + std::to_string(pos.elem[d]) + ";";
  return key;
}

Value kiln::emitOwnerPredicate(OpBuilder &b, Location loc, RankedTensorType type,
                               const TargetInfo &target) {
  Attribute layout = type.getEncoding();
  kgpu::BlockedEncodingAttr root = kgpu::getRootBlocked(layout);
  SmallVector<unsigned> kept = kgpu::getKeptDims(layout);
  ArrayRef<int64_t> shape = type.getShape();
  // Which dims replicate: a kept dim whose layout tile exceeds the shape (threads past the
  // shape wrap around), and every sliced dim spread over lanes or warps.
  SmallVector<std::pair<unsigned, int64_t>> checks; // (root dim, bound on the thread's base)
  for (unsigned d = 0; d < root.getRank(); ++d) {
    unsigned spt = root.getSizePerThread()[d], tpw = root.getThreadsPerWarp()[d],
             wpc = root.getWarpsPerCTA()[d];
    auto it = llvm::find(kept, d);
    if (it == kept.end()) {
      if (tpw * wpc > 1)
        checks.push_back({d, 1}); // only the first thread along a sliced dim
    } else if (int64_t(spt) * tpw * wpc > shape[it - kept.begin()]) {
      checks.push_back({d, shape[it - kept.begin()]});
    }
  }
  if (checks.empty())
    return Value();
  ThreadIds ids = emitThreadIds(b, loc, root, target);
  Value pred;
  for (auto [d, bound] : checks) {
    bool sliced = llvm::find(kept, d) == kept.end();
    unsigned spt = sliced ? 1 : root.getSizePerThread()[d];
    Value t = LLVM::AddOp::create(
        b, loc,
        LLVM::MulOp::create(b, loc, ids.warp[d], i32Const(b, loc, root.getThreadsPerWarp()[d])),
        ids.lane[d]);
    Value base = LLVM::MulOp::create(b, loc, t, i32Const(b, loc, spt));
    Value c = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ult, base, i32Const(b, loc, bound));
    pred = pred ? Value(LLVM::AndOp::create(b, loc, pred, c)) : c;
  }
  return pred;
}

std::optional<SmallVector<SmallVector<int64_t, 4>>>
kiln::getElementCoordinateSteps(RankedTensorType type) {
  Attribute layout = type.getEncoding();
  kgpu::BlockedEncodingAttr root = kgpu::getRootBlocked(layout);
  if (!root || root.getWgmma())
    return std::nullopt;
  SmallVector<unsigned> kept = kgpu::getKeptDims(layout);
  SmallVector<int64_t> tile;
  for (unsigned d : kept) {
    tile.push_back(int64_t(root.getSizePerThread()[d]) * root.getThreadsPerWarp()[d] *
                   root.getWarpsPerCTA()[d]);
    if (tile.back() > type.getDimSize(d))
      return std::nullopt;
  }
  SmallVector<SmallVector<int64_t, 4>> steps;
  for (const kgpu::ElemPos &pos : kgpu::getThreadElements(layout, type.getShape())) {
    SmallVector<int64_t, 4> c;
    for (unsigned i = 0; i < kept.size(); ++i)
      c.push_back(int64_t(pos.rep[i]) * tile[i] + pos.elem[i]);
    steps.push_back(std::move(c));
  }
  return steps;
}

SmallVector<SmallVector<Value, 4>> kiln::emitElementCoordinates(OpBuilder &b, Location loc,
                                                                RankedTensorType type,
                                                                const TargetInfo &target) {
  Attribute layout = type.getEncoding();
  kgpu::BlockedEncodingAttr root = kgpu::getRootBlocked(layout);
  SmallVector<unsigned> kept = kgpu::getKeptDims(layout);
  ArrayRef<int64_t> shape = type.getShape();

  ThreadIds ids = emitThreadIds(b, loc, root, target);
  ArrayRef<Value> laneIdx = ids.lane, warpIdx = ids.warp;
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
  // The wgmma accumulator layout moves the rows of an extent of 16W or more (its own
  // tiles'; a smaller one keeps the blocked rows).
  unsigned wgmmaWarps = root.getWarpsPerCTA()[0];
  bool permuteRows = false;
  if (root.getWgmma() && !kept.empty() && kept[0] == 0)
    permuteRows = shape[0] % (16 * int64_t(wgmmaWarps)) == 0;
  SmallVector<SmallVector<Value, 4>> coords;
  for (const kgpu::ElemPos &pos : kgpu::getThreadElements(layout, shape)) {
    SmallVector<Value, 4> c;
    for (unsigned i = 0; i < kept.size(); ++i) {
      unsigned d = kept[i];
      int64_t offset = int64_t(pos.rep[i]) * tile[i] + pos.elem[i];
      Value v = LLVM::AddOp::create(b, loc, base[i], i32Const(b, loc, offset));
      // A tile narrower than the layout wraps around (replicated ownership); shapes are
      // powers of two so the modulo is a mask.
      if (tile[i] > shape[i])
        v = LLVM::AndOp::create(b, loc, v, i32Const(b, loc, shape[i] - 1));
      else if (d == 0 && permuteRows)
        v = emitWgmmaAccumulatorRow(b, loc, v, wgmmaWarps);
      c.push_back(v);
    }
    coords.push_back(std::move(c));
  }
  return coords;
}
