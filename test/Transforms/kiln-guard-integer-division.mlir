// RUN: kiln-opt %s -split-input-file -kiln-guard-integer-division | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-guard-integer-division="guard=0 check=1" | FileCheck %s --check-prefix=CHECKONLY

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
