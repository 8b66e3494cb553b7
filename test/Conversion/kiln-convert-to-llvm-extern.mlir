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

// -----

// inline_asm_elementwise over 256 elements on 128 threads (2 per thread) with pack = 4: one
// asm per thread, its second half fed undefined values; 8-bit inputs share one register
// (a vector of 4), 32-bit outputs take one each, several outputs come back as a struct.
// CHECK-LABEL: llvm.func @inline_asm_packed(
// CHECK: %[[V:.*]] = llvm.insertelement %{{.*}}, %{{.*}}[%{{.*}} : i32] : vector<4xi8>
// CHECK: %[[A:.*]] = llvm.inline_asm "cvt $0, $4;", "=r,=r,=r,=r,r" %{{.*}} : (vector<4xi8>) -> !llvm.struct<(i32, i32, i32, i32)>
// CHECK-NOT: llvm.inline_asm
// CHECK: llvm.extractvalue %[[A]][0]
// CHECK: llvm.extractvalue %[[A]][1]
func.func @inline_asm_packed(%p: !kiln.ptr<i8>, %q: !kiln.ptr<i32>) {
  %r = kiln.make_range {end = 256 : i32, start = 0 : i32} : tensor<256xi32>
  %ps = kiln.splat %p : tensor<256x!kiln.ptr<i8>>
  %pp = kiln.addptr %ps, %r : tensor<256x!kiln.ptr<i8>>, tensor<256xi32>
  %x = kiln.load %pp : tensor<256x!kiln.ptr<i8>>
  %y = kiln.inline_asm_elementwise(%x) "cvt $0, $4;", "=r,=r,=r,=r,r" pure pack = 4 : (tensor<256xi8>) -> tensor<256xi32>
  %qs = kiln.splat %q : tensor<256x!kiln.ptr<i32>>
  %qp = kiln.addptr %qs, %r : tensor<256x!kiln.ptr<i32>>, tensor<256xi32>
  kiln.store %qp, %y : tensor<256x!kiln.ptr<i32>>
  return
}

// -----

// Scalars, pack = 1, not pure: one asm with side effects; its unused result keeps it.
// CHECK-LABEL: llvm.func @inline_asm_scalar(
// CHECK: llvm.inline_asm has_side_effects "st.global.u32 [$1], $2; mov.b32 $0, $2;", "=r,l,r" %{{.*}}, %{{.*}} : (!llvm.ptr<1>, i32) -> i32
func.func @inline_asm_scalar(%p: !kiln.ptr<i32>, %n: i32) {
  %0 = kiln.inline_asm_elementwise(%p, %n) "st.global.u32 [$1], $2; mov.b32 $0, $2;", "=r,l,r" pack = 1 : (!kiln.ptr<i32>, i32) -> i32
  return
}
