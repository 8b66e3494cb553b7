// RUN: kiln-opt %s -split-input-file -kiln-check-offset-overflow | FileCheck %s

// pid * BLOCK feeds an address: checked in 64 bits after the multiply, at its location.
// CHECK-LABEL: func.func @scalar_mul(
// CHECK: %[[M:.*]] = arith.muli %[[A:.*]], %[[B:.*]] : i32
// CHECK-DAG: %[[WA:.*]] = arith.extsi %[[A]] : i32 to i64
// CHECK-DAG: %[[WB:.*]] = arith.extsi %[[B]] : i32 to i64
// CHECK: %[[W:.*]] = arith.muli %[[WA]], %[[WB]] : i64
// CHECK: %[[N:.*]] = arith.extsi %[[M]] : i32 to i64
// CHECK: %[[OK:.*]] = arith.cmpi eq, %[[W]], %[[N]] : i64
// CHECK: kiln.assert %[[OK]], "int32 overflow in address arithmetic: `a * b` wraps around{{.*}}" : i1
// CHECK: kiln.addptr
func.func @scalar_mul(%p: !kiln.ptr<f32>, %pid: i32, %block: i32) {
  %o = arith.muli %pid, %block : i32
  %q = kiln.addptr %p, %o : !kiln.ptr<f32>, i32
  %v = kiln.load %q : !kiln.ptr<f32>
  kiln.store %p, %v : !kiln.ptr<f32>
  return
}

// -----

// Through a splat and a tile add; a shift is checked for bits shifted out and shifts >= 32.
// CHECK-LABEL: func.func @tile_shift(
// CHECK: %[[S:.*]] = arith.shli %[[X:.*]], %[[K:.*]] : tensor<64xi32>
// CHECK: %[[C:.*]] = arith.constant dense<32> : tensor<64xi32>
// CHECK: %[[IN:.*]] = arith.cmpi ult, %[[K]], %[[C]] : tensor<64xi32>
// CHECK: %[[BACK:.*]] = arith.shrsi %[[S]], %[[K]] : tensor<64xi32>
// CHECK: %[[SAME:.*]] = arith.cmpi eq, %[[BACK]], %[[X]] : tensor<64xi32>
// CHECK: %[[OK:.*]] = arith.andi %[[IN]], %[[SAME]] : tensor<64xi1>
// CHECK: kiln.assert %[[OK]], "int32 overflow in address arithmetic: `a << b`{{.*}}" : tensor<64xi1>
// CHECK: arith.addi {{.*}} : tensor<64xi32>
// CHECK: kiln.assert {{.*}} `a + b`
func.func @tile_shift(%p: !kiln.ptr<f32>, %base: i32, %n: i32) {
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %b = kiln.splat %base : tensor<64xi32>
  %s = arith.shli %b, %r : tensor<64xi32>
  %o = arith.addi %s, %r : tensor<64xi32>
  %ps = kiln.splat %p : tensor<64x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %o : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
  %v = kiln.load %q : tensor<64x!kiln.ptr<f32>>
  kiln.store %q, %v : tensor<64x!kiln.ptr<f32>>
  return
}

// -----

// Arithmetic that never reaches an address (a hash) may wrap: no check; i64 offsets neither.
// CHECK-LABEL: func.func @not_addresses(
// CHECK-NOT: kiln.assert
// CHECK: return
func.func @not_addresses(%p: !kiln.ptr<i32>, %x: i32, %y: i32, %i: i64, %j: i64) {
  %h = arith.muli %x, %y : i32
  %o = arith.muli %i, %j : i64
  %q = kiln.addptr %p, %o : !kiln.ptr<i32>, i64
  kiln.store %q, %h : !kiln.ptr<i32>
  return
}
