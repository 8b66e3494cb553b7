// RUN: kiln-opt %s -kiln-flatten-loops -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-flatten-loops -kiln-pipeline-dot-operands="num-warps=4 num-stages=4" -split-input-file | FileCheck %s --check-prefix=PIPE

// A persistent kernel's tile loop (marked by tl.range(..., flatten=True)) and its K loop
// become one loop over trips(tiles) * trips(K) when the K loop runs at all: the tile index is
// lb + (i / kt) * step, the K index i % kt; the prologue (the tile's row) is recomputed, and a
// counter c (i % kt without a division) says where the accumulator restarts at the
// prologue's zero (c = 0) and where the store runs (c = kt - 1). Without K iterations the
// tile loop runs alone, storing the initial zero.
// CHECK-LABEL: func.func @tiles(
// CHECK: arith.maxsi
// CHECK: %[[KT:.*]] = arith.maxsi
// CHECK: %[[HAS:.*]] = arith.cmpi sgt, %[[KT]]
// CHECK: scf.if %[[HAS]] {
// CHECK: %[[TOTAL:.*]] = arith.muli %{{.*}}, %[[KT]] : i32
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %[[TOTAL]] step %{{.*}} iter_args(%[[ACC:[^ ]+]] = %{{[^,]+}}, %[[C:[^ ]+]] = %{{[^)]+}}) -> (tensor<64x64xf32>, i32)
// CHECK: %[[O:.*]] = arith.divui %[[I]], %[[KT]]
// CHECK: %[[J:.*]] = arith.remui %[[I]], %[[KT]]
// CHECK: %[[FIRST:.*]] = arith.cmpi eq, %[[C]], %{{.*}}
// CHECK: %[[X:.*]] = arith.select %[[FIRST]], %{{.*}}, %[[ACC]] : tensor<64x64xf32>
// CHECK: %[[D:.*]] = kiln.dot %{{.*}}, %{{.*}}, %[[X]]
// CHECK: %[[LAST:.*]] = arith.cmpi eq, %[[C]]
// CHECK: scf.if %[[LAST]] {
// CHECK: kiln.store %{{.*}}, %[[D]]
// CHECK: %[[NEXTC:.*]] = arith.select %[[LAST]], %{{.*}}, %{{.*}} : i32
// CHECK: scf.yield %[[D]], %[[NEXTC]]
// CHECK: } else {
// CHECK: scf.for
// CHECK-NOT: kiln.dot
// CHECK: kiln.store %{{.*}}, %{{.*}} : tensor<64x64x!kiln.ptr<f32>>
// CHECK-NOT: kiln.flatten
// The rings then see one loop: the dot's accumulator is the loop's, restarted through
// wgmma's accumulate flag (not the first K step), the dot runs on into the next iteration,
// and the store in the epilogue branch waits for it first. The copies' tile and K indices,
// divisions of the induction variable, are computed an iteration early and carried: the
// copies at the top compute their offset from them, and the end of the body steps them on
// for i + 3 without dividing (the K index by one, wrapping into the tile index).
// PIPE-LABEL: func.func @tiles(
// PIPE: scf.for %[[I:[^ ]+]] = {{.*}} iter_args(%[[ACC:[^ ]+]] = %{{[^,]+}}, %{{[^ ]+}} = %{{[^,]+}}, %[[O:[^ ]+]] = %{{[^,]+}}, %[[J:[^ ]+]] = %{{[^,]+}}, %[[SLOT:[^ ]+]] = %{{[^)]+}})
// PIPE-NEXT: kiln_gpu.async_wait {pending = 1 : i32}
// PIPE-NOT: arith.divui
// PIPE: arith.muli %[[O]]
// PIPE: arith.muli %[[J]]
// PIPE: kiln_gpu.async_copy
// PIPE: kiln_gpu.async_copy
// PIPE: kiln_gpu.async_commit
// PIPE: %[[FIRST:.*]] = arith.cmpi eq
// PIPE-NOT: arith.select %[[FIRST]]
// PIPE: %[[NOT:.*]] = arith.xori %[[FIRST]], %{{.*}} : i1
// PIPE: %[[D:.*]] = kiln_gpu.shared_dot %{{.*}}[%[[SLOT]]], %{{.*}}[%[[SLOT]]], %[[ACC]] accumulate %[[NOT]] {pending = 1 : i32}
// PIPE: scf.if
// PIPE-NEXT: %[[W:.*]] = kiln_gpu.dot_wait %[[D]] : tensor<64x64xf32>
// PIPE: kiln.store %{{.*}}, %[[W]]
// PIPE: %[[NEXT:.*]] = arith.addi %[[I]], %{{.*}} : i32
// PIPE: %[[EXISTS:.*]] = arith.cmpi slt, %[[NEXT]]
// PIPE: %[[F:.*]]:2 = scf.if %[[EXISTS]] -> (i32, i32) {
// PIPE-NOT: arith.divui
// PIPE: %[[J1:.*]] = arith.addi %[[J]], %{{.*}} : i32
// PIPE: %[[WRAP:.*]] = arith.cmpi eq, %[[J1]]
// PIPE: %[[NJ:.*]] = arith.select %[[WRAP]], %{{.*}}, %[[J1]] : i32
// PIPE: %[[STEP:.*]] = arith.extui %[[WRAP]] : i1 to i32
// PIPE: %[[NO:.*]] = arith.addi %[[O]], %[[STEP]] : i32
// PIPE: scf.yield %[[NO]], %[[NJ]] : i32, i32
// PIPE: } else {
// PIPE-NEXT: scf.yield %[[O]], %[[J]] : i32, i32
// PIPE: scf.yield %[[D]], %{{.*}}, %[[F]]#0, %[[F]]#1, %{{.*}} : tensor<64x64xf32>, i32, i32, i32, i32
// PIPE: kiln_gpu.dot_wait
// PIPE-NEXT: kiln_gpu.async_wait {pending = 0 : i32}
func.func @tiles(%A: !kiln.ptr<f16>, %C: !kiln.ptr<f32>, %start: i32, %tiles: i32, %K: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c4 = arith.constant 4 : i32
  %c32 = arith.constant 32 : i32
  %kt = arith.divsi %K, %c32 : i32
  scf.for %t = %start to %tiles step %c4 : i32 {
    %row = arith.muli %t, %c32 : i32
    %zero = arith.constant dense<0.0> : tensor<64x64xf32>
    %acc = scf.for %k = %c0 to %kt step %c1 iter_args(%a = %zero) -> (tensor<64x64xf32>) : i32 {
      %off = arith.addi %row, %k : i32
      %pa = kiln.splat %A : tensor<64x32x!kiln.ptr<f16>>
      %o = kiln.splat %off : tensor<64x32xi32>
      %pas = kiln.addptr %pa, %o : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
      %x = kiln.load %pas : tensor<64x32x!kiln.ptr<f16>>
      %pb = kiln.splat %A : tensor<32x64x!kiln.ptr<f16>>
      %ob = kiln.splat %off : tensor<32x64xi32>
      %pbs = kiln.addptr %pb, %ob : tensor<32x64x!kiln.ptr<f16>>, tensor<32x64xi32>
      %y = kiln.load %pbs : tensor<32x64x!kiln.ptr<f16>>
      %d = kiln.dot %x, %y, %a : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
      scf.yield %d : tensor<64x64xf32>
    }
    %pc = kiln.splat %C : tensor<64x64x!kiln.ptr<f32>>
    %oc = kiln.splat %row : tensor<64x64xi32>
    %pcs = kiln.addptr %pc, %oc : tensor<64x64x!kiln.ptr<f32>>, tensor<64x64xi32>
    kiln.store %pcs, %acc : tensor<64x64x!kiln.ptr<f32>>
  } {kiln.flatten}
  return
}

