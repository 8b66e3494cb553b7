// RUN: kiln-opt %s -split-input-file -kiln-convert-to-llvm -verify-diagnostics | FileCheck %s

// The TMA lowerings of kiln_gpu (SharedRingToLLVM.cpp): tma_copy (global -> a ring slot,
// completing on the slot's mbarrier) and tma_store (registers -> a one-slot buffer -> global).
// A block is copied in boxes of kiln_gpu.tma_box_rows[arg] rows by one strip of S bytes
// (S = the 128-byte swizzle here, which the host puts in the tensor map): box (strip, row) lies
// at slot byte strip * rows * S + row * S, and reads the tensor at {inner, outer} =
// {coords[1] + strip * S / elemBytes, coords[0] + row} (PTX takes the innermost coordinate
// first, the op the outermost).

// A tensor map argument is a by-value grid constant of 128 bytes aligned to 64. A (128x64 f16,
// K-major, box rows 128) is one box; B (64x128 f16, N-major, box rows 32) is 2 strips of 64
// columns x 2 groups of 32 rows = 4 boxes, strips 64 * 128 = 8192 bytes apart, groups 32 * 128
// = 4096. The copies of each op are issued by one lane of warp 0 (a branch on the warp id read
// from lane 0 at the top, then on elect.sync) where the predicate holds, into slot
// `s` (16 KiB apart) of the ring, on barrier `s` (8 bytes apart).
// CHECK: llvm.mlir.global internal @__kiln_mbarriers_0() {{.*}} : !llvm.array<3 x i64>
// CHECK-LABEL: llvm.func @copy(
// CHECK-SAME: %[[AD:[^:]*]]: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
// CHECK-SAME: %[[BD:[^:]*]]: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant},
// CHECK-SAME: %[[I:[^:]*]]: i32, %[[J:[^:]*]]: i32, %[[S:[^:]*]]: i32, %[[P:[^:]*]]: i1)
// CHECK: %[[WARP:.*]] = llvm.inline_asm {kiln_gpu.uniform_warp_id = "thread_id / 32"} "shfl.sync.idx.b32 $0, $1, 0, 31, -1;"
// CHECK: %[[SMEM:.*]] = llvm.mlir.addressof @__kiln_dynamic_smem : !llvm.ptr<3>
// CHECK-NEXT: %[[RA:.*]] = llvm.getelementptr %[[SMEM]][0] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK: %[[RB:.*]] = llvm.getelementptr %{{.*}}[49152] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK: %[[BARS:.*]] = llvm.mlir.addressof @__kiln_mbarriers_0 : !llvm.ptr<3>
// CHECK: nvvm.barrier0
// The copy of A.
// CHECK-NEXT: %[[SLOTBYTES:.*]] = llvm.mlir.constant(16384 : i32) : i32
// CHECK-NEXT: %[[SLOTOFF:.*]] = llvm.mul %[[S]], %[[SLOTBYTES]] : i32
// CHECK-NEXT: %[[RABASE:.*]] = llvm.ptrtoint %[[RA]] : !llvm.ptr<3> to i32
// CHECK-NEXT: %[[ASLOT:.*]] = llvm.add %[[RABASE]], %[[SLOTOFF]] : i32
// CHECK-NEXT: %[[AMAP:.*]] = llvm.ptrtoint %[[AD]] : !llvm.ptr to i64
// CHECK-NEXT: %[[BARBASE:.*]] = llvm.ptrtoint %[[BARS]] : !llvm.ptr<3> to i32
// CHECK-NEXT: %[[EIGHT:.*]] = llvm.mlir.constant(8 : i32) : i32
// CHECK-NEXT: %[[BAROFF:.*]] = llvm.mul %[[S]], %[[EIGHT]] : i32
// CHECK-NEXT: %[[ABAR:.*]] = llvm.add %[[BARBASE]], %[[BAROFF]] : i32
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[W0:.*]] = llvm.icmp "eq" %[[WARP]], %[[ZERO]] : i32
// CHECK-NEXT: %[[GO:.*]] = llvm.and %[[W0]], %[[P]] : i1
// CHECK-NEXT: llvm.cond_br %[[GO]], ^[[LEADER:.*]], ^[[AFTER:[^ ]*]]
// CHECK-NEXT: ^[[LEADER]]:
// CHECK-NEXT: %[[ONE:.*]] = nvvm.elect.sync -> i1
// CHECK-NEXT: llvm.cond_br %[[ONE]], ^[[THEN:.*]], ^[[JOIN:[^ ]*]]
// CHECK-NEXT: ^[[THEN]]:
// CHECK-NEXT: %[[C0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[DST:.*]] = llvm.add %[[ASLOT]], %[[C0]] : i32
// CHECK-NEXT: %[[C1:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[INNER:.*]] = llvm.add %[[J]], %[[C1]] : i32
// CHECK-NEXT: %[[C2:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[OUTER:.*]] = llvm.add %[[I]], %[[C2]] : i32
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r" %[[DST]], %[[AMAP]], %[[INNER]], %[[OUTER]], %[[ABAR]] : (i32, i64, i32, i32, i32) -> !llvm.void
// CHECK-NEXT: llvm.br ^[[JOIN]]
// CHECK-NEXT: ^[[JOIN]]:
// CHECK-NEXT: llvm.br ^[[AFTER]]
// CHECK-NEXT: ^[[AFTER]]:
// The copy of B (coordinates [%j, %i]: inner %i, outer %j).
// CHECK-NEXT: llvm.mlir.constant(16384 : i32)
// CHECK-NEXT: llvm.mul %[[S]]
// CHECK-NEXT: %[[RBBASE:.*]] = llvm.ptrtoint %[[RB]] : !llvm.ptr<3> to i32
// CHECK-NEXT: %[[BSLOT:.*]] = llvm.add %[[RBBASE]], %{{.*}} : i32
// CHECK-NEXT: %[[BMAP:.*]] = llvm.ptrtoint %[[BD]] : !llvm.ptr to i64
// CHECK: %[[BBAR:.*]] = llvm.add
// CHECK: llvm.and %{{.*}}, %[[P]] : i1
// CHECK-NEXT: llvm.cond_br
// CHECK-NEXT: ^{{.*}}:
// CHECK-NEXT: nvvm.elect.sync
// CHECK-NEXT: llvm.cond_br
// CHECK-NEXT: ^{{.*}}:
// Box (strip 0, rows 0-31).
// CHECK-NEXT: %[[O0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[D0:.*]] = llvm.add %[[BSLOT]], %[[O0]] : i32
// CHECK-NEXT: %[[X0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[IN0:.*]] = llvm.add %[[I]], %[[X0]] : i32
// CHECK-NEXT: %[[Y0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[OUT0:.*]] = llvm.add %[[J]], %[[Y0]] : i32
// CHECK-NEXT: "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r" %[[D0]], %[[BMAP]], %[[IN0]], %[[OUT0]], %[[BBAR]]
// Box (strip 0, rows 32-63).
// CHECK-NEXT: %[[O1:.*]] = llvm.mlir.constant(4096 : i32) : i32
// CHECK-NEXT: %[[D1:.*]] = llvm.add %[[BSLOT]], %[[O1]] : i32
// CHECK-NEXT: %[[X1:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[IN1:.*]] = llvm.add %[[I]], %[[X1]] : i32
// CHECK-NEXT: %[[Y1:.*]] = llvm.mlir.constant(32 : i32) : i32
// CHECK-NEXT: %[[OUT1:.*]] = llvm.add %[[J]], %[[Y1]] : i32
// CHECK-NEXT: "cp.async.bulk.tensor.2d{{.*}}" %[[D1]], %[[BMAP]], %[[IN1]], %[[OUT1]], %[[BBAR]]
// Box (strip 1, rows 0-31).
// CHECK-NEXT: %[[O2:.*]] = llvm.mlir.constant(8192 : i32) : i32
// CHECK-NEXT: %[[D2:.*]] = llvm.add %[[BSLOT]], %[[O2]] : i32
// CHECK-NEXT: %[[X2:.*]] = llvm.mlir.constant(64 : i32) : i32
// CHECK-NEXT: %[[IN2:.*]] = llvm.add %[[I]], %[[X2]] : i32
// CHECK-NEXT: %[[Y2:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[OUT2:.*]] = llvm.add %[[J]], %[[Y2]] : i32
// CHECK-NEXT: "cp.async.bulk.tensor.2d{{.*}}" %[[D2]], %[[BMAP]], %[[IN2]], %[[OUT2]], %[[BBAR]]
// Box (strip 1, rows 32-63).
// CHECK-NEXT: %[[O3:.*]] = llvm.mlir.constant(12288 : i32) : i32
// CHECK-NEXT: %[[D3:.*]] = llvm.add %[[BSLOT]], %[[O3]] : i32
// CHECK-NEXT: %[[X3:.*]] = llvm.mlir.constant(64 : i32) : i32
// CHECK-NEXT: %[[IN3:.*]] = llvm.add %[[I]], %[[X3]] : i32
// CHECK-NEXT: %[[Y3:.*]] = llvm.mlir.constant(32 : i32) : i32
// CHECK-NEXT: %[[OUT3:.*]] = llvm.add %[[J]], %[[Y3]] : i32
// CHECK-NEXT: "cp.async.bulk.tensor.2d{{.*}}" %[[D3]], %[[BMAP]], %[[IN3]], %[[OUT3]], %[[BBAR]]
// CHECK-NEXT: llvm.br
// CHECK-NOT: cp.async.bulk.tensor
// CHECK: llvm.return
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.threads_per_warp = 32 : i32, kiln_gpu.wgmma, kiln_gpu.tma_box_rows = array<i32: 128, 32, 0, 0, 0, 0>} {
  func.func @copy(%ad: !kiln.tensormap, %bd: !kiln.tensormap, %i: i32, %j: i32, %s: i32, %p: i1) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[3, 128, 64], f16>
    %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[3, 64, 128], f16>
    %bars = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<3>
    kiln_gpu.tma_copy %ad[%i, %j], %a[%s], %bars, %p : !kiln.tensormap, !kiln_gpu.shared<[3, 128, 64], f16>, !kiln_gpu.mbarriers<3>
    kiln_gpu.tma_copy %bd[%j, %i], %b[%s], %bars, %p : !kiln.tensormap, !kiln_gpu.shared<[3, 64, 128], f16>, !kiln_gpu.mbarriers<3>
    return
  }
}

