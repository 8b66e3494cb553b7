// RUN: kiln-opt %s -split-input-file -kiln-convert-to-llvm | FileCheck %s

// The lowering of the mbarrier ops of kiln_gpu (SharedRingToLLVM.cpp) on sm_90a input: each
// barrier is 8 bytes of a static shared array, barrier `slot` at base + 8 * slot; the PTX is
// inline asm (mbarrier.init / arrive / arrive.expect_tx / try_wait.parity).

// mbarrier_alloc: one internal shared i64 array per allocation (named in allocation order,
// each inserted at the top of the module), every barrier initialized by thread 0 (init
// predicated on tid == 0) with the op's arrival count (1 by default), then the init fence and
// a CTA barrier, so that every thread may wait on the barriers afterwards.
// CHECK-DAG: llvm.mlir.global internal @__kiln_mbarriers_0() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<2 x i64>
// CHECK-DAG: llvm.mlir.global internal @__kiln_mbarriers_1() {addr_space = 3 : i32, alignment = 8 : i64} : !llvm.array<3 x i64>
// CHECK-LABEL: llvm.func @alloc(
// CHECK: %[[FULL:.*]] = llvm.mlir.addressof @__kiln_mbarriers_0 : !llvm.ptr<3>
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK: %[[FIRST:.*]] = llvm.icmp "eq" %[[TID]], %{{.*}} : i32
// CHECK: %[[I0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[B0:.*]] = llvm.ptrtoint %[[FULL]] : !llvm.ptr<3> to i32
// CHECK-NEXT: %[[E0:.*]] = llvm.mlir.constant(8 : i32) : i32
// CHECK-NEXT: %[[O0:.*]] = llvm.mul %[[I0]], %[[E0]] : i32
// CHECK-NEXT: %[[A0:.*]] = llvm.add %[[B0]], %[[O0]] : i32
// CHECK-NEXT: llvm.inline_asm has_side_effects "@$0 mbarrier.init.shared::cta.b64 [$1], 1;", "b,r" %[[FIRST]], %[[A0]] : (i1, i32) -> !llvm.void
// CHECK-NEXT: %[[I1:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK: llvm.mul %[[I1]], %{{.*}} : i32
// CHECK: llvm.inline_asm has_side_effects "@$0 mbarrier.init.shared::cta.b64 [$1], 1;", "b,r" %[[FIRST]], %{{.*}} : (i1, i32) -> !llvm.void
// CHECK-NOT: mbarrier.init
// CHECK: llvm.inline_asm has_side_effects "fence.mbarrier_init.release.cluster;", ""
// CHECK-NEXT: nvvm.barrier0
// The second allocation: 3 barriers of 4 arrivals (one per warp).
// CHECK: llvm.mlir.addressof @__kiln_mbarriers_1 : !llvm.ptr<3>
// CHECK-COUNT-3: "@$0 mbarrier.init.shared::cta.b64 [$1], 4;", "b,r"
// CHECK-NOT: mbarrier.init
// CHECK: "fence.mbarrier_init.release.cluster;"
// CHECK-NEXT: nvvm.barrier0
// CHECK-NEXT: llvm.return
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @alloc() {
    %full = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<2>
    %empty = kiln_gpu.mbarrier_alloc {arrivals = 4 : i32} : !kiln_gpu.mbarriers<3>
    return
  }
}

// -----

