// kiln.atomic_rmw verifies but has no GPU lowering yet.
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %one = arith.constant dense<1.0> : tensor<128xf32>
  // CHECK: unsupported-atomic-rmw.mlir:[[@LINE+1]]:10: error: 'kiln.atomic_rmw' is not supported on the GPU path yet (it has no lowering)
  %old = kiln.atomic_rmw fadd, acq_rel, gpu, %q, %one : tensor<128x!kiln.ptr<f32>>
  kiln.store %q, %old : tensor<128x!kiln.ptr<f32>>
  return
}
