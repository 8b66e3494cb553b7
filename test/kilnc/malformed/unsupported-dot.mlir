// kiln.dot verifies but has no GPU lowering yet.
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

func.func @k(%a: !kiln.ptr<f16>, %o: !kiln.ptr<f32>) {
  %ap = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %x = kiln.load %ap : tensor<16x16x!kiln.ptr<f16>>
  %c = arith.constant dense<0.0> : tensor<16x16xf32>
  // CHECK: unsupported-dot.mlir:[[@LINE+1]]:8: error: 'kiln.dot' is not supported on the GPU path yet (it has no lowering)
  %d = kiln.dot %x, %x, %c : tensor<16x16xf16> * tensor<16x16xf16> -> tensor<16x16xf32>
  %op = kiln.splat %o : tensor<16x16x!kiln.ptr<f32>>
  kiln.store %op, %d : tensor<16x16x!kiln.ptr<f32>>
  return
}
