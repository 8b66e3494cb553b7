// A pointer to a whole tile: pointees are scalars.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

// CHECK: ptr-to-tensor.mlir:[[@LINE+1]]:27: error: expected a scalar pointee type (integer, float or !kiln.ptr), found 'tensor<128xf32>'
func.func @k(%p: !kiln.ptr<tensor<128xf32>>) {
  return
}
