// kiln.divisibility must be a positive power of two on an integer or pointer argument.
// RUN: split-file %s %t
// RUN: not kilnc %t/zero.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not kilnc %t/three.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=THREE
// RUN: not kilnc %t/float.mlir -o /dev/null 2>&1 | FileCheck %s --check-prefix=FLOAT
// ZERO: error: expected kiln.divisibility of kernel argument #0 to be a power of two in [1, 2^30] on an integer or pointer argument, found 0 : i32 on '!kiln.ptr<f32>'
// THREE: error: expected kiln.divisibility of kernel argument #1 to be a power of two in [1, 2^30] on an integer or pointer argument, found 3 : i32 on 'i32'
// FLOAT: error: expected kiln.divisibility of kernel argument #0 to be a power of two in [1, 2^30] on an integer or pointer argument, found 1.600000e+01 : f32

//--- zero.mlir
func.func @k(%p: !kiln.ptr<f32> {kiln.divisibility = 0 : i32}) {
  return
}
//--- three.mlir
func.func @k(%p: !kiln.ptr<f32>, %n: i32 {kiln.divisibility = 3 : i32}) {
  return
}
//--- float.mlir
func.func @k(%p: !kiln.ptr<f32> {kiln.divisibility = 16.0 : f32}) {
  return
}
