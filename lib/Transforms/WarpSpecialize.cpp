//===- WarpSpecialize.cpp - A producer warpgroup for a loop's TMA copies --===//
//
// This file implements -kiln-warp-specialize (see Passes.td): in a kernel whose one loop with
// TMA rings (marked tl.range(..., warp_specialize=True), or any with all-loops) runs several
// dots and frees its slots through empty barriers, a producer warpgroup beside the program's
// warps runs the loop's ring side, and the program's warps (the consumers, the warps every
// layout was assigned over) run the rest; with ping-pong the consumers' two warpgroups take
// turns issuing the loop's dots.
//
// Why it is sound. -kiln-pipeline-dot-operands already gives such a loop the shape of a
// producer and consumers: every iteration waits on its slot's full barrier; thread 0 waits on
// the empty barrier of the slot it is about to overwrite (every consumer warp arrives there
// once it is done with the slot), then announces the bytes (expect_tx) and issues the copies,
// all from scalars the loop computes from its induction variable and its slot and phase
// arguments. Moving that work to another warpgroup changes who waits, not what is waited
// for: the copies still wait for the slot to be free, and the consumers still wait for the
// copies. The producer's loop has the same bounds and the same slot and phase arithmetic, so
// its iteration i copies what the consumers' iteration i reads, as thread 0 did. Nothing after
// the loop touches its rings.
//
// Ifs around the loop (FlashAttention-3's order skips its loop without keys) are copied
// for the producer, with the scalar ops of their blocks it needs; the rings and barriers they
// allocate move before the split, where every thread sets them up.
//
// What it is for: no consumer warp stops on an empty barrier or issues copies between its
// dots, so the two warpgroups of an attention program are no longer tied to each other's
// progress at every iteration. On the H100 (kiln_kernels' forward at D 128, session 30) that
// alone changed nothing for the plain loop (0.99-1.01x). It pays with the ping-pong (see
// addPingPong) on FlashAttention-3's order, where a turn is the two dots issued back to back:
// 548 / 587 -> 575 / 604 TFLOP/s at 4x32x4096 / 1x32x16384 (session 31).
//
// Registers: the launch has 32 * (n + 4) threads, each starting with the most registers that
// launch allows (kgpu::getEntryRegisters: 65536 / (32 * (n + 4)) rounded down to 8, 168 at 384
// threads, which the lowering declares as the kernel's .maxnreg so that ptxas knows it); the
// producer gives all but `producer-registers` back (setmaxnreg.dec) and the consumers take
// them (setmaxnreg.inc), the two counts chosen to fit that pool (an increase the pool cannot
// meet would wait forever).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Dialect/KilnGPU/IR/Dialect.h"
#include "kiln/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace kiln {
#define GEN_PASS_DEF_KILNWARPSPECIALIZE
#include "kiln/Passes.h.inc"
} // namespace kiln

using namespace mlir;
namespace kgpu = kiln::gpu;

namespace {

/// Warps of a warpgroup (wgmma and setmaxnreg work on whole warpgroups).
constexpr unsigned kWarpgroupWarps = 4;

bool isTensorTyped(Operation *op) {
  auto shaped = [](Type t) { return isa<ShapedType>(t); };
  return llvm::any_of(op->getResultTypes(), shaped) || llvm::any_of(op->getOperandTypes(), shaped);
}

/// Scalar arithmetic the producer may run a copy of: no regions, no memory effects, no tiles.
bool isScalarPure(Operation *op) {
  return !op->getNumRegions() && isMemoryEffectFree(op) && !isTensorTyped(op);
}

/// The plan for one kernel: its ring loop and the ifs around it, the ring-side ops of its
/// body (in body order), the ops they need, and the loop's iteration arguments the producer
/// carries.
struct Plan {
  scf::ForOp loop;
  SmallVector<scf::IfOp, 2> nest;     // the ifs the loop is in (then-blocks), outermost first
  SmallVector<Operation *> ringOps;   // mbarrier_wait (empty), mbarrier_expect, tma_copy
  llvm::SetVector<Operation *> slice; // scalar ops of the body the ring ops need
  llvm::SetVector<Operation *> outer; // scalar ops of the ifs' blocks the producer needs
  SmallVector<Operation *> hoisted;   // ring and barrier allocations in the ifs' blocks
  SmallVector<unsigned> carried;      // iteration arguments the producer keeps
  SmallVector<Operation *> moved;     // tensor ops before the split, for the consumers

