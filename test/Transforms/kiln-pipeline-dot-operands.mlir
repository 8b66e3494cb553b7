// RUN: kiln-opt %s -kiln-pipeline-dot-operands="num-warps=4 num-stages=3" -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-pipeline-dot-operands="num-warps=4 num-stages=4" -split-input-file | FileCheck %s --check-prefix=FOUR
// RUN: kiln-opt %s -kiln-pipeline-dot-operands="num-warps=4 num-stages=3 wgmma=false" -split-input-file | FileCheck %s --check-prefix=MMA

// A matmul K loop: both operand loads become copies into 3-slot rings, run S - 1 = 2
// iterations ahead: iterations 0 and 1 before the loop (masked by lb + n * step < ub), one
// group each. The accumulator only goes from one iteration's dot to the next, so each dot runs
// on (pending = 1) while the next iteration starts; the copies of iteration i + 2 go into the
// slot iteration i - 1 read, right after iteration i's dot (which waited for all dots but
// itself) and a barrier that orders every warpgroup's wait before them. After
// the loop every dot and copy is waited for (dot_wait on the accumulator, then the copies).
// CHECK-LABEL: func.func @k_loop(
// CHECK: %[[RA:.*]] = kiln_gpu.local_alloc {operand = 0 : i32} : <[3, 64, 32], f16>
// CHECK: %[[RB:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 32, 64], f16>
// CHECK: %[[IN0:.*]] = arith.cmpi slt, %{{.*}}, %[[UB:.*]] : i32
// CHECK: kiln_gpu.async_copy %[[RA]][%{{.*}}], %{{.*}}, %{{.*}} :
// CHECK: kiln_gpu.async_copy %[[RB]][%{{.*}}], %{{.*}}, %{{.*}} :
// CHECK: kiln_gpu.async_commit
// CHECK: kiln_gpu.async_copy %[[RA]][%{{.*}}], %{{.*}}, %{{.*}} :
// CHECK: kiln_gpu.async_copy %[[RB]][%{{.*}}], %{{.*}}, %{{.*}} :
// CHECK: kiln_gpu.async_commit
// CHECK-NOT: kiln_gpu.async_copy
// CHECK: %[[LOOP:.*]]:2 = scf.for %[[IV:.*]] = %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}, %[[SLOT:.*]] = %{{.*}})
// CHECK-NEXT: kiln_gpu.async_wait {pending = 1 : i32}
// CHECK-NEXT: %[[D:.*]] = kiln_gpu.shared_dot %[[RA]][%[[SLOT]]], %[[RB]][%[[SLOT]]], %[[ACC]] {pending = 1 : i32}
// CHECK-NEXT: kiln_gpu.barrier
// (3 slots: the write slot wraps by a compare and a select, not a remainder)
// CHECK: %[[WSUM:.*]] = arith.addi %[[SLOT]], %{{.*}} : i32
// CHECK: %[[WRAP:.*]] = arith.cmpi uge, %[[WSUM]], %{{.*}} : i32
// CHECK: %[[WSUB:.*]] = arith.subi %[[WSUM]], %{{.*}} : i32
// CHECK: %[[WS:.*]] = arith.select %[[WRAP]], %[[WSUB]], %[[WSUM]] : i32
// CHECK: kiln_gpu.async_copy %[[RA]][%[[WS]]]
// CHECK: kiln_gpu.async_copy %[[RB]][%[[WS]]]
// CHECK: kiln_gpu.async_commit
// CHECK-NOT: kiln.load
// CHECK: arith.select
// CHECK: scf.yield %[[D]], %{{.*}}
// CHECK: %[[DONE:.*]] = kiln_gpu.dot_wait %[[LOOP]]#0
// CHECK-NEXT: kiln_gpu.async_wait {pending = 0 : i32}
// CHECK: kiln.store %{{.*}}, %[[DONE]]
// With 4 slots the copies stay at the top of the body and run S - 2 = 2 ahead, into the slot
// the dot before the previous one read; no second wait.
// FOUR-LABEL: func.func @k_loop(
// FOUR: kiln_gpu.local_alloc {operand = 0 : i32} : <[4, 64, 32], f16>
// FOUR-COUNT-2: kiln_gpu.async_commit
// FOUR: scf.for
// FOUR-NEXT: kiln_gpu.async_wait {pending = 1 : i32}
// FOUR: kiln_gpu.async_commit
// FOUR-NEXT: kiln_gpu.shared_dot {{.*}} {pending = 1 : i32}
// FOUR-NOT: kiln_gpu.async_wait
// FOUR: scf.yield
// Without wgmma (mma.sync reading the rings with ldmatrix) every dot is done within its
// iteration: the copies of iteration i + 2 go at the top, after the wait, into the slot
// iteration i - 1 read, and nothing is left running (no dot_wait).
// MMA-LABEL: func.func @k_loop(
// MMA: %[[RA:.*]] = kiln_gpu.local_alloc {operand = 0 : i32} : <[3, 64, 32], f16>
// MMA-COUNT-2: kiln_gpu.async_commit
// MMA: scf.for %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}, %[[SLOT:.*]] = %{{.*}})
// MMA-NEXT: kiln_gpu.async_wait {pending = 1 : i32}
// MMA: kiln_gpu.async_copy %[[RA]]
// MMA: kiln_gpu.async_commit
// MMA-NEXT: %[[D:.*]] = kiln_gpu.shared_dot %[[RA]][%[[SLOT]]], %{{.*}}[%[[SLOT]]], %[[ACC]] :
// MMA-NOT: kiln_gpu.dot_wait
// MMA: scf.yield %[[D]]
// MMA-NOT: kiln_gpu.dot_wait
// MMA: kiln_gpu.async_wait {pending = 0 : i32}
func.func @k_loop(%A: !kiln.ptr<f16>, %B: !kiln.ptr<f16>, %C: !kiln.ptr<f32>, %K: i32) {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %zero_a = arith.constant dense<0.0> : tensor<64x32xf16>
  %acc0 = arith.constant dense<0.0> : tensor<64x64xf32>
  %r64 = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %r32 = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %acc = scf.for %k = %c0 to %K step %c32 iter_args(%a_acc = %acc0) -> (tensor<64x64xf32>) : i32 {
    %kv = kiln.splat %k : tensor<32xi32>
    %ks = arith.addi %r32, %kv : tensor<32xi32>
    %rows = kiln.expand_dims %r64 {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
    %kr = kiln.expand_dims %ks {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %Kv = kiln.splat %K : tensor<64x1xi32>
    %arow = arith.muli %rows, %Kv : tensor<64x1xi32>
    %arb = kiln.broadcast %arow : tensor<64x1xi32> -> tensor<64x32xi32>
    %akb = kiln.broadcast %kr : tensor<1x32xi32> -> tensor<64x32xi32>
    %aoff = arith.addi %arb, %akb : tensor<64x32xi32>
    %Ks = kiln.splat %K : tensor<1x32xi32>
    %kok = arith.cmpi slt, %kr, %Ks : tensor<1x32xi32>
    %am = kiln.broadcast %kok : tensor<1x32xi1> -> tensor<64x32xi1>
    %ap = kiln.splat %A : tensor<64x32x!kiln.ptr<f16>>
    %aps = kiln.addptr %ap, %aoff : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
    %a = kiln.load %aps, %am, %zero_a : tensor<64x32x!kiln.ptr<f16>>
    %kc = kiln.expand_dims %ks {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
    %c64 = arith.constant 64 : i32
    %N = kiln.splat %c64 : tensor<32x1xi32>
    %brow = arith.muli %kc, %N : tensor<32x1xi32>
    %brb = kiln.broadcast %brow : tensor<32x1xi32> -> tensor<32x64xi32>
    %cols = kiln.expand_dims %r64 {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
    %cb = kiln.broadcast %cols : tensor<1x64xi32> -> tensor<32x64xi32>
    %boff = arith.addi %brb, %cb : tensor<32x64xi32>
    %bp = kiln.splat %B : tensor<32x64x!kiln.ptr<f16>>
    %bps = kiln.addptr %bp, %boff : tensor<32x64x!kiln.ptr<f16>>, tensor<32x64xi32>
    %b = kiln.load %bps : tensor<32x64x!kiln.ptr<f16>>
    %d = kiln.dot %a, %b, %a_acc : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  %cp = kiln.splat %C : tensor<64x64x!kiln.ptr<f32>>
  kiln.store %cp, %acc : tensor<64x64x!kiln.ptr<f32>>
  return
}

// -----

// Not pipelined: the A load has a second use (it would have to stay in registers).
// CHECK-LABEL: func.func @not_copyable(
// CHECK-NOT: kiln_gpu.local_alloc
// CHECK: kiln.dot
func.func @not_copyable(%A: !kiln.ptr<f16>, %K: i32) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %acc0 = arith.constant dense<0.0> : tensor<64x64xf32>
  %acc = scf.for %k = %c0 to %K step %c16 iter_args(%acc_i = %acc0) -> (tensor<64x64xf32>) : i32 {
    %pa = kiln.splat %A : tensor<64x16x!kiln.ptr<f16>>
    %a = kiln.load %pa : tensor<64x16x!kiln.ptr<f16>>
    %pb = kiln.splat %A : tensor<16x64x!kiln.ptr<f16>>
    %b = kiln.load %pb : tensor<16x64x!kiln.ptr<f16>>
    %d = kiln.dot %a, %b, %acc_i : tensor<64x16xf16> * tensor<16x64xf16> -> tensor<64x64xf32>
    %e = arith.extf %a : tensor<64x16xf16> to tensor<64x16xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  return %acc : tensor<64x64xf32>
}

// -----

// Not pipelined: M = 32 is less than 16 rows for each of 4 warps (no warpgroup layout).
// CHECK-LABEL: func.func @too_small(
// CHECK-NOT: kiln_gpu.local_alloc
func.func @too_small(%A: !kiln.ptr<f16>, %K: i32) -> tensor<32x64xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %acc0 = arith.constant dense<0.0> : tensor<32x64xf32>
  %acc = scf.for %k = %c0 to %K step %c16 iter_args(%acc_i = %acc0) -> (tensor<32x64xf32>) : i32 {
    %pa = kiln.splat %A : tensor<32x16x!kiln.ptr<f16>>
    %a = kiln.load %pa : tensor<32x16x!kiln.ptr<f16>>
    %pb = kiln.splat %A : tensor<16x64x!kiln.ptr<f16>>
    %b = kiln.load %pb : tensor<16x64x!kiln.ptr<f16>>
    %d = kiln.dot %a, %b, %acc_i : tensor<32x16xf16> * tensor<16x64xf16> -> tensor<32x64xf32>
    scf.yield %d : tensor<32x64xf32>
  }
  return %acc : tensor<32x64xf32>
}

// -----

// The accumulator is also read inside the loop: each dot completes before the iteration goes
// on (no pending attribute), and copies run S - 1 = 2 iterations ahead.
// CHECK-LABEL: func.func @acc_read_in_loop(
// CHECK-COUNT-2: kiln_gpu.async_commit
// CHECK: scf.for
// CHECK-NEXT: kiln_gpu.async_wait {pending = 1 : i32}
// CHECK: kiln_gpu.shared_dot %{{[^{]*}} : !kiln_gpu.shared<
// CHECK: kiln_gpu.async_wait {pending = 0 : i32}
// CHECK-NOT: kiln_gpu.dot_wait
func.func @acc_read_in_loop(%A: !kiln.ptr<f16>, %K: i32, %out: !kiln.ptr<f32>) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %acc0 = arith.constant dense<0.0> : tensor<64x64xf32>
  %po = kiln.splat %out : tensor<64x64x!kiln.ptr<f32>>
  %acc = scf.for %k = %c0 to %K step %c16 iter_args(%acc_i = %acc0) -> (tensor<64x64xf32>) : i32 {
    %pa = kiln.splat %A : tensor<64x16x!kiln.ptr<f16>>
    %a = kiln.load %pa : tensor<64x16x!kiln.ptr<f16>>
    %pb = kiln.splat %A : tensor<16x64x!kiln.ptr<f16>>
    %b = kiln.load %pb : tensor<16x64x!kiln.ptr<f16>>
    %d = kiln.dot %a, %b, %acc_i : tensor<64x16xf16> * tensor<16x64xf16> -> tensor<64x64xf32>
    kiln.store %po, %d : tensor<64x64x!kiln.ptr<f32>>
    scf.yield %d : tensor<64x64xf32>
  }
  return %acc : tensor<64x64xf32>
}

// -----

// Two dots in one loop, as in flash attention: q is loaded before the loop (copied once, with
// the first group, into a one-slot buffer), k^T and v are loads of the loop (3-slot rings), p
// is computed in the body (the second dot reads it from registers). Both dots complete in
// their iteration; every iteration waits once, then copies k^T and v of iteration i + 2 into
// the slot iteration i - 1 read, in one group. After the loop the copies are waited for.
// CHECK-LABEL: func.func @attention(
// CHECK: %[[Q:.*]] = kiln_gpu.local_alloc {operand = 0 : i32} : <[1, 64, 32], f16>
// CHECK: %[[K:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 32, 32], f16>
// CHECK: %[[V:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 32, 32], f16>
// CHECK: kiln_gpu.async_copy %[[Q]][%{{.*}}], %{{[^,]*}} : <[1, 64, 32], f16>
// CHECK: kiln_gpu.async_copy %[[K]]
// CHECK: kiln_gpu.async_copy %[[V]]
// CHECK: kiln_gpu.async_commit
// CHECK-NOT: kiln_gpu.async_copy %[[Q]]
// CHECK: kiln_gpu.async_copy %[[K]]
// CHECK: kiln_gpu.async_copy %[[V]]
// CHECK: kiln_gpu.async_commit
// CHECK: scf.for %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}, %[[SLOT:.*]] = %{{.*}})
// CHECK-NEXT: kiln_gpu.async_wait {pending = 1 : i32}
// CHECK: kiln_gpu.async_copy %[[K]]
// CHECK: kiln_gpu.async_copy %[[V]]
// CHECK-NEXT: kiln_gpu.async_commit
// CHECK: %[[S:.*]] = kiln_gpu.shared_dot %[[Q]][%{{.*}}], %[[K]][%[[SLOT]]], %{{.*}} : !kiln_gpu.shared<[1, 64, 32], f16>
// CHECK: %[[P:.*]] = arith.truncf
// CHECK: kiln_gpu.shared_dot %[[P]], %[[V]][%[[SLOT]]], %{{.*}} : tensor<64x32xf16>
// CHECK-NOT: kiln.load
// CHECK: scf.yield
// CHECK-NOT: kiln_gpu.dot_wait
// CHECK: kiln_gpu.async_wait {pending = 0 : i32}
// With 4 slots the last dot (p @ v, whose p comes from the first dot) is left running into
// the next iteration, whose first dot's wait retires it; its accumulator is waited for before
// its first use in the body and after the loop. Copies run S - 2 = 2 ahead.
// FOUR-LABEL: func.func @attention(
// FOUR-COUNT-2: kiln_gpu.async_commit
// FOUR: scf.for
// FOUR-NEXT: kiln_gpu.async_wait {pending = 1 : i32}
// FOUR: kiln_gpu.shared_dot %{{.*}} : !kiln_gpu.shared<[1, 64, 32], f16>
// FOUR: %[[ACC:.*]] = kiln_gpu.dot_wait %arg
// FOUR-NEXT: %[[O:.*]] = kiln_gpu.shared_dot %{{.*}}, %[[ACC]] {pending = 1 : i32} : tensor<64x32xf16>
// FOUR: scf.yield %[[O]]
// FOUR: kiln_gpu.dot_wait
// FOUR-NEXT: kiln_gpu.async_wait {pending = 0 : i32}
// Without wgmma only q @ k^T reads rings (q copied once, k^T a ring); p @ v, whose A is
// computed in the body, stays a kiln.dot (mma.sync takes A from rings only).
// MMA-LABEL: func.func @attention(
// MMA: %[[Q:.*]] = kiln_gpu.local_alloc {operand = 0 : i32} : <[1, 64, 32], f16>
// MMA: %[[K:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 32, 32], f16>
// MMA-NOT: kiln_gpu.local_alloc
// MMA: scf.for
// MMA: kiln_gpu.shared_dot %[[Q]][%{{.*}}], %[[K]][%{{.*}}], %{{.*}} :
// MMA: kiln.load
// MMA: kiln.dot
// MMA: scf.yield
func.func @attention(%Q: !kiln.ptr<f16>, %K: !kiln.ptr<f16>, %V: !kiln.ptr<f16>, %n: i32) -> tensor<64x32xf32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %zero_s = arith.constant dense<0.0> : tensor<64x32xf32>
  %acc0 = arith.constant dense<0.0> : tensor<64x32xf32>
  %pq = kiln.splat %Q : tensor<64x32x!kiln.ptr<f16>>
  %q = kiln.load %pq : tensor<64x32x!kiln.ptr<f16>>
  %r32 = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %acc = scf.for %j = %c0 to %n step %c32 iter_args(%o = %acc0) -> (tensor<64x32xf32>) : i32 {
    %jv = kiln.splat %j : tensor<32xi32>
    %cols = arith.addi %r32, %jv : tensor<32xi32>
    %kc = kiln.expand_dims %cols {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %kb = kiln.broadcast %kc : tensor<1x32xi32> -> tensor<32x32xi32>
    %pk = kiln.splat %K : tensor<32x32x!kiln.ptr<f16>>
    %pks = kiln.addptr %pk, %kb : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    %kt = kiln.load %pks : tensor<32x32x!kiln.ptr<f16>>
    %s = kiln.dot %q, %kt, %zero_s : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    %e = math.exp2 %s : tensor<64x32xf32>
    %p = arith.truncf %e : tensor<64x32xf32> to tensor<64x32xf16>
    %vr = kiln.expand_dims %cols {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
    %vb = kiln.broadcast %vr : tensor<32x1xi32> -> tensor<32x32xi32>
    %pv = kiln.splat %V : tensor<32x32x!kiln.ptr<f16>>
    %pvs = kiln.addptr %pv, %vb : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    %v = kiln.load %pvs : tensor<32x32x!kiln.ptr<f16>>
    %d = kiln.dot %p, %v, %o : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    scf.yield %d : tensor<64x32xf32>
  }
  return %acc : tensor<64x32xf32>
}

// -----

// Tutorial 06's forward keeps a row sum of p that p @ v does not read. The last dot of the
// body is issued without waiting for itself, the sum (a reduction and an add, free of memory
// effects, read only by the yield) moves after it and runs while the tensor cores add p @ v,
// and the dot is waited for right before the yield. With 4 slots p @ v runs on into the next
// iteration instead (deferred, as in @attention), and mma.sync dots are left as they are.
// CHECK-LABEL: func.func @attention_row_sum(
// CHECK: scf.for
// CHECK: %[[E:.*]] = math.exp2
// CHECK-NEXT: %[[P:.*]] = arith.truncf %[[E]]
// CHECK: %[[D:.*]] = kiln_gpu.shared_dot %[[P]], %{{.*}} {pending = 1 : i32} : tensor<64x32xf16>
// CHECK-NEXT: %[[SUM:.*]] = kiln.reduce(%[[E]])
// CHECK: kiln.reduce.return
// CHECK: %[[L:.*]] = arith.addf %{{.*}}, %[[SUM]]
// CHECK-NOT: kiln_gpu
// CHECK: %[[DW:.*]] = kiln_gpu.dot_wait %[[D]] : tensor<64x32xf32>
// CHECK-NEXT: scf.yield %[[DW]], %[[L]]
// FOUR-LABEL: func.func @attention_row_sum(
// FOUR: %[[SUM:.*]] = kiln.reduce
// FOUR: kiln_gpu.shared_dot %{{.*}} {pending = 1 : i32} : tensor<64x32xf16>
// FOUR-NOT: kiln_gpu.dot_wait
// FOUR: scf.yield
// MMA-LABEL: func.func @attention_row_sum(
// MMA-NOT: kiln_gpu.dot_wait
// MMA: scf.yield
func.func @attention_row_sum(%Q: !kiln.ptr<f16>, %K: !kiln.ptr<f16>, %V: !kiln.ptr<f16>, %n: i32) -> (tensor<64x32xf32>, tensor<64xf32>) {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %zero_s = arith.constant dense<0.0> : tensor<64x32xf32>
  %acc0 = arith.constant dense<0.0> : tensor<64x32xf32>
  %l0 = arith.constant dense<0.0> : tensor<64xf32>
  %pq = kiln.splat %Q : tensor<64x32x!kiln.ptr<f16>>
  %q = kiln.load %pq : tensor<64x32x!kiln.ptr<f16>>
  %r32 = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %res:2 = scf.for %j = %c0 to %n step %c32 iter_args(%o = %acc0, %l = %l0) -> (tensor<64x32xf32>, tensor<64xf32>) : i32 {
    %jv = kiln.splat %j : tensor<32xi32>
    %cols = arith.addi %r32, %jv : tensor<32xi32>
    %kc = kiln.expand_dims %cols {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %kb = kiln.broadcast %kc : tensor<1x32xi32> -> tensor<32x32xi32>
    %pk = kiln.splat %K : tensor<32x32x!kiln.ptr<f16>>
    %pks = kiln.addptr %pk, %kb : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    %kt = kiln.load %pks : tensor<32x32x!kiln.ptr<f16>>
    %s = kiln.dot %q, %kt, %zero_s : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    %e = math.exp2 %s : tensor<64x32xf32>
    %sum = kiln.reduce(%e) axis = 1 {
    ^bb0(%a: f32, %b: f32):
      %t = arith.addf %a, %b : f32
      kiln.reduce.return %t : f32
    } : (tensor<64x32xf32>) -> tensor<64xf32>
    %l2 = arith.addf %l, %sum : tensor<64xf32>
    %p = arith.truncf %e : tensor<64x32xf32> to tensor<64x32xf16>
    %vr = kiln.expand_dims %cols {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
    %vb = kiln.broadcast %vr : tensor<32x1xi32> -> tensor<32x32xi32>
    %pv = kiln.splat %V : tensor<32x32x!kiln.ptr<f16>>
    %pvs = kiln.addptr %pv, %vb : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    %v = kiln.load %pvs : tensor<32x32x!kiln.ptr<f16>>
    %d = kiln.dot %p, %v, %o : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    scf.yield %d, %l2 : tensor<64x32xf32>, tensor<64xf32>
  }
  return %res#0, %res#1 : tensor<64x32xf32>, tensor<64xf32>
}

// -----

// Flash attention rotated (FlashAttention-3's intra-warpgroup overlap): q @ k_j and p @ v go
// out back to back, the softmax reads the first after the second was issued. Both dots are
// issued without waiting for themselves; q @ k_j is waited for before its first read with
// one dot (p @ v) left running, p @ v before its own first read, so the exp2 overlaps p @ v.
// The copies complete on barriers (one arrival per thread, cp.async.mbarrier.arrive) instead
// of a wait and a CTA barrier; at the end of the iteration each warp arrives on the slot's
// empty barrier, and every thread waits on the empty barrier of the slot it copies into
// (the one iteration i - 1 read) before copying iteration i + 2 there.
// CHECK-LABEL: func.func @attention_rotated(
// CHECK: %[[K:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 32, 32], f16>
// CHECK: %[[V:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 32, 32], f16>
// CHECK: %[[FULL:.*]] = kiln_gpu.mbarrier_alloc {arrivals = 128 : i32} : <3>
// CHECK: %[[EMPTY:.*]] = kiln_gpu.mbarrier_alloc {arrivals = 4 : i32} : <3>
// CHECK: kiln_gpu.async_commit
// CHECK-NEXT: kiln_gpu.async_arrive %[[FULL]][%{{.*}}] : <3>
// CHECK: kiln_gpu.async_commit
// CHECK-NEXT: kiln_gpu.async_arrive %[[FULL]][%{{.*}}] : <3>
// CHECK: scf.for {{.*}} iter_args({{.*}}, %[[SLOT:[^ ]*]] = %{{.*}}, %[[PHASE:[^ ]*]] = %{{.*}})
// CHECK-NEXT: kiln_gpu.mbarrier_wait %[[FULL]][%[[SLOT]]], %[[PHASE]] : <3>
// CHECK-NEXT: kiln_gpu.proxy_fence
// CHECK: %[[S:.*]] = kiln_gpu.shared_dot %{{.*}} {pending = 1 : i32} : !kiln_gpu.shared<[1, 64, 32], f16>
// CHECK-NEXT: %[[D:.*]] = kiln_gpu.shared_dot %{{.*}} {pending = 1 : i32} : tensor<64x32xf16>
// CHECK-NEXT: %[[SW:.*]] = kiln_gpu.dot_wait %[[S]] {pending = 1 : i32}
// CHECK-NEXT: math.exp2 %[[SW]]
// CHECK: %[[DW:.*]] = kiln_gpu.dot_wait %[[D]] :
// CHECK-NEXT: arith.mulf %[[DW]], %[[DW]]
// CHECK: kiln_gpu.mbarrier_arrive %[[EMPTY]][%[[SLOT]]], %true
// CHECK: kiln_gpu.mbarrier_wait %[[EMPTY]][%[[PREV:.*]]], %{{.*}} : <3>
// CHECK: kiln_gpu.async_copy %[[K]][%[[PREV]]]
// CHECK: kiln_gpu.async_copy %[[V]][%[[PREV]]]
// CHECK: kiln_gpu.async_commit
// CHECK-NEXT: kiln_gpu.async_arrive %[[FULL]][%[[PREV]]]
// CHECK-NEXT: scf.yield
// CHECK-NOT: kiln_gpu.barrier
// CHECK: kiln_gpu.async_wait {pending = 0 : i32}
// FOUR-LABEL: func.func @attention_rotated(
// FOUR: kiln_gpu.shared_dot %{{.*}} {pending = 1 : i32} : !kiln_gpu.shared<[1, 64, 32], f16>
// FOUR-NEXT: kiln_gpu.shared_dot %{{.*}} {pending = 1 : i32} : tensor<64x32xf16>
// FOUR-NEXT: kiln_gpu.dot_wait %{{.*}} {pending = 1 : i32}
// FOUR: kiln_gpu.dot_wait %{{.*}} :
func.func @attention_rotated(%Q: !kiln.ptr<f16>, %K: !kiln.ptr<f16>, %V: !kiln.ptr<f16>, %n: i32) -> tensor<64x32xf32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %zero_s = arith.constant dense<0.0> : tensor<64x32xf32>
  %acc0 = arith.constant dense<0.0> : tensor<64x32xf32>
  %p0 = arith.constant dense<0.0> : tensor<64x32xf16>
  %pq = kiln.splat %Q : tensor<64x32x!kiln.ptr<f16>>
  %q = kiln.load %pq : tensor<64x32x!kiln.ptr<f16>>
  %r32 = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %acc:2 = scf.for %j = %c0 to %n step %c32 iter_args(%o = %acc0, %p = %p0) -> (tensor<64x32xf32>, tensor<64x32xf16>) : i32 {
    %jv = kiln.splat %j : tensor<32xi32>
    %cols = arith.addi %r32, %jv : tensor<32xi32>
    %kc = kiln.expand_dims %cols {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %kb = kiln.broadcast %kc : tensor<1x32xi32> -> tensor<32x32xi32>
    %pk = kiln.splat %K : tensor<32x32x!kiln.ptr<f16>>
    %pks = kiln.addptr %pk, %kb : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    %kt = kiln.load %pks : tensor<32x32x!kiln.ptr<f16>>
    %vr = kiln.expand_dims %cols {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
    %vb = kiln.broadcast %vr : tensor<32x1xi32> -> tensor<32x32xi32>
    %pv = kiln.splat %V : tensor<32x32x!kiln.ptr<f16>>
    %pvs = kiln.addptr %pv, %vb : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    %v = kiln.load %pvs : tensor<32x32x!kiln.ptr<f16>>
    %s = kiln.dot %q, %kt, %zero_s : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    %d = kiln.dot %p, %v, %o : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    %e = math.exp2 %s : tensor<64x32xf32>
    %pn = arith.truncf %e : tensor<64x32xf32> to tensor<64x32xf16>
    %o2 = arith.mulf %d, %d : tensor<64x32xf32>
    scf.yield %o2, %pn : tensor<64x32xf32>, tensor<64x32xf16>
  }
  return %acc#0 : tensor<64x32xf32>
}

// -----

// Two loops reading one q (causal attention's two walks): the second loop reads the one-slot
// buffer the first filled, without copying q again.
// CHECK-LABEL: func.func @shared_q(
// CHECK: %[[Q:.*]] = kiln_gpu.local_alloc {operand = 0 : i32} : <[1, 64, 32], f16>
// CHECK: kiln_gpu.async_copy %[[Q]]
// CHECK: scf.for
// CHECK: kiln_gpu.shared_dot %[[Q]]
// CHECK: kiln_gpu.async_wait {pending = 0 : i32}
// CHECK-NOT: kiln_gpu.local_alloc {operand = 0 : i32}
// CHECK-NOT: kiln_gpu.async_copy %[[Q]]
// CHECK: scf.for
// CHECK: kiln_gpu.shared_dot %[[Q]]
// CHECK-NOT: kiln.load
func.func @shared_q(%Q: !kiln.ptr<f16>, %K: !kiln.ptr<f16>, %n: i32, %m: i32) -> tensor<64x32xf32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %acc0 = arith.constant dense<0.0> : tensor<64x32xf32>
  %pq = kiln.splat %Q : tensor<64x32x!kiln.ptr<f16>>
  %q = kiln.load %pq : tensor<64x32x!kiln.ptr<f16>>
  %r32 = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %pk = kiln.splat %K : tensor<32x32x!kiln.ptr<f16>>
  %a1 = scf.for %j = %c0 to %n step %c32 iter_args(%o = %acc0) -> (tensor<64x32xf32>) : i32 {
    %jv = kiln.splat %j : tensor<32x32xi32>
    %pks = kiln.addptr %pk, %jv : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    %kt = kiln.load %pks : tensor<32x32x!kiln.ptr<f16>>
    %s = kiln.dot %q, %kt, %o : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    %e = math.exp2 %s : tensor<64x32xf32>
    scf.yield %e : tensor<64x32xf32>
  }
  %a2 = scf.for %j = %n to %m step %c32 iter_args(%o = %a1) -> (tensor<64x32xf32>) : i32 {
    %jv = kiln.splat %j : tensor<32x32xi32>
    %pks = kiln.addptr %pk, %jv : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    %kt = kiln.load %pks : tensor<32x32x!kiln.ptr<f16>>
    %s = kiln.dot %q, %kt, %o : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    %e = math.exp2 %s : tensor<64x32xf32>
    scf.yield %e : tensor<64x32xf32>
  }
  return %a2 : tensor<64x32xf32>
}

// -----

// Tensor descriptor loads: the TMA copies them. One arrival per group expects all its bytes
// (128x64 + 64x128 halves = 32 KiB) on the slot's barrier; every iteration waits on its slot's
// barrier at the phase the slot is at (flipped at each wrap), then synchronizes; copies past
// the end are not issued. Boxes are whole blocks (kiln_gpu.tma_box_rows, per kernel argument):
// the wgmma accumulator layout reads A's rows in their natural order.
// CHECK-LABEL: module attributes {kiln_gpu.tma_box_rows = array<i32: 128, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0>}
// CHECK: %[[A:.*]] = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : <[3, 128, 64], f16>
// CHECK: %[[B:.*]] = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : <[3, 64, 128], f16>
// CHECK: %[[BARS:.*]] = kiln_gpu.mbarrier_alloc : <3>
// CHECK: kiln_gpu.mbarrier_expect %[[BARS]][%{{.*}}], %{{.*}} {bytes = 32768 : i32} : <3>
// CHECK: kiln_gpu.tma_copy %{{.*}}[%{{.*}}, %{{.*}}], %[[A]][%{{.*}}], %[[BARS]], %{{.*}}
// CHECK: kiln_gpu.tma_copy %{{.*}}[%{{.*}}, %{{.*}}], %[[B]][%{{.*}}], %[[BARS]], %{{.*}}
// CHECK-NOT: kiln_gpu.async_commit
// CHECK: scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %[[SLOT:.*]] = %{{.*}}, %[[PHASE:.*]] = %{{.*}})
// CHECK-NEXT: kiln_gpu.mbarrier_wait %[[BARS]][%[[SLOT]]], %[[PHASE]] : <3>
// CHECK-NEXT: kiln_gpu.barrier
// CHECK-NEXT: kiln_gpu.shared_dot %[[A]][%[[SLOT]]], %[[B]][%[[SLOT]]], %{{.*}} {pending = 1 : i32}
// CHECK-NEXT: kiln_gpu.barrier
// CHECK: kiln_gpu.mbarrier_expect
// CHECK: kiln_gpu.tma_copy
// CHECK: kiln_gpu.tma_copy
// CHECK: %[[WRAP:.*]] = arith.cmpi eq
// CHECK: %[[FLIP:.*]] = arith.extui %[[WRAP]] : i1 to i32
// CHECK: arith.xori %[[PHASE]], %[[FLIP]] : i32
// CHECK: kiln_gpu.dot_wait
// CHECK-NEXT: kiln_gpu.barrier
// CHECK-NOT: kiln_gpu.async_wait
// With 4 slots the copies (2 ahead) follow the dot and no iteration has a CTA barrier: after
// the dot (which waited for the previous one) every warp arrives on the previous slot's
// "empty" barrier (one arrival per warp), and thread 0 waits on the empty barrier of the slot
// it overwrites (iteration i - 2's, from the third iteration on), at the parity of that use.
// FOUR-LABEL: func.func @tma_matmul(
// FOUR: %[[FULL:.*]] = kiln_gpu.mbarrier_alloc : <4>
// FOUR: %[[EMPTY:.*]] = kiln_gpu.mbarrier_alloc {arrivals = 4 : i32} : <4>
// FOUR: scf.for %[[IV:.*]] = %[[LB:.*]] to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}, %[[SLOT:.*]] = %{{.*}}, %[[PHASE:.*]] = %{{.*}})
// FOUR-NEXT: kiln_gpu.mbarrier_wait %[[FULL]][%[[SLOT]]], %[[PHASE]] : <4>
// FOUR-NEXT: kiln_gpu.shared_dot %{{.*}} {pending = 1 : i32}
// FOUR-NOT: kiln_gpu.barrier
// FOUR: %[[PREV:.*]] = arith.remui
// FOUR: %[[SECOND:.*]] = arith.cmpi sge, %[[IV]]
// FOUR-NEXT: kiln_gpu.mbarrier_arrive %[[EMPTY]][%[[PREV]]], %[[SECOND]] : <4>
// FOUR: %[[WRITE:.*]] = arith.remui
// FOUR: %[[WRAPPED:.*]] = arith.cmpi ult, %[[SLOT]]
// FOUR: %[[FLIP:.*]] = arith.extui %[[WRAPPED]]
// FOUR: %[[OLD:.*]] = arith.xori %[[PHASE]], %[[FLIP]]
// FOUR: %[[THIRD:.*]] = arith.cmpi sge, %[[IV]]
// FOUR-NEXT: kiln_gpu.mbarrier_wait %[[EMPTY]][%[[WRITE]]], %[[OLD]] if %[[THIRD]] : <4>
// FOUR-NEXT: kiln_gpu.mbarrier_expect %[[FULL]][%[[WRITE]]]
// FOUR: kiln_gpu.tma_copy
// FOUR: kiln_gpu.tma_copy
// FOUR-NOT: kiln_gpu.barrier
// FOUR: scf.yield
func.func @tma_matmul(%ad: !kiln.tensormap, %ab: !kiln.ptr<f16>, %bd: !kiln.tensormap,
                      %bb: !kiln.ptr<f16>, %m: i32, %n: i32, %k: i32, %sa: i64, %sb: i64,
                      %om: i32, %on: i32, %kt: i32) -> tensor<128x128xf32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %acc = scf.for %i = %c0 to %kt step %c1 iter_args(%c = %zero) -> (tensor<128x128xf32>) : i32 {
    %ok = arith.muli %i, %c64 : i32
    %a = kiln.descriptor_load %ad, %ab[%om, %ok] shape [%m, %k] strides [%sa]
        : !kiln.ptr<f16> -> tensor<128x64xf16>
    %b = kiln.descriptor_load %bd, %bb[%ok, %on] shape [%k, %n] strides [%sb]
        : !kiln.ptr<f16> -> tensor<64x128xf16>
    %d = kiln.dot %a, %b, %c : tensor<128x64xf16> * tensor<64x128xf16> -> tensor<128x128xf32>
    scf.yield %d : tensor<128x128xf32>
  }
  return %acc : tensor<128x128xf32>
}

// -----

// int8 operands with int32 accumulators take rings too (wgmma k32 steps: K a multiple of 32);
// with K = 16 the dot stays where it is.
// MMA-LABEL: func.func @int8_rings(
// MMA: kiln_gpu.shared_dot {{.*}} : !kiln_gpu.shared<[3, 64, 32], i8>, <[3, 32, 64], i8>, tensor<64x64xi32>
// MMA-LABEL: func.func @int8_k16(
// MMA-NOT: kiln_gpu.local_alloc
// CHECK-LABEL: func.func @int8_rings(
// CHECK: kiln_gpu.local_alloc {operand = 0 : i32} : <[3, 64, 32], i8>
// CHECK: kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 32, 64], i8>
// CHECK: kiln_gpu.shared_dot {{.*}} : !kiln_gpu.shared<[3, 64, 32], i8>, <[3, 32, 64], i8>, tensor<64x64xi32>
func.func @int8_rings(%A: !kiln.ptr<i8>, %K: i32) -> tensor<64x64xi32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %acc0 = arith.constant dense<0> : tensor<64x64xi32>
  %acc = scf.for %k = %c0 to %K step %c32 iter_args(%acc_i = %acc0) -> (tensor<64x64xi32>) : i32 {
    %pa = kiln.splat %A : tensor<64x32x!kiln.ptr<i8>>
    %a = kiln.load %pa : tensor<64x32x!kiln.ptr<i8>>
    %pb = kiln.splat %A : tensor<32x64x!kiln.ptr<i8>>
    %b = kiln.load %pb : tensor<32x64x!kiln.ptr<i8>>
    %d = kiln.dot %a, %b, %acc_i : tensor<64x32xi8> * tensor<32x64xi8> -> tensor<64x64xi32>
    scf.yield %d : tensor<64x64xi32>
  }
  return %acc : tensor<64x64xi32>
}

// CHECK-LABEL: func.func @int8_k16(
// CHECK-NOT: kiln_gpu.local_alloc
// CHECK: kiln.dot
func.func @int8_k16(%A: !kiln.ptr<i8>, %K: i32) -> tensor<64x64xi32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %acc0 = arith.constant dense<0> : tensor<64x64xi32>
  %acc = scf.for %k = %c0 to %K step %c16 iter_args(%acc_i = %acc0) -> (tensor<64x64xi32>) : i32 {
    %pa = kiln.splat %A : tensor<64x16x!kiln.ptr<i8>>
    %a = kiln.load %pa : tensor<64x16x!kiln.ptr<i8>>
    %pb = kiln.splat %A : tensor<16x64x!kiln.ptr<i8>>
    %b = kiln.load %pb : tensor<16x64x!kiln.ptr<i8>>
    %d = kiln.dot %a, %b, %acc_i : tensor<64x16xi8> * tensor<16x64xi8> -> tensor<64x64xi32>
    scf.yield %d : tensor<64x64xi32>
  }
  return %acc : tensor<64x64xi32>
}

// -----

// Triton's `tl.dot(a, b.T)` with B stored N x K and loaded [N, K] by pointers: the transpose
// is folded into the copy. B's ring keeps its K x N slots; the copy says its pointers are the
// slot's transpose ({transposed}), and the load and the transpose go.
// CHECK-LABEL: func.func @b_transposed(
// CHECK: %[[RB:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 32, 64], f16>
// CHECK: kiln_gpu.async_copy %[[RB]][%{{.*}}], %{{.*}}, %{{.*}} {transposed} : <[3, 32, 64], f16>, tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi1>
// CHECK: scf.for
// CHECK: kiln_gpu.shared_dot
// CHECK: kiln_gpu.async_copy %[[RB]][%{{.*}}], %{{.*}}, %{{.*}} {transposed}
// CHECK-NOT: kiln.trans
// CHECK-NOT: kiln.load
// CHECK: scf.yield
// mma.sync (ldmatrix from the rings) takes the transposed copy too.
// MMA-LABEL: func.func @b_transposed(
// MMA: kiln_gpu.async_copy {{.*}} {transposed}
// MMA: kiln_gpu.shared_dot
func.func @b_transposed(%A: !kiln.ptr<f16>, %B: !kiln.ptr<f16>, %K: i32) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %acc0 = arith.constant dense<0.0> : tensor<64x64xf32>
  %r64 = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %r32 = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %acc = scf.for %k = %c0 to %K step %c32 iter_args(%c = %acc0) -> (tensor<64x64xf32>) : i32 {
    %kv = kiln.splat %k : tensor<32xi32>
    %ks = arith.addi %r32, %kv : tensor<32xi32>
    %rows = kiln.expand_dims %r64 {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
    %kr = kiln.expand_dims %ks {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %Kv = kiln.splat %K : tensor<64x1xi32>
    %row = arith.muli %rows, %Kv : tensor<64x1xi32>
    %rb = kiln.broadcast %row : tensor<64x1xi32> -> tensor<64x32xi32>
    %kb = kiln.broadcast %kr : tensor<1x32xi32> -> tensor<64x32xi32>
    %off = arith.addi %rb, %kb : tensor<64x32xi32>
    %ap = kiln.splat %A : tensor<64x32x!kiln.ptr<f16>>
    %aps = kiln.addptr %ap, %off : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
    %a = kiln.load %aps : tensor<64x32x!kiln.ptr<f16>>
    %bp = kiln.splat %B : tensor<64x32x!kiln.ptr<f16>>
    %bps = kiln.addptr %bp, %off : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
    %Ks = kiln.splat %K : tensor<1x32xi32>
    %kok = arith.cmpi slt, %kr, %Ks : tensor<1x32xi32>
    %bm = kiln.broadcast %kok : tensor<1x32xi1> -> tensor<64x32xi1>
    %zero = arith.constant dense<0.0> : tensor<64x32xf16>
    %bnk = kiln.load %bps, %bm, %zero : tensor<64x32x!kiln.ptr<f16>>
    %b = kiln.trans %bnk {order = array<i32: 1, 0>} : tensor<64x32xf16> -> tensor<32x64xf16>
    %d = kiln.dot %a, %b, %c : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
    scf.yield %d : tensor<64x64xf32>
  }
  return %acc : tensor<64x64xf32>
}

// -----

// The same through tensor descriptors (tutorial 09: B's block loaded [BLOCK_N, BLOCK_K]): the
// TMA copies the block as the descriptor names it into a K-major B ring (wgmma reads it
// without its transpose flag).
// CHECK-LABEL: func.func @tma_b_transposed(
// CHECK: kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : <[3, 128, 64], f16>
// CHECK: %[[B:.*]] = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : <[3, 64, 128], f16>
// CHECK: kiln_gpu.tma_copy %{{.*}}[%{{.*}}, %{{.*}}], %[[B]][%{{.*}}]
// CHECK: scf.for
// CHECK-NOT: kiln.trans
// CHECK-NOT: kiln.descriptor_load
// CHECK: scf.yield
// MMA-LABEL: func.func @tma_b_transposed(
// MMA-NOT: kiln_gpu.local_alloc
func.func @tma_b_transposed(%ad: !kiln.tensormap, %ab: !kiln.ptr<f16>, %bd: !kiln.tensormap,
                            %bb: !kiln.ptr<f16>, %m: i32, %n: i32, %k: i32, %sa: i64, %sb: i64,
                            %om: i32, %on: i32, %kt: i32) -> tensor<128x128xf32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %acc = scf.for %i = %c0 to %kt step %c1 iter_args(%c = %zero) -> (tensor<128x128xf32>) : i32 {
    %ok = arith.muli %i, %c64 : i32
    %a = kiln.descriptor_load %ad, %ab[%om, %ok] shape [%m, %k] strides [%sa]
        : !kiln.ptr<f16> -> tensor<128x64xf16>
    %bnk = kiln.descriptor_load %bd, %bb[%on, %ok] shape [%n, %k] strides [%sb]
        : !kiln.ptr<f16> -> tensor<128x64xf16>
    %b = kiln.trans %bnk {order = array<i32: 1, 0>} : tensor<128x64xf16> -> tensor<64x128xf16>
    %d = kiln.dot %a, %b, %c : tensor<128x64xf16> * tensor<64x128xf16> -> tensor<128x128xf32>
    scf.yield %d : tensor<128x128xf32>
  }
  return %acc : tensor<128x128xf32>
}

// -----

// fp8 blocks contiguous along K (A [BLOCK_M, BLOCK_K], B's [BLOCK_N, BLOCK_K] transposed):
// the TMA copies them as they are into K-major rings, the layout 8-bit wgmma reads (mma.sync
// widens fp8: no rings there).
// CHECK-LABEL: func.func @tma_fp8_k_major(
// CHECK: kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : <[3, 128, 128], f8E4M3FN>
// CHECK: %[[B:.*]] = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : <[3, 128, 128], f8E4M3FN>
// CHECK: kiln_gpu.mbarrier_expect %{{.*}}[%{{.*}}], %{{.*}} {bytes = 32768 : i32} : <3>
// CHECK: kiln_gpu.tma_copy %{{.*}}[%{{.*}}, %{{.*}}], %[[B]][%{{.*}}]
// CHECK: scf.for
// CHECK: kiln_gpu.shared_dot
// CHECK-NOT: kiln.descriptor_load
// CHECK: scf.yield
// MMA-LABEL: func.func @tma_fp8_k_major(
// MMA-NOT: kiln_gpu.local_alloc
func.func @tma_fp8_k_major(%ad: !kiln.tensormap, %ab: !kiln.ptr<f8E4M3FN>, %bd: !kiln.tensormap,
                           %bb: !kiln.ptr<f8E4M3FN>, %m: i32, %n: i32, %k: i32, %sa: i64,
                           %sb: i64, %om: i32, %on: i32, %kt: i32) -> tensor<128x128xf32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c128 = arith.constant 128 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %acc = scf.for %i = %c0 to %kt step %c1 iter_args(%c = %zero) -> (tensor<128x128xf32>) : i32 {
    %ok = arith.muli %i, %c128 : i32
    %a = kiln.descriptor_load %ad, %ab[%om, %ok] shape [%m, %k] strides [%sa]
        : !kiln.ptr<f8E4M3FN> -> tensor<128x128xf8E4M3FN>
    %bnk = kiln.descriptor_load %bd, %bb[%on, %ok] shape [%n, %k] strides [%sb]
        : !kiln.ptr<f8E4M3FN> -> tensor<128x128xf8E4M3FN>
    %b = kiln.trans %bnk {order = array<i32: 1, 0>} : tensor<128x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN>
    %d = kiln.dot %a, %b, %c : tensor<128x128xf8E4M3FN> * tensor<128x128xf8E4M3FN> -> tensor<128x128xf32>
    scf.yield %d : tensor<128x128xf32>
  }
  return %acc : tensor<128x128xf32>
}

// -----

// Block pointers (tl.make_block_ptr + tl.advance): the descriptor loads' offsets are integer
// inductions (yielded as `x + inc`, inc invariant); the copy for S - 1 iterations ahead adds
// (S - 1) * inc to the carried offset, as for pointer inductions.
// CHECK-LABEL: func.func @tma_block_pointers(
// CHECK: kiln_gpu.tma_copy %{{.*}}[%{{.*}}, %{{.*}}]
// CHECK: scf.for %{{.*}} iter_args(%{{[^ ]*}} = %{{[^,]*}}, %[[KA:[^ ]*]] = %{{[^,]*}}, %[[KB:[^ ]*]] = %{{[^,]*}},
// CHECK: kiln_gpu.shared_dot %{{.*}} {pending = 1 : i32}
// CHECK: %[[A2:.*]] = arith.addi %[[KA]], %{{.*}} : i32
// CHECK-NEXT: kiln_gpu.tma_copy %{{.*}}[%{{.*}}, %[[A2]]]
// CHECK: %[[B2:.*]] = arith.addi %[[KB]], %{{.*}} : i32
// CHECK-NEXT: kiln_gpu.tma_copy %{{.*}}[%[[B2]], %{{.*}}]
// CHECK-NOT: kiln.descriptor_load
// CHECK: scf.yield
func.func @tma_block_pointers(%ad: !kiln.tensormap, %ab: !kiln.ptr<f16>, %bd: !kiln.tensormap,
                              %bb: !kiln.ptr<f16>, %m: i32, %n: i32, %k: i32, %sa: i64,
                              %sb: i64, %om: i32, %on: i32) -> tensor<128x128xf32> {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %r:3 = scf.for %i = %c0 to %k step %c64 iter_args(%c = %zero, %ka = %c0, %kb = %c0)
      -> (tensor<128x128xf32>, i32, i32) : i32 {
    %a = kiln.descriptor_load %ad, %ab[%om, %ka] shape [%m, %k] strides [%sa]
        : !kiln.ptr<f16> -> tensor<128x64xf16>
    %b = kiln.descriptor_load %bd, %bb[%kb, %on] shape [%k, %n] strides [%sb]
        : !kiln.ptr<f16> -> tensor<64x128xf16>
    %d = kiln.dot %a, %b, %c : tensor<128x64xf16> * tensor<64x128xf16> -> tensor<128x128xf32>
    %ka2 = arith.addi %ka, %c64 : i32
    %kb2 = arith.addi %c64, %kb : i32
    scf.yield %d, %ka2, %kb2 : tensor<128x128xf32>, i32, i32
  }
  return %r#0 : tensor<128x128xf32>
}

// -----

// One loaded block read by two dots, as is and transposed (tutorial 06's backward: dot(k, qT)
// and dot(ds, qT.T)). With wgmma both read one ring, filled by one copy: the second reads the
// slot transposed (b_transposed); the load and the transpose go. On the mma.sync path (ldmatrix
// reads a ring one way) each dot gets a ring and a copy of its own, the second transposed.
// (A of both: loads before the loop, one-slot buffers.)
// CHECK-LABEL: func.func @two_dots_read_one_load(
// CHECK: %[[R1:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 32, 64], f16>
// CHECK-NOT: kiln_gpu.local_alloc {operand = 1
// CHECK: scf.for
// CHECK: kiln_gpu.shared_dot %{{.*}}, %[[R1]][%[[S:.*]]], %{{.*}} {pending = 1 : i32}
// CHECK: kiln_gpu.shared_dot %{{.*}}, %[[R1]][%[[S]]], %{{.*}} {b_transposed, pending = 1 : i32}
// CHECK: kiln_gpu.async_copy %[[R1]][%{{.*}}], %{{.*}}, %{{.*}} :
// CHECK-NOT: kiln_gpu.async_copy
// CHECK-NOT: kiln.load
// CHECK-NOT: kiln.trans
// CHECK: scf.yield
// MMA-LABEL: func.func @two_dots_read_one_load(
// MMA-DAG: kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 32, 64], f16>
// MMA-DAG: kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 64, 32], f16>
// MMA: kiln_gpu.async_copy {{.*}} {transposed}
// MMA: scf.for
// MMA: kiln_gpu.shared_dot
// MMA-NOT: b_transposed
// MMA: kiln_gpu.shared_dot
// MMA-NOT: b_transposed
// MMA: scf.yield
func.func @two_dots_read_one_load(%A: !kiln.ptr<f16>, %B: !kiln.ptr<f16>, %K: i32)
    -> (tensor<64x64xf32>, tensor<64x32xf32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %acc0 = arith.constant dense<0.0> : tensor<64x64xf32>
  %acc1 = arith.constant dense<0.0> : tensor<64x32xf32>
  %r64 = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %r32 = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %rows = kiln.expand_dims %r32 {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %cols = kiln.expand_dims %r64 {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  %c64t = arith.constant dense<64> : tensor<32x1xi32>
  %row = arith.muli %rows, %c64t : tensor<32x1xi32>
  %rb = kiln.broadcast %row : tensor<32x1xi32> -> tensor<32x64xi32>
  %cb = kiln.broadcast %cols : tensor<1x64xi32> -> tensor<32x64xi32>
  %off = arith.addi %rb, %cb : tensor<32x64xi32>
  %bp = kiln.splat %B : tensor<32x64x!kiln.ptr<f16>>
  %b0 = kiln.addptr %bp, %off : tensor<32x64x!kiln.ptr<f16>>, tensor<32x64xi32>
  %step = arith.constant dense<2048> : tensor<32x64xi32>
  %ap = kiln.splat %A : tensor<64x32x!kiln.ptr<f16>>
  %a = kiln.load %ap : tensor<64x32x!kiln.ptr<f16>>
  %ap2 = kiln.splat %A : tensor<64x64x!kiln.ptr<f16>>
  %a2 = kiln.load %ap2 : tensor<64x64x!kiln.ptr<f16>>
  %res:3 = scf.for %k = %c0 to %K step %c1 iter_args(%c = %acc0, %e = %acc1, %bps = %b0)
      -> (tensor<64x64xf32>, tensor<64x32xf32>, tensor<32x64x!kiln.ptr<f16>>) : i32 {
    %b = kiln.load %bps : tensor<32x64x!kiln.ptr<f16>>
    %d = kiln.dot %a, %b, %c : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
    %bt = kiln.trans %b {order = array<i32: 1, 0>} : tensor<32x64xf16> -> tensor<64x32xf16>
    %d2 = kiln.dot %a2, %bt, %e : tensor<64x64xf16> * tensor<64x32xf16> -> tensor<64x32xf32>
    %next = kiln.addptr %bps, %step : tensor<32x64x!kiln.ptr<f16>>, tensor<32x64xi32>
    scf.yield %d, %d2, %next : tensor<64x64xf32>, tensor<64x32xf32>, tensor<32x64x!kiln.ptr<f16>>
  }
  return %res#0, %res#1 : tensor<64x64xf32>, tensor<64x32xf32>
}

// -----

// The same block through a tensor descriptor (tutorial 06's backward at D 128 after
// -kiln-pointer-tiles-to-descriptors): one TMA ring both dots read, the second transposed;
// one copy an iteration, and the slot's barrier expects that one block's bytes.
// CHECK-LABEL: func.func @tma_two_dots_read_one_block(
// CHECK: %[[R:.*]] = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : <[3, 32, 64], f16>
// CHECK-NOT: kiln_gpu.local_alloc {k_major = {{.*}}, operand = 1
// CHECK: kiln_gpu.mbarrier_expect %{{.*}} {bytes = 4096 : i32}
// CHECK: scf.for
// CHECK: kiln_gpu.shared_dot %{{.*}}, %[[R]][%[[S:.*]]], %{{.*}} {pending = 1 : i32}
// CHECK: kiln_gpu.shared_dot %{{.*}}, %[[R]][%[[S]]], %{{.*}} {b_transposed, pending = 1 : i32}
// CHECK: kiln_gpu.mbarrier_expect %{{.*}} {bytes = 4096 : i32}
// CHECK: kiln_gpu.tma_copy %{{.*}}, %[[R]][%{{.*}}]
// CHECK-NOT: kiln_gpu.tma_copy
// CHECK-NOT: kiln.descriptor_load
// CHECK-NOT: kiln.trans
// CHECK: scf.yield
func.func @tma_two_dots_read_one_block(%bd: !kiln.tensormap, %bb: !kiln.ptr<f16>, %n: i32,
                                      %k: i32, %sb: i64, %kt: i32, %A: !kiln.ptr<f16>)
    -> (tensor<64x64xf32>, tensor<64x32xf32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c32 = arith.constant 32 : i32
  %acc0 = arith.constant dense<0.0> : tensor<64x64xf32>
  %acc1 = arith.constant dense<0.0> : tensor<64x32xf32>
  %ap = kiln.splat %A : tensor<64x32x!kiln.ptr<f16>>
  %a = kiln.load %ap : tensor<64x32x!kiln.ptr<f16>>
  %ap2 = kiln.splat %A : tensor<64x64x!kiln.ptr<f16>>
  %a2 = kiln.load %ap2 : tensor<64x64x!kiln.ptr<f16>>
  %res:2 = scf.for %i = %c0 to %kt step %c1 iter_args(%c = %acc0, %e = %acc1)
      -> (tensor<64x64xf32>, tensor<64x32xf32>) : i32 {
    %row = arith.muli %i, %c32 : i32
    %b = kiln.descriptor_load %bd, %bb[%row, %c0] shape [%k, %n] strides [%sb]
        : !kiln.ptr<f16> -> tensor<32x64xf16>
    %d = kiln.dot %a, %b, %c : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
    %bt = kiln.trans %b {order = array<i32: 1, 0>} : tensor<32x64xf16> -> tensor<64x32xf16>
    %d2 = kiln.dot %a2, %bt, %e : tensor<64x64xf16> * tensor<64x32xf16> -> tensor<64x32xf32>
    scf.yield %d, %d2 : tensor<64x64xf32>, tensor<64x32xf32>
  }
  return %res#0, %res#1 : tensor<64x64xf32>, tensor<64x32xf32>
}

// -----

// Tutorial 06's forward through tensor descriptors: q is a descriptor load before the loop,
// k (read transposed) and v descriptor loads of the loop. The TMA fills k's and v's rings;
// q becomes its block's masked address and is copied once by cp.async into a one-slot buffer,
// which is not in the rings' barrier counts: it is waited for (and every warp synchronized)
// before the loop. Both dots are done within the iteration, so the loop has no CTA barrier:
// each warp arrives on the slot's empty barrier at the end of the body, and at the top
// thread 0 waits on the empty barrier of the slot it overwrites (the previous iteration's,
// from iteration 1 on) before issuing the copies 2 ahead. mma.sync reads no descriptor
// rings: nothing changes there.
// CHECK-LABEL: func.func @tma_attention(
// CHECK-NOT: kiln.descriptor_load
// CHECK: %[[QBUF:.*]] = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : <[1, 64, 32], f16>
// CHECK: %[[K:.*]] = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : <[3, 32, 32], f16>
// CHECK: %[[V:.*]] = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : <[3, 32, 32], f16>
// CHECK: %[[FULL:.*]] = kiln_gpu.mbarrier_alloc : <3>
// CHECK: %[[EMPTY:.*]] = kiln_gpu.mbarrier_alloc {arrivals = 4 : i32} : <3>
// CHECK: kiln_gpu.async_copy %[[QBUF]][%{{.*}}], %{{[^,]*}}, %{{[^ ]*}} : <[1, 64, 32], f16>
// CHECK: kiln_gpu.tma_copy %{{.*}}, %[[K]]
// CHECK: kiln_gpu.tma_copy %{{.*}}, %[[V]]
// CHECK: kiln_gpu.tma_copy %{{.*}}, %[[K]]
// CHECK: kiln_gpu.tma_copy %{{.*}}, %[[V]]
// CHECK-NEXT: kiln_gpu.async_commit
// CHECK-NEXT: kiln_gpu.async_wait {pending = 0 : i32}
// CHECK-NEXT: kiln_gpu.barrier
// CHECK: scf.for %[[IV:[^ ]*]] = {{.*}} iter_args(%{{[^ ]*}} = %{{[^,]*}}, %[[SLOT:[^ ]*]] = %{{[^,]*}}, %[[PHASE:[^ ]*]] = %{{[^)]*}})
// CHECK-NEXT: kiln_gpu.mbarrier_wait %[[FULL]][%[[SLOT]]], %[[PHASE]] : <3>
// CHECK-NOT: kiln_gpu.barrier
// CHECK-NOT: arith.remui
// CHECK: %[[WRITE:.*]] = arith.select
// CHECK: %[[SECOND:.*]] = arith.cmpi sge, %[[IV]]
// CHECK-NEXT: kiln_gpu.mbarrier_wait %[[EMPTY]][%[[WRITE]]], %{{.*}} if %[[SECOND]] : <3>
// CHECK-NEXT: kiln_gpu.mbarrier_expect %[[FULL]][%[[WRITE]]]
// CHECK: kiln_gpu.tma_copy %{{.*}}, %[[K]][%[[WRITE]]]
// CHECK: kiln_gpu.tma_copy %{{.*}}, %[[V]][%[[WRITE]]]
// CHECK-NOT: kiln_gpu.async_copy
// CHECK-NOT: kiln_gpu.barrier
// CHECK: kiln_gpu.shared_dot %[[QBUF]][%{{.*}}], %[[K]][%[[SLOT]]]
// CHECK: kiln_gpu.shared_dot %{{.*}}, %[[V]][%[[SLOT]]]
// CHECK: kiln_gpu.dot_wait
// CHECK: kiln_gpu.mbarrier_arrive %[[EMPTY]][%[[SLOT]]], %true : <3>
// CHECK-NOT: kiln_gpu.barrier
// CHECK: scf.yield
// CHECK: kiln_gpu.barrier
// MMA-LABEL: func.func @tma_attention(
// MMA-NOT: kiln_gpu.local_alloc
// MMA-COUNT-3: kiln.descriptor_load
func.func @tma_attention(%qd: !kiln.tensormap, %qb: !kiln.ptr<f16>, %kd: !kiln.tensormap,
                         %kb: !kiln.ptr<f16>, %vd: !kiln.tensormap, %vb: !kiln.ptr<f16>,
                         %rows: i32, %dim: i32, %s: i64, %y: i32, %n: i32) -> tensor<64x32xf32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %zero_s = arith.constant dense<0.0> : tensor<64x32xf32>
  %acc0 = arith.constant dense<0.0> : tensor<64x32xf32>
  %q = kiln.descriptor_load %qd, %qb[%y, %c0] shape [%rows, %dim] strides [%s]
      : !kiln.ptr<f16> -> tensor<64x32xf16>
  %acc = scf.for %j = %c0 to %n step %c32 iter_args(%o = %acc0) -> (tensor<64x32xf32>) : i32 {
    %row = arith.addi %y, %j : i32
    %k = kiln.descriptor_load %kd, %kb[%row, %c0] shape [%rows, %dim] strides [%s]
        : !kiln.ptr<f16> -> tensor<32x32xf16>
    %kt = kiln.trans %k {order = array<i32: 1, 0>} : tensor<32x32xf16> -> tensor<32x32xf16>
    %sc = kiln.dot %q, %kt, %zero_s : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    %e = math.exp2 %sc : tensor<64x32xf32>
    %p = arith.truncf %e : tensor<64x32xf32> to tensor<64x32xf16>
    %v = kiln.descriptor_load %vd, %vb[%row, %c0] shape [%rows, %dim] strides [%s]
        : !kiln.ptr<f16> -> tensor<32x32xf16>
    %d = kiln.dot %p, %v, %o : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    scf.yield %d : tensor<64x32xf32>
  }
  return %acc : tensor<64x32xf32>
}

// -----

// FlashAttention-3's order through descriptors: q @ k_j issued, the accumulator rescaled (its
// first read), then p @ v issued with p carried in fp32; the softmax after both never reads
// acc. Dots are waited for where they are read, and p @ v runs on across the back edge (its
// result only goes to the yield): the next iteration waits for it before its first dot (a
// dot_wait of the accumulator argument, all groups), then each warp arrives on the empty
// barrier of the slot the previous iteration read (from iteration 1 on). Nothing waits for it
// within its iteration, so ptxas cannot move that wait up into the softmax. The copies go at
// the end of the body, 2 ahead, into that slot: warp 0 waits on it (whole_warp: a warp-uniform
// branch, where thread 0's spin loop made ptxas build the descriptors in vector registers),
// then thread 0 expects and copies. After the loop, a wait for the last p @ v.
// CHECK-LABEL: func.func @tma_attention_carried(
// CHECK: %[[K:.*]] = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : <[3, 32, 32], f16>
// CHECK: %[[V:.*]] = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : <[3, 32, 32], f16>
// CHECK: %[[FULL:.*]] = kiln_gpu.mbarrier_alloc : <3>
// CHECK: %[[EMPTY:.*]] = kiln_gpu.mbarrier_alloc {arrivals = 4 : i32} : <3>
// CHECK: %[[LOOP:.*]]:5 = scf.for %[[IV:[^ ]*]] = {{.*}} iter_args(%[[O:[^ ]*]] = %{{[^,]*}}, %{{[^ ]*}} = %{{[^,]*}}, %{{[^ ]*}} = %{{[^,]*}}, %[[SLOT:[^ ]*]] = %{{[^,]*}}, %[[PHASE:[^ ]*]] = %{{[^)]*}})
// CHECK-NEXT: kiln_gpu.mbarrier_wait %[[FULL]][%[[SLOT]]], %[[PHASE]] : <3>
// CHECK-NOT: kiln_gpu.tma_copy
// CHECK: %[[DONE:.*]] = kiln_gpu.dot_wait %[[O]] : tensor<64x32xf32>
// CHECK: %[[PREV:.*]] = arith.select
// CHECK: %[[SECOND:.*]] = arith.cmpi sge, %[[IV]]
// CHECK-NEXT: kiln_gpu.mbarrier_arrive %[[EMPTY]][%[[PREV]]], %[[SECOND]] : <3>
// CHECK-NEXT: %[[S:.*]] = kiln_gpu.shared_dot %{{.*}}, %[[K]][%[[SLOT]]], %{{.*}} {pending = 1 : i32}
// CHECK: arith.mulf %[[DONE]]
// CHECK: %[[D:.*]] = kiln_gpu.shared_dot %{{.*}}, %[[V]][%[[SLOT]]], %{{.*}} {pending = 1 : i32}
// CHECK-NEXT: kiln_gpu.dot_wait %[[S]] {pending = 1 : i32}
// CHECK-NOT: kiln_gpu.dot_wait %[[D]]
// CHECK: kiln_gpu.mbarrier_wait %[[EMPTY]][%{{.*}}], %{{.*}} if %{{.*}} {whole_warp} : <3>
// CHECK-NEXT: kiln_gpu.mbarrier_expect %[[FULL]][%{{.*}}], %{{.*}} {bytes = 4096 : i32} : <3>
// CHECK: kiln_gpu.tma_copy {{.*}} : !kiln.tensormap
// CHECK: kiln_gpu.tma_copy {{.*}} : !kiln.tensormap
// CHECK-NOT: kiln_gpu.mbarrier_arrive
// CHECK: scf.yield %[[D]],
// CHECK: kiln_gpu.dot_wait %[[LOOP]]#0 : tensor<64x32xf32>
// CHECK-NEXT: kiln_gpu.barrier
func.func @tma_attention_carried(%qd: !kiln.tensormap, %qb: !kiln.ptr<f16>, %kd: !kiln.tensormap,
                                 %kb: !kiln.ptr<f16>, %vd: !kiln.tensormap, %vb: !kiln.ptr<f16>,
                                 %rows: i32, %dim: i32, %s: i64, %y: i32, %n: i32) -> tensor<64x32xf32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %zero_s = arith.constant dense<0.0> : tensor<64x32xf32>
  %ones = arith.constant dense<1.0> : tensor<64x32xf32>
  %q = kiln.descriptor_load %qd, %qb[%y, %c0] shape [%rows, %dim] strides [%s]
      : !kiln.ptr<f16> -> tensor<64x32xf16>
  %r:3 = scf.for %j = %c0 to %n step %c32 iter_args(%o = %zero_s, %pf = %zero_s, %al = %ones)
      -> (tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>) : i32 {
    %row = arith.addi %y, %j : i32
    %k = kiln.descriptor_load %kd, %kb[%row, %c0] shape [%rows, %dim] strides [%s]
        : !kiln.ptr<f16> -> tensor<32x32xf16>
    %kt = kiln.trans %k {order = array<i32: 1, 0>} : tensor<32x32xf16> -> tensor<32x32xf16>
    %v = kiln.descriptor_load %vd, %vb[%row, %c0] shape [%rows, %dim] strides [%s]
        : !kiln.ptr<f16> -> tensor<32x32xf16>
    %sc = kiln.dot %q, %kt, %zero_s : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    %os = arith.mulf %o, %al : tensor<64x32xf32>
    %p = arith.truncf %pf : tensor<64x32xf32> to tensor<64x32xf16>
    %d = kiln.dot %p, %v, %os : tensor<64x32xf16> * tensor<32x32xf16> -> tensor<64x32xf32>
    %e = math.exp2 %sc : tensor<64x32xf32>
    scf.yield %d, %e, %e : tensor<64x32xf32>, tensor<64x32xf32>, tensor<64x32xf32>
  }
  return %r#0 : tensor<64x32xf32>
}
