//===- MemoryOpToHost.cpp - Loads, stores, atomics, print, assert, host ----===//
//
// This file lowers kiln's memory and debugging ops for the host backend.
// - Loads and stores of tiles split the tile into runs the axis analysis proves contiguous
//   (along the last dimension) and use one llvm.intr.masked.load/store per run; without such
//   runs, a masked gather/scatter. Masked-out lanes never touch memory; a load gives `other`
//   there (zero without it). Scalars branch on their mask.
// - Atomics run lane by lane in an scf.for, each unmasked lane one llvm.atomicrmw/cmpxchg,
//   sequentially consistent with the requested ordering.
// - Every access is checked against the launch's buffers: in debug mode each lane, through the
//   runtime's check, which masks off (and reports) lanes outside them; otherwise the span of
//   its unmasked lanes, with one call, and the lanes only where that span leaves every single
//   buffer (stray stores then never land on the heap).
//   Accesses through addresses the kernel computed from integers or read from memory
//   (kUncheckedAccessAttr) are not checked: no buffer holds them.
// - kiln.print and kiln.assert call the runtime through the context's function table.
// - kiln.barrier (tl.debug_barrier) is nothing: one thread runs a program.
// Booleans live in memory as bytes, as in Triton.
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/Common.h"
#include "kiln/Conversion/KilnToHost.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

using namespace mlir;
using namespace kiln;
using namespace kiln::host;

namespace {

Type i8Ty(OpBuilder &b) { return b.getI8Type(); }

/// The type an element has in memory: i1 is stored as i8.
Type memoryType(Type elem) {
  if (elem.isInteger(1))
    return IntegerType::get(elem.getContext(), 8);
  return elem;
}

/// `type` (a converted tile or a scalar) with elements of type `elem`.
Type withElement(Type type, Type elem) {
  if (isTile(type))
    return getTileType(getNumElements(type), elem);
  return elem;
}

/// Applies `fn` to every chunk of `tile` (or to the scalar) and packs the results as `type`.
Value mapChunks(OpBuilder &b, Location loc, Value tile, Type type,
                function_ref<Value(Value, Type)> fn) {
  if (!isTile(tile.getType()))
    return fn(tile, type);
  Type chunkTy = VectorType::get({getChunkWidth(getNumElements(type))}, getTileElementType(type));
  SmallVector<Value> out;
  for (Value c : unpack(b, loc, tile))
    out.push_back(fn(c, chunkTy));
  return pack(b, loc, type, out);
}

Value zext(OpBuilder &b, Location loc, Value v, Type elem) {
  return mapChunks(b, loc, v, withElement(v.getType(), elem),
                   [&](Value c, Type t) -> Value { return LLVM::ZExtOp::create(b, loc, t, c); });
}
Value trunc(OpBuilder &b, Location loc, Value v, Type elem) {
  return mapChunks(b, loc, v, withElement(v.getType(), elem),
                   [&](Value c, Type t) -> Value { return LLVM::TruncOp::create(b, loc, t, c); });
}

unsigned byteSize(Type t) {
  if (isa<LLVM::LLVMPointerType>(t))
    return 8;
  return std::max(1u, t.getIntOrFloatBitWidth() / 8);
}

Value zeroOf(OpBuilder &b, Location loc, Type type) { return LLVM::ZeroOp::create(b, loc, type); }

/// An all-true mask tile of `n` elements.
Value allTrue(OpBuilder &b, Location loc, int64_t n) {
  auto chunkTy = VectorType::get({getChunkWidth(n)}, b.getI1Type());
  Value c = arith::ConstantOp::create(b, loc, chunkTy, DenseElementsAttr::get(chunkTy, true));
  return pack(b, loc, getTileType(n, b.getI1Type()),
              SmallVector<Value>(n / chunkTy.getNumElements(), c));
}

/// An alloca of `type` in the entry block of the enclosing function.
Value entryAlloca(OpBuilder &b, Location loc, Operation *at, Type type) {
  OpBuilder::InsertionGuard guard(b);
  auto func = at->getParentOfType<FunctionOpInterface>();
  b.setInsertionPointToStart(&func.getFunctionBody().front());
  Value one = LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(1));
  return LLVM::AllocaOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()), type, one,
                                /*alignment=*/64);
}

Value i32Val(OpBuilder &b, Location loc, int64_t v) {
  return LLVM::ConstantOp::create(b, loc, b.getI32Type(), b.getI32IntegerAttr(v));
}
Value i64Val(OpBuilder &b, Location loc, int64_t v) {
  return LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(v));
}

/// Debug mode: asks the runtime to check the unmasked lanes of `ptrs`; returns the mask with
/// the lanes outside every buffer cleared. `mask` may be null (all lanes) for scalars.
Value checkAccess(OpBuilder &b, Location loc, Operation *op, Value ptrs, Value mask,
                  unsigned elemBytes, bool isStore) {
  bool tile = isTile(ptrs.getType());
  int64_t n = getNumElements(ptrs.getType());
  Type maskMemTy = withElement(ptrs.getType(), i8Ty(b));
  Value ptrBuf = entryAlloca(b, loc, op, ptrs.getType());
  Value maskBuf = entryAlloca(b, loc, op, maskMemTy);
  LLVM::StoreOp::create(b, loc, ptrs, ptrBuf);
  Value m = mask ? mask
                 : (tile ? allTrue(b, loc, n)
                         : LLVM::ConstantOp::create(b, loc, b.getI1Type(), b.getBoolAttr(true))
                               .getResult());
  LLVM::StoreOp::create(b, loc, zext(b, loc, m, i8Ty(b)), maskBuf);
  callRuntime(b, loc, op, kCheckAccess,
              {getExtraArg(op, kPidX), getExtraArg(op, kPidY), getExtraArg(op, kPidZ),
               getStringPtr(b, loc, op, formatSite(loc)), ptrBuf, maskBuf, i64Val(b, loc, n),
               i64Val(b, loc, elemBytes), i32Val(b, loc, isStore)});
  Value checked = LLVM::LoadOp::create(b, loc, maskMemTy, maskBuf);
  return trunc(b, loc, checked, b.getI1Type());
}

