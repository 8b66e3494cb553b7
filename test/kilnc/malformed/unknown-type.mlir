// A kiln type that does not exist (tiles are builtin tensors).
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

// CHECK: unknown-type.mlir:[[@LINE+1]]:24: error: unknown type `tile` in dialect `kiln`
func.func @k(%t: !kiln.tile<128xf32>) {
  return
}
