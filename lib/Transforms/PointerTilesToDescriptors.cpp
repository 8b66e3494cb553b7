//===- PointerTilesToDescriptors.cpp - Matmul pointer tiles as descriptor accesses -===//
//
// This file implements -kiln-pointer-tiles-to-descriptors (see Passes.td): a loop's load of a
// 2-D f16/bf16 tile (or fp8/int8, contiguous along the dot's K) that feeds a dot, through pointers
// the loop advances (Triton's tutorial matmul: `a_ptrs += BLOCK_K * stride_ak`), becomes a
// kiln.descriptor_load of a tensor map the launcher encodes from the kernel's arguments, so that
// -kiln-pipeline-dot-operands copies it with the tensor memory accelerator instead of cp.async.
//
// What it takes, all checked on the IR:
//   ptrs(t)  = splat(base) + idx0[:, None] * s0 + idx1[None, :]          (t-th iteration,
//              + t * step along one dimension d          advanced by addptr(ptrs, c * s_d))
//   idx_d    = start_d + arange(B_d), or (start_d + arange(B_d)) % M_d    (wrapped)
//   mask     = a conjunction of idx_d < bound_d, bound_d loop-invariant, or E - k * a on the
//              advancing dimension (k the induction variable from 0, a * k's step = c)
//   other    = 0 (or none)
// `base` is a pointer argument specialized 16-byte aligned, s0 an argument specialized to a
// multiple of 16 bytes (or such a constant), the bounds arguments or constants. Then the
// element (i, j) of iteration t is at coordinates (start_0 + i + t*step_0, start_1 + j +
// t*step_1) of the row-major tensor [extent_0, extent_1] with row stride s0, and the pointer
// load reads it exactly where the tensor holds it and the descriptor load does (zero
// elsewhere), provided the coordinates are not negative and no index wraps. A dimension's
// extent is its mask's bound, its wrap M, else 2^31 - 1 (unmasked: every coordinate is read;
// the driver encodes such extents whatever the row stride, measured on the H100).
// Where that needs a run-time fact (start_d >= 0; start_d + B_d <= M_d for a wrapped index;
// extents and row stride positive, else the launcher cannot encode the map), the loop is
// versioned: scf.if (facts) { the loop with descriptor loads } else { the loop as it was }
// (Triton's `% M` on the rows of the last, partial tiles). A wrapped index needs no such fact
// where its slices that wrap are never stored (SliceFlow.h: the tile's rows only reach a
// store masked by start_d + arange(B_d) < M_d): the descriptor reads them as zeros past the
// tensor's end, and the edge tiles run the TMA too. A loop is taken only when every
// load feeding its dots is (the rings copy a loop's operands all by the TMA or all by
// cp.async).
//
// A store of a 2-D f16/bf16 block computed from a dot (a matmul's C) through such a pointer
// tile (no wrap), masked by bounds on its own row and column indices, becomes a
// kiln.descriptor_store the same way, under scf.if where it assumes run-time facts (the
// pointer store elsewhere): -kiln-lower-descriptors then stores it through shared memory and
// the TMA.
//
// Each new tensor map is an argument appended to the function, carrying its recipe
// (kTensorMapRecipeAttr: base argument, dtype code, rank, block, extents and stride as
// argument numbers or -1 - constant) for the front end to hand the launcher.
//
//===----------------------------------------------------------------------===//

#include "LoopSlices.h"
#include "PointerTiles.h"
#include "SliceFlow.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Dialect/KilnGPU/IR/DotLayouts.h"
#include "kiln/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallPtrSet.h"

#include <limits>
#include <map>

