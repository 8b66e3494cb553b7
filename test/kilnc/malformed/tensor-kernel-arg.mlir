// Kernel arguments are scalars and pointers; a tile cannot be passed to a launch.
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

// CHECK: tensor-kernel-arg.mlir:[[@LINE+1]]:14: error: expected kernel argument #0 of 'k' to be a scalar or a pointer, found 'tensor<128xf32>'
func.func @k(%x: tensor<128xf32>, %p: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  kiln.store %q, %x : tensor<128x!kiln.ptr<f32>>
  return
}
