// kilnc compiles exactly one kernel per module.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

// CHECK: two-kernels.mlir:0:0: error: expected exactly one kernel function, found 2
func.func @first(%p: !kiln.ptr<f32>, %x: f32) {
  kiln.store %p, %x : !kiln.ptr<f32>
  return
}

func.func @second(%p: !kiln.ptr<f32>, %x: f32) {
  kiln.store %p, %x : !kiln.ptr<f32>
  return
}