/// The span [begin, end) of the bytes the unmasked lanes of `ptrs` touch (`mask` may be null
/// for a scalar): begin >= end when no lane is unmasked. With `contiguous` (the axis analysis
/// proved every lane one element past the one before), the span of all lanes instead: its
/// first and last address, two extracts where the masked reductions cost a few instructions
/// per lane; a masked-off lane past an array then only sends the access to the per-lane check.
std::pair<Value, Value> activeSpan(OpBuilder &b, Location loc, Value ptrs, Value mask,
                                   unsigned elemBytes, bool contiguous) {
  Type i64 = b.getI64Type();
  auto constant = [&](Type type, uint64_t v) -> Value {
    if (auto vec = dyn_cast<VectorType>(type))
      return arith::ConstantOp::create(
          b, loc, vec, DenseElementsAttr::get(vec, b.getIntegerAttr(i64, APInt(64, v))));
    return LLVM::ConstantOp::create(b, loc, i64, b.getIntegerAttr(i64, APInt(64, v)));
  };
  Value lo, hi;
  if (contiguous && isTile(ptrs.getType())) {
    SmallVector<Value> chunks = unpack(b, loc, ptrs);
    int64_t width = cast<VectorType>(chunks.back().getType()).getNumElements();
    lo = LLVM::PtrToIntOp::create(
        b, loc, i64, LLVM::ExtractElementOp::create(b, loc, chunks.front(), i32Val(b, loc, 0)));
    hi = LLVM::PtrToIntOp::create(
        b, loc, i64,
        LLVM::ExtractElementOp::create(b, loc, chunks.back(), i32Val(b, loc, width - 1)));
  } else if (!isTile(ptrs.getType())) {
    Value p = LLVM::PtrToIntOp::create(b, loc, i64, ptrs);
    lo = mask ? LLVM::SelectOp::create(b, loc, mask, p, constant(i64, UINT64_MAX)) : p;
    hi = mask ? LLVM::SelectOp::create(b, loc, mask, p, constant(i64, 0)) : p;
  } else {
    SmallVector<Value> maskChunks = unpack(b, loc, mask);
    for (auto [c, chunk] : llvm::enumerate(unpack(b, loc, ptrs))) {
      auto vecTy = VectorType::get({cast<VectorType>(chunk.getType()).getNumElements()}, i64);
      Value ints = LLVM::PtrToIntOp::create(b, loc, vecTy, chunk);
      Value l = LLVM::vector_reduce_umin::create(
          b, loc, i64,
          LLVM::SelectOp::create(b, loc, maskChunks[c], ints, constant(vecTy, UINT64_MAX)));
      Value h = LLVM::vector_reduce_umax::create(
          b, loc, i64, LLVM::SelectOp::create(b, loc, maskChunks[c], ints, constant(vecTy, 0)));
      lo = lo ? LLVM::UMinOp::create(b, loc, lo, l).getResult() : l;
      hi = hi ? LLVM::UMaxOp::create(b, loc, hi, h).getResult() : h;
    }
  }
  Value end = LLVM::AddOp::create(b, loc, hi, constant(i64, elemBytes));
  return {lo, end};
}

/// Every access checks its addresses against the launch's buffers: in debug mode each lane
/// (checkAccess); otherwise the span of its unmasked lanes, with one call, and the lanes only
/// where the span leaves every single buffer: a stray store then never lands in memory that
/// is not the kernel's (on the heap it would corrupt a neighbouring allocation silently).
/// Returns the mask with the stray lanes cleared (the launch then fails naming the line).
Value boundsCheck(OpBuilder &b, Location loc, Operation *op, Value ptrs, Value mask,
                  unsigned elemBytes, bool isStore, bool debug, bool contiguous = false) {
  if (op->hasAttr(kUncheckedAccessAttr)) // an address computed by the kernel: bounds unknown
    return mask ? mask : LLVM::ConstantOp::create(b, loc, b.getI1Type(), b.getBoolAttr(true));
  if (debug)
    return checkAccess(b, loc, op, ptrs, mask, elemBytes, isStore);
  auto [begin, end] = activeSpan(b, loc, ptrs, mask, elemBytes, contiguous);
  Value inside = callRuntime(b, loc, op, kCheckRange, {begin, end}, b.getI32Type());
  Value ok = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, inside, i32Val(b, loc, 0));
  auto ifOp = scf::IfOp::create(
      b, loc, ok,
      [&](OpBuilder &tb, Location l) {
        Value m =
            mask
                ? mask
                : LLVM::ConstantOp::create(tb, l, tb.getI1Type(), tb.getBoolAttr(true)).getResult();
        scf::YieldOp::create(tb, l, m);
      },
      [&](OpBuilder &eb, Location l) {
        scf::YieldOp::create(eb, l, checkAccess(eb, l, op, ptrs, mask, elemBytes, isStore));
      });
  return ifOp.getResult(0);
}

