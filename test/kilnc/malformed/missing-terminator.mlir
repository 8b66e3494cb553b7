// The kernel body has no `return`.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>, %x: f32) {
  // CHECK: missing-terminator.mlir:[[@LINE+1]]:3: error: block with no terminator, has "kiln.store"
  kiln.store %p, %x : !kiln.ptr<f32>
}
