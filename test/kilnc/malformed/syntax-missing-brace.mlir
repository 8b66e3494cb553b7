// The function body is never closed: the parser reaches the end of the module.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

// CHECK: syntax-missing-brace.mlir:[[@LINE+8]]:2: error: expected operation name in quotes
module {
  func.func @k(%p: !kiln.ptr<f32>) {
    %pid = kiln.program_id x : i32
    %q = kiln.addptr %p, %pid : !kiln.ptr<f32>, i32
    %v = kiln.load %q : !kiln.ptr<f32>
    kiln.store %q, %v : !kiln.ptr<f32>
    return
}
