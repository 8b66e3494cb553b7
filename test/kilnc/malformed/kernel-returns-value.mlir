// A kernel writes its outputs through pointers; returning a value is an error.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s
// CHECK: kernel-returns-value.mlir:[[@LINE+1]]:1: error: expected kernel 'k' to return nothing (outputs are written through pointers), found 1 results
func.func @k(%p: !kiln.ptr<f32>) -> f32 {
  %v = kiln.load %p : !kiln.ptr<f32>
  return %v : f32
}