// mbarrier_expect: thread 0, and only where the predicate holds, arrives on barrier `slot`
// expecting the op's byte count (a real branch: the other threads skip it).
// CHECK-LABEL: llvm.func @expect(
// CHECK-SAME: %[[SLOT:[^:]*]]: i32, %[[PRED:[^:]*]]: i1)
// CHECK: %[[BARS:.*]] = llvm.mlir.addressof @__kiln_mbarriers_0
// CHECK: nvvm.barrier0
// CHECK-NEXT: %[[BASE:.*]] = llvm.ptrtoint %[[BARS]] : !llvm.ptr<3> to i32
// CHECK-NEXT: %[[EIGHT:.*]] = llvm.mlir.constant(8 : i32) : i32
// CHECK-NEXT: %[[OFF:.*]] = llvm.mul %[[SLOT]], %[[EIGHT]] : i32
// CHECK-NEXT: %[[BAR:.*]] = llvm.add %[[BASE]], %[[OFF]] : i32
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[T0:.*]] = llvm.icmp "eq" %[[TID]], %[[ZERO]] : i32
// CHECK-NEXT: %[[GO:.*]] = llvm.and %[[T0]], %[[PRED]] : i1
// CHECK-NEXT: llvm.cond_br %[[GO]], ^[[THEN:.*]], ^[[AFTER:[^ ]*]]
// CHECK-NEXT: ^[[THEN]]:
// CHECK-NEXT: %[[BYTES:.*]] = llvm.mlir.constant(24576 : i32) : i32
// CHECK-NEXT: llvm.inline_asm has_side_effects "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;", "r,r" %[[BAR]], %[[BYTES]] : (i32, i32) -> !llvm.void
// CHECK-NEXT: llvm.br ^[[AFTER]]
// CHECK-NEXT: ^[[AFTER]]:
// CHECK-NEXT: llvm.return
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @expect(%s: i32, %p: i1) {
    %full = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<2>
    kiln_gpu.mbarrier_expect %full[%s], %p {bytes = 24576 : i32} : !kiln_gpu.mbarriers<2>
    return
  }
}

// -----

// mbarrier_wait: every thread spins on try_wait.parity of barrier `slot` at `phase` (unique
// labels per asm instance); with `if %pred` only thread 0 waits, where the predicate holds.
// CHECK-LABEL: llvm.func @wait(
// CHECK-SAME: %[[SLOT:[^:]*]]: i32, %[[PHASE:[^:]*]]: i32, %[[PRED:[^:]*]]: i1)
// CHECK: nvvm.barrier0
// CHECK-NEXT: llvm.ptrtoint
// CHECK-NEXT: llvm.mlir.constant(8 : i32)
// CHECK-NEXT: llvm.mul %[[SLOT]]
// CHECK-NEXT: %[[BAR:.*]] = llvm.add
// CHECK-NEXT: llvm.inline_asm has_side_effects "{\0A.reg .pred done;\0Await${:uid}:\0Ambarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\0A@!done bra.uni wait${:uid};\0A}", "r,r" %[[BAR]], %[[PHASE]] : (i32, i32) -> !llvm.void
// The predicated wait: a branch on tid == 0 && pred around the same spin.
// CHECK: %[[BAR2:.*]] = llvm.add
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[T0:.*]] = llvm.icmp "eq" %[[TID]], %[[ZERO]] : i32
// CHECK-NEXT: %[[GO:.*]] = llvm.and %[[T0]], %[[PRED]] : i1
// CHECK-NEXT: llvm.cond_br %[[GO]], ^[[THEN:.*]], ^[[AFTER:[^ ]*]]
// CHECK-NEXT: ^[[THEN]]:
// CHECK-NEXT: llvm.inline_asm has_side_effects "{{.*}}mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;{{.*}}", "r,r" %[[BAR2]], %[[PHASE]]
// CHECK-NEXT: llvm.br ^[[AFTER]]
// CHECK-NEXT: ^[[AFTER]]:
// CHECK-NEXT: llvm.return
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @wait(%s: i32, %phase: i32, %p: i1) {
    %full = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<2>
    kiln_gpu.mbarrier_wait %full[%s], %phase : !kiln_gpu.mbarriers<2>
    kiln_gpu.mbarrier_wait %full[%s], %phase if %p : !kiln_gpu.mbarriers<2>
    return
  }
}

// -----

