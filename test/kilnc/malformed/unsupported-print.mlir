// kiln.print (tl.device_print) verifies but has no GPU lowering yet.
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<i32>) {
  %v = kiln.load %p : !kiln.ptr<i32>
  // CHECK: unsupported-print.mlir:[[@LINE+1]]:3: error: 'kiln.print' is not supported on the GPU path yet (it has no lowering)
  kiln.print " v = " %v : i32
  return
}
