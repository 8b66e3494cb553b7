// RUN: kiln-opt %s -split-input-file -kiln-pipeline-dot-operands="num-warps=8 num-stages=3" -kiln-assign-layouts="num-warps=8 wgmma=true" -kiln-warp-specialize="all-loops=false" | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-pipeline-dot-operands="num-warps=4 num-stages=3" -kiln-assign-layouts="num-warps=4 wgmma=true" -kiln-warp-specialize="all-loops=false" | FileCheck %s --check-prefix=FOUR

// On 4 warps (one consumer warpgroup) a thread starts with 248 registers, more than the
// consumers could take: no split.
// FOUR-NOT: kiln_gpu.launch_warps
// FOUR-NOT: kiln_gpu.warp_id
// FOUR-NOT: set_max_registers

// FlashAttention-3's order in a loop marked tl.range(..., warp_specialize=True), inside the
// `if` that skips it when there are no keys: the rings and barriers the if allocated move
// before the split (every thread sets them up); the producer runs its own copy of the if
// around the loop's ring side; the consumers keep the if, its first copies and the loop.
// Its two dots are issued back to back (q @ k, then the previous block's p @ v), so the
// consumers' two warpgroups take turns issuing them: warpgroup w waits at named barrier
// 2 + w before the first and hands over at 3 - w after the last, which no longer waits for
// the first (pending 2); warpgroup 1 gives warpgroup 0 the first turn and warpgroup 0 takes
// the last one back after the loop.
// CHECK: module attributes {kiln_gpu.consumer_warps = 8 : i32, kiln_gpu.launch_warps = 12 : i32
// CHECK-LABEL: func.func @fa3(
// CHECK: %[[SOME:.*]] = arith.cmpi sgt
// CHECK: %[[K:.*]] = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : <[3, 64, 64], f16>
// CHECK: %[[FULL:.*]] = kiln_gpu.mbarrier_alloc {kiln_gpu.all_threads} : <3>
// CHECK: %[[EMPTY:.*]] = kiln_gpu.mbarrier_alloc {arrivals = 8 : i32, kiln_gpu.all_threads} : <3>
// CHECK: %[[W:.*]] = kiln_gpu.warp_id : i32
// CHECK: %[[P:.*]] = arith.cmpi uge, %[[W]], %c8_i32 : i32
// CHECK-NEXT: scf.if %[[P]] {
// CHECK-NEXT: kiln_gpu.set_max_registers 24
// CHECK-NEXT: scf.if %[[SOME]] {
// CHECK: scf.for
// CHECK-NOT: shared_dot
// CHECK: kiln_gpu.mbarrier_wait %[[EMPTY]][%{{.*}}], %{{.*}} if %{{.*}} {kiln_gpu.leader_warp = 8 : i32
// CHECK-NEXT: kiln_gpu.mbarrier_expect %[[FULL]]
// CHECK: kiln_gpu.tma_copy %{{.*}}, %[[K]][%{{.*}}], %[[FULL]], %{{.*}} {kiln_gpu.leader_warp = 8 : i32}
// CHECK: kiln_gpu.tma_copy {{.*}} {kiln_gpu.leader_warp = 8 : i32}
// CHECK-NOT: shared_dot
// CHECK: } else {
// CHECK-NEXT: kiln_gpu.set_max_registers 240 increase
// CHECK: scf.if %[[SOME]] -> (tensor<128x64xf32
// CHECK-NOT: local_alloc
// CHECK-NOT: mbarrier_alloc
// CHECK: kiln_gpu.tma_copy
// CHECK-NOT: leader_warp
// CHECK: %[[G:.*]] = arith.divui %[[W]], %c4_i32 : i32
// CHECK: %[[MINE:.*]] = arith.addi %[[G]], %c2_i32
// CHECK: %[[OTHER:.*]] = arith.subi %c3_i32{{.*}}, %[[G]]
// CHECK: %[[SECOND:.*]] = arith.cmpi ne, %[[G]]
// CHECK-NEXT: %[[TWO:.*]] = arith.constant 2 : i32
// CHECK-NEXT: scf.if %[[SECOND]] {
// CHECK-NEXT: kiln_gpu.named_barrier %[[TWO]], 256 arrive
// CHECK: scf.for
// CHECK-NEXT: kiln_gpu.mbarrier_wait %[[FULL]]
// CHECK-NOT: kiln_gpu.tma_copy
// CHECK: kiln_gpu.mbarrier_arrive %[[EMPTY]]
// CHECK: kiln_gpu.named_barrier %[[MINE]], 256
// CHECK-NEXT: %[[QK:.*]] = kiln_gpu.shared_dot {{.*}} {pending = 1 : i32}
// CHECK: kiln_gpu.shared_dot {{.*}} {pending = 2 : i32}
// CHECK-NEXT: kiln_gpu.named_barrier %[[OTHER]], 256 arrive
// CHECK-NEXT: kiln_gpu.dot_wait %[[QK]] {pending = 1 : i32}
// CHECK: scf.yield
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[G]]
// CHECK-NEXT: scf.if %[[FIRST]] {
// CHECK-NEXT: kiln_gpu.named_barrier %[[TWO]], 256
// CHECK: kiln.store
// CHECK: }
// CHECK-NEXT: return
func.func @fa3(%qd: !kiln.tensormap, %Q: !kiln.ptr<f16>, %kd: !kiln.tensormap, %K: !kiln.ptr<f16>,
               %vd: !kiln.tensormap, %V: !kiln.ptr<f16>, %O: !kiln.ptr<f32>, %rows: i32, %s: i64, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zero_s = arith.constant dense<0.0> : tensor<128x64xf32>
  %acc0 = arith.constant dense<0.0> : tensor<128x64xf32>
  %q = kiln.descriptor_load %qd, %Q[%c0, %c0] shape [%rows, %c64] strides [%s] : !kiln.ptr<f16> -> tensor<128x64xf16>
  %some = arith.cmpi sgt, %n, %c0 : i32
  %acc = scf.if %some -> (tensor<128x64xf32>) {
    %hi = arith.addi %n, %c64 : i32
    %last = arith.subi %n, %c64 : i32
    %r:2 = scf.for %j = %c0 to %hi step %c64 iter_args(%o = %acc0, %p = %zero_s) -> (tensor<128x64xf32>, tensor<128x64xf32>) : i32 {
      %jk = arith.minsi %j, %last : i32
      %jv0 = arith.subi %j, %c64 : i32
      %jv = arith.maxsi %jv0, %c0 : i32
      %kt = kiln.descriptor_load %kd, %K[%c0, %jk] shape [%c64, %rows] strides [%s] : !kiln.ptr<f16> -> tensor<64x64xf16>
      %v = kiln.descriptor_load %vd, %V[%jv, %c0] shape [%rows, %c64] strides [%s] : !kiln.ptr<f16> -> tensor<64x64xf16>
      %sc = kiln.dot %q, %kt, %zero_s : tensor<128x64xf16> * tensor<64x64xf16> -> tensor<128x64xf32>
      %p16 = arith.truncf %p : tensor<128x64xf32> to tensor<128x64xf16>
      %d = kiln.dot %p16, %v, %o : tensor<128x64xf16> * tensor<64x64xf16> -> tensor<128x64xf32>
      %e = math.exp2 %sc : tensor<128x64xf32>
      scf.yield %d, %e : tensor<128x64xf32>, tensor<128x64xf32>
    } {kiln.warp_specialize}
    scf.yield %r#0 : tensor<128x64xf32>
  } else {
    scf.yield %acc0 : tensor<128x64xf32>
  }
  %po = kiln.splat %O : tensor<128x64x!kiln.ptr<f32>>
  kiln.store %po, %acc : tensor<128x64x!kiln.ptr<f32>>
  return
}