/// Lanes [start, start + n) of `v`.
Value slice(OpBuilder &b, Location loc, Value v, int64_t start, int64_t n) {
  SmallVector<int32_t> idx;
  for (int64_t i = 0; i < n; ++i)
    idx.push_back(int32_t(start + i));
  return shuffle(b, loc, v, idx);
}

/// The concatenation of equally sized vectors (a power-of-two count).
Value concat(OpBuilder &b, Location loc, SmallVector<Value> parts) {
  while (parts.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i < parts.size(); i += 2) {
      int64_t n = cast<VectorType>(parts[i].getType()).getNumElements();
      SmallVector<int32_t> idx;
      for (int64_t j = 0; j < 2 * n; ++j)
        idx.push_back(int32_t(j));
      next.push_back(LLVM::ShuffleVectorOp::create(b, loc, parts[i], parts[i + 1], idx));
    }
    parts = std::move(next);
  }
  return parts.front();
}

/// Elements of the last dimension that form contiguous runs in memory (1: none proven).
int64_t contiguousRun(const AxisInfoAnalysis &axis, Value ptr) {
  auto type = dyn_cast<RankedTensorType>(ptr.getType());
  if (!type)
    return 1;
  unsigned last = type.getRank() - 1;
  const AxisInfo &info = axis.get(ptr);
  if (info.getRank() != type.getRank())
    return 1;
  int64_t run = std::min<int64_t>(info.contiguity[last], type.getDimSize(last));
  return run >= 2 && type.getDimSize(last) % run == 0 ? run : 1;
}

/// True when the tile of pointers `ptr` is one contiguous run: rank 1 and a run (the axis
/// analysis's contiguity) as long as the tile.
bool wholeTileContiguous(Value ptr, int64_t run) {
  auto type = dyn_cast<RankedTensorType>(ptr.getType());
  return type && type.getRank() == 1 && run == type.getDimSize(0);
}

/// Chunk `c` of a masked access of a tile whose pointers are `ptrs` (one chunk): whole
/// contiguous runs of `run` elements use one masked load (or store) from their first address.
struct ChunkAccess {
  Value ptrs, mask;
  int64_t width, run;
};

Value loadChunk(OpBuilder &b, Location loc, const ChunkAccess &a, Value other, Type elem,
                unsigned align) {
  auto type = VectorType::get({a.width}, elem);
  if (a.run < 2)
    return LLVM::masked_gather::create(b, loc, type, a.ptrs, a.mask, ValueRange{other}, align);
  int64_t run = std::min(a.run, a.width);
  auto runTy = VectorType::get({run}, elem);
  SmallVector<Value> parts;
  for (int64_t start = 0; start < a.width; start += run) {
    Value base = LLVM::ExtractElementOp::create(b, loc, a.ptrs, i32Val(b, loc, start));
    parts.push_back(LLVM::MaskedLoadOp::create(b, loc, runTy, base,
                                               slice(b, loc, a.mask, start, run),
                                               slice(b, loc, other, start, run), align));
  }
  return concat(b, loc, parts);
}

void storeChunk(OpBuilder &b, Location loc, const ChunkAccess &a, Value value, unsigned align) {
  if (a.run < 2) {
    LLVM::masked_scatter::create(b, loc, value, a.ptrs, a.mask, align);
    return;
  }
  int64_t run = std::min(a.run, a.width);
  for (int64_t start = 0; start < a.width; start += run) {
    Value base = LLVM::ExtractElementOp::create(b, loc, a.ptrs, i32Val(b, loc, start));
    LLVM::MaskedStoreOp::create(b, loc, slice(b, loc, value, start, run), base,
                                slice(b, loc, a.mask, start, run), align);
  }
}

//===----------------------------------------------------------------------===//
// Large tiles (buffers; see LargeTileToHost.cpp)
//===----------------------------------------------------------------------===//

/// Element `i` (an i32) of a buffer of `memElem`.
Value loadElement(OpBuilder &b, Location loc, Value buf, Type memElem, Value i) {
  Value p = LLVM::GEPOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext()), memElem, buf,
                                ValueRange{i});
  return LLVM::LoadOp::create(b, loc, memElem, p, byteSize(memElem));
}

/// A mask buffer of `n` lanes, all set.
Value allTrueBuffer(OpBuilder &b, Location loc, Operation *op, int64_t n) {
  Value buf = allocTileBuffer(b, loc, op, n, b.getI1Type());
  auto chunkTy = VectorType::get({kChunk}, b.getI1Type());
  Value ones = arith::ConstantOp::create(b, loc, chunkTy, DenseElementsAttr::get(chunkTy, true));
  forEachChunk(b, loc, n,
               [&](OpBuilder &lb, Location l, Value c) { storeTileChunk(lb, l, buf, c, ones); });
  return buf;
}

