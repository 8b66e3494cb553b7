//===- AxisInfo.cpp - Contiguity, divisibility and constancy --------------===//
//
// This file implements the axis analysis. It walks each function once in program order
// (operands are defined before use in SSA form); loop-carried values start and stay unknown,
// which is conservative. Each rule below says why its result is sound.
//
//===----------------------------------------------------------------------===//

#include "kiln/Analysis/AxisInfo.h"

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/MathExtras.h"
#include <numeric>

using namespace mlir;
using namespace kiln;

/// Divisibility recorded for the value 0 (divisible by everything); large but safe to multiply.
static constexpr int64_t kMaxDivisor = int64_t(1) << 30;

int64_t kiln::highestPowerOf2Divisor(int64_t v) {
  if (v == 0)
    return kMaxDivisor;
  return std::min<int64_t>(int64_t(1) << llvm::countr_zero(uint64_t(v)), kMaxDivisor);
}

static SmallVector<int64_t> shapeOrScalar(Type type) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return SmallVector<int64_t>(tensor.getShape());
  return {1};
}

AxisInfo AxisInfo::unknown(unsigned rank) {
  AxisInfo info;
  info.contiguity.assign(rank, 1);
  info.divisibility.assign(rank, 1);
  info.constancy.assign(rank, 1);
  return info;
}

AxisInfo AxisInfo::constant(ArrayRef<int64_t> shape, int64_t divisibility) {
  AxisInfo info = unknown(shape.size());
  for (unsigned d = 0; d < shape.size(); ++d) {
    info.constancy[d] = shape[d];
    info.divisibility[d] = divisibility;
  }
  return info;
}

static int64_t gcd(int64_t a, int64_t b) { return std::gcd(a, b); }

/// Bytes per pointee element of a pointer (tile), 1 for non-pointers.
static int64_t pointeeBytes(Type type) {
  if (auto ptr = dyn_cast<PointerType>(getElementTypeOrSelf(type))) {
    if (isa<PointerType>(ptr.getPointeeType()))
      return 8; // a global pointer is 64 bits
    return std::max<int64_t>(1, ptr.getPointeeType().getIntOrFloatBitWidth() / 8);
  }
  return 1;
}

/// Known constant integer value of `v`, if any (scalar constants and splat constants).
static std::optional<int64_t> constantValue(Value v) {
  APInt value;
  if (matchPattern(v, m_ConstantInt(&value)))
    return value.getSExtValue();
  if (auto splat = v.getDefiningOp<SplatOp>())
    return constantValue(splat.getSrc());
  return std::nullopt;
}

AxisInfoAnalysis::AxisInfoAnalysis(Operation *root, bool trustHints) : trustHints(trustHints) {
  root->walk([&](func::FuncOp func) {
    for (BlockArgument arg : func.getArguments()) {
      AxisInfo info = AxisInfo::unknown(1);
      if (auto div = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(), kDivisibilityAttr))
        info.divisibility[0] = std::max<int64_t>(1, highestPowerOf2Divisor(div.getInt()));
      infos[arg] = info;
    }
    visitRegion(func.getBody());
  });
}

void AxisInfoAnalysis::visitRegion(Region &region) {
  for (Block &block : region) {
    if (!block.isEntryBlock())
      visitBlockArguments(block);
    for (Operation &op : block) {
      visit(&op);
      for (Region &nested : op.getRegions())
        visitRegion(nested);
    }
  }
}

void AxisInfoAnalysis::ensure(Value v) {
  if (infos.count(v) || isa<BlockArgument>(v))
    return;
  Operation *def = v.getDefiningOp();
  if (!def || def->getNumRegions())
    return;
  for (Value operand : def->getOperands())
    ensure(operand);
  visit(def);
}

static SmallVector<Value> getIncomingValues(Block &block, unsigned argNumber);

