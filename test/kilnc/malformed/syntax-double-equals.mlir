// A stray token where an operation name belongs.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>) {
  // CHECK: syntax-double-equals.mlir:[[@LINE+1]]:9: error: expected operation name in quotes
  %pid = = kiln.program_id x : i32
  return
}