// -----

// Left alone (the mark dropped): the tile loop carries a value, or its prologue stores.
// CHECK-LABEL: func.func @carried(
// CHECK: scf.for
// CHECK: scf.for
// CHECK-NOT: kiln.flatten
// CHECK-LABEL: func.func @prologue_effect(
// CHECK: scf.for
// CHECK: kiln.store
// CHECK: scf.for
// CHECK-NOT: kiln.flatten
func.func @carried(%n: i32, %m: i32) -> i32 {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %r = scf.for %t = %c0 to %n step %c1 iter_args(%s = %c0) -> (i32) : i32 {
    %i = scf.for %k = %c0 to %m step %c1 iter_args(%x = %s) -> (i32) : i32 {
      %y = arith.addi %x, %k : i32
      scf.yield %y : i32
    }
    scf.yield %i : i32
  } {kiln.flatten}
  return %r : i32
}

func.func @prologue_effect(%p: !kiln.ptr<i32>, %n: i32, %m: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %t = %c0 to %n step %c1 : i32 {
    kiln.store %p, %t : !kiln.ptr<i32>
    %i = scf.for %k = %c0 to %m step %c1 iter_args(%x = %c0) -> (i32) : i32 {
      %y = arith.addi %x, %k : i32
      scf.yield %y : i32
    }
    kiln.store %p, %i : !kiln.ptr<i32>
  } {kiln.flatten}
  return
}