namespace kiln {
#define GEN_PASS_DEF_KILNPOINTERTILESTODESCRIPTORS
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
using namespace kiln;
using namespace kiln::pointer_tiles;

namespace {

/// The plan for a store of a 2-D f16/bf16 block computed from a dot through a pointer tile,
/// masked by bounds on its own indices (none wrapped), or failure.
FailureOr<Plan> planStore(StoreOp store, func::FuncOp func) {
  auto type = dyn_cast<RankedTensorType>(store.getValue().getType());
  if (!type || type.getRank() != 2 ||
      !(type.getElementType().isF16() || type.getElementType().isBF16()) ||
      !fedByDot(store.getValue()))
    return failure();
  Plan plan;
  plan.op = store;
  plan.type = type;
  if (failed(planPointers(store.getPtr(), func, plan, /*attentionTiles=*/false)))
    return failure();
  std::array<Value, 2> bounds;
  if (failed(maskBounds(store.getMask(), plan.dims, bounds)))
    return failure();
  for (int d = 0; d < 2; ++d)
    if (bounds[d])
      plan.dims[d].extent = Scalar::of(bounds[d]);
  for (int d = 0; d < 2; ++d)
    if (plan.dims[d].wrap || !recipeSource(plan.dims[d].extent, func, false))
      return failure();
  if (!recipeSource(plan.dims[0].stride, func, true))
    return failure();
  return plan;
}

/// Whether the slices along `d` of `load`'s tile, whose index `dim` wraps at M, are stored
/// only under a mask `start + arange(n) < M` on the same start (SliceFlow.h): those that
/// wrap, start + i >= M, are then never stored, and a descriptor load may read them as the
/// zeros past the tensor's end.
bool wrappedSlicesDropped(LoadOp load, int d, const Dim &dim) {
  int64_t n = cast<RankedTensorType>(load.getType()).getDimSize(d);
  auto drops = [&](StoreOp store, int sd) {
    SmallVector<Bound, 2> bounds;
    if (!store.getMask() || !decomposeMask(store.getMask(), bounds))
      return false;
    return llvm::any_of(bounds, [&](const Bound &b) {
      if (b.dim != sd || !computedAlike(b.bound, dim.wrap))
        return false;
      Dim idx;
      idx.index = b.index;
      if (!decomposeIndex(idx, n) || idx.wrap)
        return false;
      return idx.start.isConst()
                 ? dim.start.isConst() && idx.start.constant == dim.start.constant
                 : !dim.start.isConst() && computedAlike(idx.start.value, dim.start.value);
    });
  };
  return slicesOnlyReachDroppingStores(load.getResult(), d, drops);
}

/// The launchers' dtype code of a tensor map of `elem` elements (python/src/LauncherArgs.cpp,
/// rt::encodeRecipeTensorMap): f16 'h', bf16 'H', fp8 e4m3 'e' and e5m2 'E', int8 'c' (the
/// 8-bit ones bytes to the TMA); 0 for elements the pass leaves to cp.async.
char tensorMapCode(Type elem) {
  if (elem.isF16())
    return 'h';
  if (elem.isBF16())
    return 'H';
  if (isa<Float8E4M3FNType>(elem))
    return 'e';
  if (isa<Float8E5M2Type>(elem))
    return 'E';
  if (elem.isInteger(8))
    return 'c';
  return 0;
}

/// The plan for `load` in `loop`, or failure.
FailureOr<Plan> planLoad(LoadOp load, scf::ForOp loop, func::FuncOp func, bool attentionTiles) {
  auto type = dyn_cast<RankedTensorType>(load.getType());
  if (!type || type.getRank() != 2 || !tensorMapCode(type.getElementType()))
    return failure();
  bool eightBit = type.getElementTypeBitWidth() == 8;
  if (load.getIsVolatile())
    return failure();
  // Only tiles that feed dots (directly or transposed): the TMA copies those. 8-bit tiles only
  // directly, and only contiguous along the dot's K (wgmma reads 8-bit operands K-major and
  // the TMA does not transpose: the cp.async copies do, 4 x 4 bytes in registers).
  for (Operation *user : load->getUsers()) {
    if (auto t = dyn_cast<TransOp>(user)) {
      if (eightBit || !llvm::all_of(t->getUsers(), [](Operation *u) { return isa<DotOp>(u); }))
        return failure();
    } else if (auto dot = dyn_cast<DotOp>(user); !dot || dot.getC() == load.getResult()) {
      return failure();
    }
  }
  // The 8-bit tile's K: the dimension its dots reduce (one for all of them).
  std::optional<int64_t> kDim = eightBit ? getDotReductionDim(load.getResult()) : std::nullopt;
  if (eightBit && !kDim)
    return failure();
  if (Value other = load.getOther()) { // +0.0 (or 0), as the TMA fills
    Value o = splatScalar(other) ? splatScalar(other) : other;
    if (!matchPattern(o, m_PosZeroFloat()) && !matchPattern(o, m_Zero()))
      return failure();
  }
  // Pointers the loop carries and advances (`a_ptrs += BLOCK_K * stride_ak`), or computed in
  // the body from the induction variable (`K + (start_n + offs_n)[None, :] * stride_kn`).
  auto ptrArg = dyn_cast<BlockArgument>(load.getPtr());
  bool carried = ptrArg && ptrArg.getOwner() == loop.getBody() && ptrArg.getArgNumber() != 0;
  llvm::SetVector<Operation *> incOps;
  Value inc;
  if (carried && !(inc = getInductionIncrement(ptrArg, loop, incOps)))
    return failure();

  Plan plan;
  plan.op = load;
  plan.type = type;
  Value ptrs = carried ? loop.getInitArgs()[ptrArg.getArgNumber() - 1] : load.getPtr();
  if (failed(planPointers(ptrs, func, plan, attentionTiles)))
    return failure();
  if (plan.baseOffset && !loop.isDefinedOutsideOfLoop(plan.baseOffset))
    return failure();
  if (eightBit && plan.rowDim == *kDim) // the contiguous dimension (not the rows') must be K
    return failure();
  // A tile read as the transpose of its block goes to dots as it is or transposed back
  // (tutorial 06's backward: k @ qT and ds @ qT^T); the rings then take the block's
  // transpose, or the block, as the dot's operand.
  if (plan.rowDim == 1 && llvm::any_of(load->getUsers(), [](Operation *u) {
        auto t = dyn_cast<TransOp>(u);
        return t && !(t.getOrder().size() == 2 && t.getOrder()[0] == 1);
      }))
    return failure();
  // A tile several dots read (their rings share one TMA copy) goes to the TMA when its rows
  // take 256 bytes or more: with narrower rows (tutorial 06's backward at D 64, blocks of 2-4
  // KiB) the loop's short iterations waited longer at its barriers than the TMA saved in
  // address work, and ran slower than with cp.async (docs/internals.md).
  auto dotsReading = [](Value v) {
    llvm::SmallPtrSet<Operation *, 4> dots;
    for (Operation *u : v.getUsers())
      if (isa<TransOp>(u))
        dots.insert(u->user_begin(), u->user_end());
      else
        dots.insert(u);
    return dots.size();
  };
  if (dotsReading(load.getResult()) > 1 &&
      type.getDimSize(1 - plan.rowDim) * (type.getElementTypeBitWidth() / 8) < 256)
    return failure();
  std::array<Dim, 2> &dims = plan.dims;
  const int r = plan.rowDim, c = 1 - r;
  for (int d = 0; d < 2; ++d) {
    Dim &dim = dims[d];
    if (loop.isDefinedOutsideOfLoop(dim.index) &&
        (!dim.start.value || loop.isDefinedOutsideOfLoop(dim.start.value)))
      continue;
    // In the body: start = iv + c (c invariant), not wrapped, with pointers not carried.
    if (carried || dim.wrap || !dim.start.value)
      return failure();
    Value iv = loop.getInductionVar(), v = dim.start.value;
    if (auto add = v.getDefiningOp<arith::AddIOp>()) {
      for (auto [x, y] :
           {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())})
        if (x == iv && loop.isDefinedOutsideOfLoop(y)) {
          dim.ivPlus = y;
          v = x;
          break;
        }
    }
    if (v != iv || v.getType() != dim.start.value.getType())
      return failure();
    dim.startFromIv = true;
  }