  /// The top-level op the split goes before: the outermost if, or the loop.
  Operation *anchor() { return nest.empty() ? loop.getOperation() : nest.front().getOperation(); }
};

/// Adds to `plan.slice` the body's ops `v` depends on, and the iteration arguments it reads
/// to `args`. Fails on anything but scalar ops free of memory effects.
LogicalResult addSlice(Value v, Plan &plan, llvm::SetVector<unsigned> &args) {
  Block *body = plan.loop.getBody();
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    if (arg.getOwner() == body && arg.getArgNumber() > 0)
      args.insert(arg.getArgNumber() - 1);
    return success();
  }
  Operation *def = v.getDefiningOp();
  if (def->getBlock() != body || plan.slice.contains(def))
    return success();
  if (!isScalarPure(def))
    return failure();
  for (Value operand : def->getOperands())
    if (failed(addSlice(operand, plan, args)))
      return failure();
  plan.slice.insert(def);
  return success();
}

/// Adds to `plan.outer` what the producer needs of `v` when the ifs' blocks define it: scalar
/// ops free of memory effects, cloned into the producer's copy of the ifs (allocations are
/// hoisted before the split instead). Values of the kernel's top block are there already.
LogicalResult addOuter(Value v, Plan &plan) {
  Operation *def = v.getDefiningOp();
  if (!def || plan.outer.contains(def))
    return success();
  Block *top = &plan.anchor()->getParentOfType<func::FuncOp>().getBody().front();
  if (def->getBlock() == top)
    return success();
  if (!llvm::any_of(plan.nest, [&](scf::IfOp nest) { return def->getBlock() == nest.thenBlock(); }))
    return failure();
  if (isa<kgpu::LocalAllocOp, kgpu::MBarrierAllocOp>(def))
    return success(); // hoisted
  if (!isScalarPure(def))
    return failure();
  for (Value operand : def->getOperands())
    if (failed(addOuter(operand, plan)))
      return failure();
  plan.outer.insert(def);
  return success();
}