// -----

// A narrower block: A 64x16 bf16 is 32-byte rows (the 32-byte swizzle, 16 columns per box),
// box rows 64 (the whole block): one copy; 64 x 32 = 2048-byte slots.
// CHECK-LABEL: llvm.func @narrow(
// CHECK-SAME: %[[AD:[^:]*]]: !llvm.ptr {{.*}}, %[[I:[^:]*]]: i32, %[[S:[^:]*]]: i32, %[[P:[^:]*]]: i1)
// CHECK: llvm.mlir.constant(2048 : i32)
// CHECK-NEXT: llvm.mul %[[S]]
// CHECK: nvvm.elect.sync
// CHECK-NEXT: llvm.cond_br
// CHECK-NEXT: ^{{.*}}:
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[D:.*]] = llvm.add
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[IN:.*]] = llvm.add %[[I]]
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[OUT:.*]] = llvm.add %[[I]]
// CHECK-NEXT: "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r" %[[D]], %{{.*}}, %[[IN]], %[[OUT]], %{{.*}}
// CHECK-NEXT: llvm.br
// CHECK-NOT: cp.async.bulk.tensor
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma, kiln_gpu.tma_box_rows = array<i32: 64, 0, 0, 0>} {
  func.func @narrow(%ad: !kiln.tensormap, %i: i32, %s: i32, %p: i1) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 16], bf16>
    %bars = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<2>
    kiln_gpu.tma_copy %ad[%i, %i], %a[%s], %bars, %p : !kiln.tensormap, !kiln_gpu.shared<[2, 64, 16], bf16>, !kiln_gpu.mbarriers<2>
    return
  }
}

