//===- SliceFlow.cpp - Where a tile's rows or columns go -------------------===//
//
// See SliceFlow.h.
//
//===----------------------------------------------------------------------===//

#include "SliceFlow.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace kiln {

namespace {

/// Whether `t` is a tile of `like`'s shape.
bool sameTileShape(Type t, Type like) {
  auto tt = dyn_cast<RankedTensorType>(t);
  auto lt = dyn_cast<RankedTensorType>(like);
  return tt && lt && tt.getShape() == lt.getShape();
}

bool computedAlike(Value a, Value b, int depth) {
  if (a == b)
    return true;
  Operation *x = a.getDefiningOp(), *y = b.getDefiningOp();
  if (!x || !y || depth == 0 || a.getType() != b.getType() || x->getName() != y->getName() ||
      x->getNumRegions() || !isPure(x) || x->getAttrDictionary() != y->getAttrDictionary() ||
      x->getNumOperands() != y->getNumOperands() ||
      cast<OpResult>(a).getResultNumber() != cast<OpResult>(b).getResultNumber())
    return false;
  for (auto [p, q] : llvm::zip(x->getOperands(), y->getOperands()))
    if (!computedAlike(p, q, depth - 1))
      return false;
  return true;
}

} // namespace

bool computedAlike(Value a, Value b) { return computedAlike(a, b, 6); }

bool slicesOnlyReachDroppingStores(Value v, int dim,
                                   llvm::function_ref<bool(StoreOp, int)> storeDrops) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getRank() != 2)
    return false;
  SmallVector<std::pair<Value, int>> work{{v, dim}};
  llvm::DenseSet<std::pair<Value, int>> seen{{v, dim}};
  auto reach = [&](Value x, int d) {
    auto t = dyn_cast<RankedTensorType>(x.getType());
    if (!t || t.getRank() != 2)
      return false;
    if (seen.insert({x, d}).second)
      work.push_back({x, d});
    return true;
  };
  while (!work.empty()) {
    if (seen.size() > 4096)
      return false;
    auto [x, d] = work.pop_back_val();
    for (OpOperand &use : x.getUses()) {
      Operation *user = use.getOwner();
      unsigned n = use.getOperandNumber();
      bool ok = false;
      if (auto dot = dyn_cast<DotOp>(user)) {
        // result[i, j] = sum_k a[i, k] b[k, j] + c[i, j]
        ok = (n == 0 && d == 0) || (n == 1 && d == 1) || n == 2;
        ok = ok && reach(dot.getResult(), d);
      } else if (auto trans = dyn_cast<TransOp>(user)) {
        ArrayRef<int32_t> order = trans.getOrder();
        ok = order.size() == 2 && reach(trans.getResult(), order[0] == d ? 0 : 1);
      } else if (auto store = dyn_cast<StoreOp>(user)) {
        ok = &use == &store.getValueMutable() && storeDrops(store, d);
      } else if (auto loop = dyn_cast<scf::ForOp>(user)) {
        OpResult result = loop.getTiedLoopResult(&use);
        BlockArgument arg = loop.getTiedLoopRegionIterArg(&use);
        ok = result && arg && reach(result, d) && reach(arg, d);
      } else if (auto yield = dyn_cast<scf::YieldOp>(user)) {
        Operation *parent = yield->getParentOp();
        if (auto loop = dyn_cast<scf::ForOp>(parent))
          ok = reach(loop.getRegionIterArgs()[n], d) && reach(loop.getResult(n), d);
        else if (auto ifOp = dyn_cast<scf::IfOp>(parent))
          ok = reach(ifOp.getResult(n), d);
      } else if (user->getNumResults() == 1 &&
                 sameTileShape(user->getResult(0).getType(), x.getType()) &&
                 (OpTrait::hasElementwiseMappableTraits(user) ||
                  (isa<ExternElementwiseOp>(user) && cast<ExternElementwiseOp>(user).getPure()))) {
        // Element (i, j) from the operands' elements (i, j) (other operands: tiles of the same
        // shape, whatever they hold).
        ok = reach(user->getResult(0), d);
      }
      if (!ok)
        return false;
    }
  }
  return true;
}

} // namespace kiln