  // The increment: n along the contiguous dimension (a constant), or n * s_r along the rows
  // (where the row stride is a constant dividing n, both are tried: the mask decides).
  SmallVector<std::pair<int, int64_t>, 2> steps;
  if (!carried) {
    steps.push_back({-1, 0}); // (the coordinates are the body's own start values)
  } else if (auto n = constInt(inc); n && *n > 0) {
    steps.push_back({c, *n});
    if (dims[r].stride.isConst() && *n % dims[r].stride.constant == 0)
      steps.push_back({r, *n / dims[r].stride.constant});
  } else if (Value incScalar = splatScalar(inc); incScalar && !dims[r].stride.isConst()) {
    if (auto mul = stripExt(incScalar).getDefiningOp<arith::MulIOp>())
      for (auto [s, f] :
           {std::pair(mul.getLhs(), mul.getRhs()), std::pair(mul.getRhs(), mul.getLhs())})
        if (stripExt(s) == dims[r].stride.value && constInt(f) && *constInt(f) > 0) {
          steps.push_back({r, *constInt(f)});
          break;
        }
  }

  std::array<Value, 2> boundOfDim;
  if (failed(maskBounds(load.getMask(), dims, boundOfDim)))
    return failure();
  auto lb = constInt(loop.getLowerBound()), ls = constInt(loop.getStep());
  if (!ls || *ls <= 0)
    return failure();
  // Each dimension's extent for a step along `stepDim`, or failure.
  auto assignExtents = [&](int stepDim, int64_t step, std::array<Dim, 2> &out) {
    for (int d = 0; d < 2; ++d) {
      Dim &dim = out[d];
      dim.step = d == stepDim ? step : 0;
      if (dim.wrap && dim.step)
        return false;
      Value bound = boundOfDim[d];
      if (!bound) {
        // Unmasked: the wrap, else every coordinate (the driver takes extents past the row
        // stride).
        if (dim.wrap)
          dim.extent = Scalar::of(dim.wrap);
        continue;
      }
      if (loop.isDefinedOutsideOfLoop(bound)) {
        // idx < E on a dimension the loop does not advance.
        if (dim.step || (dim.wrap && bound != dim.wrap))
          return false;
        dim.extent = Scalar::of(bound);
        continue;
      }
      // idx < E - a * k on the advancing dimension, k from 0 by ls, a * ls the step.
      auto sub = bound.getDefiningOp<arith::SubIOp>();
      if (!sub || !dim.step || !loop.isDefinedOutsideOfLoop(sub.getLhs()) || lb != 0)
        return false;
      Value f = sub.getRhs(), iv = loop.getInductionVar();
      std::optional<int64_t> a;
      if (f == iv)
        a = 1;
      else if (auto mul = f.getDefiningOp<arith::MulIOp>())
        a = mul.getLhs() == iv   ? constInt(mul.getRhs())
            : mul.getRhs() == iv ? constInt(mul.getLhs())
                                 : std::nullopt;
      if (!a || *a * *ls != dim.step)
        return false;
      dim.extent = Scalar::of(sub.getLhs());
    }
    return true;
  };
  bool found = false;
  for (auto [stepDim, step] : steps) {
    std::array<Dim, 2> candidate = dims;
    if (assignExtents(stepDim, step, candidate)) {
      dims = candidate;
      found = true;
      break;
    }
  }
  if (!found)
    return failure();
  // A base moved by a program shifts the row coordinates, not a mask's or a wrap's bounds
  // (they count the tile's own indices): its rows must be unmasked.
  if (plan.baseOffset &&
      (dims[r].wrap || !dims[r].extent.isConst() || dims[r].extent.constant != kUnbounded))
    return failure();
  // Every field the host encodes must come from the arguments.
  for (int d = 0; d < 2; ++d)
    if (!recipeSource(dims[d].extent, func, false))
      return failure();
  if (!recipeSource(dims[r].stride, func, true))
    return failure();
  // (Its extent is M: the wrap, as its mask's bound if it has one.)
  for (int d = 0; d < 2; ++d)
    if (dims[d].wrap)
      dims[d].wrapDropped = wrappedSlicesDropped(load, d, dims[d]);
  return plan;
}

/// The plans of the loads directly in `loop`'s body.
/// Whether some use of `load` is an operand of a dot (directly or transposed).
bool feedsDot(LoadOp load) {
  return llvm::any_of(load->getUsers(), [](Operation *u) {
    if (isa<DotOp>(u))
      return true;
    return isa<TransOp>(u) &&
           llvm::any_of(u->getUsers(), [](Operation *v) { return isa<DotOp>(v); });
  });
}

/// The plans of the loads directly in `loop`'s body: all of the loads that feed its dots, or
/// none (the rings copy a loop's operands all by the TMA or all by cp.async, so one operand
/// the pass cannot take keeps the others cp.async copies too).
SmallVector<Plan> planLoop(scf::ForOp loop, func::FuncOp func, bool attentionTiles) {
  SmallVector<Plan> plans;
  for (auto load : loop.getBody()->getOps<LoadOp>()) {
    if (!feedsDot(load))
      continue;
    FailureOr<Plan> p = planLoad(load, loop, func, attentionTiles);
    if (failed(p))
      return {};
    plans.push_back(*p);
  }
  return plans;
}

Value constI32(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIntOp::create(b, loc, b.getI32Type(), v);
}

Value materialize(OpBuilder &b, Location loc, const Scalar &s) {
  return s.isConst() ? constI32(b, loc, s.constant) : s.value;
}

/// Whether the plans assume facts only known at run time (see emitGuard).
bool needsGuard(ArrayRef<Plan> plans) {
  return llvm::any_of(plans, [](const Plan &p) {
    return llvm::any_of(
               p.dims,
               [](const Dim &d) { return !d.start.isConst() || d.wrap || !d.extent.isConst(); }) ||
           !p.dims[p.rowDim].stride.isConst() || p.baseOffset;
  });
}

/// `v` (an i32 or i64 scalar) as i64.
Value toI64(OpBuilder &b, Location loc, Value v) {
  return v.getType().isInteger(64) ? v : arith::ExtSIOp::create(b, loc, b.getI64Type(), v);
}

/// The row stride of `p`, i64.
Value rowStride(OpBuilder &b, Location loc, const Plan &p) {
  const Scalar &s = p.dims[p.rowDim].stride;
  return s.isConst() ? Value(arith::ConstantIntOp::create(b, loc, b.getI64Type(), s.constant))
                     : toI64(b, loc, s.value);
}

/// The offset of `p`'s moved base in rows, off / s_r (i64; a row stride of 0 or less, which
/// the guard rejects, divides by 1). The guard and the rewritten loop build the same ops, so
/// that CSE leaves one division a program.
Value rowsOfOffset(OpBuilder &b, Location loc, const Plan &p) {
  Type i64 = b.getI64Type();
  Value s = rowStride(b, loc, p), zero = arith::ConstantIntOp::create(b, loc, i64, 0);
  Value safe = arith::SelectOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, s, zero), s,
      arith::ConstantIntOp::create(b, loc, i64, 1));
  return arith::DivSIOp::create(b, loc, toI64(b, loc, p.baseOffset), safe);
}