// -----

// An expert's block of a 3-D tensor [E, N, K] (the block 1 along E): the box's two inner
// coordinates as for a 2-D block, then the expert's, in cp.async.bulk.tensor.3d. Its group's
// barrier expects the TMA's bytes without arriving (mbarrier.expect_tx: the group's cp.async
// copies arrive there, one arrival a thread).
// CHECK-LABEL: llvm.func @expert(
// CHECK-SAME: %[[AD:[^:]*]]: !llvm.ptr {{.*}}, %[[E:[^:]*]]: i32, %[[I:[^:]*]]: i32, %[[S:[^:]*]]: i32, %[[P:[^:]*]]: i1)
// CHECK: "mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [$0], $1;", "r,r" %{{.*}}, %{{.*}} : (i32, i32) -> !llvm.void
// CHECK: nvvm.elect.sync
// CHECK-NEXT: llvm.cond_br
// CHECK-NEXT: ^{{.*}}:
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[D:.*]] = llvm.add
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[IN:.*]] = llvm.add %[[I]]
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[OUT:.*]] = llvm.add %[[I]]
// CHECK-NEXT: "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3, $5}], [$4];", "r,l,r,r,r,r" %[[D]], %{{.*}}, %[[IN]], %[[OUT]], %{{.*}}, %[[E]]
// CHECK-NEXT: llvm.br
// CHECK-NOT: cp.async.bulk.tensor
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma, kiln_gpu.tma_box_rows = array<i32: 64, 0, 0, 0, 0>} {
  func.func @expert(%ad: !kiln.tensormap, %e: i32, %i: i32, %s: i32, %p: i1) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 16], bf16>
    %bars = kiln_gpu.mbarrier_alloc {arrivals = 128 : i32} : !kiln_gpu.mbarriers<2>
    kiln_gpu.mbarrier_expect %bars[%s], %p {bytes = 2048 : i32, no_arrive} : !kiln_gpu.mbarriers<2>
    kiln_gpu.tma_copy %ad[%e, %i, %i], %a[%s], %bars, %p : !kiln.tensormap, !kiln_gpu.shared<[2, 64, 16], bf16>, !kiln_gpu.mbarriers<2>
    return
  }
}

