// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts -kiln-convert-to-llvm | FileCheck %s

// An elementwise result the axis analysis proves constant over aligned runs is computed once
// per run. `r < n` with n a multiple of 16 is constant over runs of 16; a thread owns two
// blocks of 4 f32 ([4] x 32 lanes x 4 warps, 1024 elements): two compares, not eight, and
// the selects of all 8 elements use them.
// CHECK-LABEL: llvm.func @mask_runs(
// CHECK-COUNT-2: llvm.icmp "slt"
// CHECK-NOT: llvm.icmp "slt"
// CHECK-COUNT-8: llvm.select
// CHECK-NOT: llvm.select
func.func @mask_runs(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %n: i32 {kiln.divisibility = 16 : i32}) {
  %r = kiln.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
  %nv = kiln.splat %n : tensor<1024xi32>
  %m = arith.cmpi slt, %r, %nv : tensor<1024xi32>
  %p = kiln.splat %x : tensor<1024x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
  %v = kiln.load %ps : tensor<1024x!kiln.ptr<f32>>
  %zero = arith.constant dense<0.0> : tensor<1024xf32>
  %w = arith.select %m, %v, %zero : tensor<1024xi1>, tensor<1024xf32>
  kiln.store %ps, %w : tensor<1024x!kiln.ptr<f32>>
  return
}

// -----

// Nothing known of n: every element compares.
// CHECK-LABEL: llvm.func @mask_elements(
// CHECK-COUNT-8: llvm.icmp "slt"
// CHECK-NOT: llvm.icmp "slt"
func.func @mask_elements(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %n: i32) {
  %r = kiln.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
  %nv = kiln.splat %n : tensor<1024xi32>
  %m = arith.cmpi slt, %r, %nv : tensor<1024xi32>
  %p = kiln.splat %x : tensor<1024x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
  %v = kiln.load %ps : tensor<1024x!kiln.ptr<f32>>
  %zero = arith.constant dense<0.0> : tensor<1024xf32>
  %w = arith.select %m, %v, %zero : tensor<1024xi1>, tensor<1024xf32>
  kiln.store %ps, %w : tensor<1024x!kiln.ptr<f32>>
  return
}

// -----

// A 2-D tile: rows r[:, None] are constant along the columns. Under [1, 4] x [2, 16] lanes x
// [4, 1] warps a thread owns 8 rows of 4 columns: one compare per row, 8 instead of 32.
// CHECK-LABEL: llvm.func @rows_2d(
// CHECK-COUNT-8: llvm.icmp "slt"
// CHECK-NOT: llvm.icmp "slt"
func.func @rows_2d(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %n: i32) {
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %re = kiln.expand_dims %r {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %rb = kiln.broadcast %re : tensor<64x1xi32> -> tensor<64x64xi32>
  %nv = kiln.splat %n : tensor<64x64xi32>
  %m = arith.cmpi slt, %rb, %nv : tensor<64x64xi32>
  %c = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %ce = kiln.expand_dims %c {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  %cb = kiln.broadcast %ce : tensor<1x64xi32> -> tensor<64x64xi32>
  %c64 = arith.constant dense<64> : tensor<64x64xi32>
  %row = arith.muli %rb, %c64 : tensor<64x64xi32>
  %off = arith.addi %row, %cb : tensor<64x64xi32>
  %p = kiln.splat %x : tensor<64x64x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %off : tensor<64x64x!kiln.ptr<f32>>, tensor<64x64xi32>
  %v = kiln.load %ps : tensor<64x64x!kiln.ptr<f32>>
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %w = arith.select %m, %v, %zero : tensor<64x64xi1>, tensor<64x64xf32>
  kiln.store %ps, %w : tensor<64x64x!kiln.ptr<f32>>
  return
}
