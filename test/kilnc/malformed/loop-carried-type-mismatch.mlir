// The loop carries an f32 tile but its body yields an f16 one.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>, %n: i32) {
  %z = arith.constant dense<0.0> : tensor<128xf32>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  // CHECK: loop-carried-type-mismatch.mlir:[[@LINE+1]]:10: error: 'scf.for' op 0-th region iter_arg and 0-th yielded value have different type: 'tensor<128xf32>' != 'tensor<128xf16>'
  %acc = scf.for %i = %c0 to %n step %c1 iter_args(%a = %z) -> (tensor<128xf32>) : i32 {
    %h = arith.truncf %a : tensor<128xf32> to tensor<128xf16>
    scf.yield %h : tensor<128xf16>
  }
  return
}