/// The plan for `func`, or failure where the kernel does not have the shape the file comment
/// describes (it is then left as it is).
FailureOr<Plan> planKernel(func::FuncOp func, bool allLoops) {
  if (!func.getBody().hasOneBlock())
    return failure();
  Block &top = func.getBody().front();
  Plan plan;
  // The one loop whose body issues TMA copies, in the kernel's top block or in the then-blocks
  // of ifs there (a loop that may run no iteration: FlashAttention-3's order).
  bool several = false;
  func.walk([&](scf::ForOp loop) {
    if (loop.getBody()->getOps<kgpu::TmaCopyOp>().empty() ||
        (!allLoops && !loop->hasAttr(kiln::kWarpSpecializeAttr)))
      return;
    several |= bool(plan.loop);
    plan.loop = loop;
  });
  if (!plan.loop || several || top.getTerminator()->getNumOperands())
    return failure();
  for (Operation *at = plan.loop; at->getBlock() != &top;) {
    auto nest = dyn_cast<scf::IfOp>(at->getParentOp());
    if (!nest || at->getBlock() != nest.thenBlock())
      return failure();
    plan.nest.insert(plan.nest.begin(), nest);
    at = nest;
  }
  scf::ForOp loop = plan.loop;
  Block *body = loop.getBody();

  // The loop: TMA copies and its ring ops at the top of its body, several dots, no other
  // kind of copy or barrier, and empty barriers the consumers arrive on.
  unsigned dots = 0;
  bool other = false;
  loop.walk([&](Operation *op) {
    if (isa<kgpu::SharedDotOp>(op))
      ++dots;
    else if (isa<kgpu::AsyncCopyOp, kgpu::AsyncWaitOp, kgpu::AsyncArriveOp, kgpu::BarrierOp,
                 kgpu::MBarrierAllocOp, kgpu::LocalAllocOp, kgpu::TmaStoreOp>(op))
      other = true;
    else if (isa<kgpu::TmaCopyOp, kgpu::MBarrierExpectOp>(op) && op->getBlock() != body)
      other = true;
  });
  if (other || dots < 2)
    return failure();
  llvm::SmallPtrSet<Value, 4> empty;
  for (auto arrive : body->getOps<kgpu::MBarrierArriveOp>())
    empty.insert(arrive.getBarriers());
  bool waited = false;
  for (Operation &op : *body) {
    auto wait = dyn_cast<kgpu::MBarrierWaitOp>(op);
    if (wait && empty.contains(wait.getBarriers())) {
      waited = true;
      plan.ringOps.push_back(&op);
    } else if (isa<kgpu::TmaCopyOp, kgpu::MBarrierExpectOp>(op)) {
      if (!waited)
        return failure(); // a copy that does not wait for its slot to be free
      plan.ringOps.push_back(&op);
    }
  }
  if (!waited)
    return failure();

  // The scalar work the ring ops need, with the iteration arguments it carries.
  llvm::SetVector<unsigned> args;
  for (Operation *op : plan.ringOps)
    for (Value v : op->getOperands())
      if (failed(addSlice(v, plan, args)))
        return failure();
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  for (unsigned i = 0; i < args.size(); ++i) { // grows while the yields need more
    if (isa<ShapedType>(loop.getRegionIterArgs()[args[i]].getType()))
      return failure();
    if (failed(addSlice(yield.getOperand(args[i]), plan, args)))
      return failure();
  }
  plan.carried.assign(args.begin(), args.end());
  llvm::sort(plan.carried);

  // What the producer's copy of the ifs and the loop reads from the ifs' blocks.
  SmallVector<Value> needed = {loop.getLowerBound(), loop.getUpperBound(), loop.getStep()};
  for (unsigned i : plan.carried)
    needed.push_back(loop.getInitArgs()[i]);
  for (scf::IfOp nest : plan.nest)
    needed.push_back(nest.getCondition());
  auto outside = [&](Operation *op) {
    for (Value v : op->getOperands())
      if (!loop.getRegion().isAncestor(v.getParentRegion()))
        needed.push_back(v);
  };
  for (Operation *op : plan.ringOps)
    outside(op);
  for (Operation *op : plan.slice)
    outside(op);
  for (Value v : needed)
    if (failed(addOuter(v, plan)))
      return failure();
  // (Those before the next if or the loop: the rings and barriers it uses. Allocations after
  // it stay with the consumers, their barriers over the consumers alone.)
  for (auto [i, nest] : llvm::enumerate(plan.nest)) {
    Operation *next = i + 1 < plan.nest.size() ? plan.nest[i + 1].getOperation() : loop;
    for (Operation *op = &nest.thenBlock()->front(); op != next; op = op->getNextNode())
      if (isa<kgpu::LocalAllocOp, kgpu::MBarrierAllocOp>(op)) {
        if (op->getNumOperands())
          return failure();
        plan.hoisted.push_back(op);
      }
  }

  // Before the loop: both roles run scalar work, the rings' and barriers' set-up and the
  // first TMA copies (thread 0's). Tensor values, and the cp.async copies of one-slot
  // buffers (q, copied by the threads of its layout), are the consumers' (moved after the
  // split, in order). Loads only read: a tile's goes with the consumers, a scalar's stays
  // where both roles run it (the producer's copies may need it, a block table's entry).
  for (Operation &op : top) {
    if (&op == plan.anchor())
      break;
    if (isa<kgpu::LocalAllocOp, kgpu::MBarrierAllocOp, kgpu::MBarrierExpectOp, kgpu::TmaCopyOp,
            kgpu::BarrierOp>(op))
      continue;
    if (isa<kgpu::AsyncCopyOp, kgpu::AsyncCommitOp, kgpu::AsyncWaitOp>(op)) {
      plan.moved.push_back(&op);
      continue;
    }
    auto load = dyn_cast<kiln::LoadOp>(op);
    if (load && !load.getIsVolatile()) {
      if (isTensorTyped(&op))
        plan.moved.push_back(&op);
      continue;
    }
    if (op.getNumRegions() || !isMemoryEffectFree(&op))
      return failure();
    if (isTensorTyped(&op))
      plan.moved.push_back(&op);
  }
  // What stays before the split must not read a moved value.
  llvm::SmallPtrSet<Operation *, 16> movedSet(plan.moved.begin(), plan.moved.end());
  for (Operation &op : top) {
    if (&op == plan.anchor())
      break;
    if (movedSet.contains(&op))
      continue;
    for (Value v : op.getOperands())
      if (v.getDefiningOp() && movedSet.contains(v.getDefiningOp()))
        return failure();
  }
  for (Value v : needed)
    if (v.getDefiningOp() && movedSet.contains(v.getDefiningOp()))
      return failure();
  for (Operation *op : llvm::concat<Operation *const>(plan.slice, plan.outer))
    for (Value v : op->getOperands())
      if (v.getDefiningOp() && movedSet.contains(v.getDefiningOp()))
        return failure();
  return plan;
}