/// The run-time facts the plans assume: starts not negative, wrapped indices not wrapping
/// (unless the slices that wrap are never stored),
/// and a tensor map the host can encode (extents and row stride positive; else the launcher
/// leaves it unencoded and the loop as it was runs). A base moved by `off` elements: off not
/// negative, a whole number of rows, and (in `loop`) the last row coordinate the loop reads,
/// off / s_r + start_r + (trips - 1) * step_r + B_r, within int32.
Value emitGuard(OpBuilder &b, Location loc, ArrayRef<Plan> plans, scf::ForOp loop = {}) {
  Value guard = arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1);
  auto conj = [&](Value c) { guard = arith::AndIOp::create(b, loc, guard, c); };
  auto positive = [&](Value v) {
    Value zero = arith::ConstantIntOp::create(b, loc, v.getType(), 0);
    conj(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, v, zero));
  };
  for (const Plan &p : plans) {
    for (int d = 0; d < 2; ++d) {
      const Dim &dim = p.dims[d];
      if (dim.startFromIv) {
        // start = iv + c grows with iv (the step is positive): its least is lb + c.
        Value lo = toI64(b, loc, loop.getLowerBound());
        if (dim.ivPlus)
          lo = arith::AddIOp::create(b, loc, lo, toI64(b, loc, dim.ivPlus));
        conj(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, lo,
                                   arith::ConstantIntOp::create(b, loc, b.getI64Type(), 0)));
      } else if (!dim.start.isConst()) {
        conj(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, dim.start.value,
                                   constI32(b, loc, 0)));
      }
      if (dim.wrap && !dim.wrapDropped) {
        // start + B <= M, in 64 bits (no overflow).
        Type i64 = b.getI64Type();
        Value start = arith::ExtSIOp::create(b, loc, i64, materialize(b, loc, dim.start));
        int64_t n = p.type.getDimSize(d);
        Value end =
            arith::AddIOp::create(b, loc, start, arith::ConstantIntOp::create(b, loc, i64, n));
        Value m = arith::ExtSIOp::create(b, loc, i64, dim.wrap);
        conj(arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sle, end, m));
      }
      if (!dim.extent.isConst())
        positive(dim.extent.value);
    }
    if (!p.dims[p.rowDim].stride.isConst())
      positive(p.dims[p.rowDim].stride.value);
    if (p.baseOffset && loop) {
      Type i64 = b.getI64Type();
      auto c64 = [&](int64_t v) { return arith::ConstantIntOp::create(b, loc, i64, v); };
      auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) {
        return arith::CmpIOp::create(b, loc, pred, x, y);
      };
      Value off = toI64(b, loc, p.baseOffset), rows = rowsOfOffset(b, loc, p);
      conj(cmp(arith::CmpIPredicate::sge, off, c64(0)));
      // off a whole number of rows: rows * s_r == off (no remainder: one division only)
      conj(cmp(arith::CmpIPredicate::eq, arith::MulIOp::create(b, loc, rows, rowStride(b, loc, p)),
               off));
      const Dim &row = p.dims[p.rowDim];
      // (start = iv + c stays below ub + c)
      Value first =
          toI64(b, loc, row.startFromIv ? loop.getUpperBound() : materialize(b, loc, row.start));
      if (row.startFromIv && row.ivPlus)
        first = arith::AddIOp::create(b, loc, first, toI64(b, loc, row.ivPlus));
      Value last = arith::AddIOp::create(b, loc, rows, first);
      last = arith::AddIOp::create(b, loc, last, c64(p.type.getDimSize(p.rowDim)));
      if (row.step) {
        // trips = ceil((ub - lb) / st), st > 0; the last iteration is trips - 1.
        Value lb = toI64(b, loc, loop.getLowerBound()), ub = toI64(b, loc, loop.getUpperBound());
        Value st = toI64(b, loc, loop.getStep());
        Value span = arith::MaxSIOp::create(b, loc, arith::SubIOp::create(b, loc, ub, lb), c64(0));
        Value trips = arith::DivSIOp::create(
            b, loc, arith::AddIOp::create(b, loc, span, arith::SubIOp::create(b, loc, st, c64(1))),
            st);
        Value lastT =
            arith::MaxSIOp::create(b, loc, arith::SubIOp::create(b, loc, trips, c64(1)), c64(0));
        last = arith::AddIOp::create(b, loc, last,
                                     arith::MulIOp::create(b, loc, lastT, c64(row.step)));
      }
      conj(cmp(arith::CmpIPredicate::sle, last, c64(std::numeric_limits<int32_t>::max())));
    }
  }
  return guard;
}

