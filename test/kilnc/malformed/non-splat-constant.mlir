// Non-splat tile constants have no GPU lowering yet; the error names the op.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s
func.func @k(%p: !kiln.ptr<i32>) {
  %r = kiln.make_range {end = 4 : i32, start = 0 : i32} : tensor<4xi32>
  %ps = kiln.splat %p : tensor<4x!kiln.ptr<i32>>
  %q = kiln.addptr %ps, %r : tensor<4x!kiln.ptr<i32>>, tensor<4xi32>
  // CHECK: non-splat-constant.mlir:[[@LINE+1]]:8: error: non-splat tile constants are not supported on the GPU path yet
  %c = arith.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  kiln.store %q, %c : tensor<4x!kiln.ptr<i32>>
  return
}