/// The producer's loop: `plan.loop`'s bounds, the carried scalars, the slice and the ring ops
/// in body order (marked to be issued by the producer's first warp); `map` holds the
/// producer's copies of the ifs' values.
void buildProducerLoop(OpBuilder &b, const Plan &plan, unsigned leaderWarp, IRMapping &map) {
  scf::ForOp loop = plan.loop;
  SmallVector<Value> inits;
  for (unsigned i : plan.carried)
    inits.push_back(map.lookupOrDefault(loop.getInitArgs()[i]));
  auto producer = scf::ForOp::create(b, loop.getLoc(), map.lookupOrDefault(loop.getLowerBound()),
                                     map.lookupOrDefault(loop.getUpperBound()),
                                     map.lookupOrDefault(loop.getStep()), inits);
  Block *body = producer.getBody();
  map.map(loop.getInductionVar(), producer.getInductionVar());
  for (auto [i, arg] : llvm::enumerate(plan.carried))
    map.map(loop.getRegionIterArgs()[arg], producer.getRegionIterArgs()[i]);
  OpBuilder inner = OpBuilder::atBlockBegin(body);
  llvm::SmallPtrSet<Operation *, 8> ring(plan.ringOps.begin(), plan.ringOps.end());
  for (Operation &op : loop.getBody()->without_terminator()) {
    if (!plan.slice.contains(&op) && !ring.contains(&op))
      continue;
    Operation *copy = inner.clone(op, map);
    if (ring.contains(&op))
      copy->setAttr(kgpu::kLeaderWarpAttr, inner.getI32IntegerAttr(int32_t(leaderWarp)));
  }
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  SmallVector<Value> next;
  for (unsigned i : plan.carried)
    next.push_back(map.lookupOrDefault(yield.getOperand(i)));
  // (scf::ForOp::create gives the body a yield only when it carries nothing.)
  if (body->mightHaveTerminator())
    body->getTerminator()->erase();
  inner.setInsertionPointToEnd(body);
  scf::YieldOp::create(inner, loop.getLoc(), next);
}

/// The producer's side: the ifs the loop is in, without results, each with the scalar ops of
/// its block the producer needs, and the producer's loop innermost.
void buildProducer(OpBuilder &b, const Plan &plan, unsigned leaderWarp) {
  IRMapping map;
  OpBuilder at = b;
  for (scf::IfOp nest : plan.nest) {
    auto copy =
        scf::IfOp::create(at, nest.getLoc(), TypeRange(), map.lookupOrDefault(nest.getCondition()),
                          /*withElseRegion=*/false);
    at = copy.getThenBodyBuilder();
    for (Operation &op : nest.thenBlock()->without_terminator())
      if (plan.outer.contains(&op))
        at.clone(op, map);
  }
  buildProducerLoop(at, plan, leaderWarp, map);
}

