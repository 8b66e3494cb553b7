// The file ends in the middle of an operation (a cut-off download or editor save).
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

// CHECK: truncated.mlir:[[@LINE+6]]:38: error: expected non-function type
func.func @k(%x: !kiln.ptr<f32>, %n: i32) {
  %range = kiln.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
  %nv = kiln.splat %n : tensor<1024xi32>
  %xp = kiln.splat %x : tensor<1024x!kiln.ptr<f32>>
  %xps = kiln.addptr %xp, %range : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
  %mask = arith.cmpi slt, %range, %nv :