//===- LoopSlices.cpp - What loop pipelining clones -----------------------===//
//
// This file implements the helpers of LoopSlices.h.
//
//===----------------------------------------------------------------------===//

#include "LoopSlices.h"
#include "kiln/Dialect/KilnGPU/IR/DotLayouts.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;

FailureOr<SmallVector<Operation *>>
kiln::getAddressSlice(Operation *op, scf::ForOp loop,
                      function_ref<bool(BlockArgument)> acceptIterArg) {
  Block *body = loop.getBody();
  llvm::SetVector<Operation *> slice;
  SmallVector<Value> worklist(op->getOperands());
  while (!worklist.empty()) {
    Value v = worklist.pop_back_val();
    if (v == loop.getInductionVar())
      continue;
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() == body && !(acceptIterArg && acceptIterArg(arg)))
        return failure(); // an iteration argument: the next value is not known yet
      continue;           // defined outside the loop, or accepted
    }
    Operation *def = v.getDefiningOp();
    if (!loop->isProperAncestor(def))
      continue; // loop invariant
    // Free of memory effects, not necessarily speculatable: integer division (a flattened
    // loop's tile index) is cloned too. A clone computes the address of an iteration that
    // may not exist, whose copy or load is masked off.
    if (def->getBlock() != body || def->getNumRegions() || !isMemoryEffectFree(def))
      return failure();
    if (slice.insert(def))
      llvm::append_range(worklist, def->getOperands());
  }
  SmallVector<Operation *> ordered(slice.begin(), slice.end());
  llvm::sort(ordered, [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  return ordered;
}

Value kiln::splatMaskLike(OpBuilder &b, Location loc, Value cond, Type like) {
  if (auto tile = dyn_cast<RankedTensorType>(like))
    return SplatOp::create(b, loc, tile.clone(b.getI1Type()), cond);
  return cond;
}

Value kiln::emitInRange(OpBuilder &b, Location loc, scf::ForOp loop, Value iv) {
  auto pred = loop.getUnsignedCmp() ? arith::CmpIPredicate::ult : arith::CmpIPredicate::slt;
  return arith::CmpIOp::create(b, loc, pred, iv, loop.getUpperBound());
}

void kiln::noteTmaBoxRows(func::FuncOp func, unsigned arg, int32_t rows) {
  auto module = func->getParentOfType<ModuleOp>();
  SmallVector<int32_t> all(func.getNumArguments(), 0);
  if (auto old = module->getAttrOfType<DenseI32ArrayAttr>(kTmaBoxRowsAttr);
      old && old.size() == int64_t(all.size()))
    all.assign(old.asArrayRef().begin(), old.asArrayRef().end());
  all[arg] = all[arg] ? std::min(all[arg], rows) : rows;
  module->setAttr(kTmaBoxRowsAttr, DenseI32ArrayAttr::get(module.getContext(), all));
}

bool kiln::collectInvariantChain(Value v, scf::ForOp loop, llvm::SetVector<Operation *> &ops) {
  if (isa<BlockArgument>(v))
    return cast<BlockArgument>(v).getOwner() != loop.getBody();
  Operation *def = v.getDefiningOp();
  if (!loop->isProperAncestor(def))
    return true;
  if (def->getBlock() != loop.getBody() || def->getNumRegions() || !isPure(def))
    return false;
  if (!ops.insert(def))
    return true;
  return llvm::all_of(def->getOperands(),
                      [&](Value o) { return collectInvariantChain(o, loop, ops); });
}

Value kiln::getInductionIncrement(BlockArgument arg, scf::ForOp loop,
                                  llvm::SetVector<Operation *> &incOps) {
  if (arg.getOwner() != loop.getBody() || arg.getArgNumber() == 0)
    return Value();
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  Value next = yield.getOperand(arg.getArgNumber() - 1), inc;
  if (auto add = next.getDefiningOp<AddPtrOp>(); add && add.getPtr() == arg)
    inc = add.getOffset();
  else if (auto addi = next.getDefiningOp<arith::AddIOp>())
    inc = addi.getLhs() == arg ? addi.getRhs() : addi.getRhs() == arg ? addi.getLhs() : Value();
  if (!inc || !collectInvariantChain(inc, loop, incOps))
    return Value();
  return inc;
}

Value kiln::emitInductionStep(OpBuilder &b, Location loc, Value base, Value step) {
  if (isa<PointerType>(getElementTypeOrSelf(base.getType())))
    return AddPtrOp::create(b, loc, base.getType(), base, step);
  return arith::AddIOp::create(b, loc, base, step);
}