/// FlashAttention-3's ping-pong between the consumers' two warpgroups: each waits for its
/// turn (named barrier 2 + its index) before it issues the loop's first dot and hands the
/// turn to the other (barrier 3 - its index) once it has issued the last, so that one
/// warpgroup's dots run on the tensor cores while the other computes between its dots.
/// Warpgroup 1 hands warpgroup 0 the first turn before the loop, and warpgroup 0 takes the
/// last hand-over after it. A warpgroup holding the turn only waits for its own dots, so the
/// turns cannot deadlock.
void addPingPong(scf::ForOp loop, Value warp, unsigned warps) {
  SmallVector<kgpu::SharedDotOp, 4> dots(loop.getBody()->getOps<kgpu::SharedDotOp>());
  if (dots.size() < 2)
    return;
  // Only dots issued back to back: a turn that waited for one of its own dots would hold
  // the tensor cores' turn across the work between them (attention's plain order). A wait
  // (a dot's own, or a dot_wait) after k of the turn's dots leaves them running when it
  // lets `pending` >= k groups run on.
  llvm::SmallPtrSet<Operation *, 4> issued;
  for (Operation *op = dots.front(); op != dots.back(); op = op->getNextNode()) {
    uint32_t pending = UINT32_MAX;
    if (auto dot = dyn_cast<kgpu::SharedDotOp>(op)) {
      issued.insert(op);
      pending = dot.getPending();
    } else if (auto wait = dyn_cast<kgpu::DotWaitOp>(op)) {
      pending = wait.getPending();
    }
    if (pending < issued.size())
      return;
  }
  Location loc = loop.getLoc();
  OpBuilder b(loop);
  auto constant = [&](int32_t v) {
    return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
  };
  Value group = arith::DivUIOp::create(b, loc, warp, constant(int32_t(kWarpgroupWarps)));
  Value mine = arith::AddIOp::create(b, loc, group, constant(2));
  Value other = arith::SubIOp::create(b, loc, constant(3), group);
  int32_t threads = int32_t(warps * kgpu::kWarpSize);
  Value second = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, group, constant(0));
  Value firstTurn = constant(2);
  auto first = scf::IfOp::create(b, loc, TypeRange(), second, /*withElseRegion=*/false);
  OpBuilder handOver = first.getThenBodyBuilder();
  kgpu::NamedBarrierOp::create(handOver, loc, firstTurn, threads, /*arrive=*/true);
  // After the loop warpgroup 0 takes the last turn back, so that barrier 2 ends as it began.
  b.setInsertionPointAfter(loop);
  Value firstGroup = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, group, constant(0));
  auto takeBackIf = scf::IfOp::create(b, loc, TypeRange(), firstGroup, /*withElseRegion=*/false);
  OpBuilder takeBack = takeBackIf.getThenBodyBuilder();
  kgpu::NamedBarrierOp::create(takeBack, loc, firstTurn, threads, /*arrive=*/false);
  b.setInsertionPoint(dots.front());
  kgpu::NamedBarrierOp::create(b, loc, mine, threads, /*arrive=*/false);
  b.setInsertionPointAfter(dots.back());
  kgpu::NamedBarrierOp::create(b, loc, other, threads, /*arrive=*/true);
  // The last dot hands the turn over as soon as it is issued, waiting for none of the turn's
  // dots, where their results are read behind dot_waits of their own (or chained into a
  // later dot) and its own was not awaited at issue either.
  kgpu::SharedDotOp last = dots.back();
  bool guarded = last.getPending() > 0 && llvm::all_of(issued, [](Operation *dot) {
                   return llvm::all_of(dot->getUsers(), [](Operation *user) {
                     return isa<kgpu::DotWaitOp, kgpu::SharedDotOp>(user);
                   });
                 });
  if (guarded)
    last.setPending(std::max<uint32_t>(last.getPending(), issued.size() + 1));
}

