// RUN: kiln-opt %s -kiln-pipeline-dot-operands="num-warps=4 num-stages=3" -split-input-file | FileCheck %s

// A grouped GEMM's expert weights through a 3-D descriptor (unsloth's MoE kernels, Triton's
// grouped GEMMs): B's block [1, 128, 64] is reshaped to 128x64 and transposed for the dot.
// The TMA copies it as a 3-D box, 1 along the experts (the expert its outer coordinate),
// into a 2-D ring; A's 2-D descriptor beside it. The reshape and the loads go.
// CHECK-LABEL: func.func @experts(
// CHECK: %[[A:.*]] = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : <[3, 128, 64], f16>
// CHECK: %[[B:.*]] = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : <[3, 64, 128], f16>
// CHECK: %[[BARS:.*]] = kiln_gpu.mbarrier_alloc : <3>
// CHECK: kiln_gpu.mbarrier_expect %[[BARS]][%{{.*}}], %{{.*}} {bytes = 32768 : i32} : <3>
// CHECK: kiln_gpu.tma_copy %arg0[%arg12, %{{.*}}], %[[A]]
// CHECK: kiln_gpu.tma_copy %arg2[%arg11, %arg13, %{{.*}}], %[[B]]
// CHECK: scf.for
// CHECK: kiln_gpu.mbarrier_wait %[[BARS]]
// CHECK: kiln_gpu.shared_dot %[[A]]
// CHECK-NOT: kiln.descriptor_load
// CHECK-NOT: kiln.reshape
// CHECK: return
func.func @experts(%ad: !kiln.tensormap, %ab: !kiln.ptr<f16>, %bd: !kiln.tensormap,
                   %bb: !kiln.ptr<f16>, %m: i32, %ne: i32, %n: i32, %k: i32, %sa: i64,
                   %sb0: i64, %sb1: i64, %e: i32, %om: i32, %on: i32, %kt: i32)
    -> tensor<128x128xf32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %acc = scf.for %i = %c0 to %kt step %c1 iter_args(%c = %zero) -> (tensor<128x128xf32>) : i32 {
    %ok = arith.muli %i, %c64 : i32
    %a = kiln.descriptor_load %ad, %ab[%om, %ok] shape [%m, %k] strides [%sa]
        : !kiln.ptr<f16> -> tensor<128x64xf16>
    %w = kiln.descriptor_load %bd, %bb[%e, %on, %ok] shape [%ne, %n, %k] strides [%sb0, %sb1]
        : !kiln.ptr<f16> -> tensor<1x128x64xf16>
    %bnk = kiln.reshape %w : tensor<1x128x64xf16> -> tensor<128x64xf16>
    %b = kiln.trans %bnk {order = array<i32: 1, 0>} : tensor<128x64xf16> -> tensor<64x128xf16>
    %d = kiln.dot %a, %b, %c : tensor<128x64xf16> * tensor<64x128xf16> -> tensor<128x128xf32>
    scf.yield %d : tensor<128x128xf32>
  }
  return %acc : tensor<128x128xf32>
}

// -----

