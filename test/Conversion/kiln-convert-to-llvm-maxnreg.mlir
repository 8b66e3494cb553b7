// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm -verify-diagnostics | FileCheck %s

// A module's kiln.maxnreg (Triton's maxnreg launch option) caps the registers per thread of
// each of its kernels: nvvm.maxnreg beside nvvm.maxntid (ptxas's .maxnreg).
// CHECK-LABEL: llvm.func @capped(
// CHECK-SAME: nvvm.kernel
// CHECK-SAME: nvvm.maxnreg = 40 : i32
// CHECK-SAME: nvvm.maxntid = array<i32: 128, 1, 1>
module attributes {kiln.maxnreg = 40 : i32} {
func.func @capped(%x: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %p = kiln.splat %x : tensor<128x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %v = kiln.load %ps : tensor<128x!kiln.ptr<f32>>
  kiln.store %ps, %v : tensor<128x!kiln.ptr<f32>>
  return
}
}

// -----

// Without it, no cap.
// CHECK-LABEL: llvm.func @uncapped(
// CHECK-NOT: nvvm.maxnreg
// CHECK: llvm.return
func.func @uncapped(%x: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %p = kiln.splat %x : tensor<128x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %v = kiln.load %ps : tensor<128x!kiln.ptr<f32>>
  kiln.store %ps, %v : tensor<128x!kiln.ptr<f32>>
  return
}

// -----

// ptxas takes 16 to 255 registers per thread.
// expected-error @+1 {{kiln.maxnreg = 300: expected a register count per thread from 16 to 255}}
module attributes {kiln.maxnreg = 300 : i32} {
func.func @too_many(%x: !kiln.ptr<f32>) {
  return
}
}