/// The tensor map argument for `plan` (one per distinct recipe), appended to `func`.
BlockArgument mapArgument(func::FuncOp func, const Plan &plan,
                          std::map<SmallVector<int64_t>, unsigned> &maps) {
  RankedTensorType type = plan.type;
  const int r = plan.rowDim, c = 1 - r;
  SmallVector<int64_t> recipe{plan.base.getArgNumber(),
                              int64_t(tensorMapCode(type.getElementType())), 2, type.getDimSize(r),
                              type.getDimSize(c)};
  for (int d : {r, c})
    recipe.push_back(*recipeSource(plan.dims[d].extent, func, false));
  recipe.push_back(*recipeSource(plan.dims[r].stride, func, true));
  auto [it, added] = maps.try_emplace(recipe, func.getNumArguments());
  if (added) {
    OpBuilder b(func.getContext());
    auto attrs =
        b.getDictionaryAttr(b.getNamedAttr(kTensorMapRecipeAttr, b.getDenseI64ArrayAttr(recipe)));
    (void)func.insertArgument(it->second, TensorMapType::get(func.getContext()), attrs,
                              func.getLoc());
  }
  return func.getArgument(it->second);
}

/// A descriptor access's offsets (start + t * step; the rows' plus `rows`, the base's offset
/// in rows, where not null), extents and row stride (i64) for `p`, rows first.
std::tuple<SmallVector<Value, 2>, SmallVector<Value, 2>, Value>
emitBlockOperands(OpBuilder &b, Location loc, const Plan &p, Value t, Value rows = {}) {
  SmallVector<Value, 2> offsets, shape;
  for (int i : {p.rowDim, 1 - p.rowDim}) {
    const Dim &d = p.dims[i];
    Value at = materialize(b, loc, d.start);
    if (d.step)
      at = arith::AddIOp::create(b, loc, at,
                                 arith::MulIOp::create(b, loc, t, constI32(b, loc, d.step)));
    if (rows && i == p.rowDim)
      at = arith::AddIOp::create(b, loc, at, rows);
    offsets.push_back(at);
    shape.push_back(materialize(b, loc, d.extent));
  }
  return {offsets, shape, rowStride(b, loc, p)};
}

