//===- PointerTiles.cpp - Pointer tiles as blocks of a tensor ---------------===//
//
// See PointerTiles.h.
//
//===----------------------------------------------------------------------===//

#include "PointerTiles.h"

#include "mlir/IR/Matchers.h"
#include "llvm/ADT/SmallPtrSet.h"

namespace kiln::pointer_tiles {

/// The integer constant `v` is, scalar or splat (arith.constant, kiln.splat of one).
std::optional<int64_t> constInt(Value v) {
  if (!v)
    return std::nullopt;
  if (auto splat = v.getDefiningOp<SplatOp>())
    return constInt(splat.getSrc());
  APInt value;
  if (matchPattern(v, m_ConstantInt(&value)))
    return value.getSExtValue();
  return std::nullopt;
}

/// The scalar a tile splats (kiln.splat's operand), else null.
Value splatScalar(Value v) {
  if (auto splat = v.getDefiningOp<SplatOp>())
    return splat.getSrc();
  return Value();
}

/// Looks through sign extension.
Value stripExt(Value v) {
  while (auto ext = v.getDefiningOp<arith::ExtSIOp>())
    v = ext.getIn();
  return v;
}

/// Adds to `dims` the per-dimension terms of the integer offset tile `off` (rank 2): sums of
/// expand_dims(idx) * stride, broadcast; false for anything else.
bool decomposeOffset(Value off, std::array<Dim, 2> &dims) {
  if (constInt(off) == 0)
    return true;
  Operation *op = off.getDefiningOp();
  if (!op)
    return false;
  if (auto b = dyn_cast<BroadcastOp>(op))
    return decomposeOffset(b.getSrc(), dims);
  if (auto ext = dyn_cast<arith::ExtSIOp>(op))
    return decomposeOffset(ext.getIn(), dims);
  if (auto add = dyn_cast<arith::AddIOp>(op))
    return decomposeOffset(add.getLhs(), dims) && decomposeOffset(add.getRhs(), dims);
  if (auto expand = dyn_cast<ExpandDimsOp>(op)) {
    auto src = cast<RankedTensorType>(expand.getSrc().getType());
    if (src.getRank() != 1 || !src.getElementType().isInteger(32))
      return false;
    Dim &d = dims[expand.getAxis() == 1 ? 0 : 1];
    if (d.present)
      return false;
    d.present = true;
    d.index = expand.getSrc();
    return true;
  }
  if (auto mul = dyn_cast<arith::MulIOp>(op)) {
    for (auto [tile, factor] :
         {std::pair(mul.getLhs(), mul.getRhs()), std::pair(mul.getRhs(), mul.getLhs())}) {
      Scalar s;
      if (auto c = constInt(factor))
        s = {Value(), *c};
      else if (Value v = splatScalar(factor))
        s = {stripExt(v), 0};
      else
        continue;
      std::array<Dim, 2> inner;
      if (!decomposeOffset(tile, inner) || inner[0].present == inner[1].present)
        return false;
      Dim &in = inner[0].present ? inner[0] : inner[1];
      if (!in.stride.isConst() || in.stride.constant != 1)
        return false;
      in.stride = s;
      Dim &d = inner[0].present ? dims[0] : dims[1];
      if (d.present)
        return false;
      d = in;
      return true;
    }
  }
  return false;
}

/// The base argument and dimensions of the pointer tile `ptrs`: splat(base) moved by offsets.
/// With `baseOffset`, the splatted pointer may also be the base moved by a scalar
/// (`K += off_z * s_z + off_h * s_h`), returned there.
bool decomposePointers(Value ptrs, BlockArgument &base, std::array<Dim, 2> &dims,
                       Value *baseOffset = nullptr) {
  Operation *op = ptrs.getDefiningOp();
  if (!op)
    return false;
  if (auto b = dyn_cast<BroadcastOp>(op))
    return decomposePointers(b.getSrc(), base, dims, baseOffset);
  if (auto add = dyn_cast<AddPtrOp>(op))
    return decomposePointers(add.getPtr(), base, dims, baseOffset) &&
           decomposeOffset(add.getOffset(), dims);
  if (auto splat = dyn_cast<SplatOp>(op)) {
    Value src = splat.getSrc();
    if (auto moved = src.getDefiningOp<AddPtrOp>(); moved && baseOffset) {
      if (!moved.getOffset().getType().isInteger(32) && !moved.getOffset().getType().isInteger(64))
        return false;
      *baseOffset = moved.getOffset();
      src = moved.getPtr();
    }
    base = dyn_cast<BlockArgument>(src);
    return base && isa<func::FuncOp>(base.getOwner()->getParentOp());
  }
  return false;
}

/// idx = start + arange(n), or (start + arange(n)) % M.
bool decomposeIndex(Dim &d, int64_t n) {
  Value v = d.index;
  if (auto rem = v.getDefiningOp<arith::RemSIOp>()) {
    d.wrap = splatScalar(rem.getRhs());
    if (!d.wrap)
      return false;
    v = rem.getLhs();
  }
  Value start;
  if (auto add = v.getDefiningOp<arith::AddIOp>()) {
    for (auto [s, r] :
         {std::pair(add.getLhs(), add.getRhs()), std::pair(add.getRhs(), add.getLhs())})
      if (r.getDefiningOp<MakeRangeOp>() && (splatScalar(s) || constInt(s))) {
        start = s;
        v = r;
        break;
      }
    if (!start)
      return false;
  }
  auto range = v.getDefiningOp<MakeRangeOp>();
  if (!range || int64_t(range.getEnd()) - int64_t(range.getStart()) != n)
    return false;
  int64_t first = range.getStart();
  if (!start) {
    d.start = {Value(), first};
  } else if (auto c = constInt(start)) {
    d.start = {Value(), *c + first};
  } else {
    if (first != 0)
      return false;
    d.start = {splatScalar(start), 0};
  }
  return d.start.value || d.start.constant >= 0;
}

/// The 1-D index tile and dimension a rank-2 compare operand expands (through broadcast).
Value peelIndex(Value v, int &dim) {
  if (auto b = v.getDefiningOp<BroadcastOp>())
    return peelIndex(b.getSrc(), dim);
  auto expand = v.getDefiningOp<ExpandDimsOp>();
  if (!expand || cast<RankedTensorType>(expand.getSrc().getType()).getRank() != 1)
    return Value();
  dim = expand.getAxis() == 1 ? 0 : 1;
  return expand.getSrc();
}

/// idx < bound from a compare whose index side `peel` finds.
bool boundOf(arith::CmpIOp cmp, llvm::function_ref<Value(Value)> peel, Bound &out) {
  Value idx, bound;
  if (cmp.getPredicate() == arith::CmpIPredicate::slt) {
    idx = peel(cmp.getLhs());
    bound = splatScalar(cmp.getRhs());
  } else if (cmp.getPredicate() == arith::CmpIPredicate::sgt) {
    idx = peel(cmp.getRhs());
    bound = splatScalar(cmp.getLhs());
  }
  if (!idx || !bound)
    return false;
  out.index = idx;
  out.bound = bound;
  return true;
}

/// The bounds of a rank-2 mask: a conjunction of per-dimension compares.
bool decomposeMask(Value mask, SmallVectorImpl<Bound> &bounds) {
  if (auto c = constInt(mask); c && *c != 0)
    return true;
  Operation *op = mask.getDefiningOp();
  if (!op)
    return false;
  if (auto b = dyn_cast<BroadcastOp>(op))
    return decomposeMask(b.getSrc(), bounds);
  if (auto a = dyn_cast<arith::AndIOp>(op))
    return decomposeMask(a.getLhs(), bounds) && decomposeMask(a.getRhs(), bounds);
  Bound b;
  if (auto expand = dyn_cast<ExpandDimsOp>(op)) { // (idx < bound)[None, :]
    auto cmp = expand.getSrc().getDefiningOp<arith::CmpIOp>();
    if (!cmp || cast<RankedTensorType>(cmp.getType()).getRank() != 1 ||
        !boundOf(
            cmp, [](Value v) { return v; }, b))
      return false;
    b.dim = expand.getAxis() == 1 ? 0 : 1;
  } else if (auto cmp = dyn_cast<arith::CmpIOp>(op)) { // idx[None, :] < bound
    int dim = -1;
    if (!boundOf(
            cmp, [&](Value v) { return peelIndex(v, dim); }, b))
      return false;
    b.dim = dim;
  } else {
    return false;
  }
  bounds.push_back(b);
  return true;
}

/// The bound of each dimension in `mask` (null: none): idx_d < bound_d on the pointer tile's
/// own index tiles, one per dimension at most, i32; failure for any other mask.
LogicalResult maskBounds(Value mask, const std::array<Dim, 2> &dims, std::array<Value, 2> &out) {
  out = {Value(), Value()};
  SmallVector<Bound, 2> bounds;
  if (mask && !decomposeMask(mask, bounds))
    return failure();
  for (Bound &b : bounds) {
    if (b.dim < 0 || out[b.dim] || b.index != dims[b.dim].index || !b.bound.getType().isInteger(32))
      return failure();
    out[b.dim] = b.bound;
  }
  return success();
}

/// What the host encodes a map field from: argument number, or -1 - constant.
std::optional<int64_t> recipeSource(const Scalar &s, func::FuncOp func, bool stride) {
  if (s.isConst())
    return s.constant > 0 ? std::optional<int64_t>(-1 - s.constant) : std::nullopt;
  auto arg = dyn_cast<BlockArgument>(s.value);
  if (!arg || arg.getOwner() != &func.getBody().front())
    return std::nullopt;
  auto type = dyn_cast<IntegerType>(arg.getType());
  if (!type || (type.getWidth() != 32 && !(stride && type.getWidth() == 64)))
    return std::nullopt;
  return int64_t(arg.getArgNumber());
}

/// The base, strides and index forms of the pointer tile `ptrs` into `plan` (`plan.type` its
/// block), or failure: a pointer argument specialized 16-byte aligned, contiguous columns, a
/// row stride of a multiple of 16 bytes, indices start + arange (% M). With `attentionTiles`
/// the rows may be the contiguous dimension instead (plan.rowDim 1) and the base moved by a
/// scalar (plan.baseOffset).
LogicalResult planPointers(Value ptrs, func::FuncOp func, Plan &plan, bool attentionTiles) {
  std::array<Dim, 2> &dims = plan.dims;
  Value offset;
  if (!decomposePointers(ptrs, plan.base, dims, attentionTiles ? &offset : nullptr) ||
      !dims[0].present || !dims[1].present)
    return failure();
  plan.baseOffset = offset;
  auto div = func.getArgAttrOfType<IntegerAttr>(plan.base.getArgNumber(), kDivisibilityAttr);
  if (!div || div.getInt() % 16)
    return failure();
  const int64_t elemBytes = std::max(1u, plan.type.getElementTypeBitWidth() / 8);
  auto unit = [](const Dim &d) { return d.stride.isConst() && d.stride.constant == 1; };
  if (unit(dims[1]))
    plan.rowDim = 0;
  else if (attentionTiles && unit(dims[0]))
    plan.rowDim = 1;
  else
    return failure();
  const Dim &row = dims[plan.rowDim];
  if (row.stride.isConst()) {
    if (row.stride.constant <= 0 || (row.stride.constant * elemBytes) % 16)
      return failure();
  } else {
    auto arg = dyn_cast<BlockArgument>(row.stride.value);
    if (!arg || arg.getOwner() != &func.getBody().front())
      return failure();
    auto sdiv = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kDivisibilityAttr);
    if (!sdiv || (sdiv.getInt() * elemBytes) % 16)
      return failure();
  }
  for (int d = 0; d < 2; ++d)
    if (!decomposeIndex(dims[d], plan.type.getDimSize(d)))
      return failure();
  return success();
}

