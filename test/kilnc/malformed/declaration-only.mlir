// A module with only a declaration has no kernel to compile.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s
// CHECK: declaration-only.mlir:[[@LINE+1]]:1: error: expected a kernel definition, found a declaration of 'k'
func.func private @k(%p: !kiln.ptr<f32>)