/// Replaces the planned store by the descriptor store of its block, under scf.if where the
/// plan assumes run-time facts (the store as it was elsewhere).
void rewriteStore(const Plan &p, func::FuncOp func,
                  std::map<SmallVector<int64_t>, unsigned> &maps) {
  auto store = cast<StoreOp>(p.op);
  OpBuilder b(store);
  Location loc = store.getLoc();
  BlockArgument map = mapArgument(func, p, maps);
  bool guarded = needsGuard(p);
  if (guarded) {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, emitGuard(b, loc, p),
                                  /*withElseRegion=*/true);
    store->moveBefore(ifOp.elseBlock()->getTerminator());
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  }
  auto [offsets, shape, stride] = emitBlockOperands(b, loc, p, Value());
  DescriptorStoreOp::create(b, loc, map, p.base, offsets, store.getValue(), shape,
                            ValueRange{stride});
  if (!guarded)
    store->erase();
}

/// `resultUnused(i)`: whether the loop's i-th result is read after it (the pointers it no longer
/// reads are then carried unchanged).
void rewriteLoads(scf::ForOp loop, ArrayRef<Plan> plans, func::FuncOp func,
                  std::map<SmallVector<int64_t>, unsigned> &maps,
                  llvm::function_ref<bool(unsigned)> resultUnused) {
  for (const Plan &p : plans) {
    auto load = cast<LoadOp>(p.op);
    OpBuilder b(load);
    Location loc = load.getLoc();
    BlockArgument map = mapArgument(func, p, maps);
    // The iteration number t = (k - lb) / step.
    Value t = loop.getInductionVar();
    if (constInt(loop.getLowerBound()) != 0)
      t = arith::SubIOp::create(b, loc, t, loop.getLowerBound());
    if (constInt(loop.getStep()) != 1)
      t = arith::DivSIOp::create(b, loc, t, loop.getStep());
    if (!t.getType().isInteger(32))
      t = arith::TruncIOp::create(b, loc, b.getI32Type(), t);
    // The base's offset in rows, before the loop (the guard ensured it whole and in range).
    Value rows;
    if (p.baseOffset) {
      OpBuilder pre(loop);
      rows = arith::TruncIOp::create(pre, loc, pre.getI32Type(), rowsOfOffset(pre, loc, p));
    }
    auto [offsets, shape, stride] = emitBlockOperands(b, loc, p, t, rows);
    auto type = cast<RankedTensorType>(load.getType());
    Value block;
    if (p.rowDim == 0) {
      block =
          DescriptorLoadOp::create(b, loc, type, map, p.base, offsets, shape, ValueRange{stride});
    } else { // the transpose of the block [B1, B0]
      auto blockType =
          RankedTensorType::get({type.getDimSize(1), type.getDimSize(0)}, type.getElementType());
      Value desc = DescriptorLoadOp::create(b, loc, blockType, map, p.base, offsets, shape,
                                            ValueRange{stride});
      block = TransOp::create(b, loc, type, desc, ArrayRef<int32_t>{1, 0});
      // A transpose of the tile is the block itself.
      for (Operation *user : llvm::make_early_inc_range(load->getUsers()))
        if (auto t = dyn_cast<TransOp>(user)) {
          t.replaceAllUsesWith(desc);
          t->erase();
        }
    }
    auto ptrArg = dyn_cast<BlockArgument>(load.getPtr());
    load.replaceAllUsesWith(block);
    load->erase();
    if (!ptrArg || ptrArg.getOwner() != loop.getBody())
      continue; // pointers computed in the body: dead now, for canonicalization
    // The pointers are no longer read: carry them unchanged (canonicalization drops them).
    unsigned i = ptrArg.getArgNumber() - 1;
    auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
    Operation *next = yield.getOperand(i).getDefiningOp();
    if (resultUnused(i) && next && next->hasOneUse() &&
        llvm::all_of(ptrArg.getUsers(), [&](Operation *u) { return u == next; })) {
      yield->setOperand(i, ptrArg);
      next->erase();
    }
  }
}