/// boundsCheck for a large tile: `ptrs` and `mask` are buffers (the mask one byte a lane, as the
/// runtime's check takes it); returns the buffer of the checked mask (a copy where lanes may
/// be cleared: the mask may be used by other accesses).
Value largeBoundsCheck(OpBuilder &b, Location loc, Operation *op, Value ptrs, Value mask, int64_t n,
                       unsigned elemBytes, bool isStore, bool debug, bool contiguous) {
  if (op->hasAttr(kUncheckedAccessAttr))
    return mask;
  auto ptrTy = LLVM::LLVMPointerType::get(b.getContext());
  auto check = [&](OpBuilder &cb, Location l) -> Value {
    Value copy = allocTileBuffer(cb, l, op, n, cb.getI1Type());
    LLVM::MemcpyOp::create(cb, l, copy, mask, i64Val(cb, l, n), /*isVolatile=*/false);
    callRuntime(cb, l, op, kCheckAccess,
                {getExtraArg(op, kPidX), getExtraArg(op, kPidY), getExtraArg(op, kPidZ),
                 getStringPtr(cb, l, op, formatSite(loc)), ptrs, copy, i64Val(cb, l, n),
                 i64Val(cb, l, elemBytes), i32Val(cb, l, isStore)});
    return copy;
  };
  if (debug)
    return check(b, loc);
  Type i64 = b.getI64Type();
  Value lo, hi;
  if (contiguous) {
    lo = LLVM::PtrToIntOp::create(b, loc, i64, loadElement(b, loc, ptrs, ptrTy, i32Val(b, loc, 0)));
    hi = LLVM::PtrToIntOp::create(b, loc, i64,
                                  loadElement(b, loc, ptrs, ptrTy, i32Val(b, loc, n - 1)));
  } else {
    // The lowest and highest address of the unmasked lanes, chunk by chunk.
    auto vecTy = VectorType::get({kChunk}, i64);
    auto splatI64 = [&](OpBuilder &vb, Location l, uint64_t v) -> Value {
      return arith::ConstantOp::create(
          vb, l, vecTy, DenseElementsAttr::get(vecTy, vb.getIntegerAttr(i64, APInt(64, v))));
    };
    Value c0 = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
    Value cn = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(n / kChunk)));
    Value c1 = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(1));
    Value lo0 = LLVM::ConstantOp::create(b, loc, i64, b.getIntegerAttr(i64, APInt(64, UINT64_MAX)));
    Value hi0 = LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(0));
    auto loop = scf::ForOp::create(
        b, loc, c0, cn, c1, ValueRange{lo0, hi0},
        [&](OpBuilder &lb, Location l, Value c, ValueRange acc) {
          Value ints = LLVM::PtrToIntOp::create(lb, l, vecTy, loadRawChunk(lb, l, ptrs, ptrTy, c));
          Value m = loadTileChunk(lb, l, mask, lb.getI1Type(), c);
          Value cl = LLVM::vector_reduce_umin::create(
              lb, l, i64, LLVM::SelectOp::create(lb, l, m, ints, splatI64(lb, l, UINT64_MAX)));
          Value ch = LLVM::vector_reduce_umax::create(
              lb, l, i64, LLVM::SelectOp::create(lb, l, m, ints, splatI64(lb, l, 0)));
          scf::YieldOp::create(lb, l,
                               ValueRange{LLVM::UMinOp::create(lb, l, acc[0], cl).getResult(),
                                          LLVM::UMaxOp::create(lb, l, acc[1], ch).getResult()});
        });
    disableUnrolling(loop);
    lo = loop.getResult(0);
    hi = loop.getResult(1);
  }
  Value end = LLVM::AddOp::create(b, loc, hi, i64Val(b, loc, elemBytes));
  Value inside = callRuntime(b, loc, op, kCheckRange, {lo, end}, b.getI32Type());
  Value ok = LLVM::ICmpOp::create(b, loc, LLVM::ICmpPredicate::ne, inside, i32Val(b, loc, 0));
  auto ifOp = scf::IfOp::create(
      b, loc, ok, [&](OpBuilder &tb, Location l) { scf::YieldOp::create(tb, l, mask); },
      [&](OpBuilder &eb, Location l) { scf::YieldOp::create(eb, l, check(eb, l)); });
  return ifOp.getResult(0);
}

/// A load or store of a large tile: one scf.for over chunks, each chunk the register path's
/// masked loads (stores) of contiguous runs or a gather (scatter).
LogicalResult lowerLargeAccess(ConversionPatternRewriter &rewriter, Operation *op, Value origPtr,
                               Value ptrs, Value mask, Value other, Value value, Type elem,
                               const AxisInfoAnalysis &axis, bool debug) {
  Location loc = op->getLoc();
  bool isStore = bool(value);
  int64_t n = cast<RankedTensorType>(origPtr.getType()).getNumElements();
  Type memElem = memoryType(elem);
  unsigned align = byteSize(memElem);
  auto ptrTy = LLVM::LLVMPointerType::get(rewriter.getContext());
  if (!mask)
    mask = allTrueBuffer(rewriter, loc, op, n);
  int64_t run = contiguousRun(axis, origPtr);
  mask = largeBoundsCheck(rewriter, loc, op, ptrs, mask, n, align, isStore, debug,
                          wholeTileContiguous(origPtr, run));
  Value out = isStore ? Value() : allocTileBuffer(rewriter, loc, op, n, elem);
  forEachChunk(rewriter, loc, n, [&](OpBuilder &b, Location l, Value c) {
    ChunkAccess access{loadRawChunk(b, l, ptrs, ptrTy, c),
                       loadTileChunk(b, l, mask, b.getI1Type(), c), kChunk, run};
    if (isStore) {
      storeChunk(b, l, access, loadRawChunk(b, l, value, elem, c), align);
      return;
    }
    Value o = other ? loadRawChunk(b, l, other, elem, c)
                    : zeroOf(b, l, VectorType::get({kChunk}, memElem));
    storeTileChunk(b, l, out, c, loadChunk(b, l, access, o, memElem, align));
  });
  if (isStore)
    rewriter.eraseOp(op);
  else
    rewriter.replaceOp(op, out);
  return success();
}

