// kiln.reduce verifies but has no GPU lowering yet.
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %v = kiln.load %q : tensor<128x!kiln.ptr<f32>>
  // CHECK: unsupported-reduce.mlir:[[@LINE+1]]:8: error: 'kiln.reduce' is not supported on the GPU path yet (it has no lowering)
  %s = kiln.reduce(%v) axis = 0 {
  ^bb0(%a: f32, %b: f32):
    %t = arith.addf %a, %b : f32
    kiln.reduce.return %t : f32
  } : (tensor<128xf32>) -> f32
  kiln.store %p, %s : !kiln.ptr<f32>
  return
}
