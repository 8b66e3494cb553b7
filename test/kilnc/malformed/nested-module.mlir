// The kernel sits in a nested module: the top-level module has none of its own.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

// CHECK: nested-module.mlir:[[@LINE+1]]:1: error: expected exactly one kernel function, found 0
module {
  module @inner {
    func.func @k(%p: !kiln.ptr<f32>, %x: f32) {
      kiln.store %p, %x : !kiln.ptr<f32>
      return
    }
  }
}