/// Whether `v` is computed from a kiln.dot's result (through the ops of its function, and
/// through the results of loops and ifs to what they yield): a matmul's epilogue, whose
/// store the TMA takes from the dot's fragments. Other stores (of elementwise kernels) keep
/// their coalesced pointer stores.
bool fedByDot(Value v) {
  SmallVector<Value> work{v};
  llvm::SmallPtrSet<Operation *, 32> seen;
  while (!work.empty() && seen.size() < 64) {
    Value x = work.pop_back_val();
    Operation *op = x.getDefiningOp();
    if (!op || !seen.insert(op).second)
      continue;
    if (isa<DotOp>(op))
      return true;
    if (isa<LoadOp, DescriptorLoadOp>(op))
      continue;
    unsigned i = cast<OpResult>(x).getResultNumber();
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      work.push_back(loop.getBody()->getTerminator()->getOperand(i));
    } else if (auto ifOp = dyn_cast<scf::IfOp>(op)) {
      for (Region *r : {&ifOp.getThenRegion(), &ifOp.getElseRegion()})
        if (!r->empty())
          work.push_back(r->front().getTerminator()->getOperand(i));
    } else if (op->getNumRegions() == 0) {
      for (Value operand : op->getOperands())
        if (isa<RankedTensorType>(operand.getType()))
          work.push_back(operand);
    }
  }
  return false;
}

} // namespace kiln::pointer_tiles