// -----

// whole_warp (a loop whose last dot runs on across its back edge): warp 0 waits, all its
// lanes, behind a branch on the warp id read from lane 0 once at the top of the kernel
// (shfl.sync.idx: ptxas knows it to be warp-uniform) and the op's predicate; the spin loop
// inside is the plain one. Two such waits share the one shfl.
// CHECK-LABEL: llvm.func @whole_warp(
// CHECK-SAME: %[[S:[^:]*]]: i32, %[[P:[^:]*]]: i1, %[[PH:[^:]*]]: i32)
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x
// CHECK: %[[ID:.*]] = llvm.lshr %[[TID]], %{{.*}} : i32
// CHECK: %[[WARP:.*]] = llvm.inline_asm {kiln_gpu.uniform_warp_id = "thread_id / 32"} "shfl.sync.idx.b32 $0, $1, 0, 31, -1;", "=r,r" %[[ID]]
// CHECK-NOT: shfl.sync.idx
// CHECK: %[[ZERO:.*]] = llvm.icmp "eq" %[[WARP]], %{{.*}} : i32
// CHECK: %[[GO:.*]] = llvm.and %[[ZERO]], %[[P]] : i1
// CHECK: llvm.cond_br %[[GO]], ^[[WAIT:.*]], ^[[AFTER:[^ ]*]]
// CHECK: ^[[WAIT]]:
// CHECK: llvm.inline_asm has_side_effects "{\0A.reg .pred done;\0Await${:uid}:\0Ambarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\0A@!done bra.uni wait${:uid};\0A}", "r,r" %{{.*}}, %[[PH]]
// CHECK: llvm.icmp "eq" %[[WARP]]
// CHECK-NOT: shfl.sync.idx
// CHECK: llvm.return
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @whole_warp(%s: i32, %p: i1, %ph: i32) {
    %empty = kiln_gpu.mbarrier_alloc {arrivals = 4 : i32} : !kiln_gpu.mbarriers<2>
    kiln_gpu.mbarrier_wait %empty[%s], %ph if %p {whole_warp} : !kiln_gpu.mbarriers<2>
    kiln_gpu.mbarrier_wait %empty[%s], %ph if %p {whole_warp} : !kiln_gpu.mbarriers<2>
    return
  }
}

