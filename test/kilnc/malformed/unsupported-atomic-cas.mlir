// kiln.atomic_cas on a scalar (a spin lock) verifies but has no GPU lowering yet.
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

func.func @k(%lock: !kiln.ptr<i32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  // CHECK: unsupported-atomic-cas.mlir:[[@LINE+1]]:8: error: 'kiln.atomic_cas' is not supported on the GPU path yet (it has no lowering)
  %0 = kiln.atomic_cas acquire, gpu, %lock, %c0, %c1 : !kiln.ptr<i32>
  kiln.store %lock, %0 : !kiln.ptr<i32>
  return
}
