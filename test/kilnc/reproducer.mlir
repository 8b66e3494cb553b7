// A failing pipeline writes a reproducer that replays the failure with kiln-opt.
// RUN: rm -f %t.repro.mlir
// RUN: not kilnc %s --reproducer=%t.repro.mlir -o /dev/null 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPRO < %t.repro.mlir
// RUN: not kiln-opt %t.repro.mlir --run-reproducer 2>&1 | FileCheck %s --check-prefix=REPLAY

// CHECK: error: 'kiln.print' is not supported on the GPU path yet
// CHECK: reproducer generated at
// REPRO: kiln.print
// REPRO: pipeline: "builtin.module(
// REPLAY: error: 'kiln.print' is not supported on the GPU path yet
func.func @uses_print(%p: !kiln.ptr<f32>) {
  %v = kiln.load %p : !kiln.ptr<f32>
  kiln.print " v = " %v : f32
  return
}
