// RUN: kiln-opt %s -split-input-file -kiln-pipeline-dot-operands="num-warps=8 num-stages=3" -kiln-assign-layouts="num-warps=8 wgmma=true" -kiln-warp-specialize | FileCheck %s

// An attention loop whose K and V come through TMA rings with empty barriers: a producer
// warpgroup (warps 8-11) runs the ring side of the loop, issued by its first warp; the
// consumers (warps 0-7, the layouts' warps) take the registers, q's copy, the loop without its
// ring side, and the rest of the kernel. The set-up before the split (the rings, the barriers
// and the first copies) is run by every thread, its barriers over all of them. The loop waits
// for q @ k before its softmax, so its warpgroups do not take turns (no named barriers).
// CHECK: module attributes {kiln_gpu.consumer_warps = 8 : i32, kiln_gpu.launch_warps = 12 : i32
// CHECK-LABEL: func.func @attention(
// CHECK: %[[FULL:.*]] = kiln_gpu.mbarrier_alloc {kiln_gpu.all_threads} : <3>
// CHECK: %[[EMPTY:.*]] = kiln_gpu.mbarrier_alloc {arrivals = 8 : i32, kiln_gpu.all_threads} : <3>
// CHECK: kiln_gpu.tma_copy
// CHECK-NOT: leader_warp
// CHECK: kiln_gpu.barrier {kiln_gpu.all_threads}
// CHECK: %[[W:.*]] = kiln_gpu.warp_id : i32
// CHECK: %[[P:.*]] = arith.cmpi uge, %[[W]], %c8_i32 : i32
// CHECK-NEXT: scf.if %[[P]] {
// CHECK-NEXT: kiln_gpu.set_max_registers 24
// CHECK-NEXT: scf.for %{{.*}} iter_args(%[[SLOT:.*]] = %{{.*}}, %[[PHASE:.*]] = %{{.*}}) -> (i32, i32)
// CHECK-NOT: shared_dot
// CHECK: kiln_gpu.mbarrier_wait %[[EMPTY]][%{{.*}}], %{{.*}} if %{{.*}} {kiln_gpu.leader_warp = 8 : i32}
// CHECK-NEXT: kiln_gpu.mbarrier_expect %[[FULL]][%{{.*}}], %{{.*}} {bytes = 16384 : i32, kiln_gpu.leader_warp = 8 : i32}
// CHECK-NEXT: kiln_gpu.tma_copy {{.*}} {kiln_gpu.leader_warp = 8 : i32}
// CHECK-NEXT: kiln_gpu.tma_copy {{.*}} {kiln_gpu.leader_warp = 8 : i32}
// CHECK-NOT: shared_dot
// CHECK: scf.yield %{{.*}}, %{{.*}} : i32, i32
// CHECK: } else {
// CHECK-NEXT: kiln_gpu.set_max_registers 240 increase
// CHECK-NOT: named_barrier
// CHECK: kiln_gpu.async_copy
// CHECK: kiln_gpu.async_wait
// CHECK: scf.for
// CHECK-NEXT: kiln_gpu.mbarrier_wait %[[FULL]]
// CHECK-NOT: kiln_gpu.tma_copy
// CHECK-NOT: kiln_gpu.mbarrier_expect
// CHECK-NOT: named_barrier
// CHECK: kiln_gpu.shared_dot
// CHECK-NOT: named_barrier
// CHECK: kiln_gpu.shared_dot
// CHECK-NOT: named_barrier
// CHECK: kiln_gpu.mbarrier_arrive %[[EMPTY]]
// CHECK: kiln.store
// CHECK: }
// CHECK-NEXT: return
func.func @attention(%qd: !kiln.tensormap, %Q: !kiln.ptr<f16>, %kd: !kiln.tensormap, %K: !kiln.ptr<f16>,
                     %vd: !kiln.tensormap, %V: !kiln.ptr<f16>, %O: !kiln.ptr<f32>, %rows: i32, %s: i64, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zero_s = arith.constant dense<0.0> : tensor<128x64xf32>
  %acc0 = arith.constant dense<0.0> : tensor<128x64xf32>
  %q = kiln.descriptor_load %qd, %Q[%c0, %c0] shape [%rows, %c64] strides [%s] : !kiln.ptr<f16> -> tensor<128x64xf16>
  %acc = scf.for %j = %c0 to %n step %c64 iter_args(%o = %acc0) -> (tensor<128x64xf32>) : i32 {
    %kt = kiln.descriptor_load %kd, %K[%c0, %j] shape [%c64, %rows] strides [%s] : !kiln.ptr<f16> -> tensor<64x64xf16>
    %sc = kiln.dot %q, %kt, %zero_s : tensor<128x64xf16> * tensor<64x64xf16> -> tensor<128x64xf32>
    %e = math.exp2 %sc : tensor<128x64xf32>
    %p = arith.truncf %e : tensor<128x64xf32> to tensor<128x64xf16>
    %v = kiln.descriptor_load %vd, %V[%j, %c0] shape [%rows, %c64] strides [%s] : !kiln.ptr<f16> -> tensor<64x64xf16>
    %d = kiln.dot %p, %v, %o : tensor<128x64xf16> * tensor<64x64xf16> -> tensor<128x64xf32>
    scf.yield %d : tensor<128x64xf32>
  }
  %po = kiln.splat %O : tensor<128x64x!kiln.ptr<f32>>
  kiln.store %po, %acc : tensor<128x64x!kiln.ptr<f32>>
  return
}