struct LoadConversion : OpConversionPattern<LoadOp> {
  LoadConversion(TypeConverter &tc, MLIRContext *ctx, const AxisInfoAnalysis &axis,
                 const HostLoweringOptions &options)
      : OpConversionPattern(tc, ctx), axis(axis), options(options) {}

  LogicalResult matchAndRewrite(LoadOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type resTy = getTypeConverter()->convertType(op.getType());
    Type elem = getTileElementType(resTy);
    Type memElem = memoryType(elem);
    Type memTy = withElement(resTy, memElem);
    unsigned align = byteSize(memElem);
    Value ptrs = adaptor.getPtr(), mask = adaptor.getMask(), other = adaptor.getOther();
    if (isLargeTile(op.getType()))
      return lowerLargeAccess(
          rewriter, op, op.getPtr(), ptrs, mask, other, Value(),
          getTypeConverter()->convertType(cast<RankedTensorType>(op.getType()).getElementType()),
          axis, options.debug);
    auto fromMemory = [&](Value v) -> Value {
      return memElem == elem ? v : trunc(rewriter, loc, v, elem);
    };
    Value otherMem = other ? (memElem == elem ? other : zext(rewriter, loc, other, memElem))
                           : zeroOf(rewriter, loc, memTy);

    if (!isTile(resTy)) {
      mask = boundsCheck(rewriter, loc, op, ptrs, mask, align, /*isStore=*/false, options.debug);
      if (!mask) {
        rewriter.replaceOp(op, fromMemory(LLVM::LoadOp::create(rewriter, loc, memElem, ptrs, align,
                                                               op.getIsVolatile())));
        return success();
      }
      auto ifOp = scf::IfOp::create(
          rewriter, loc, mask,
          [&](OpBuilder &b, Location l) {
            Value v = LLVM::LoadOp::create(b, l, memElem, ptrs, align, op.getIsVolatile());
            scf::YieldOp::create(b, l, v);
          },
          [&](OpBuilder &b, Location l) { scf::YieldOp::create(b, l, otherMem); });
      rewriter.replaceOp(op, fromMemory(ifOp.getResult(0)));
      return success();
    }

    int64_t n = getNumElements(resTy);
    if (!mask)
      mask = allTrue(rewriter, loc, n);
    int64_t run = contiguousRun(axis, op.getPtr());
    mask = boundsCheck(rewriter, loc, op, ptrs, mask, align, /*isStore=*/false, options.debug,
                       wholeTileContiguous(op.getPtr(), run));
    SmallVector<Value> ptrChunks = unpack(rewriter, loc, ptrs);
    SmallVector<Value> maskChunks = unpack(rewriter, loc, mask);
    SmallVector<Value> otherChunks = unpack(rewriter, loc, otherMem);
    SmallVector<Value> chunks;
    for (size_t c = 0; c < ptrChunks.size(); ++c)
      chunks.push_back(loadChunk(rewriter, loc,
                                 {ptrChunks[c], maskChunks[c], getChunkWidth(n), run},
                                 otherChunks[c], memElem, align));
    rewriter.replaceOp(op, fromMemory(pack(rewriter, loc, memTy, chunks)));
    return success();
  }

  const AxisInfoAnalysis &axis;
  const HostLoweringOptions &options;
};

struct StoreConversion : OpConversionPattern<StoreOp> {
  StoreConversion(TypeConverter &tc, MLIRContext *ctx, const AxisInfoAnalysis &axis,
                  const HostLoweringOptions &options)
      : OpConversionPattern(tc, ctx), axis(axis), options(options) {}

  LogicalResult matchAndRewrite(StoreOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value ptrs = adaptor.getPtr(), value = adaptor.getValue(), mask = adaptor.getMask();
    if (isLargeTile(op.getValue().getType()))
      return lowerLargeAccess(rewriter, op, op.getPtr(), ptrs, mask, Value(), value,
                              getTypeConverter()->convertType(
                                  cast<RankedTensorType>(op.getValue().getType()).getElementType()),
                              axis, options.debug);
    Type elem = getTileElementType(value.getType());
    Type memElem = memoryType(elem);
    if (memElem != elem)
      value = zext(rewriter, loc, value, memElem);
    unsigned align = byteSize(memElem);

    if (!isTile(value.getType())) {
      mask = boundsCheck(rewriter, loc, op, ptrs, mask, align, /*isStore=*/true, options.debug);
      if (!mask) {
        LLVM::StoreOp::create(rewriter, loc, value, ptrs, align);
      } else {
        scf::IfOp::create(rewriter, loc, mask, [&](OpBuilder &b, Location l) {
          LLVM::StoreOp::create(b, l, value, ptrs, align);
          scf::YieldOp::create(b, l);
        });
      }
      rewriter.eraseOp(op);
      return success();
    }

    int64_t n = getNumElements(value.getType());
    if (!mask)
      mask = allTrue(rewriter, loc, n);
    int64_t run = contiguousRun(axis, op.getPtr());
    mask = boundsCheck(rewriter, loc, op, ptrs, mask, align, /*isStore=*/true, options.debug,
                       wholeTileContiguous(op.getPtr(), run));
    SmallVector<Value> ptrChunks = unpack(rewriter, loc, ptrs);
    SmallVector<Value> maskChunks = unpack(rewriter, loc, mask);
    SmallVector<Value> valueChunks = unpack(rewriter, loc, value);
    for (size_t c = 0; c < ptrChunks.size(); ++c)
      storeChunk(rewriter, loc, {ptrChunks[c], maskChunks[c], getChunkWidth(n), run},
                 valueChunks[c], align);
    rewriter.eraseOp(op);
    return success();
  }