struct KilnWarpSpecializePass final : kiln::impl::KilnWarpSpecializeBase<KilnWarpSpecializePass> {
  using Base::Base;
  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto warpsAttr = module->getAttrOfType<IntegerAttr>(kgpu::kNumWarpsAttr);
    if (!warpsAttr || !module->hasAttr(kgpu::kWgmmaAttr))
      return;
    unsigned warps = unsigned(warpsAttr.getInt());
    if (warps % kWarpgroupWarps || producerRegisters < 24 || producerRegisters > 256 ||
        producerRegisters % 8)
      return;
    // The consumers' share of the SM's registers, a multiple of 8, at most 240.
    int64_t consumerRegisters =
        (kgpu::kRegistersPerSM - int64_t(kWarpgroupWarps * kgpu::kWarpSize) * producerRegisters) /
        int64_t(warps * kgpu::kWarpSize);
    consumerRegisters = std::min<int64_t>(240, consumerRegisters / 8 * 8);
    // Each thread starts with the launch's share of the SM (at most 248 after rounding to 8):
    // the producer must give some back and the consumers take more (setmaxnreg.inc to fewer
    // registers than a thread holds is not an increase). One consumer warpgroup (4 warps:
    // 248 a thread to start with) does not qualify.
    int64_t start = kgpu::getEntryRegisters(warps + kWarpgroupWarps);
    if (consumerRegisters <= start || int64_t(producerRegisters) >= start)
      return;

    SmallVector<std::pair<func::FuncOp, Plan>, 1> plans;
    for (auto func : module.getOps<func::FuncOp>())
      if (FailureOr<Plan> plan = planKernel(func, allLoops); succeeded(plan))
        plans.emplace_back(func, std::move(*plan));
    if (plans.empty())
      return;
    MLIRContext *ctx = module.getContext();
    Type i32 = IntegerType::get(ctx, 32);
    module->setAttr(kgpu::kLaunchWarpsAttr, IntegerAttr::get(i32, warps + kWarpgroupWarps));
    module->setAttr(kgpu::kConsumerWarpsAttr, IntegerAttr::get(i32, warps));

    for (auto &[func, plan] : plans) {
      scf::ForOp loop = plan.loop;
      Operation *anchor = plan.anchor();
      Location loc = loop.getLoc();
      Block &top = func.getBody().front();
      // The rings and barriers the ifs allocate are set up before the split, by every thread.
      for (Operation *op : plan.hoisted)
        op->moveBefore(anchor);
      // The barriers both roles reach: the set-up before the split.
      for (Operation &op : top) {
        if (&op == anchor)
          break;
        if (isa<kgpu::MBarrierAllocOp, kgpu::BarrierOp>(op))
          op.setAttr(kgpu::kAllThreadsAttr, UnitAttr::get(ctx));
      }
      OpBuilder b(anchor);
      Value warp = kgpu::WarpIdOp::create(b, loc, i32);
      Value isProducer = arith::CmpIOp::create(
          b, loc, arith::CmpIPredicate::uge, warp,
          arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(int32_t(warps))));
      auto split = scf::IfOp::create(b, loc, TypeRange(), isProducer, /*withElseRegion=*/true);

      OpBuilder producer = split.getThenBodyBuilder();
      kgpu::SetMaxRegistersOp::create(producer, loc, int32_t(producerRegisters), false);
      buildProducer(producer, plan, warps);

      // The consumers: the tensor values before the loop, the loop without its ring side,
      // and the rest of the kernel.
      Block *consumer = split.elseBlock();
      OpBuilder cb = OpBuilder::atBlockBegin(consumer);
      auto grow = kgpu::SetMaxRegistersOp::create(cb, loc, int32_t(consumerRegisters), true);
      Operation *at = grow;
      auto moveHere = [&](Operation *op) {
        op->moveAfter(at);
        at = op;
      };
      for (Operation *op : plan.moved)
        moveHere(op);
      SmallVector<Operation *> rest;
      for (Operation *op = anchor; op != top.getTerminator(); op = op->getNextNode())
        rest.push_back(op);
      for (Operation *op : rest)
        moveHere(op);
      for (Operation *op : llvm::reverse(plan.ringOps))
        op->erase();
      if (pingPong && warps == 2 * kWarpgroupWarps)
        addPingPong(loop, warp, warps);
    }
  }
};

} // namespace
