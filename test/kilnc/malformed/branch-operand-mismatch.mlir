// A branch passes two values to a block that takes one.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>, %x: f32, %c: i1) {
  // CHECK: branch-operand-mismatch.mlir:[[@LINE+1]]:3: error: branch has 2 operands for successor #0, but target block has 1
  cf.cond_br %c, ^bb1(%x, %x : f32, f32), ^bb1(%x : f32)
^bb1(%y: f32):
  kiln.store %p, %y : !kiln.ptr<f32>
  return
}