// -----

// tma_store: every thread stores its elements into the buffer (the layout gives each thread
// runs of 8 f16 along the columns: one 16-byte vector store each, 2 per thread) at their
// swizzled N-major offset: (col >> 6) * (32 rows * 128) + row * 128 + (col & 63) * 2, then
// o ^ (((o >> 7) & 7) << 4). Then a proxy fence and a barrier; one lane of warp 0 (no predicate)
// issues one bulk tensor store per box (box rows 16: two boxes, 16 * 128 = 2048 bytes
// apart), commits and waits until they have read the buffer; a barrier ends it.
// CHECK-LABEL: llvm.func @store(
// CHECK-SAME: %[[X:[^:]*]]: !llvm.ptr<1>, %[[CD:[^:]*]]: !llvm.ptr {llvm.align = 64 : i64, llvm.byval = !llvm.array<128 x i8>, nvvm.grid_constant}, %[[I:[^:]*]]: i32, %[[J:[^:]*]]: i32)
// CHECK: %[[WARP:.*]] = llvm.inline_asm {kiln_gpu.uniform_warp_id = "thread_id / 32"}
// CHECK: %[[SMEM:.*]] = llvm.mlir.addressof @__kiln_dynamic_smem
// CHECK-NEXT: %[[BUF:.*]] = llvm.getelementptr %[[SMEM]][0]
// CHECK: %[[BASE:.*]] = llvm.ptrtoint %[[BUF]] : !llvm.ptr<3> to i32
// CHECK: %[[BLOCK:.*]] = llvm.lshr %[[COL:.*]], %{{.*}} : i32
// CHECK-NEXT: %[[M63:.*]] = llvm.mlir.constant(63 : i32) : i32
// CHECK-NEXT: %[[INB:.*]] = llvm.and %[[COL]], %[[M63]] : i32
// CHECK-NEXT: %[[STRIP:.*]] = llvm.mlir.constant(4096 : i32) : i32
// CHECK-NEXT: %[[BO:.*]] = llvm.mul %[[BLOCK]], %[[STRIP]] : i32
// CHECK-NEXT: %[[ROWB:.*]] = llvm.mlir.constant(128 : i32) : i32
// CHECK-NEXT: %[[RO:.*]] = llvm.mul %{{.*}}, %[[ROWB]] : i32
// CHECK-NEXT: %[[O1:.*]] = llvm.add %[[BO]], %[[RO]] : i32
// CHECK-NEXT: %[[EB:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[CO:.*]] = llvm.mul %[[INB]], %[[EB]] : i32
// CHECK-NEXT: %[[O:.*]] = llvm.add %[[O1]], %[[CO]] : i32
// CHECK-NEXT: %[[SMASK:.*]] = llvm.mlir.constant(7 : i32) : i32
// CHECK-NEXT: %[[SEVEN:.*]] = llvm.mlir.constant(7 : i32) : i32
// CHECK-NEXT: %[[SH:.*]] = llvm.lshr %[[O]], %[[SEVEN]] : i32
// CHECK-NEXT: %[[ROW8:.*]] = llvm.and %[[SH]], %[[SMASK]] : i32
// CHECK-NEXT: %[[FOUR:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK-NEXT: %[[CHUNK:.*]] = llvm.shl %[[ROW8]], %[[FOUR]] : i32
// CHECK-NEXT: %[[SW:.*]] = llvm.xor %[[O]], %[[CHUNK]] : i32
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[SWO:.*]] = llvm.add %[[SW]]
// CHECK-NEXT: %[[ADDR:.*]] = llvm.add %[[BASE]], %[[SWO]] : i32
// CHECK-NEXT: %[[PTR:.*]] = llvm.inttoptr %[[ADDR]] : i32 to !llvm.ptr<3>
// CHECK-NEXT: llvm.mlir.undef : vector<8xf16>
// CHECK-COUNT-8: llvm.insertelement
// CHECK-NEXT: llvm.store %{{.*}}, %[[PTR]] {alignment = 16 : i64} : vector<8xf16>, !llvm.ptr<3>
// CHECK: llvm.store %{{.*}} {alignment = 16 : i64} : vector<8xf16>, !llvm.ptr<3>
// CHECK-NEXT: llvm.inline_asm has_side_effects "fence.proxy.async.shared::cta;", ""
// CHECK-NEXT: nvvm.barrier0
// CHECK-NEXT: %[[MAP:.*]] = llvm.ptrtoint %[[CD]] : !llvm.ptr to i64
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[W0:.*]] = llvm.icmp "eq" %[[WARP]], %[[ZERO]] : i32
// CHECK-NEXT: llvm.cond_br %[[W0]], ^[[LEADER:.*]], ^[[AFTER:[^ ]*]]
// CHECK-NEXT: ^[[LEADER]]:
// CHECK-NEXT: %[[ONE:.*]] = nvvm.elect.sync -> i1
// CHECK-NEXT: llvm.cond_br %[[ONE]], ^[[THEN:.*]], ^[[JOIN:[^ ]*]]
// CHECK-NEXT: ^[[THEN]]:
// CHECK-NEXT: %[[S0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[SRC0:.*]] = llvm.add %[[BASE]], %[[S0]] : i32
// CHECK-NEXT: %[[X0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[IN0:.*]] = llvm.add %[[J]], %[[X0]] : i32
// CHECK-NEXT: %[[Y0:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[OUT0:.*]] = llvm.add %[[I]], %[[Y0]] : i32
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];", "l,r,r,r" %[[MAP]], %[[IN0]], %[[OUT0]], %[[SRC0]] : (i64, i32, i32, i32) -> !llvm.void
// CHECK-NEXT: %[[S1:.*]] = llvm.mlir.constant(2048 : i32) : i32
// CHECK-NEXT: %[[SRC1:.*]] = llvm.add %[[BASE]], %[[S1]] : i32
// CHECK-NEXT: %[[X1:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[IN1:.*]] = llvm.add %[[J]], %[[X1]] : i32
// CHECK-NEXT: %[[Y1:.*]] = llvm.mlir.constant(16 : i32) : i32
// CHECK-NEXT: %[[OUT1:.*]] = llvm.add %[[I]], %[[Y1]] : i32
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [$0, {$1, $2}], [$3];", "l,r,r,r" %[[MAP]], %[[IN1]], %[[OUT1]], %[[SRC1]]
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.bulk.commit_group;", ""
// CHECK-NEXT: llvm.inline_asm has_side_effects "cp.async.bulk.wait_group.read 0;", ""
// CHECK-NEXT: llvm.br ^[[JOIN]]
// CHECK-NEXT: ^[[JOIN]]:
// CHECK-NEXT: llvm.br ^[[AFTER]]
// CHECK-NEXT: ^[[AFTER]]:
// CHECK-NEXT: nvvm.barrier0
// CHECK-NEXT: llvm.return
#bl = #kiln_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.threads_per_warp = 32 : i32, kiln_gpu.wgmma, kiln_gpu.tma_box_rows = array<i32: 0, 16, 0, 0>} {
  func.func @store(%x: !kiln.ptr<f16>, %cd: !kiln.tensormap, %i: i32, %j: i32) {
    %buf = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[1, 32, 64], f16>
    %p = kiln.splat %x : tensor<32x64x!kiln.ptr<f16>, #bl>
    %v = kiln.load %p : tensor<32x64x!kiln.ptr<f16>, #bl>
    kiln_gpu.tma_store %cd[%i, %j], %v, %buf : !kiln.tensormap, tensor<32x64xf16, #bl>, !kiln_gpu.shared<[1, 32, 64], f16>
    return
  }
}

