// kiln.scan verifies but has no GPU lowering yet.
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<i32>) {
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  // CHECK: unsupported-scan.mlir:[[@LINE+1]]:8: error: 'kiln.scan' is not supported on the GPU path yet (it has no lowering)
  %c = kiln.scan(%r) axis = 0 {
  ^bb0(%a: i32, %b: i32):
    %t = arith.addi %a, %b : i32
    kiln.scan.return %t : i32
  } : (tensor<64xi32>) -> tensor<64xi32>
  %ps = kiln.splat %p : tensor<64x!kiln.ptr<i32>>
  %q = kiln.addptr %ps, %r : tensor<64x!kiln.ptr<i32>>, tensor<64xi32>
  kiln.store %q, %c : tensor<64x!kiln.ptr<i32>>
  return
}
