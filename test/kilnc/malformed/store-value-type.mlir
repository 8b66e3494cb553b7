// An f16 tile stored through f32 pointers: the value type must be the pointee type.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>, %x: f16) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %v = kiln.splat %x : tensor<128xf16>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  // CHECK: store-value-type.mlir:[[@LINE+2]]:18: error: use of value '%v' expects different type than prior uses: 'tensor<128xf32>' vs 'tensor<128xf16>'
  // CHECK: store-value-type.mlir:[[@LINE-4]]:3: note: prior use here
  kiln.store %q, %v : tensor<128x!kiln.ptr<f32>>
  return
}
