// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s

// Shared scratch (SharedScratch.cpp): ops reuse one pool and a data-flow analysis places the
// barriers. Two cross-warp reductions per iteration of a loop (LayerNorm's pattern) take the
// pool's two slots in turn (16 bytes each, slot 1 from byte 128): each one's writes find only
// the other slot's reads outstanding, across the back edge too, so the loop has the two
// barriers of the reductions themselves and no others.
// CHECK: llvm.mlir.global internal @__kiln_scratch() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<144 x i8>
// CHECK-LABEL: llvm.func @two_reductions_in_loop(
// CHECK: llvm.cond_br
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.store {{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.getelementptr %{{.*}}[128] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.store {{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.return
func.func @two_reductions_in_loop(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %n: i32) {
  %r = kiln.make_range {end = 512 : i32, start = 0 : i32} : tensor<512xi32>
  %p = kiln.splat %x : tensor<512x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<512x!kiln.ptr<f32>>, tensor<512xi32>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant 0.0 : f32
  %t = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (f32) : i32 {
    %v = kiln.load %ps : tensor<512x!kiln.ptr<f32>>
    %s = kiln.reduce(%v) axis = 0 {
    ^bb0(%a: f32, %b: f32):
      %u = arith.addf %a, %b : f32
      kiln.reduce.return %u : f32
    } : (tensor<512xf32>) -> f32
    %m = kiln.reduce(%v) axis = 0 {
    ^bb0(%a: f32, %b: f32):
      %u = arith.maximumf %a, %b : f32
      kiln.reduce.return %u : f32
    } : (tensor<512xf32>) -> f32
    %sm = arith.addf %s, %m : f32
    %next = arith.addf %acc, %sm : f32
    scf.yield %next : f32
  }
  kiln.store %x, %t : !kiln.ptr<f32>
  return
}

// -----

// A tile too large for the second slot (a 32x32 f32 trans: 4236 bytes) shares slot 0 with the
// reduction before it, whose reads may still be running: the trans starts with a barrier.
// Three barriers in all: the reduction's, the one before the trans's writes, the trans's.
// CHECK: llvm.mlir.global internal @__kiln_scratch() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<4240 x i8>
// CHECK-LABEL: llvm.func @reduce_then_trans(
// CHECK-COUNT-3: nvvm.barrier0
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.return
func.func @reduce_then_trans(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}) {
  %r = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %re = kiln.expand_dims %r {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %rb = kiln.broadcast %re : tensor<32x1xi32> -> tensor<32x32xi32>
  %ce = kiln.expand_dims %r {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %cb = kiln.broadcast %ce : tensor<1x32xi32> -> tensor<32x32xi32>
  %c32 = arith.constant dense<32> : tensor<32x32xi32>
  %row = arith.muli %rb, %c32 : tensor<32x32xi32>
  %off = arith.addi %row, %cb : tensor<32x32xi32>
  %p = kiln.splat %x : tensor<32x32x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %off : tensor<32x32x!kiln.ptr<f32>>, tensor<32x32xi32>
  %v = kiln.load %ps : tensor<32x32x!kiln.ptr<f32>>
  %s = kiln.reduce(%v) axis = 0 {
  ^bb0(%a: f32, %b: f32):
    %u = arith.addf %a, %b : f32
    kiln.reduce.return %u : f32
  } : (tensor<32x32xf32>) -> tensor<32xf32>
  %t = kiln.trans %v {order = array<i32: 1, 0>} : tensor<32x32xf32> -> tensor<32x32xf32>
  kiln.store %ps, %t : tensor<32x32x!kiln.ptr<f32>>
  %sp = kiln.splat %x : tensor<32x!kiln.ptr<f32>>
  %sps = kiln.addptr %sp, %r : tensor<32x!kiln.ptr<f32>>, tensor<32xi32>
  kiln.store %sps, %s : tensor<32x!kiln.ptr<f32>>
  return
}
