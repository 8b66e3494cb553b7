// Pointer offsets are integers.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>, %x: f32) {
  // CHECK: pointer-arith-float-offset.mlir:[[@LINE+1]]:8: error: 'kiln.addptr' op operand #1 must be integer or integer tile, but got 'f32'
  %q = kiln.addptr %p, %x : !kiln.ptr<f32>, f32
  kiln.store %q, %x : !kiln.ptr<f32>
  return
}
