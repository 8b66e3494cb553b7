// arith.addf on integer tiles.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<i32>) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  // CHECK: wrong-operand-type.mlir:[[@LINE+1]]:8: error: 'arith.addf' op operand #0 must be floating-point-like, but got 'tensor<128xi32>'
  %s = arith.addf %r, %r : tensor<128xi32>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<i32>>
  %q = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<i32>>, tensor<128xi32>
  kiln.store %q, %s : tensor<128x!kiln.ptr<i32>>
  return
}