/// Whether `v` is `arg` itself or a block argument that receives nothing but `arg`: a while
/// loop's body argument forwarded unchanged from its condition block's (scf.while's `after`
/// argument the condition passes `arg` to, or the CFG block after scf-to-cf).
static bool isForwardOf(Value v, Value arg) {
  if (v == arg)
    return true;
  auto forwarded = dyn_cast<BlockArgument>(v);
  if (!forwarded)
    return false;
  Block *block = forwarded.getOwner();
  if (auto loop = dyn_cast_or_null<scf::WhileOp>(block->getParentOp());
      loop && block == loop.getAfterBody())
    return loop.getConditionOp().getArgs()[forwarded.getArgNumber()] == arg;
  if (block->hasNoPredecessors())
    return false;
  SmallVector<Value> incoming = getIncomingValues(*block, forwarded.getArgNumber());
  return llvm::all_of(incoming, [&](Value in) { return in == arg; });
}

AxisInfo AxisInfoAnalysis::getInductionInfo(Value arg, ArrayRef<Value> incoming) {
  SmallVector<int64_t> shape = shapeOrScalar(arg.getType());
  unsigned rank = shape.size();
  int64_t scale = pointeeBytes(arg.getType());
  AxisInfo out = AxisInfo::unknown(rank);
  bool first = true;
  auto meet = [&](ArrayRef<int64_t> contiguity, ArrayRef<int64_t> divisibility,
                  ArrayRef<int64_t> constancy) {
    for (unsigned d = 0; d < rank; ++d) {
      out.contiguity[d] = first ? contiguity[d] : gcd(out.contiguity[d], contiguity[d]);
      out.divisibility[d] = first ? divisibility[d] : gcd(out.divisibility[d], divisibility[d]);
      out.constancy[d] = first ? constancy[d] : gcd(out.constancy[d], constancy[d]);
    }
    first = false;
  };
  for (Value in : incoming) {
    if (!in)
      return AxisInfo::unknown(rank);
    if (isForwardOf(in, arg))
      continue;
    Operation *def = in.getDefiningOp();
    if (def && isa<AddPtrOp, arith::AddIOp>(def) && isForwardOf(def->getOperand(0), arg)) {
      // A step: runs survive where the increment is constant; alignment is what both keep.
      Value inc = def->getOperand(1);
      ensure(inc);
      const AxisInfo &step = get(inc);
      SmallVector<int64_t> contiguity(rank), divisibility(rank);
      for (unsigned d = 0; d < rank; ++d) {
        contiguity[d] = step.constancy[d];
        divisibility[d] = std::min(step.divisibility[d] * scale, kMaxDivisor);
      }
      meet(contiguity, divisibility, step.constancy);
      continue;
    }
    const AxisInfo &init = get(in);
    meet(init.contiguity, init.divisibility, init.constancy);
  }
  if (first)
    return AxisInfo::unknown(rank);
  return out;
}

/// The values `block`'s argument `argNumber` receives along each edge into it; a null value
/// where a predecessor's terminator does not say (not a branch, or no operand for it).
static SmallVector<Value> getIncomingValues(Block &block, unsigned argNumber) {
  SmallVector<Value> incoming;
  for (auto it = block.pred_begin(); it != block.pred_end(); ++it) {
    auto branch = dyn_cast<BranchOpInterface>((*it)->getTerminator());
    if (!branch) {
      incoming.push_back(Value());
      break;
    }
    for (unsigned s = 0; s < branch->getNumSuccessors(); ++s)
      if (branch->getSuccessor(s) == &block)
        incoming.push_back(branch.getSuccessorOperands(s)[argNumber]);
  }
  return incoming;
}