// -----

// A loop of one dot (a matmul) is left as it is: no split, no extra warps.
// CHECK-NOT: kiln_gpu.launch_warps
// CHECK-LABEL: func.func @tma_matmul(
// CHECK-NOT: kiln_gpu.warp_id
// CHECK-NOT: leader_warp
// CHECK: return
func.func @tma_matmul(%ad: !kiln.tensormap, %ab: !kiln.ptr<f16>, %bd: !kiln.tensormap,
                      %bb: !kiln.ptr<f16>, %m: i32, %n: i32, %k: i32, %sa: i64, %sb: i64,
                      %om: i32, %on: i32, %kt: i32, %out: !kiln.ptr<f32>) {
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
  %po = kiln.splat %out : tensor<128x128x!kiln.ptr<f32>>
  kiln.store %po, %acc : tensor<128x128x!kiln.ptr<f32>>
  return
}

// -----

// Loads before the loop only read: a tile's (a bias the output adds) goes to the consumers,
// a scalar's (a scale) stays before the split, where both roles run it.
// CHECK-LABEL: func.func @attention_with_loads_before(
// CHECK: %[[SCALE:.*]] = kiln.load %{{.*}} : !kiln.ptr<f32>
// CHECK: %[[W:.*]] = kiln_gpu.warp_id : i32
// CHECK: scf.if
// CHECK-NEXT: kiln_gpu.set_max_registers 24
// CHECK-NOT: kiln.load
// CHECK: } else {
// CHECK-NEXT: kiln_gpu.set_max_registers 240 increase
// CHECK: %[[BIAS:.*]] = kiln.load %{{.*}} : tensor<128x64x!kiln.ptr<f32>{{.*}}>
// CHECK: scf.for
// CHECK: arith.addf %{{.*}}, %[[BIAS]]
// CHECK: arith.mulf %{{.*}}, %{{.*}}
// CHECK: kiln.store
func.func @attention_with_loads_before(%qd: !kiln.tensormap, %Q: !kiln.ptr<f16>, %kd: !kiln.tensormap, %K: !kiln.ptr<f16>,
                     %vd: !kiln.tensormap, %V: !kiln.ptr<f16>, %O: !kiln.ptr<f32>, %B: !kiln.ptr<f32>,
                     %S: !kiln.ptr<f32>, %rows: i32, %s: i64, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zero_s = arith.constant dense<0.0> : tensor<128x64xf32>
  %acc0 = arith.constant dense<0.0> : tensor<128x64xf32>
  %scale = kiln.load %S : !kiln.ptr<f32>
  %pb = kiln.splat %B : tensor<128x64x!kiln.ptr<f32>>
  %bias = kiln.load %pb : tensor<128x64x!kiln.ptr<f32>>
  %q = kiln.descriptor_load %qd, %Q[%c0, %c0] shape [%rows, %c64] strides [%s] : !kiln.ptr<f16> -> tensor<128x64xf16>
  %acc = scf.for %j = %c0 to %n step %c64 iter_args(%o = %acc0) -> (tensor<128x64xf32>) : i32 {
    %kt = kiln.descriptor_load %kd, %K[%c0, %j] shape [%c64, %rows] strides [%s] : !kiln.ptr<f16> -> tensor<64x64xf16>
    %sc = kiln.dot %q, %kt, %zero_s : tensor<128x64xf16> * tensor<64x64xf16> -> tensor<128x64xf32>
    %e = math.exp2 %sc : tensor<128x64xf32>
    %p = arith.truncf %e : tensor<128x64xf32> to tensor<128x64xf16>
    %v = kiln.descriptor_load %vd, %V[%j, %c0] shape [%rows, %c64] strides [%s] : !kiln.ptr<f16> -> tensor<64x64xf16>
    %d = kiln.dot %p, %v, %o : tensor<128x64xf16> * tensor<64x64xf16> -> tensor<128x64xf32>
    scf.yield %d : tensor<128x64xf32>
  }
  %biased = arith.addf %acc, %bias : tensor<128x64xf32>
  %ss = kiln.splat %scale : tensor<128x64xf32>
  %scaled = arith.mulf %biased, %ss : tensor<128x64xf32>
  %po = kiln.splat %O : tensor<128x64x!kiln.ptr<f32>>
  kiln.store %po, %scaled : tensor<128x64x!kiln.ptr<f32>>
  return
}