  const AxisInfoAnalysis &axis;
  const HostLoweringOptions &options;
};

LLVM::AtomicOrdering toOrdering(MemSemantic sem) {
  switch (sem) {
  case MemSemantic::relaxed:
    return LLVM::AtomicOrdering::monotonic;
  case MemSemantic::acquire:
    return LLVM::AtomicOrdering::acquire;
  case MemSemantic::release:
    return LLVM::AtomicOrdering::release;
  case MemSemantic::acq_rel:
    return LLVM::AtomicOrdering::acq_rel;
  }
  return LLVM::AtomicOrdering::acq_rel;
}

LLVM::AtomicOrdering failureOrdering(MemSemantic sem) {
  switch (sem) {
  case MemSemantic::relaxed:
  case MemSemantic::release:
    return LLVM::AtomicOrdering::monotonic;
  default:
    return LLVM::AtomicOrdering::acquire;
  }
}

/// Runs `perLane(b, ptr, operands...)` for every lane whose mask is set, in order, and
/// returns the tile of its results (zero for masked-out lanes): one scf.for over the lanes of
/// each chunk (a large tile of `largeLanes` lanes: over all lanes, the buffer of the results
/// allocated for `at`). Scalars: one guarded call.
Value forEachLane(OpBuilder &b, Location loc, Operation *at, int64_t largeLanes, Type resTy,
                  Value ptrs, Value mask, ArrayRef<Value> operands,
                  function_ref<Value(OpBuilder &, Location, Value, ArrayRef<Value>)> perLane) {
  Type elem = getTileElementType(resTy);
  auto guarded = [&](OpBuilder &ob, Location l, Value m, Value ptr, ArrayRef<Value> ops) {
    if (!m)
      return perLane(ob, l, ptr, ops);
    auto ifOp = scf::IfOp::create(
        ob, l, m,
        [&](OpBuilder &ib, Location il) {
          scf::YieldOp::create(ib, il, perLane(ib, il, ptr, ops));
        },
        [&](OpBuilder &ib, Location il) { scf::YieldOp::create(ib, il, zeroOf(ib, il, elem)); });
    return ifOp.getResult(0);
  };
  if (isa<LLVM::LLVMPointerType>(resTy)) {
    // A large tile (buffers): one scf.for over all its lanes.
    int64_t n = largeLanes;
    elem = getElementTypeOrSelf(at->getResult(0).getType()); // an integer or float type
    auto ptrTy = LLVM::LLVMPointerType::get(b.getContext());
    Value out = allocTileBuffer(b, loc, at, n, elem);
    Value lb = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
    Value ub = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(n)));
    Value step = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(1));
    auto loop = scf::ForOp::create(
        b, loc, lb, ub, step, ValueRange{}, [&](OpBuilder &ib, Location l, Value i, ValueRange) {
          Value m =
              LLVM::TruncOp::create(ib, l, ib.getI1Type(), loadElement(ib, l, mask, i8Ty(ib), i));
          SmallVector<Value> ops;
          for (Value o : operands)
            ops.push_back(loadElement(ib, l, o, elem, i));
          Value r = guarded(ib, l, m, loadElement(ib, l, ptrs, ptrTy, i), ops);
          Value p = LLVM::GEPOp::create(ib, l, ptrTy, elem, out, ValueRange{i});
          LLVM::StoreOp::create(ib, l, r, p, byteSize(elem));
          scf::YieldOp::create(ib, l);
        });
    disableUnrolling(loop);
    return out;
  }
  if (!isTile(resTy))
    return guarded(b, loc, mask, ptrs, operands);
  int64_t width = getChunkWidth(getNumElements(resTy));
  auto chunkTy = VectorType::get({width}, elem);
  SmallVector<Value> ptrChunks = unpack(b, loc, ptrs);
  SmallVector<Value> maskChunks = mask ? unpack(b, loc, mask) : SmallVector<Value>();
  SmallVector<SmallVector<Value>> operandChunks;
  for (Value o : operands)
    operandChunks.push_back(unpack(b, loc, o));
  SmallVector<Value> results;
  for (size_t c = 0; c < ptrChunks.size(); ++c) {
    Value lb = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(0));
    Value ub = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(width));
    Value step = arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(1));
    auto loop = scf::ForOp::create(
        b, loc, lb, ub, step, ValueRange{zeroOf(b, loc, chunkTy)},
        [&](OpBuilder &lb_, Location l, Value i, ValueRange iters) {
          Value m =
              mask ? LLVM::ExtractElementOp::create(lb_, l, maskChunks[c], i).getResult() : Value();
          Value ptr = LLVM::ExtractElementOp::create(lb_, l, ptrChunks[c], i);
          SmallVector<Value> ops;
          for (auto &chunks : operandChunks)
            ops.push_back(LLVM::ExtractElementOp::create(lb_, l, chunks[c], i));
          Value r = guarded(lb_, l, m, ptr, ops);
          scf::YieldOp::create(lb_, l,
                               LLVM::InsertElementOp::create(lb_, l, iters[0], r, i).getResult());
        });
    results.push_back(loop.getResult(0));
  }
  return pack(b, loc, resTy, results);
}

