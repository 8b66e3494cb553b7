// RUN: kiln-opt %s -split-input-file -kiln-guard-integer-ops | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-guard-integer-ops="guard=0 check=1" | FileCheck %s --check-prefix=CHECKONLY

// A signed division divides by 1 where the divisor is 0 or where INT_MIN / -1 would overflow.
// CHECK-LABEL: func.func @signed(
// CHECK: %[[Z:.*]] = arith.constant dense<0> : tensor<64xi32>
// CHECK: %[[ISZ:.*]] = arith.cmpi eq, %[[B:.*]], %[[Z]]
// CHECK: arith.constant dense<-1> : tensor<64xi32>
// CHECK: arith.constant dense<-2147483648> : tensor<64xi32>
// CHECK: %[[OV:.*]] = arith.andi
// CHECK: %[[BAD:.*]] = arith.ori %[[ISZ]], %[[OV]]
// CHECK: %[[ONE:.*]] = arith.constant dense<1> : tensor<64xi32>
// CHECK: %[[D:.*]] = arith.select %[[BAD]], %[[ONE]], %[[B]]
// CHECK: arith.divsi %{{.*}}, %[[D]] : tensor<64xi32>
// CHECK-NOT: kiln.assert
// CHECKONLY-LABEL: func.func @signed(
// CHECKONLY: %[[NZ:.*]] = arith.cmpi ne
// CHECKONLY: kiln.assert %[[NZ]], "integer division by zero{{.*}}" : tensor<64xi1>
// CHECKONLY-NOT: arith.select
// CHECKONLY: arith.divsi %{{.*}}, %{{.*}} : tensor<64xi32>
func.func @signed(%a: tensor<64xi32>, %b: tensor<64xi32>) -> tensor<64xi32> {
  %q = arith.divsi %a, %b : tensor<64xi32>
  return %q : tensor<64xi32>
}

// -----

// Unsigned remainders only need the zero case.
// CHECK-LABEL: func.func @unsigned(
// CHECK: %[[ISZ:.*]] = arith.cmpi eq
// CHECK-NOT: arith.ori
// CHECK: %[[D:.*]] = arith.select %[[ISZ]]
// CHECK: arith.remui %{{.*}}, %[[D]] : i64
func.func @unsigned(%a: i64, %b: i64) -> i64 {
  %r = arith.remui %a, %b : i64
  return %r : i64
}

// -----

// Shifts by the width or more follow PTX: shl gives 0, shrsi the sign (amount clamped).
// CHECK-LABEL: func.func @shifts(
// CHECK: %[[W:.*]] = arith.constant dense<32> : tensor<64xi32>
// CHECK: %[[FAR:.*]] = arith.cmpi uge, %[[K:.*]], %[[W]]
// CHECK: %[[Z:.*]] = arith.constant dense<0> : tensor<64xi32>
// CHECK: %[[K0:.*]] = arith.select %[[FAR]], %[[Z]], %[[K]]
// CHECK: %[[S:.*]] = arith.shli %{{.*}}, %[[K0]]
// CHECK: %[[R:.*]] = arith.select %[[FAR]], %[[Z]], %[[S]]
// CHECK: %[[W2:.*]] = arith.constant dense<32> : tensor<64xi32>
// CHECK: %[[FAR2:.*]] = arith.cmpi uge, %[[K]], %[[W2]]
// CHECK: %[[LAST:.*]] = arith.constant dense<31> : tensor<64xi32>
// CHECK: %[[K31:.*]] = arith.select %[[FAR2]], %[[LAST]], %[[K]]
// CHECK: %[[A:.*]] = arith.shrsi %[[R]], %[[K31]]
// CHECK: return %[[A]]
// CHECKONLY-LABEL: func.func @shifts(
// CHECKONLY-NOT: arith.select
func.func @shifts(%x: tensor<64xi32>, %k: tensor<64xi32>) -> tensor<64xi32> {
  %s = arith.shli %x, %k : tensor<64xi32>
  %a = arith.shrsi %s, %k : tensor<64xi32>
  return %a : tensor<64xi32>
}
