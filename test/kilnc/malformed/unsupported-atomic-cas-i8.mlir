// 8-bit compare-and-swap does not verify (16, 32 and 64 bits do, as in Triton).
// RUN: not kilnc %s -o /dev/null --reproducer=%t.repro.mlir 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<i8>) {
  %c1 = arith.constant 1 : i8
  %c2 = arith.constant 2 : i8
  // CHECK: unsupported-atomic-cas-i8.mlir:[[@LINE+1]]:10: error: 'kiln.atomic_cas' op expected a 16, 32 or 64-bit element type, found 'i8'
  %old = kiln.atomic_cas acq_rel, gpu, %p, %c1, %c2 : !kiln.ptr<i8>
  kiln.store %p, %old : !kiln.ptr<i8>
  return
}