/// The converted result type, the lanes of a large tile (0: a register tile or a scalar), the
/// element type and the mask of an atomic op: `mask` (null: every lane), each lane's address
/// checked by the fault guard (an access outside every buffer is reported and skipped).
struct AtomicLanes {
  Type resTy;
  int64_t n;
  Type elem;
  Value mask;
};
AtomicLanes atomicLanes(ConversionPatternRewriter &rewriter, const TypeConverter &converter,
                        Operation *op, Value ptr, Value mask, bool debug) {
  Location loc = op->getLoc();
  Type type = op->getResult(0).getType();
  Type resTy = converter.convertType(type);
  bool large = isLargeTile(type);
  int64_t n = large ? cast<RankedTensorType>(type).getNumElements() : 0;
  Type elem = large ? converter.convertType(cast<RankedTensorType>(type).getElementType())
                    : getTileElementType(resTy);
  if (!mask && large)
    mask = allTrueBuffer(rewriter, loc, op, n);
  if (!mask && isTile(resTy))
    mask = allTrue(rewriter, loc, getNumElements(resTy));
  mask = large
             ? largeBoundsCheck(rewriter, loc, op, ptr, mask, n, byteSize(elem), true, debug, false)
             : boundsCheck(rewriter, loc, op, ptr, mask, byteSize(elem), true, debug);
  return {resTy, n, elem, mask};
}

struct AtomicRMWConversion : OpConversionPattern<AtomicRMWOp> {
  AtomicRMWConversion(TypeConverter &tc, MLIRContext *ctx, const HostLoweringOptions &options)
      : OpConversionPattern(tc, ctx), options(options) {}
  LogicalResult matchAndRewrite(AtomicRMWOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    AtomicLanes lanes = atomicLanes(rewriter, *getTypeConverter(), op, adaptor.getPtr(),
                                    adaptor.getMask(), options.debug);
    Type resTy = lanes.resTy, elem = lanes.elem;
    int64_t n = lanes.n;
    Value mask = lanes.mask;
    LLVM::AtomicBinOp bin = getLLVMAtomicBinOp(op.getKind(), elem);
    LLVM::AtomicOrdering ordering = toOrdering(op.getSem());
    Value r = forEachLane(
        rewriter, loc, op, n, resTy, adaptor.getPtr(), mask, {adaptor.getVal()},
        [&](OpBuilder &b, Location l, Value ptr, ArrayRef<Value> ops) {
          return LLVM::AtomicRMWOp::create(b, l, bin, ptr, ops[0], ordering).getResult();
        });
    rewriter.replaceOp(op, r);
    return success();
  }
  const HostLoweringOptions &options;
};

struct AtomicCASConversion : OpConversionPattern<AtomicCASOp> {
  AtomicCASConversion(TypeConverter &tc, MLIRContext *ctx, const HostLoweringOptions &options)
      : OpConversionPattern(tc, ctx), options(options) {}
  LogicalResult matchAndRewrite(AtomicCASOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    AtomicLanes lanes =
        atomicLanes(rewriter, *getTypeConverter(), op, adaptor.getPtr(), Value(), options.debug);
    Type resTy = lanes.resTy, elem = lanes.elem;
    int64_t n = lanes.n;
    Value mask = lanes.mask;
    // cmpxchg takes integers: floats go through their bits.
    Type intElem =
        isa<FloatType>(elem) ? Type(rewriter.getIntegerType(elem.getIntOrFloatBitWidth())) : elem;
    LLVM::AtomicOrdering onSuccess = toOrdering(op.getSem()),
                         onFailure = failureOrdering(op.getSem());
    Value r = forEachLane(
        rewriter, loc, op, n, resTy, adaptor.getPtr(), mask, {adaptor.getCmp(), adaptor.getVal()},
        [&](OpBuilder &b, Location l, Value ptr, ArrayRef<Value> ops) -> Value {
          Value cmp = ops[0], val = ops[1];
          if (intElem != elem) {
            cmp = LLVM::BitcastOp::create(b, l, intElem, cmp);
            val = LLVM::BitcastOp::create(b, l, intElem, val);
          }
          auto x = LLVM::AtomicCmpXchgOp::create(b, l, ptr, cmp, val, onSuccess, onFailure);
          Value old = LLVM::ExtractValueOp::create(b, l, x, 0);
          if (intElem != elem)
            old = LLVM::BitcastOp::create(b, l, elem, old);
          return old;
        });
    rewriter.replaceOp(op, r);
    return success();
  }
  const HostLoweringOptions &options;
};

//===----------------------------------------------------------------------===//
// Debugging
//===----------------------------------------------------------------------===//

