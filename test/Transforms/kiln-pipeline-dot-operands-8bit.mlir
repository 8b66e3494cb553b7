// RUN: kiln-opt %s -kiln-pipeline-dot-operands="num-warps=4 num-stages=3" -split-input-file | FileCheck %s

// int8 blocks contiguous along K (A [BLOCK_M, BLOCK_K], B's [BLOCK_N, BLOCK_K] transposed):
// the TMA copies them as they are into K-major rings, as for fp8 (kiln-pipeline-dot-operands'
// @tma_fp8_k_major).
// CHECK-LABEL: func.func @tma_i8_k_major(
// CHECK: kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : <[3, 128, 128], i8>
// CHECK: %[[B:.*]] = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : <[3, 128, 128], i8>
// CHECK: kiln_gpu.tma_copy %{{.*}}[%{{.*}}, %{{.*}}], %[[B]][%{{.*}}]
// CHECK: scf.for
// CHECK: kiln_gpu.shared_dot
// CHECK-NOT: kiln.descriptor_load
// CHECK-NOT: kiln_gpu.async_copy
// CHECK: scf.yield
func.func @tma_i8_k_major(%ad: !kiln.tensormap, %ab: !kiln.ptr<i8>, %bd: !kiln.tensormap,
                          %bb: !kiln.ptr<i8>, %m: i32, %n: i32, %k: i32, %sa: i64,
                          %sb: i64, %om: i32, %on: i32, %kt: i32) -> tensor<128x128xi32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c128 = arith.constant 128 : i32
  %zero = arith.constant dense<0> : tensor<128x128xi32>
  %acc = scf.for %i = %c0 to %kt step %c1 iter_args(%c = %zero) -> (tensor<128x128xi32>) : i32 {
    %ok = arith.muli %i, %c128 : i32
    %a = kiln.descriptor_load %ad, %ab[%om, %ok] shape [%m, %k] strides [%sa]
        : !kiln.ptr<i8> -> tensor<128x128xi8>
    %bnk = kiln.descriptor_load %bd, %bb[%on, %ok] shape [%n, %k] strides [%sb]
        : !kiln.ptr<i8> -> tensor<128x128xi8>
    %b = kiln.trans %bnk {order = array<i32: 1, 0>} : tensor<128x128xi8> -> tensor<128x128xi8>
    %d = kiln.dot %a, %b, %c : tensor<128x128xi8> * tensor<128x128xi8> -> tensor<128x128xi32>
    scf.yield %d : tensor<128x128xi32>
  }
  return %acc : tensor<128x128xi32>
}

// -----

// B read K x N (N contiguous): a TMA copy would leave it N-major in its ring, which 8-bit
// wgmma cannot read. A still goes by the TMA; B is its masked load, copied by cp.async into a
// ring -kiln-assign-layouts orders K-major (no k_major here: the verifier rejected the TMA
// loop's k_major = false on it before).
// CHECK-LABEL: func.func @tma_i8_n_major_b(
// CHECK: kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : <[3, 128, 128], i8>
// CHECK: %[[B:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 128, 128], i8>
// CHECK: kiln_gpu.tma_copy
// CHECK: kiln_gpu.async_copy %[[B]][%{{.*}}], %{{.*}}, %{{.*}} : <[3, 128, 128], i8>, tensor<128x128x!kiln.ptr<i8>>, tensor<128x128xi1>
// CHECK: scf.for
// CHECK: kiln_gpu.shared_dot
// CHECK-NOT: kiln.descriptor_load
// CHECK: scf.yield
func.func @tma_i8_n_major_b(%ad: !kiln.tensormap, %ab: !kiln.ptr<i8>, %bd: !kiln.tensormap,
                            %bb: !kiln.ptr<i8>, %m: i32, %n: i32, %k: i32, %sa: i64,
                            %sb: i64, %om: i32, %on: i32, %kt: i32) -> tensor<128x128xi32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c128 = arith.constant 128 : i32
  %zero = arith.constant dense<0> : tensor<128x128xi32>
  %acc = scf.for %i = %c0 to %kt step %c1 iter_args(%c = %zero) -> (tensor<128x128xi32>) : i32 {
    %ok = arith.muli %i, %c128 : i32
    %a = kiln.descriptor_load %ad, %ab[%om, %ok] shape [%m, %k] strides [%sa]
        : !kiln.ptr<i8> -> tensor<128x128xi8>
    %b = kiln.descriptor_load %bd, %bb[%ok, %on] shape [%k, %n] strides [%sb]
        : !kiln.ptr<i8> -> tensor<128x128xi8>
    %d = kiln.dot %a, %b, %c : tensor<128x128xi8> * tensor<128x128xi8> -> tensor<128x128xi32>
    scf.yield %d : tensor<128x128xi32>
  }
  return %acc : tensor<128x128xi32>
}
