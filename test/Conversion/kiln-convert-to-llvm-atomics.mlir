// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s

// A masked atomic add on a tile: one predicated atom per owned element.
// CHECK-LABEL: llvm.func @tile_fadd(
// CHECK: llvm.inline_asm has_side_effects {{.*}}"@$1 atom.acq_rel.gpu.global.add.f32 $0, [ $2 + 0 ], $3;", "=f,b,l,f"
func.func @tile_fadd(%p: !kiln.ptr<f32>, %n: i32) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %nv = kiln.splat %n : tensor<128xi32>
  %m = arith.cmpi slt, %r, %nv : tensor<128xi32>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %one = arith.constant dense<1.0> : tensor<128xf32>
  %old = kiln.atomic_rmw fadd, acq_rel, gpu, %q, %one, %m : tensor<128x!kiln.ptr<f32>>
  kiln.store %q, %old, %m : tensor<128x!kiln.ptr<f32>>
  return
}

// -----

// A 16-element tile under 128 threads is replicated 8 times: only the owner updates.
// CHECK-LABEL: llvm.func @replicated_max(
// CHECK: llvm.icmp "ult"
// CHECK: "@$1 atom.relaxed.cta.global.max.s32 $0, [ $2 + 0 ], $3;", "=r,b,l,r"
func.func @replicated_max(%p: !kiln.ptr<i32>) {
  %r = kiln.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
  %ps = kiln.splat %p : tensor<16x!kiln.ptr<i32>>
  %q = kiln.addptr %ps, %r : tensor<16x!kiln.ptr<i32>>, tensor<16xi32>
  %old = kiln.atomic_rmw max, relaxed, cta, %q, %r : tensor<16x!kiln.ptr<i32>>
  return
}

// -----

// A scalar atomic runs on thread 0; the old value is shared through the shared scratch pool.
// CHECK: llvm.mlir.global internal @__kiln_scratch() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<16 x i8>
// CHECK-LABEL: llvm.func @scalar_cas(
// CHECK: "@$1 atom.acq_rel.gpu.global.cas.b32 $0, [ $2 + 0 ], $3, $4;", "=r,b,l,r,r"
// CHECK: nvvm.barrier0
func.func @scalar_cas(%p: !kiln.ptr<i32>, %out: !kiln.ptr<i32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %old = kiln.atomic_cas acq_rel, gpu, %p, %c0, %c1 : !kiln.ptr<i32>
  kiln.store %out, %old : !kiln.ptr<i32>
  return
}

// -----

// 8-bit add (acq_rel, gpu): relaxed llvm.atomicrmw per owned element behind a branch on the
// mask (LLVM expands it to a compare-and-swap loop on the word), between release and acquire
// fences of the op's scope.
// CHECK-LABEL: llvm.func @narrow_add(
// CHECK: llvm.fence syncscope("device") release
// CHECK: llvm.cond_br
// CHECK: llvm.atomicrmw add %{{.*}}, %{{.*}} syncscope("device") monotonic : !llvm.ptr<1>, i8
// CHECK: llvm.fence syncscope("device") acquire
func.func @narrow_add(%p: !kiln.ptr<i8>, %n: i32) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %nv = kiln.splat %n : tensor<128xi32>
  %m = arith.cmpi slt, %r, %nv : tensor<128xi32>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<i8>>
  %q = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<i8>>, tensor<128xi32>
  %one = arith.constant dense<1> : tensor<128xi8>
  %old = kiln.atomic_rmw add, acq_rel, gpu, %q, %one, %m : tensor<128x!kiln.ptr<i8>>
  kiln.store %q, %old, %m : tensor<128x!kiln.ptr<i8>>
  return
}

// -----

// A 16-bit compare-and-swap is atom.cas.b16 in 16-bit registers; relaxed fp16 max has no
// fences.
// CHECK-LABEL: llvm.func @cas16_and_relaxed_max(
// CHECK: "@$1 atom.acq_rel.gpu.global.cas.b16 $0, [ $2 + 0 ], $3, $4;", "=h,b,l,h,h"
// CHECK-NOT: llvm.fence
// CHECK: llvm.atomicrmw fmax %{{.*}}, %{{.*}} syncscope("block") monotonic : !llvm.ptr<1>, f16
// CHECK-NOT: llvm.fence
func.func @cas16_and_relaxed_max(%p: !kiln.ptr<i16>, %h: !kiln.ptr<f16>, %x: f16) {
  %c1 = arith.constant 1 : i16
  %c2 = arith.constant 2 : i16
  %old = kiln.atomic_cas acq_rel, gpu, %p, %c1, %c2 : !kiln.ptr<i16>
  kiln.store %p, %old : !kiln.ptr<i16>
  %m = kiln.atomic_rmw max, relaxed, cta, %h, %x : !kiln.ptr<f16>
  kiln.store %h, %m : !kiln.ptr<f16>
  return
}
