// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts | FileCheck %s

// One loaded vector used as a column and as a row: the second use gets its own tile through
// a layout conversion, and each expand_dims slices its own layout.
// CHECK-LABEL: func.func @outer(
// CHECK: %[[V:.*]] = kiln.load {{.*}} : tensor<64x!kiln.ptr<f32>, #[[S0:.*]]>
// CHECK-NEXT: %[[COL:.*]] = kiln.expand_dims %[[V]] {axis = 1 : i32} : tensor<64xf32, #[[S0]]> -> tensor<64x1xf32, #[[B:.*]]>
// CHECK-NEXT: %[[CVT:.*]] = kiln_gpu.convert_layout %[[V]] : tensor<64xf32, #[[S0]]> -> tensor<64xf32, #[[S1:.*]]>
// CHECK-NEXT: kiln.expand_dims %[[CVT]] {axis = 0 : i32} : tensor<64xf32, #[[S1]]> -> tensor<1x64xf32, #[[B]]>
func.func @outer(%x: !kiln.ptr<f32>, %out: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %xs = kiln.splat %x : tensor<64x!kiln.ptr<f32>>
  %xp = kiln.addptr %xs, %r : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
  %v = kiln.load %xp : tensor<64x!kiln.ptr<f32>>
  %col = kiln.expand_dims %v {axis = 1 : i32} : tensor<64xf32> -> tensor<64x1xf32>
  %row = kiln.expand_dims %v {axis = 0 : i32} : tensor<64xf32> -> tensor<1x64xf32>
  %cb = kiln.broadcast %col : tensor<64x1xf32> -> tensor<64x64xf32>
  %rb = kiln.broadcast %row : tensor<1x64xf32> -> tensor<64x64xf32>
  %s = arith.addf %cb, %rb : tensor<64x64xf32>
  %os = kiln.splat %out : tensor<64x64x!kiln.ptr<f32>>
  kiln.store %os, %s : tensor<64x64x!kiln.ptr<f32>>
  return
}

// -----

// A reduction result also used as the slice of another layout: the conversion follows the
// reduction.
// CHECK-LABEL: func.func @reduce_then_row(
// CHECK: %[[S:.*]] = kiln.reduce
// CHECK: kiln_gpu.convert_layout %[[S]]
func.func @reduce_then_row(%p: !kiln.ptr<f32>, %q: !kiln.ptr<f32>) {
  %ps = kiln.splat %p : tensor<32x64x!kiln.ptr<f32>>
  %x = kiln.load %ps : tensor<32x64x!kiln.ptr<f32>>
  %s = kiln.reduce(%x) axis = 1 {
  ^bb0(%a: f32, %b: f32):
    %t = arith.addf %a, %b : f32
    kiln.reduce.return %t : f32
  } : (tensor<32x64xf32>) -> tensor<32xf32>
  %col = kiln.expand_dims %s {axis = 1 : i32} : tensor<32xf32> -> tensor<32x1xf32>
  %row = kiln.expand_dims %s {axis = 0 : i32} : tensor<32xf32> -> tensor<1x32xf32>
  %cb = kiln.broadcast %col : tensor<32x1xf32> -> tensor<32x32xf32>
  %rb = kiln.broadcast %row : tensor<1x32xf32> -> tensor<32x32xf32>
  %o = arith.mulf %cb, %rb : tensor<32x32xf32>
  %qs = kiln.splat %q : tensor<32x32x!kiln.ptr<f32>>
  kiln.store %qs, %o : tensor<32x32x!kiln.ptr<f32>>
  return
}

// -----

// A dot's accumulator that is a reduction's result, and a dot result expanded into a larger
// tile (a batched dot's elements): the accumulator keeps the dot's mma layout, the conversions
// stand between it and the slices.
// CHECK-LABEL: func.func @sliced_accumulator(
// CHECK: %[[S:.*]] = kiln.reduce
// CHECK: -> tensor<32x32xf32, #[[SL:.*]]>
// CHECK-NEXT: %[[C:.*]] = kiln_gpu.convert_layout %[[S]] : tensor<32x32xf32, #[[SL]]> -> tensor<32x32xf32, #[[ACC:.*]]>
// CHECK: %[[D:.*]] = kiln.dot %{{.*}}, %{{.*}}, %[[C]] : {{.*}} -> tensor<32x32xf32, #[[ACC]]>
// CHECK-NEXT: %[[E:.*]] = kiln_gpu.convert_layout %[[D]] : tensor<32x32xf32, #[[ACC]]> -> tensor<32x32xf32, #[[SL]]>
// CHECK-NEXT: kiln.expand_dims %[[E]] {axis = 0 : i32}
func.func @sliced_accumulator(%p: !kiln.ptr<f32>, %a: !kiln.ptr<f16>, %q: !kiln.ptr<f32>) {
  %ps = kiln.splat %p : tensor<2x32x32x!kiln.ptr<f32>>
  %x = kiln.load %ps : tensor<2x32x32x!kiln.ptr<f32>>
  %s = kiln.reduce(%x) axis = 0 {
  ^bb0(%l: f32, %r: f32):
    %t = arith.addf %l, %r : f32
    kiln.reduce.return %t : f32
  } : (tensor<2x32x32xf32>) -> tensor<32x32xf32>
  %as = kiln.splat %a : tensor<32x32x!kiln.ptr<f16>>
  %av = kiln.load %as : tensor<32x32x!kiln.ptr<f16>>
  %d = kiln.dot %av, %av, %s : tensor<32x32xf16> * tensor<32x32xf16> -> tensor<32x32xf32>
  %e = kiln.expand_dims %d {axis = 0 : i32} : tensor<32x32xf32> -> tensor<1x32x32xf32>
  %b = kiln.broadcast %e : tensor<1x32x32xf32> -> tensor<2x32x32xf32>
  %qs = kiln.splat %q : tensor<2x32x32x!kiln.ptr<f32>>
  kiln.store %qs, %b : tensor<2x32x32x!kiln.ptr<f32>>
  return
}