// -----

// The lowering's own checks. A tensor map the module gives no box rows for:
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @no_box_rows(%ad: !kiln.tensormap, %i: i32, %s: i32, %p: i1) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 64], f16>
    %bars = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<2>
    // expected-error @below {{'kiln_gpu.tma_copy' op expected a tensor map argument with its box rows in kiln_gpu.tma_box_rows}}
    // expected-error @below {{failed to legalize operation 'kiln_gpu.tma_copy'}}
    kiln_gpu.tma_copy %ad[%i, %i], %a[%s], %bars, %p : !kiln.tensormap, !kiln_gpu.shared<[2, 64, 64], f16>, !kiln_gpu.mbarriers<2>
    return
  }
}

// -----

// A K-major B ring (tl.dot(a, b.T) with B's block loaded N x K) is filled with the boxes of
// the block as the descriptor names it, N x K: 128 rows along N (box rows 128) by one strip
// of 64 K (128 bytes), so one box at {coords[1], coords[0]}, as for A.
// CHECK-LABEL: llvm.func @k_major_b(
// CHECK-SAME: %{{[^:]*}}: !llvm.ptr {{.*}}, %[[I:[^:]*]]: i32, %[[J:[^:]*]]: i32,
// CHECK: cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1, {$2, $3}], [$4];", "r,l,r,r,r" %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}
// CHECK-NOT: cp.async.bulk.tensor
// CHECK: llvm.return
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma, kiln_gpu.tma_box_rows = array<i32: 128, 0, 0, 0, 0>} {
  func.func @k_major_b(%bd: !kiln.tensormap, %i: i32, %j: i32, %s: i32, %p: i1) {
    %b = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : !kiln_gpu.shared<[2, 64, 128], f16>
    %bars = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<2>
    kiln_gpu.tma_copy %bd[%j, %i], %b[%s], %bars, %p : !kiln.tensormap, !kiln_gpu.shared<[2, 64, 128], f16>, !kiln_gpu.mbarriers<2>
    return
  }
}