void AxisInfoAnalysis::visitBlockArguments(Block &block) {
  for (BlockArgument arg : block.getArguments()) {
    SmallVector<Value> incoming = getIncomingValues(block, arg.getArgNumber());
    // Tiles, and scalar pointers (a row pointer advanced by a stride once scf.for is a CFG
    // loop), through their inductions.
    if (auto tile = dyn_cast<RankedTensorType>(arg.getType());
        (tile && isa<IntegerType, PointerType>(tile.getElementType())) ||
        isa<PointerType>(arg.getType())) {
      infos[arg] = getInductionInfo(arg, incoming);
      continue;
    }
    if (!isa<IntegerType>(arg.getType()))
      continue;
    int64_t div = int64_t(1) << 30;
    bool known = !llvm::is_contained(incoming, Value());
    for (Value in : incoming) {
      if (!in)
        break; // unknown: div is not used
      // The back edge of an induction: arg + x adds x's divisibility.
      if (auto add = in.getDefiningOp<arith::AddIOp>()) {
        if (isForwardOf(add.getLhs(), arg)) {
          div = std::min(div, get(add.getRhs()).divisibility[0]);
          continue;
        }
        if (isForwardOf(add.getRhs(), arg)) {
          div = std::min(div, get(add.getLhs()).divisibility[0]);
          continue;
        }
      }
      if (isForwardOf(in, arg))
        continue;
      div = std::min(div, get(in).divisibility[0]);
    }
    AxisInfo info = AxisInfo::unknown(1);
    if (known && block.hasNoPredecessors() == false)
      info.divisibility[0] = std::max<int64_t>(1, div);
    infos[arg] = info;
  }
}

const AxisInfo &AxisInfoAnalysis::get(Value value) const {
  auto it = infos.find(value);
  if (it != infos.end())
    return it->second;
  unsigned rank = shapeOrScalar(value.getType()).size();
  auto [u, inserted] = unknowns.try_emplace(rank, AxisInfo::unknown(rank));
  return u->second;
}

