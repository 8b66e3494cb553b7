// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s

// extern_elementwise: one call of the libdevice function per owned element (128 elements
// over 4 warps: one per thread), declared once.
// CHECK-DAG: llvm.func @__nv_asinf(f32) -> f32
// CHECK-LABEL: llvm.func @asin_tile(
// CHECK: llvm.call @__nv_asinf(%{{.*}}) : (f32) -> f32
// CHECK-NOT: kiln.extern_elementwise
func.func @asin_tile(%p: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %x = kiln.load %q : tensor<128x!kiln.ptr<f32>>
  %y = kiln.extern_elementwise @__nv_asinf(%x) pure : (tensor<128xf32>) -> tensor<128xf32>
  kiln.store %q, %y : tensor<128x!kiln.ptr<f32>>
  return
}

// -----

// A scalar call with an int32 argument; the hardware registers and griddepcontrol.
// CHECK-DAG: llvm.func @__nv_powif(f32, i32) -> f32
// CHECK-LABEL: llvm.func @scalar_and_registers(
// CHECK: llvm.call @__nv_powif(%{{.*}}, %{{.*}}) : (f32, i32) -> f32
// CHECK: nvvm.read.ptx.sreg.globaltimer : i64
// CHECK: nvvm.read.ptx.sreg.smid : i32
// CHECK: nvvm.griddepcontrol wait
// CHECK: nvvm.griddepcontrol launch_dependents
func.func @scalar_and_registers(%p: !kiln.ptr<f32>, %n: i32, %t: !kiln.ptr<i64>, %s: !kiln.ptr<i32>) {
  %x = kiln.load %p : !kiln.ptr<f32>
  %y = kiln.extern_elementwise @__nv_powif(%x, %n) pure : (f32, i32) -> f32
  kiln.store %p, %y : !kiln.ptr<f32>
  %g = kiln.globaltimer : i64
  kiln.store %t, %g : !kiln.ptr<i64>
  %m = kiln.smid : i32
  kiln.store %s, %m : !kiln.ptr<i32>
  kiln.grid_dependency wait
  kiln.grid_dependency launch_dependents
  return
}
