// A kiln op that does not exist.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>) {
  // CHECK: unknown-op.mlir:[[@LINE+1]]:8: error: custom op 'kiln.frobnicate' is unknown
  %v = kiln.frobnicate %p : !kiln.ptr<f32>
  return
}