// -----

// The same loop, not marked: with all-loops=false the kernel stays as it is.
// CHECK-NOT: kiln_gpu.launch_warps
// CHECK-LABEL: func.func @fa3_unmarked(
// CHECK-NOT: kiln_gpu.warp_id
// CHECK-NOT: named_barrier
// CHECK: return
func.func @fa3_unmarked(%qd: !kiln.tensormap, %Q: !kiln.ptr<f16>, %kd: !kiln.tensormap, %K: !kiln.ptr<f16>,
               %vd: !kiln.tensormap, %V: !kiln.ptr<f16>, %O: !kiln.ptr<f32>, %rows: i32, %s: i64, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zero_s = arith.constant dense<0.0> : tensor<128x64xf32>
  %acc0 = arith.constant dense<0.0> : tensor<128x64xf32>
  %q = kiln.descriptor_load %qd, %Q[%c0, %c0] shape [%rows, %c64] strides [%s] : !kiln.ptr<f16> -> tensor<128x64xf16>
  %some = arith.cmpi sgt, %n, %c0 : i32
  %acc = scf.if %some -> (tensor<128x64xf32>) {
    %hi = arith.addi %n, %c64 : i32
    %last = arith.subi %n, %c64 : i32
    %r:2 = scf.for %j = %c0 to %hi step %c64 iter_args(%o = %acc0, %p = %zero_s) -> (tensor<128x64xf32>, tensor<128x64xf32>) : i32 {
      %jk = arith.minsi %j, %last : i32
      %jv0 = arith.subi %j, %c64 : i32
      %jv = arith.maxsi %jv0, %c0 : i32
      %kt = kiln.descriptor_load %kd, %K[%c0, %jk] shape [%c64, %rows] strides [%s] : !kiln.ptr<f16> -> tensor<64x64xf16>
      %v = kiln.descriptor_load %vd, %V[%jv, %c0] shape [%rows, %c64] strides [%s] : !kiln.ptr<f16> -> tensor<64x64xf16>
      %sc = kiln.dot %q, %kt, %zero_s : tensor<128x64xf16> * tensor<64x64xf16> -> tensor<128x64xf32>
      %p16 = arith.truncf %p : tensor<128x64xf32> to tensor<128x64xf16>
      %d = kiln.dot %p16, %v, %o : tensor<128x64xf16> * tensor<64x64xf16> -> tensor<128x64xf32>
      %e = math.exp2 %sc : tensor<128x64xf32>
      scf.yield %d, %e : tensor<128x64xf32>, tensor<128x64xf32>
    }
    scf.yield %r#0 : tensor<128x64xf32>
  } else {
    scf.yield %acc0 : tensor<128x64xf32>
  }
  %po = kiln.splat %O : tensor<128x64x!kiln.ptr<f32>>
  kiln.store %po, %acc : tensor<128x64x!kiln.ptr<f32>>
  return
}