// -----

// Box rows that do not divide the block's rows (48 of 64) make no box.
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma, kiln_gpu.tma_box_rows = array<i32: 48, 0, 0, 0>} {
  func.func @bad_box_rows(%ad: !kiln.tensormap, %i: i32, %s: i32, %p: i1) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 64], f16>
    %bars = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<2>
    // expected-error @below {{'kiln_gpu.tma_copy' op expected a slot in the layout of the TMA boxes of its block}}
    // expected-error @below {{failed to legalize operation 'kiln_gpu.tma_copy'}}
    kiln_gpu.tma_copy %ad[%i, %i], %a[%s], %bars, %p : !kiln.tensormap, !kiln_gpu.shared<[2, 64, 64], f16>, !kiln_gpu.mbarriers<2>
    return
  }
}

// -----

// tma_store writes its buffer N-major (as a ring of B); a K-major buffer is refused.
#bl = #kiln_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma, kiln_gpu.tma_box_rows = array<i32: 0, 32, 0, 0>} {
  func.func @store_k_major(%x: !kiln.ptr<f16>, %cd: !kiln.tensormap, %i: i32) {
    %buf = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : !kiln_gpu.shared<[1, 32, 64], f16>
    %p = kiln.splat %x : tensor<32x64x!kiln.ptr<f16>, #bl>
    %v = kiln.load %p : tensor<32x64x!kiln.ptr<f16>, #bl>
    // expected-error @below {{'kiln_gpu.tma_store' op expected a buffer in the layout of the TMA boxes of its block}}
    // expected-error @below {{failed to legalize operation 'kiln_gpu.tma_store'}}
    kiln_gpu.tma_store %cd[%i, %i], %v, %buf : !kiln.tensormap, tensor<32x64xf16, #bl>, !kiln_gpu.shared<[1, 32, 64], f16>
    return
  }
}
