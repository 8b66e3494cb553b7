// The mask covers 512 lanes, the pointer tile 1024.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>, %n: i32) {
  %r = kiln.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
  %h = kiln.make_range {end = 512 : i32, start = 0 : i32} : tensor<512xi32>
  %nv = kiln.splat %n : tensor<512xi32>
  %mask = arith.cmpi slt, %h, %nv : tensor<512xi32>
  %ps = kiln.splat %p : tensor<1024x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %r : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
  // CHECK: type-mismatch-mask.mlir:[[@LINE+2]]:{{[0-9]+}}: error: use of value '%mask' expects different type than prior uses: 'tensor<1024xi1>' vs 'tensor<512xi1>'
  // CHECK: type-mismatch-mask.mlir:[[@LINE-4]]:3: note: prior use here
  %v = kiln.load %q, %mask : tensor<1024x!kiln.ptr<f32>>
  return
}
