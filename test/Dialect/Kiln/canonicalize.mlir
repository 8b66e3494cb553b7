// RUN: kiln-opt %s -canonicalize -split-input-file | FileCheck %s

// Folders and canonicalization patterns of the kiln ops. Results are returned so that the
// rewritten values stay live.

// CHECK-LABEL: func.func @splat_of_constant
// CHECK-NEXT: %[[C:.*]] = arith.constant dense<3.500000e+00> : tensor<64xf32>
// CHECK-NEXT: return %[[C]]
func.func @splat_of_constant() -> tensor<64xf32> {
  %c = arith.constant 3.5 : f32
  %0 = kiln.splat %c : tensor<64xf32>
  return %0 : tensor<64xf32>
}

// -----

// CHECK-LABEL: func.func @splat_of_int_constant_2d
// CHECK-NEXT: %[[C:.*]] = arith.constant dense<-7> : tensor<16x8xi32>
// CHECK-NEXT: return %[[C]]
func.func @splat_of_int_constant_2d() -> tensor<16x8xi32> {
  %c = arith.constant -7 : i32
  %0 = kiln.splat %c : tensor<16x8xi32>
  return %0 : tensor<16x8xi32>
}

// -----

// A splat of a non-constant stays.
// CHECK-LABEL: func.func @splat_of_argument
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK-NEXT: %[[S:.*]] = kiln.splat %[[X]] : tensor<64xf32>
// CHECK-NEXT: return %[[S]]
func.func @splat_of_argument(%x: f32) -> tensor<64xf32> {
  %0 = kiln.splat %x : tensor<64xf32>
  return %0 : tensor<64xf32>
}

// -----

// CHECK-LABEL: func.func @broadcast_of_splat
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK-NEXT: %[[S:.*]] = kiln.splat %[[X]] : tensor<32x64xf32>
// CHECK-NOT: kiln.broadcast
// CHECK-NEXT: return %[[S]]
func.func @broadcast_of_splat(%x: f32) -> tensor<32x64xf32> {
  %0 = kiln.splat %x : tensor<1x64xf32>
  %1 = kiln.broadcast %0 : tensor<1x64xf32> -> tensor<32x64xf32>
  return %1 : tensor<32x64xf32>
}

// -----

// A broadcast of a constant splat folds to a constant of the result's shape.
// CHECK-LABEL: func.func @broadcast_of_constant
// CHECK-NEXT: %[[C:.*]] = arith.constant dense<1> : tensor<32x64xi32>
// CHECK-NEXT: return %[[C]]
func.func @broadcast_of_constant() -> tensor<32x64xi32> {
  %c = arith.constant dense<1> : tensor<32x1xi32>
  %1 = kiln.broadcast %c : tensor<32x1xi32> -> tensor<32x64xi32>
  return %1 : tensor<32x64xi32>
}

// -----

// CHECK-LABEL: func.func @broadcast_of_broadcast
// CHECK-SAME: (%[[X:.*]]: tensor<1x1xf16>)
// CHECK-NEXT: %[[B:.*]] = kiln.broadcast %[[X]] : tensor<1x1xf16> -> tensor<16x32xf16>
// CHECK-NEXT: return %[[B]]
func.func @broadcast_of_broadcast(%x: tensor<1x1xf16>) -> tensor<16x32xf16> {
  %0 = kiln.broadcast %x : tensor<1x1xf16> -> tensor<1x32xf16>
  %1 = kiln.broadcast %0 : tensor<1x32xf16> -> tensor<16x32xf16>
  return %1 : tensor<16x32xf16>
}

// -----

// The inner broadcast has another use: it stays, the outer one reads the original source.
// CHECK-LABEL: func.func @broadcast_of_shared_broadcast
// CHECK-SAME: (%[[X:.*]]: tensor<1x1xf16>)
// CHECK-DAG: %[[I:.*]] = kiln.broadcast %[[X]] : tensor<1x1xf16> -> tensor<1x32xf16>
// CHECK-DAG: %[[O:.*]] = kiln.broadcast %[[X]] : tensor<1x1xf16> -> tensor<16x32xf16>
// CHECK: return %[[I]], %[[O]]
func.func @broadcast_of_shared_broadcast(%x: tensor<1x1xf16>) -> (tensor<1x32xf16>, tensor<16x32xf16>) {
  %0 = kiln.broadcast %x : tensor<1x1xf16> -> tensor<1x32xf16>
  %1 = kiln.broadcast %0 : tensor<1x32xf16> -> tensor<16x32xf16>
  return %0, %1 : tensor<1x32xf16>, tensor<16x32xf16>
}

// -----

// CHECK-LABEL: func.func @identity_broadcast
// CHECK-SAME: (%[[X:.*]]: tensor<32x64xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_broadcast(%x: tensor<32x64xf32>) -> tensor<32x64xf32> {
  %0 = kiln.broadcast %x : tensor<32x64xf32> -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// A real broadcast of a non-splat stays.