// Tokens gathered by pointers (masked rows), the expert's weights through a 3-D descriptor
// (an MoE layer's expert GEMM): with wgmma one loop mixes the engines. Every thread's
// cp.async copies of a group arrive on the slot's barrier (one arrival per thread) and thread
// 0 expects the TMA's bytes there without arriving; the iteration waits on the barrier, then
// a proxy fence (wgmma reads what cp.async wrote) and a CTA barrier (the slots' reuse; with
// three slots the copies go after the dot, behind a second). After the loop every cp.async
// group is waited for. A's ring, filled by cp.async, gets its order from its copies
// (-kiln-assign-layouts); B's, the TMA's, from the block.
// CHECK-LABEL: func.func @gathered_tokens(
// CHECK: %[[A:.*]] = kiln_gpu.local_alloc {operand = 0 : i32} : <[3, 128, 64], f16>
// CHECK: %[[B:.*]] = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : <[3, 64, 128], f16>
// CHECK: %[[BARS:.*]] = kiln_gpu.mbarrier_alloc {arrivals = 128 : i32} : <3>
// CHECK: kiln_gpu.mbarrier_expect %[[BARS]][%[[S0:.*]]], %{{.*}} {bytes = 16384 : i32, no_arrive} : <3>
// CHECK: kiln_gpu.async_copy %[[A]][%[[S0]]]
// CHECK: kiln_gpu.tma_copy %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}], %[[B]][%[[S0]]], %[[BARS]]
// CHECK: kiln_gpu.async_commit
// CHECK: kiln_gpu.async_arrive %[[BARS]][%[[S0]]]
// CHECK: scf.for
// CHECK: kiln_gpu.mbarrier_wait %[[BARS]]
// CHECK-NEXT: kiln_gpu.proxy_fence
// CHECK-NEXT: kiln_gpu.barrier
// CHECK: kiln_gpu.shared_dot %[[A]]
// CHECK: kiln_gpu.mbarrier_expect %[[BARS]]{{.*}}no_arrive
// CHECK: kiln_gpu.async_copy %[[A]]
// CHECK: kiln_gpu.tma_copy
// CHECK: kiln_gpu.async_arrive %[[BARS]]
// CHECK: }
// CHECK: kiln_gpu.async_wait {pending = 0 : i32}
func.func @gathered_tokens(%x: !kiln.ptr<f16>, %bd: !kiln.tensormap, %bb: !kiln.ptr<f16>,
                           %m: i32, %ne: i32, %n: i32, %k: i32, %sb0: i64, %sb1: i64, %e: i32,
                           %on: i32, %kt: i32) -> tensor<128x128xf32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %fzero = arith.constant dense<0.0> : tensor<128x64xf16>
  %rows = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %cols = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %mm = kiln.splat %m : tensor<128xi32>
  %rok = arith.cmpi slt, %rows, %mm : tensor<128xi32>
  %rok2 = kiln.expand_dims %rok {axis = 1 : i32} : tensor<128xi1> -> tensor<128x1xi1>
  %mask = kiln.broadcast %rok2 : tensor<128x1xi1> -> tensor<128x64xi1>
  %kk = kiln.splat %k : tensor<128xi32>
  %roff = arith.muli %rows, %kk : tensor<128xi32>
  %roff2 = kiln.expand_dims %roff {axis = 1 : i32} : tensor<128xi32> -> tensor<128x1xi32>
  %roffb = kiln.broadcast %roff2 : tensor<128x1xi32> -> tensor<128x64xi32>
  %cols2 = kiln.expand_dims %cols {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  %colsb = kiln.broadcast %cols2 : tensor<1x64xi32> -> tensor<128x64xi32>
  %off = arith.addi %roffb, %colsb : tensor<128x64xi32>
  %xs = kiln.splat %x : tensor<128x64x!kiln.ptr<f16>>
  %p0 = kiln.addptr %xs, %off : tensor<128x64x!kiln.ptr<f16>>, tensor<128x64xi32>
  %step = kiln.splat %c64 : tensor<128x64xi32>
  %acc:2 = scf.for %i = %c0 to %kt step %c1 iter_args(%c = %zero, %p = %p0)
      -> (tensor<128x128xf32>, tensor<128x64x!kiln.ptr<f16>>) : i32 {
    %ok = arith.muli %i, %c64 : i32
    %a = kiln.load %p, %mask, %fzero : tensor<128x64x!kiln.ptr<f16>>
    %w = kiln.descriptor_load %bd, %bb[%e, %on, %ok] shape [%ne, %n, %k] strides [%sb0, %sb1]
        : !kiln.ptr<f16> -> tensor<1x128x64xf16>
    %bnk = kiln.reshape %w : tensor<1x128x64xf16> -> tensor<128x64xf16>
    %b = kiln.trans %bnk {order = array<i32: 1, 0>} : tensor<128x64xf16> -> tensor<64x128xf16>
    %d = kiln.dot %a, %b, %c : tensor<128x64xf16> * tensor<64x128xf16> -> tensor<128x128xf32>
    %pn = kiln.addptr %p, %step : tensor<128x64x!kiln.ptr<f16>>, tensor<128x64xi32>
    scf.yield %d, %pn : tensor<128x128xf32>, tensor<128x64x!kiln.ptr<f16>>
  }
  return %acc#0 : tensor<128x128xf32>
}