void AxisInfoAnalysis::visit(Operation *op) {
  // The induction variable of `for i in range(lb, ub, step)` is lb + j * step: divisible by
  // what divides both (Triton's rule). Loop-carried integers and pointers, tiles or scalars,
  // keep what their initial value and their step both keep (a row pointer advanced by a
  // stride, `X_ptr += stride_x`, stays as aligned as both); other loop-carried values are
  // unknown.
  if (auto forOp = dyn_cast<scf::ForOp>(op)) {
    AxisInfo iv = AxisInfo::unknown(1);
    iv.divisibility[0] =
        std::min(get(forOp.getLowerBound()).divisibility[0], get(forOp.getStep()).divisibility[0]);
    infos[forOp.getInductionVar()] = iv;
    auto yield = cast<scf::YieldOp>(forOp.getBody()->getTerminator());
    for (auto [i, arg] : llvm::enumerate(forOp.getRegionIterArgs()))
      if (isa<IntegerType, PointerType>(getElementTypeOrSelf(arg.getType()))) {
        infos[arg] = getInductionInfo(arg, {forOp.getInitArgs()[i], yield.getOperand(i)});
        // What the loop leaves is one more step (or the initial value): the same lattice
        // (a row pointer walked across channels, then walked back, stays aligned).
        AxisInfo info = infos.lookup(arg);
        infos[forOp.getResult(i)] = info;
      }
    return;
  }
  // A while loop's carried values as inductions too: the condition block's arguments keep
  // what the initial values and the body's steps keep; the body's arguments are what the
  // condition forwards.
  if (auto whileOp = dyn_cast<scf::WhileOp>(op)) {
    scf::YieldOp yield = whileOp.getYieldOp();
    for (auto [i, arg] : llvm::enumerate(whileOp.getBeforeArguments()))
      if (isa<IntegerType, PointerType>(getElementTypeOrSelf(arg.getType())))
        infos[arg] = getInductionInfo(arg, {whileOp.getInits()[i], yield.getOperand(i)});
    scf::ConditionOp condition = whileOp.getConditionOp();
    for (auto [i, arg] : llvm::enumerate(whileOp.getAfterArguments())) {
      auto from = dyn_cast<BlockArgument>(condition.getArgs()[i]);
      if (from && from.getOwner() == whileOp.getBeforeBody() && infos.count(from)) {
        AxisInfo info = infos.lookup(from);
        infos[arg] = info;
        infos[whileOp.getResult(i)] = info; // the loop leaves what the condition forwards
      }
    }
    return;
  }
  if (op->getNumResults() != 1)
    return;
  Value result = op->getResult(0);
  Type type = result.getType();
  Type elem = getElementTypeOrSelf(type);
  if (!isa<IntegerType, PointerType>(elem))
    return;
  SmallVector<int64_t> shape = shapeOrScalar(type);
  unsigned rank = shape.size();
  auto in = [&](unsigned i) -> const AxisInfo & { return get(op->getOperand(i)); };
  AxisInfo out = AxisInfo::unknown(rank);

  // Constants: every element known; constant along every dimension.
  if (std::optional<int64_t> c = constantValue(result)) {
    infos[result] = AxisInfo::constant(shape, highestPowerOf2Divisor(*c));
    return;
  }

  llvm::TypeSwitch<Operation *>(op)
      .Case([&](MakeRangeOp range) {
        // start, start+1, ...: one run over the whole tile, beginning at `start`.
        out.contiguity[0] = range.getEnd() - range.getStart();
        out.divisibility[0] = highestPowerOf2Divisor(range.getStart());
      })
      .Case([&](SplatOp splat) {
        out = AxisInfo::constant(shape, get(splat.getSrc()).divisibility[0]);
      })
      .Case([&](BroadcastOp bc) {
        // Stretched dimensions repeat one element: constant along them.
        const AxisInfo &src = in(0);
        ArrayRef<int64_t> srcShape = bc.getSrc().getType().getShape();
        for (unsigned d = 0; d < rank; ++d) {
          out.divisibility[d] = src.divisibility[d];
          if (srcShape[d] == 1 && shape[d] != 1) {
            out.constancy[d] = shape[d];
          } else {
            out.contiguity[d] = src.contiguity[d];
            out.constancy[d] = src.constancy[d];
          }
        }
      })
      .Case([&](ExpandDimsOp ed) {
        // The new unit dimension holds single elements: each element's own divisibility is
        // the run-start divisibility only if no dimension has runs longer than one.
        const AxisInfo &src = in(0);
        unsigned axis = ed.getAxis();
        int64_t elemDiv = kMaxDivisor;
        for (unsigned d = 0; d < src.getRank(); ++d)
          elemDiv = src.contiguity[d] > 1 ? 1 : std::min(elemDiv, src.divisibility[d]);
        out.contiguity.assign(src.contiguity.begin(), src.contiguity.end());
        out.divisibility.assign(src.divisibility.begin(), src.divisibility.end());
        out.constancy.assign(src.constancy.begin(), src.constancy.end());
        out.contiguity.insert(out.contiguity.begin() + axis, 1);
        out.divisibility.insert(out.divisibility.begin() + axis, elemDiv);
        out.constancy.insert(out.constancy.begin() + axis, 1);
      })
      .Case<arith::AddIOp, AddPtrOp>([&](Operation *) {
        // (run of +1) + (constant run) is a run of +1 over their common aligned length.
        const AxisInfo &a = in(0), &b = in(1);
        int64_t scale = pointeeBytes(op->getOperand(0).getType());
        for (unsigned d = 0; d < rank; ++d) {
          out.contiguity[d] =
              std::max(gcd(a.contiguity[d], b.constancy[d]), gcd(a.constancy[d], b.contiguity[d]));
          out.divisibility[d] = gcd(a.divisibility[d], b.divisibility[d] * scale);
          out.constancy[d] = gcd(a.constancy[d], b.constancy[d]);
        }
      })
      .Case([&](arith::SubIOp) {
        const AxisInfo &a = in(0), &b = in(1);
        for (unsigned d = 0; d < rank; ++d) {
          out.contiguity[d] = gcd(a.contiguity[d], b.constancy[d]);
          out.divisibility[d] = gcd(a.divisibility[d], b.divisibility[d]);
          out.constancy[d] = gcd(a.constancy[d], b.constancy[d]);
        }
      })
      .Case([&](arith::MulIOp) {
        // Run starts of a product are products of run starts only if neither side has runs
        // longer than one; otherwise only the other factor's divisibility survives.
        const AxisInfo &a = in(0), &b = in(1);
        for (unsigned d = 0; d < rank; ++d) {
          int64_t da = a.contiguity[d] > 1 ? 1 : a.divisibility[d];
          int64_t db = b.contiguity[d] > 1 ? 1 : b.divisibility[d];
          out.divisibility[d] = std::min(da * db, kMaxDivisor);
          out.constancy[d] = gcd(a.constancy[d], b.constancy[d]);
          // x * 1 keeps x's runs.
          if (constantValue(op->getOperand(1)) == 1)
            out.contiguity[d] = a.contiguity[d];
          else if (constantValue(op->getOperand(0)) == 1)
            out.contiguity[d] = b.contiguity[d];
        }
      })
      .Case<arith::RemSIOp, arith::RemUIOp>([&](Operation *) {
        // (s + i) % n with s and n multiples of L does not wrap inside an aligned run of L.
        const AxisInfo &a = in(0), &b = in(1);
        for (unsigned d = 0; d < rank; ++d) {
          out.constancy[d] = gcd(a.constancy[d], b.constancy[d]);
          if (b.constancy[d] == shape[d])
            out.contiguity[d] = gcd(gcd(a.contiguity[d], a.divisibility[d]), b.divisibility[d]);
          out.divisibility[d] = gcd(a.divisibility[d], b.divisibility[d]);
        }
      })
      .Case<arith::DivSIOp, arith::DivUIOp, arith::ShRSIOp, arith::ShRUIOp>([&](Operation *) {
        // x / c (x >> log2 c) for a power-of-two constant c: x's element divisibility shrinks
        // by c (k0 // 2 of a multiple of 64 is a multiple of 32: the division is exact). An
        // aligned run of +1 gives runs of equal values where the division floors (unsigned
        // division, shifts); truncating signed division does not (-4/4, -3/4 = -1, 0).
        const AxisInfo &a = in(0), &b = in(1);
        std::optional<int64_t> c = constantValue(op->getOperand(1));
        if (c && isa<arith::ShRSIOp, arith::ShRUIOp>(op))
          c = *c >= 0 && *c < 62 ? std::optional<int64_t>(int64_t(1) << *c) : std::nullopt;
        bool pow2 = c && *c > 0 && (*c & (*c - 1)) == 0;
        for (unsigned d = 0; d < rank; ++d) {
          out.constancy[d] = gcd(a.constancy[d], b.constancy[d]);
          if (!pow2)
            continue;
          if (a.contiguity[d] == 1 && a.divisibility[d] % *c == 0)
            out.divisibility[d] = a.divisibility[d] / *c;
          else if (a.contiguity[d] > 1 && !isa<arith::DivSIOp>(op))
            out.constancy[d] =
                std::max(out.constancy[d], gcd(gcd(a.contiguity[d], a.divisibility[d]), *c));
        }
      })
      .Case<arith::MinSIOp, arith::MaxSIOp, arith::MinUIOp, arith::MaxUIOp>([&](Operation *) {
        // Each element is one of the operands' elements: divisible by what divides both.
        const AxisInfo &a = in(0), &b = in(1);
        for (unsigned d = 0; d < rank; ++d) {
          out.constancy[d] = gcd(a.constancy[d], b.constancy[d]);
          out.divisibility[d] = gcd(a.divisibility[d], b.divisibility[d]);
        }
      })
      .Case([&](arith::ShLIOp) {
        // x << c: element divisibility times 2^c (contiguity is lost).
        const AxisInfo &a = in(0), &b = in(1);
        std::optional<int64_t> c = constantValue(op->getOperand(1));
        for (unsigned d = 0; d < rank; ++d) {
          out.constancy[d] = gcd(a.constancy[d], b.constancy[d]);
          if (c && *c >= 0 && *c < 32 && a.contiguity[d] == 1)
            out.divisibility[d] = std::min(a.divisibility[d] << *c, kMaxDivisor);
        }
      })
      .Case([&](arith::CmpIOp cmp) {
        const AxisInfo &a = in(0), &b = in(1);
        using P = arith::CmpIPredicate;
        P pred = cmp.getPredicate();
        // x < n (and x >= n) is constant over an aligned run of +1 of length L when n is a
        // multiple of L constant over that run: s+L-1 < n  <=>  s < n for s, n multiples of L.
        bool lhsRun = pred == P::slt || pred == P::ult || pred == P::sge || pred == P::uge;
        bool rhsRun = pred == P::sgt || pred == P::ugt || pred == P::sle || pred == P::ule;
        for (unsigned d = 0; d < rank; ++d) {
          int64_t c = gcd(a.constancy[d], b.constancy[d]);
          if (lhsRun)
            c = std::max(c, gcd(gcd(gcd(a.contiguity[d], a.divisibility[d]), b.divisibility[d]),
                                b.constancy[d]));
          if (rhsRun)
            c = std::max(c, gcd(gcd(gcd(b.contiguity[d], b.divisibility[d]), a.divisibility[d]),
                                a.constancy[d]));
          out.constancy[d] = c;
        }
      })
      .Case<arith::AndIOp, arith::OrIOp, arith::XOrIOp>([&](Operation *) {
        const AxisInfo &a = in(0), &b = in(1);
        for (unsigned d = 0; d < rank; ++d)
          out.constancy[d] = gcd(a.constancy[d], b.constancy[d]);
      })
      .Case([&](arith::SelectOp sel) {
        const AxisInfo &c = get(sel.getCondition()), &a = in(1), &b = in(2);
        unsigned crank = c.getRank();
        for (unsigned d = 0; d < rank; ++d) {
          int64_t cc = crank == rank ? c.constancy[d] : shape[d];
          out.constancy[d] = gcd(cc, gcd(a.constancy[d], b.constancy[d]));
          out.contiguity[d] = gcd(cc, std::min(a.contiguity[d], b.contiguity[d]));
          out.divisibility[d] = gcd(a.divisibility[d], b.divisibility[d]);
        }
      })
      .Case<arith::ExtSIOp, arith::ExtUIOp, arith::TruncIOp>([&](Operation *) { out = in(0); })
      .Case([&](PtrCastOp) {
        // The addresses are unchanged: their byte alignment and the runs of equal values
        // stay. A run of consecutive elements stays one only where the element size does
        // (an i64 address counts bytes): `p.to(tl.pointer_type(tl.int32))` of a 16-byte
        // aligned uint8 pointer is still 16-byte aligned.
        const AxisInfo &src = in(0);
        bool sameStep = pointeeBytes(op->getOperand(0).getType()) == pointeeBytes(type);
        for (unsigned d = 0; d < rank; ++d) {
          out.divisibility[d] = src.divisibility[d];
          out.constancy[d] = src.constancy[d];
          out.contiguity[d] = sameStep ? src.contiguity[d] : 1;
        }
      })
      .Default([&](Operation *) {});
  // The user's hints (tl.multiple_of, tl.max_contiguous, tl.max_constancy) win, as in Triton.
  auto take = [&](StringRef name, SmallVectorImpl<int64_t> &field) {
    if (!trustHints)
      return;
    if (auto hint = op->getAttrOfType<DenseI64ArrayAttr>(name))
      if (hint.size() == rank)
        for (unsigned d = 0; d < rank; ++d)
          field[d] = hint[d];
  };
  take(kMultipleOfAttr, out.divisibility);
  take(kMaxContiguousAttr, out.contiguity);
  take(kMaxConstancyAttr, out.constancy);
  infos[result] = out;
}

unsigned AxisInfoAnalysis::getPtrVectorWidth(Value ptr, unsigned dim, unsigned maxBits) const {
  const AxisInfo &info = get(ptr);
  int64_t bytes = pointeeBytes(ptr.getType());
  int64_t alignElems = std::max<int64_t>(1, info.divisibility[dim] / bytes);
  int64_t width = std::min<int64_t>(info.contiguity[dim], alignElems);
  width = std::min<int64_t>(width, std::max<int64_t>(1, maxBits / (bytes * 8)));
  return std::max<int64_t>(1, width);
}

int64_t AxisInfoAnalysis::getMaskConstancy(Value mask, unsigned dim) const {
  return get(mask).constancy[dim];
}
