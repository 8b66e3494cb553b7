// A failing pipeline writes a reproducer that replays the failure with kiln-opt.
// RUN: rm -f %t.repro.mlir
// RUN: not kilnc %s --reproducer=%t.repro.mlir -o /dev/null 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPRO < %t.repro.mlir
// RUN: not kiln-opt %t.repro.mlir --run-reproducer 2>&1 | FileCheck %s --check-prefix=REPLAY

// CHECK: error: 'kiln.atomic_rmw' is not supported on the GPU path yet
// CHECK: reproducer generated at
// REPRO: kiln.atomic_rmw
// REPRO: pipeline: "builtin.module(
// REPLAY: error: 'kiln.atomic_rmw' is not supported on the GPU path yet
func.func @uses_atomic(%p: !kiln.ptr<f32>) {
  %one = arith.constant 1.0 : f32
  %old = kiln.atomic_rmw fadd, acq_rel, gpu, %p, %one : !kiln.ptr<f32>
  return
}
