// RUN: kiln-opt %s -kiln-pipeline-dot-operands="num-warps=4 num-stages=3" | FileCheck %s

// A grouped GEMM's expert weights through a 3-D descriptor (unsloth's MoE kernels, Triton's
// grouped GEMMs): B's block [1, 128, 64] is reshaped to 128x64 and transposed for the dot.
// The TMA takes 2-D blocks only, so that load becomes the masked load of its 128x64 tile
// (the reshapes fold away), which cp.async copies into a ring; A's 2-D descriptor, which the
// TMA could copy, then becomes a masked load as well (a loop copies with one engine), so both
// operands are copied ahead instead of B being loaded where the dot reads it.
// CHECK-LABEL: func.func @experts(
// CHECK-NOT: kiln_gpu.tma_copy
// CHECK: %[[A:.*]] = kiln_gpu.local_alloc {operand = 0 : i32} : <[3, 128, 64], f16>
// CHECK: %[[B:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 64, 128], f16>
// CHECK: kiln_gpu.async_copy %[[A]]
// CHECK: kiln_gpu.async_copy %[[B]]{{.*}} {transposed}
// CHECK: scf.for
// CHECK: kiln_gpu.shared_dot %[[A]]
// CHECK-NOT: kiln.descriptor_load
// CHECK-NOT: kiln.reshape
// CHECK-NOT: kiln_gpu.tma_copy
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
