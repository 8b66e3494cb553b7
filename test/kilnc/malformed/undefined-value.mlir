// %y is used but never defined.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>, %x: f32) {
  // CHECK: undefined-value.mlir:[[@LINE+1]]:18: error: use of undeclared SSA value name
  kiln.store %p, %y : !kiln.ptr<f32>
  return
}