// mbarrier_arrive: lane 0 of every warp (tid & 31 == 0), where the predicate holds, arrives
// (a predicated arrive: no branch).
// CHECK-LABEL: llvm.func @arrive(
// CHECK-SAME: %[[SLOT:[^:]*]]: i32, %[[PRED:[^:]*]]: i1)
// CHECK: %[[BARS:.*]] = llvm.mlir.addressof @__kiln_mbarriers_0
// CHECK: nvvm.barrier0
// CHECK-NEXT: %[[MASK:.*]] = llvm.mlir.constant(31 : i32) : i32
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: %[[LANE:.*]] = llvm.and %[[TID]], %[[MASK]] : i32
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[L0:.*]] = llvm.icmp "eq" %[[LANE]], %[[ZERO]] : i32
// CHECK-NEXT: %[[GO:.*]] = llvm.and %[[L0]], %[[PRED]] : i1
// CHECK-NEXT: %[[BASE:.*]] = llvm.ptrtoint %[[BARS]] : !llvm.ptr<3> to i32
// CHECK-NEXT: %[[EIGHT:.*]] = llvm.mlir.constant(8 : i32) : i32
// CHECK-NEXT: %[[OFF:.*]] = llvm.mul %[[SLOT]], %[[EIGHT]] : i32
// CHECK-NEXT: %[[BAR:.*]] = llvm.add %[[BASE]], %[[OFF]] : i32
// CHECK-NEXT: llvm.inline_asm has_side_effects "@$0 mbarrier.arrive.shared::cta.b64 _, [$1];", "b,r" %[[GO]], %[[BAR]] : (i1, i32) -> !llvm.void
// CHECK-NOT: llvm.cond_br
// CHECK: llvm.return
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @arrive(%s: i32, %p: i1) {
    %empty = kiln_gpu.mbarrier_alloc {arrivals = 4 : i32} : !kiln_gpu.mbarriers<3>
    kiln_gpu.mbarrier_arrive %empty[%s], %p : !kiln_gpu.mbarriers<3>
    return
  }
}

// -----

// The cp.async side of barrier-completed rings: async_arrive is every thread's
// cp.async.mbarrier.arrive.noinc on barrier `slot`; proxy_fence is fence.proxy.async;
// kiln_gpu.barrier is bar.sync (nvvm.barrier0).
// CHECK-LABEL: llvm.func @async_arrive(
// CHECK-SAME: %[[SLOT:[^:]*]]: i32)
// CHECK: nvvm.barrier0
// CHECK-NEXT: llvm.ptrtoint
// CHECK-NEXT: llvm.mlir.constant(8 : i32)
// CHECK-NEXT: llvm.mul %[[SLOT]]
// CHECK-NEXT: %[[BAR:.*]] = llvm.add
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.mbarrier.arrive.noinc.shared::cta.b64 [$0];", "r" %[[BAR]] : (i32) -> !llvm.void
// CHECK-NEXT: llvm.inline_asm has_side_effects "fence.proxy.async.shared::cta;", ""  : () -> !llvm.void
// CHECK-NEXT: nvvm.barrier0
// CHECK-NEXT: llvm.return
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @async_arrive(%s: i32) {
    %full = kiln_gpu.mbarrier_alloc {arrivals = 128 : i32} : !kiln_gpu.mbarriers<3>
    kiln_gpu.async_arrive %full[%s] : !kiln_gpu.mbarriers<3>
    kiln_gpu.proxy_fence
    kiln_gpu.barrier
    return
  }
}

// -----

// async_wait: cp.async.wait_group with the op's count; on sm_90a (kiln_gpu.wgmma on the
// module) a proxy fence follows (wgmma reads what the copies wrote), then a CTA barrier.
// CHECK-LABEL: llvm.func @async_wait_wgmma(
// CHECK: llvm.inline_asm has_side_effects "cp.async.commit_group;", ""
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.wait_group 2;", ""
// CHECK-NEXT: llvm.inline_asm has_side_effects "fence.proxy.async.shared::cta;", ""
// CHECK-NEXT: nvvm.barrier0
// CHECK-NEXT: llvm.return
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @async_wait_wgmma() {
    kiln_gpu.async_commit
    kiln_gpu.async_wait {pending = 2 : i32}
    return
  }
}

// -----

// Without wgmma (mma.sync reads the rings through ldmatrix, the generic proxy) no fence.
// CHECK-LABEL: llvm.func @async_wait_mma(
// CHECK: llvm.inline_asm has_side_effects "cp.async.wait_group 0;", ""
// CHECK-NEXT: nvvm.barrier0
// CHECK-NEXT: llvm.return
module attributes {kiln_gpu.num_warps = 4 : i32} {
  func.func @async_wait_mma() {
    kiln_gpu.async_wait {pending = 0 : i32}
    return
  }
}
