// Device print and assert have no GPU lowering yet.
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<i32>, %n: i32) {
  %pid = kiln.program_id x : i32
  // CHECK: unsupported-print-assert.mlir:[[@LINE+1]]:3: error: 'kiln.print' is not supported on the GPU path yet (it has no lowering)
  kiln.print "pid: " %pid : i32
  %ok = arith.cmpi slt, %pid, %n : i32
  // CHECK: unsupported-print-assert.mlir:[[@LINE+1]]:3: error: 'kiln.assert' is not supported on the GPU path yet (it has no lowering)
  kiln.assert %ok, "pid out of range" : i1
  return
}
