// A failing pipeline writes a reproducer that replays the failure with kiln-opt.
// RUN: rm -f %t.repro.mlir
// RUN: not kilnc %s --reproducer=%t.repro.mlir -o /dev/null 2>&1 | FileCheck %s
// RUN: FileCheck %s --check-prefix=REPRO < %t.repro.mlir
// RUN: not kiln-opt %t.repro.mlir --run-reproducer 2>&1 | FileCheck %s --check-prefix=REPLAY

// CHECK: error: non-splat tile constants are not supported on the GPU path yet
// CHECK: reproducer generated at
// REPRO: arith.constant dense<[1, 2, 3, 4]>
// REPRO: pipeline: "builtin.module(
// REPLAY: error: non-splat tile constants are not supported on the GPU path yet
func.func @uses_constant(%p: !kiln.ptr<i32>) {
  %r = kiln.make_range {end = 4 : i32, start = 0 : i32} : tensor<4xi32>
  %ps = kiln.splat %p : tensor<4x!kiln.ptr<i32>>
  %q = kiln.addptr %ps, %r : tensor<4x!kiln.ptr<i32>>, tensor<4xi32>
  %c = arith.constant dense<[1, 2, 3, 4]> : tensor<4xi32>
  kiln.store %q, %c : tensor<4x!kiln.ptr<i32>>
  return
}
