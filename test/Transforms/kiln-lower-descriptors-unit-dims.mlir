// RUN: kiln-opt %s -kiln-lower-descriptors -canonicalize | FileCheck %s

// A block with a unit dimension ([1, 16, 32] of a 3-D tensor: one expert's rows) is accessed
// as its 16x32 tile: the expert's position is a scalar, checked against its extent and
// splat into the tile's mask, its offset times its stride added to every pointer; the load
// is reshaped to the block, and a reshape of that back to 16x32 (as kernels write it) folds
// away. A store reshapes its value to the tile.
// CHECK-LABEL: func.func @experts(
// CHECK-SAME: %[[D:[^:]*]]: !kiln.tensormap, %[[BASE:[^:]*]]: !kiln.ptr<f16>, %[[E:[^:]*]]: i32, %[[I:[^:]*]]: i32, %[[J:[^:]*]]: i32, %[[NE:[^:]*]]: i32
// CHECK-DAG: %[[LO:.*]] = arith.cmpi sge, %[[E]], %{{.*}} : i32
// CHECK-DAG: %[[HI:.*]] = arith.cmpi slt, %[[E]], %[[NE]] : i32
// CHECK-DAG: %[[IN:.*]] = arith.andi %[[LO]], %[[HI]] : i1
// CHECK-DAG: %[[E64:.*]] = arith.extsi %[[E]] : i32 to i64
// CHECK: kiln.splat %[[IN]] : tensor<16x32xi1>
// CHECK: %[[P:.*]] = kiln.addptr %{{.*}}, %{{.*}} : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xi64>
// CHECK: %[[T:.*]] = kiln.load %[[P]], %{{.*}}, %{{.*}} : tensor<16x32x!kiln.ptr<f16>>
// CHECK-NOT: kiln.reshape
// CHECK: %[[X:.*]] = arith.addf %[[T]], %[[T]] : tensor<16x32xf16>
// CHECK: kiln.store %{{.*}}, %[[X]], %{{.*}} : tensor<16x32x!kiln.ptr<f16>>
// CHECK-NOT: kiln.descriptor
func.func @experts(%d: !kiln.tensormap, %base: !kiln.ptr<f16>, %e: i32, %i: i32, %j: i32,
                   %ne: i32, %n: i32, %k: i32, %s0: i64, %s1: i64) {
  %b = kiln.descriptor_load %d, %base[%e, %i, %j] shape [%ne, %n, %k] strides [%s0, %s1]
      : !kiln.ptr<f16> -> tensor<1x16x32xf16>
  %t = kiln.reshape %b : tensor<1x16x32xf16> -> tensor<16x32xf16>
  %x = arith.addf %t, %t : tensor<16x32xf16>
  %y = kiln.reshape %x : tensor<16x32xf16> -> tensor<1x16x32xf16>
  kiln.descriptor_store %d, %base[%e, %i, %j], %y shape [%ne, %n, %k] strides [%s0, %s1]
      : !kiln.ptr<f16>, tensor<1x16x32xf16>
  return
}
