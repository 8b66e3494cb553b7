// trans and reshape need layout conversions through shared memory: no GPU lowering yet.
// Each unsupported op is reported, not only the first.
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f16>) {
  %ps = kiln.splat %p : tensor<16x32x!kiln.ptr<f16>>
  %v = kiln.load %ps : tensor<16x32x!kiln.ptr<f16>>
  // CHECK: unsupported-trans-reshape.mlir:[[@LINE+1]]:8: error: 'kiln.trans' is not supported on the GPU path yet (it has no lowering)
  %t = kiln.trans %v {order = array<i32: 1, 0>} : tensor<16x32xf16> -> tensor<32x16xf16>
  // CHECK: unsupported-trans-reshape.mlir:[[@LINE+1]]:8: error: 'kiln.reshape' is not supported on the GPU path yet (it has no lowering)
  %r = kiln.reshape %t : tensor<32x16xf16> -> tensor<16x32xf16>
  kiln.store %ps, %r : tensor<16x32x!kiln.ptr<f16>>
  return
}