struct KilnPointerTilesToDescriptorsPass final
    : kiln::impl::KilnPointerTilesToDescriptorsBase<KilnPointerTilesToDescriptorsPass> {
  using Base::Base;
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      std::map<SmallVector<int64_t>, unsigned> maps;
      SmallVector<scf::ForOp> loops;
      func.walk([&](scf::ForOp loop) { loops.push_back(loop); });
      for (scf::ForOp loop : loops) {
        SmallVector<Plan> plans = planLoop(loop, func, attentionTiles);
        if (plans.empty())
          continue;
        if (!needsGuard(plans)) {
          rewriteLoads(loop, plans, func, maps,
                       [&](unsigned i) { return loop.getResult(i).use_empty(); });
          continue;
        }
        // A loop that tl.range(flatten=True) fuses with its outer one stays a single loop.
        if (auto outer = loop->getParentOfType<scf::ForOp>(); outer && outer->hasAttr(kFlattenAttr))
          continue;
        OpBuilder b(loop);
        Location loc = loop.getLoc();
        Value guard = emitGuard(b, loc, plans, loop);
        // scf.if (guard) { loop with descriptor loads } else { loop as it was }.
        auto ifOp = scf::IfOp::create(b, loc, loop.getResultTypes(), guard,
                                      /*withElseRegion=*/true);
        loop->replaceAllUsesWith(ifOp.getResults());
        b.setInsertionPointToStart(ifOp.thenBlock());
        IRMapping cloned;
        auto fast = cast<scf::ForOp>(b.clone(*loop, cloned));
        scf::YieldOp::create(b, loc, fast.getResults());
        loop->moveBefore(ifOp.elseBlock(), ifOp.elseBlock()->end());
        b.setInsertionPointToEnd(ifOp.elseBlock());
        scf::YieldOp::create(b, loc, loop.getResults());
        // The plans' values are defined outside the loop: only their loads move to the clone.
        for (Plan &p : plans) {
          p.op = cloned.lookup(p.op);
          for (Dim &d : p.dims) // (a start the body computes from the induction variable)
            if (d.startFromIv)
              d.start.value = cloned.lookupOrDefault(d.start.value);
        }
        rewriteLoads(fast, plans, func, maps,
                     [&](unsigned i) { return ifOp.getResult(i).use_empty(); });
      }
      // Stores of blocks (a matmul's C) through the TMA as well.
      SmallVector<StoreOp> stores;
      func.walk([&](StoreOp store) { stores.push_back(store); });
      for (StoreOp store : stores)
        if (FailureOr<Plan> p = planStore(store, func); succeeded(p))
          rewriteStore(*p, func, maps);
    }
  }
};

} // namespace
