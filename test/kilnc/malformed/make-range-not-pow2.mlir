// A 1000-element range: tiles are powers of two.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>) {
  // CHECK: make-range-not-pow2.mlir:[[@LINE+1]]:8: error: 'kiln.make_range' op expected end - start to be a power of two, found 1000
  %r = kiln.make_range {end = 1000 : i32, start = 0 : i32} : tensor<1000xi32>
  return
}