// CHECK-LABEL: func.func @broadcast_kept
// CHECK-SAME: (%[[X:.*]]: tensor<32x1xf32>)
// CHECK-NEXT: %[[B:.*]] = kiln.broadcast %[[X]] : tensor<32x1xf32> -> tensor<32x64xf32>
// CHECK-NEXT: return %[[B]]
func.func @broadcast_kept(%x: tensor<32x1xf32>) -> tensor<32x64xf32> {
  %0 = kiln.broadcast %x : tensor<32x1xf32> -> tensor<32x64xf32>
  return %0 : tensor<32x64xf32>
}

// -----

// CHECK-LABEL: func.func @identity_reshape
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>)
// CHECK-NEXT: return %[[X]]
func.func @identity_reshape(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = kiln.reshape %x : tensor<8x16xf32> -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_of_constant
// CHECK-NEXT: %[[C:.*]] = arith.constant dense<2.000000e+00> : tensor<128xf16>
// CHECK-NEXT: return %[[C]]
func.func @reshape_of_constant() -> tensor<128xf16> {
  %c = arith.constant dense<2.0> : tensor<8x16xf16>
  %0 = kiln.reshape %c : tensor<8x16xf16> -> tensor<128xf16>
  return %0 : tensor<128xf16>
}

// -----

// A real reshape stays.
// CHECK-LABEL: func.func @reshape_kept
// CHECK-NEXT: kiln.reshape %{{.*}} allow_reorder : tensor<8x16xf32> -> tensor<128xf32>
func.func @reshape_kept(%x: tensor<8x16xf32>) -> tensor<128xf32> {
  %0 = kiln.reshape %x allow_reorder : tensor<8x16xf32> -> tensor<128xf32>
  return %0 : tensor<128xf32>
}

// -----

// CHECK-LABEL: func.func @expand_dims_of_splat
// CHECK-SAME: (%[[X:.*]]: i32)
// CHECK-NEXT: %[[S:.*]] = kiln.splat %[[X]] : tensor<64x1xi32>
// CHECK-NOT: kiln.expand_dims
// CHECK-NEXT: return %[[S]]
func.func @expand_dims_of_splat(%x: i32) -> tensor<64x1xi32> {
  %0 = kiln.splat %x : tensor<64xi32>
  %1 = kiln.expand_dims %0 {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  return %1 : tensor<64x1xi32>
}

// -----

// expand_dims of a constant splat is a constant, so that `acc * alpha[:, None]` with alpha a
// constant 1.0 folds to acc.
// CHECK-LABEL: func.func @expand_dims_of_constant
// CHECK-SAME: (%[[ACC:.*]]: tensor<64x32xf32>)
// CHECK-NOT: kiln.expand_dims
// CHECK-NOT: arith.mulf
// CHECK: return %[[ACC]]
func.func @expand_dims_of_constant(%acc: tensor<64x32xf32>) -> tensor<64x32xf32> {
  %ones = arith.constant dense<1.000000e+00> : tensor<64xf32>
  %0 = kiln.expand_dims %ones {axis = 1 : i32} : tensor<64xf32> -> tensor<64x1xf32>
  %1 = kiln.broadcast %0 : tensor<64x1xf32> -> tensor<64x32xf32>
  %2 = arith.mulf %acc, %1 : tensor<64x32xf32>
  return %2 : tensor<64x32xf32>
}

// -----

// expand_dims of a range is not a splat: it stays.
// CHECK-LABEL: func.func @expand_dims_kept
// CHECK: kiln.make_range
// CHECK-NEXT: kiln.expand_dims %{{.*}} {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
func.func @expand_dims_kept() -> tensor<1x64xi32> {
  %0 = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %1 = kiln.expand_dims %0 {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  return %1 : tensor<1x64xi32>
}

// -----

// Splat, expand_dims and broadcast of one scalar collapse to a single splat.
// CHECK-LABEL: func.func @splat_chain
// CHECK-SAME: (%[[X:.*]]: f32)
// CHECK-NEXT: %[[S:.*]] = kiln.splat %[[X]] : tensor<16x64xf32>
// CHECK-NEXT: return %[[S]]
func.func @splat_chain(%x: f32) -> tensor<16x64xf32> {
  %0 = kiln.splat %x : tensor<64xf32>
  %1 = kiln.expand_dims %0 {axis = 0 : i32} : tensor<64xf32> -> tensor<1x64xf32>
  %2 = kiln.broadcast %1 : tensor<1x64xf32> -> tensor<16x64xf32>
  return %2 : tensor<16x64xf32>
}

// -----

// CHECK-LABEL: func.func @addptr_zero_scalar
// CHECK-SAME: (%[[P:.*]]: !kiln.ptr<f32>)
// CHECK-NEXT: return %[[P]]
func.func @addptr_zero_scalar(%p: !kiln.ptr<f32>) -> !kiln.ptr<f32> {
  %c0 = arith.constant 0 : i32
  %0 = kiln.addptr %p, %c0 : !kiln.ptr<f32>, i32
  return %0 : !kiln.ptr<f32>
}

// -----

// CHECK-LABEL: func.func @addptr_zero_tile
// CHECK-SAME: (%[[P:.*]]: tensor<128x!kiln.ptr<f16>>)
// CHECK-NEXT: return %[[P]]
func.func @addptr_zero_tile(%p: tensor<128x!kiln.ptr<f16>>) -> tensor<128x!kiln.ptr<f16>> {
  %c0 = arith.constant 0 : i64
  %z = kiln.splat %c0 : tensor<128xi64>
  %0 = kiln.addptr %p, %z : tensor<128x!kiln.ptr<f16>>, tensor<128xi64>
  return %0 : tensor<128x!kiln.ptr<f16>>
}

// -----

// CHECK-LABEL: func.func @addptr_nonzero
// CHECK-SAME: (%[[P:.*]]: !kiln.ptr<f32>)
// CHECK-NEXT: %[[C:.*]] = arith.constant 1 : i32
// CHECK-NEXT: %[[Q:.*]] = kiln.addptr %[[P]], %[[C]] : !kiln.ptr<f32>, i32
// CHECK-NEXT: return %[[Q]]
func.func @addptr_nonzero(%p: !kiln.ptr<f32>) -> !kiln.ptr<f32> {
  %c1 = arith.constant 1 : i32
  %0 = kiln.addptr %p, %c1 : !kiln.ptr<f32>, i32
  return %0 : !kiln.ptr<f32>
}

// -----

// Pure ops and (non-volatile) loads whose results are unused go away; stores stay.
// CHECK-LABEL: func.func @dead_pure_ops
// CHECK-SAME: (%[[P:.*]]: !kiln.ptr<f32>, %[[X:.*]]: f32)
// CHECK-NEXT: kiln.store %[[P]], %[[X]] : !kiln.ptr<f32>
// CHECK-NEXT: return
func.func @dead_pure_ops(%p: !kiln.ptr<f32>, %x: f32) {
  %0 = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %1 = kiln.program_id x : i32
  %2 = kiln.load %p : !kiln.ptr<f32>
  kiln.store %p, %x : !kiln.ptr<f32>
  return
}

// -----

// An unused volatile load stays: volatile means the access itself matters.
// CHECK-LABEL: func.func @unused_volatile_load_stays
// CHECK: kiln.load %{{.*}} volatile
// CHECK-NOT: kiln.load
func.func @unused_volatile_load_stays(%p: !kiln.ptr<f32>) {
  %0 = kiln.load %p volatile : !kiln.ptr<f32>
  %1 = kiln.load %p : !kiln.ptr<f32>
  return
}

// -----

// acc + dot(a, b, 0) -> dot(a, b, acc) (Triton's combine; `acc += tl.dot(a, b)`), also with
// the sum the other way round and for integer dots; a dot read twice, or from a non-zero
// accumulator, stays.
// CHECK-LABEL: func.func @add_of_dot
// CHECK-SAME: (%[[A:.*]]: tensor<64x32xf16>, %[[B:.*]]: tensor<32x64xf16>, %[[ACC:.*]]: tensor<64x64xf32>
// CHECK: %[[D:.*]] = kiln.dot %[[A]], %[[B]], %[[ACC]] : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
// CHECK: %[[E:.*]] = kiln.dot %[[A]], %[[B]], %[[D]]
// CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xi8> * tensor<32x64xi8> -> tensor<64x64xi32>
// CHECK-NOT: arith.addi
// CHECK: %[[T:.*]] = kiln.dot %[[A]], %[[B]], %{{.*}} :
// CHECK: arith.addf %[[T]], %[[T]]
// CHECK: %[[N:.*]] = kiln.dot %[[A]], %[[B]], %[[ACC]]
// CHECK: arith.addf %[[N]], %[[ACC]]
func.func @add_of_dot(%a: tensor<64x32xf16>, %b: tensor<32x64xf16>, %acc: tensor<64x64xf32>,
                      %ia: tensor<64x32xi8>, %ib: tensor<32x64xi8>, %iacc: tensor<64x64xi32>)
    -> (tensor<64x64xf32>, tensor<64x64xi32>, tensor<64x64xf32>, tensor<64x64xf32>) {
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %d0 = kiln.dot %a, %b, %zero : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
  %s0 = arith.addf %acc, %d0 : tensor<64x64xf32>
  %d1 = kiln.dot %a, %b, %zero : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
  %s1 = arith.addf %d1, %s0 : tensor<64x64xf32>
  %izero = arith.constant dense<0> : tensor<64x64xi32>
  %d2 = kiln.dot %ia, %ib, %izero : tensor<64x32xi8> * tensor<32x64xi8> -> tensor<64x64xi32>
  %s2 = arith.addi %d2, %iacc : tensor<64x64xi32>
  %d3 = kiln.dot %a, %b, %zero : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
  %s3 = arith.addf %d3, %d3 : tensor<64x64xf32>
  %d4 = kiln.dot %a, %b, %acc : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
  %s4 = arith.addf %d4, %acc : tensor<64x64xf32>
  return %s1, %s2, %s3, %s4 : tensor<64x64xf32>, tensor<64x64xi32>, tensor<64x64xf32>, tensor<64x64xf32>
}
