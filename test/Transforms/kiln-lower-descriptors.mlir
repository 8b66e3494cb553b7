// RUN: kiln-opt %s -kiln-lower-descriptors | FileCheck %s
// RUN: kiln-opt %s | kiln-opt | FileCheck %s --check-prefix=ROUNDTRIP
// RUN: kiln-opt %s -kiln-lower-descriptors=tma-stores=true | FileCheck %s --check-prefix=TMA

// A descriptor load becomes the masked load of the block's pointers, zero outside the tensor;
// a descriptor store the masked store. Rows are offset i + arange, scaled by the stride;
// columns are contiguous; each dimension is checked against 0 and its extent.
// CHECK-LABEL: func.func @copy(
// CHECK-SAME: %[[D:.*]]: !kiln.tensormap, %[[BASE:.*]]: !kiln.ptr<f16>, %[[I:.*]]: i32, %[[J:.*]]: i32, %[[M:.*]]: i32, %[[N:.*]]: i32, %[[S:.*]]: i64)
// CHECK: %[[ROWS:.*]] = arith.addi %{{.*}}, %{{.*}} : tensor<16xi32>
// CHECK: %[[R2:.*]] = kiln.expand_dims %[[ROWS]] {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
// CHECK: %[[RB:.*]] = kiln.broadcast %[[R2]] : tensor<16x1xi32> -> tensor<16x32xi32>
// CHECK: %[[RIN:.*]] = arith.andi %{{.*}}, %{{.*}} : tensor<16x32xi1>
// CHECK: %[[R64:.*]] = arith.extsi %[[RB]] : tensor<16x32xi32> to tensor<16x32xi64>
// CHECK: %[[SS:.*]] = kiln.splat %[[S]] : tensor<16x32xi64>
// CHECK: %[[ROFF:.*]] = arith.muli %[[R64]], %[[SS]] : tensor<16x32xi64>
// CHECK: kiln.expand_dims %{{.*}} {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
// CHECK: %[[MASK:.*]] = arith.andi %[[RIN]], %{{.*}} : tensor<16x32xi1>
// CHECK: %[[OFF:.*]] = arith.addi %[[ROFF]], %{{.*}} : tensor<16x32xi64>
// CHECK: %[[PB:.*]] = kiln.splat %[[BASE]] : tensor<16x32x!kiln.ptr<f16>>
// CHECK: %[[P:.*]] = kiln.addptr %[[PB]], %[[OFF]] : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xi64>
// CHECK: %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<16x32xf16>
// CHECK: %[[T:.*]] = kiln.load %[[P]], %[[MASK]], %[[ZERO]] : tensor<16x32x!kiln.ptr<f16>>
// CHECK: kiln.store %{{.*}}, %[[T]], %{{.*}} : tensor<16x32x!kiln.ptr<f16>>
// CHECK-NOT: kiln.descriptor
// ROUNDTRIP: kiln.descriptor_load %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] shape[%{{.*}}, %{{.*}}] strides[%{{.*}}] : <f16> -> tensor<16x32xf16>
// ROUNDTRIP: kiln.descriptor_store
func.func @copy(%d: !kiln.tensormap, %base: !kiln.ptr<f16>, %i: i32, %j: i32, %m: i32,
                %n: i32, %s: i64) {
  %t = kiln.descriptor_load %d, %base[%i, %j] shape [%m, %n] strides [%s]
      : !kiln.ptr<f16> -> tensor<16x32xf16>
  kiln.descriptor_store %d, %base[%j, %i], %t shape [%m, %n] strides [%s]
      : !kiln.ptr<f16>, tensor<16x32xf16>
  return
}

// A rank-1 descriptor has no strides.
// CHECK-LABEL: func.func @vector(
// CHECK: %[[P1:.*]] = kiln.addptr %{{.*}}, %{{.*}} : tensor<64x!kiln.ptr<f32>>, tensor<64xi64>
// CHECK: kiln.load %[[P1]], %{{.*}}, %{{.*}} : tensor<64x!kiln.ptr<f32>>
func.func @vector(%d: !kiln.tensormap, %base: !kiln.ptr<f32>, %i: i32, %n: i32) -> tensor<64xf32> {
  %t = kiln.descriptor_load %d, %base[%i] shape [%n] strides [] : !kiln.ptr<f32> -> tensor<64xf32>
  return %t : tensor<64xf32>
}

// With tma-stores (sm_90a), a top-level store of a 2-D f16 block through a tensor map argument
// goes through a one-slot shared buffer laid out as a ring of B and the TMA; the map's box rows
// (the whole block, up to 256) are noted on the module. Loads stay masked loads.
// TMA: module attributes {kiln_gpu.tma_box_rows = array<i32: 16, 0, 0, 0, 0, 0, 0>}
// TMA-LABEL: func.func @copy(
// TMA: %[[T:.*]] = kiln.load
// TMA: %[[BUF:.*]] = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : <[1, 16, 32], f16>
// TMA: kiln_gpu.tma_store %{{.*}}[%{{.*}}, %{{.*}}], %[[T]], %[[BUF]] : !kiln.tensormap, tensor<16x32xf16>, <[1, 16, 32], f16>
// TMA-NOT: kiln.store
// TMA-LABEL: func.func @vector(
