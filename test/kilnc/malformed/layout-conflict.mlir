// One loaded tile used as both a column (x[:, None]) and a row (x[None, :]): the two uses
// need different layouts and the GPU path has no layout conversion yet.
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>, %q: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %ps = kiln.splat %p : tensor<32x!kiln.ptr<f32>>
  %pa = kiln.addptr %ps, %r : tensor<32x!kiln.ptr<f32>>, tensor<32xi32>
  %v = kiln.load %pa : tensor<32x!kiln.ptr<f32>>
  %col = kiln.expand_dims %v {axis = 1 : i32} : tensor<32xf32> -> tensor<32x1xf32>
  // CHECK: layout-conflict.mlir:[[@LINE+1]]:10: error: needs a layout conversion, which the GPU path does not support yet: this tile is also used at loc("{{.*}}layout-conflict.mlir":[[@LINE-1]]:10) with another layout
  %row = kiln.expand_dims %v {axis = 0 : i32} : tensor<32xf32> -> tensor<1x32xf32>
  %cb = kiln.broadcast %col : tensor<32x1xf32> -> tensor<32x32xf32>
  %rb = kiln.broadcast %row : tensor<1x32xf32> -> tensor<32x32xf32>
  %s = arith.addf %cb, %rb : tensor<32x32xf32>
  %qs = kiln.splat %q : tensor<32x32x!kiln.ptr<f32>>
  kiln.store %qs, %s : tensor<32x32x!kiln.ptr<f32>>
  return
}
