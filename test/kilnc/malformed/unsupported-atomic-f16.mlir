// 16-bit atomics verify but the GPU path lowers only 32- and 64-bit ones so far.
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f16>) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<f16>>
  %q = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<f16>>, tensor<128xi32>
  %one = arith.constant dense<1.0> : tensor<128xf16>
  // CHECK: unsupported-atomic-f16.mlir:[[@LINE+1]]:10: error: atomic_rmw on 16-bit elements is not supported on the GPU path yet (32 and 64 bits are)
  %old = kiln.atomic_rmw fadd, acq_rel, gpu, %q, %one : tensor<128x!kiln.ptr<f16>>
  kiln.store %q, %old : tensor<128x!kiln.ptr<f16>>
  return
}