int32_t printKind(Type t) {
  if (isa<LLVM::LLVMPointerType>(t))
    return kPrintPtr;
  if (t.isF16())
    return kPrintF16;
  if (t.isBF16())
    return kPrintBF16;
  if (t.isF32())
    return kPrintF32;
  if (t.isF64())
    return kPrintF64;
  switch (t.getIntOrFloatBitWidth()) {
  case 1:
    return kPrintI1;
  case 8:
    return kPrintI8;
  case 16:
    return kPrintI16;
  case 32:
    return kPrintI32;
  default:
    return kPrintI64;
  }
}

struct PrintConversion : OpConversionPattern<PrintOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(PrintOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value prefix = getStringPtr(rewriter, loc, op, op.getPrefix());
    SmallVector<Value> pid{getExtraArg(op, kPidX), getExtraArg(op, kPidY), getExtraArg(op, kPidZ)};
    auto ptrTy = LLVM::LLVMPointerType::get(getContext());
    auto emit = [&](Value data, int32_t kind, int64_t n) {
      callRuntime(rewriter, loc, op, kPrint,
                  {pid[0], pid[1], pid[2], prefix, data, i32Val(rewriter, loc, kind),
                   i64Val(rewriter, loc, n), i32Val(rewriter, loc, op.getHex() ? 1 : 0)});
    };
    if (adaptor.getArgs().empty())
      emit(LLVM::ZeroOp::create(rewriter, loc, ptrTy), kPrintI32, 0);
    for (auto [orig, v] : llvm::zip(op.getArgs(), adaptor.getArgs())) {
      if (isLargeTile(orig.getType())) { // a buffer, booleans as bytes
        auto type = cast<RankedTensorType>(orig.getType());
        emit(v, printKind(getTypeConverter()->convertType(type.getElementType())),
             type.getNumElements());
        continue;
      }
      Type elem = getTileElementType(v.getType());
      int32_t kind = printKind(elem);
      if (elem.isInteger(1))
        v = zext(rewriter, loc, v, i8Ty(rewriter));
      Value buf = entryAlloca(rewriter, loc, op, v.getType());
      LLVM::StoreOp::create(rewriter, loc, v, buf);
      emit(buf, kind, getNumElements(v.getType()));
    }
    rewriter.eraseOp(op);
    return success();
  }
};

struct AssertConversion : OpConversionPattern<AssertOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(AssertOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value cond = adaptor.getCondition();
    if (isLargeTile(op.getCondition().getType())) {
      int64_t n = cast<RankedTensorType>(op.getCondition().getType()).getNumElements();
      Value c0 = arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(0));
      Value cn = arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(n / kChunk));
      Value c1 = arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(1));
      Value all =
          LLVM::ConstantOp::create(rewriter, loc, rewriter.getI1Type(), rewriter.getBoolAttr(true));
      Value buf = cond;
      auto loop = scf::ForOp::create(
          rewriter, loc, c0, cn, c1, ValueRange{all},
          [&](OpBuilder &b, Location l, Value c, ValueRange acc) {
            Value r = LLVM::vector_reduce_and::create(b, l, b.getI1Type(),
                                                      loadTileChunk(b, l, buf, b.getI1Type(), c));
            scf::YieldOp::create(b, l, LLVM::AndOp::create(b, l, acc[0], r).getResult());
          });
      disableUnrolling(loop);
      cond = loop.getResult(0);
    } else if (isTile(cond.getType())) {
      Value all;
      for (Value c : unpack(rewriter, loc, cond)) {
        Value r = LLVM::vector_reduce_and::create(rewriter, loc, rewriter.getI1Type(), c);
        all = all ? LLVM::AndOp::create(rewriter, loc, all, r).getResult() : r;
      }
      cond = all;
    }
    emitAssertFailure(rewriter, loc, op, cond);
    rewriter.eraseOp(op);
    return success();
  }
};

/// tl.debug_barrier: one thread runs a program on the host, so there is nothing to wait for.
struct BarrierConversion : OpConversionPattern<BarrierOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(BarrierOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void kiln::host::emitAssertFailure(OpBuilder &b, Location loc, AssertOp assertOp, Value holds) {
  Value failed = LLVM::XOrOp::create(
      b, loc, holds, LLVM::ConstantOp::create(b, loc, b.getI1Type(), b.getBoolAttr(true)));
  scf::IfOp::create(b, loc, failed, [&](OpBuilder &tb, Location l) {
    callRuntime(tb, l, assertOp, kAssertFail,
                {getExtraArg(assertOp, kPidX), getExtraArg(assertOp, kPidY),
                 getExtraArg(assertOp, kPidZ), getStringPtr(tb, l, assertOp, assertOp.getMessage()),
                 getStringPtr(tb, l, assertOp, formatSite(assertOp.getLoc()))});
    scf::YieldOp::create(tb, l);
  });
}

void kiln::host::populateMemoryOpToHostPatterns(TypeConverter &converter,
                                                RewritePatternSet &patterns,
                                                const AxisInfoAnalysis &axis,
                                                const HostLoweringOptions &options) {
  MLIRContext *ctx = patterns.getContext();
  patterns.add<LoadConversion, StoreConversion>(converter, ctx, axis, options);
  patterns.add<AtomicRMWConversion, AtomicCASConversion>(converter, ctx, options);
  patterns.add<PrintConversion, AssertConversion, BarrierConversion>(converter, ctx);
}
