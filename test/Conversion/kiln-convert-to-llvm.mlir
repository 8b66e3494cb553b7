// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm -verify-diagnostics | FileCheck %s

// A kernel becomes an nvvm.kernel llvm.func with maxntid = 32 * num_warps; a tile of 1024
// under [4] x 32 lanes x 4 warps is 8 registers per thread; masked loads are predicated
// 128-bit inline PTX, and the divisibility of a pointer becomes its llvm.align.
// CHECK-LABEL: llvm.func @add(
// CHECK-SAME: %{{.*}}: !llvm.ptr<1> {llvm.align = 16 : i64}
// CHECK-SAME: nvvm.kernel
// CHECK-SAME: nvvm.maxntid = array<i32: 128, 1, 1>
// CHECK: nvvm.read.ptx.sreg.ctaid.x
// CHECK: nvvm.read.ptx.sreg.tid.x
// CHECK: llvm.inline_asm has_side_effects {{.*}}"@$4 ld.global.v4.b32 { $0, $1, $2, $3 }, [ $5 + 0 ];", "=r,=r,=r,=r,b,l"
// CHECK: llvm.fadd {{.*}} : f32
// CHECK: llvm.inline_asm has_side_effects {{.*}}"@$0 st.global.v4.b32 [ $1 + 0 ], { $2, $3, $4, $5 };", "b,l,r,r,r,r"
func.func @add(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %n: i32 {kiln.divisibility = 16 : i32}) {
  %pid = kiln.program_id x : i32
  %c = arith.constant 1024 : i32
  %s = arith.muli %pid, %c : i32
  %r = kiln.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
  %sv = kiln.splat %s : tensor<1024xi32>
  %o = arith.addi %sv, %r : tensor<1024xi32>
  %nv = kiln.splat %n : tensor<1024xi32>
  %m = arith.cmpi slt, %o, %nv : tensor<1024xi32>
  %p = kiln.splat %x : tensor<1024x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %o : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
  %v = kiln.load %ps, %m : tensor<1024x!kiln.ptr<f32>>
  %w = arith.addf %v, %v : tensor<1024xf32>
  kiln.store %ps, %w, %m : tensor<1024x!kiln.ptr<f32>>
  return
}

// -----

// Without alignment facts and without a mask: scalar plain loads and stores; `other`
// initializes the destination registers before the predicated load.
// CHECK-LABEL: llvm.func @unaligned(
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr<1> -> f32
// CHECK: "mov.b32 $0, $3;\0A\09@$1 ld.global.b32 $0, [ $2 + 0 ];", "=r,b,l,r"
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : f32, !llvm.ptr<1>
func.func @unaligned(%x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>, %n: i32) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %p = kiln.splat %x : tensor<128x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %v = kiln.load %ps : tensor<128x!kiln.ptr<f32>>
  %nv = kiln.splat %n : tensor<128xi32>
  %m = arith.cmpi slt, %r, %nv : tensor<128xi32>
  %q = kiln.splat %y : tensor<128x!kiln.ptr<f32>>
  %qs = kiln.addptr %q, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %zero = arith.constant dense<0.0> : tensor<128xf32>
  %u = kiln.load %qs, %m, %zero : tensor<128x!kiln.ptr<f32>>
  %s = arith.addf %v, %u : tensor<128xf32>
  kiln.store %ps, %s : tensor<128x!kiln.ptr<f32>>
  return
}

// -----

// exp uses ex2.approx on x * log2(e); log calls libdevice; f32 division is div.full.f32 as in
// Triton unless kiln.ieee asks for the rounded quotient; kiln.ieee sqrt is sqrt.rn.f32; fma is
// libdevice's __nv_fmaf (fma.rn.f32).
// CHECK-LABEL: llvm.func @math(
// CHECK: llvm.fmul %{{.*}}, %{{.*}} : f32
// CHECK: llvm.inline_asm "ex2.approx.ftz.f32 $0, $1;", "=f,f"
// CHECK: llvm.call @__nv_logf
// CHECK: llvm.inline_asm "div.full.f32 $0, $1, $2;", "=f,f,f"
// CHECK: llvm.fdiv %{{.*}}, %{{.*}} : f32
// CHECK: llvm.inline_asm "sqrt.rn.f32 $0, $1;", "=f,f"
// CHECK: llvm.call @__nv_fmaf(
func.func @math(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %p = kiln.splat %x : tensor<128x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %v = kiln.load %ps : tensor<128x!kiln.ptr<f32>>
  %e = math.exp %v : tensor<128xf32>
  %l = math.log %e : tensor<128xf32>
  %q = arith.divf %l, %v : tensor<128xf32>
  %r2 = arith.divf %q, %v {kiln.ieee} : tensor<128xf32>
  %s = math.sqrt %r2 {kiln.ieee} : tensor<128xf32>
  %f = math.fma %s, %v, %q : tensor<128xf32>
  kiln.store %ps, %f : tensor<128x!kiln.ptr<f32>>
  return
}

// -----

// Loop-carried tiles become loop-carried structs.
// CHECK-LABEL: llvm.func @loop(
// CHECK: llvm.br ^bb{{[0-9]+}}(%{{.*}}, %{{.*}} : i32, !llvm.struct<(f32, f32, f32, f32)>)
func.func @loop(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %n: i32) {
  %r = kiln.make_range {end = 512 : i32, start = 0 : i32} : tensor<512xi32>
  %p = kiln.splat %x : tensor<512x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<512x!kiln.ptr<f32>>, tensor<512xi32>
  %zero = arith.constant dense<0.0> : tensor<512xf32>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %acc = scf.for %i = %c0 to %n step %c1 iter_args(%a = %zero) -> (tensor<512xf32>) : i32 {
    %v = kiln.load %ps : tensor<512x!kiln.ptr<f32>>
    %s = arith.addf %a, %v : tensor<512xf32>
    scf.yield %s : tensor<512xf32>
  }
  kiln.store %ps, %acc : tensor<512x!kiln.ptr<f32>>
  return
}

// -----

// Tile kernel arguments are reported at their location.
// expected-error @below {{expected kernel argument #0 of 'tile_arg' to be a scalar or a pointer, found 'tensor<16xf32>'}}
func.func @tile_arg(%a: tensor<16xf32>) {
  return
}


// -----

// A reduction across warps: a barrier between writing and reading the partials; without loops
// no second barrier (its buffer is never written again).
// CHECK-LABEL: llvm.func @reduce_across_warps(
// CHECK-COUNT-5: nvvm.shfl.sync bfly
// CHECK: llvm.store {{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: llvm.load {{.*}} : !llvm.ptr<3> -> f32
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.return
func.func @reduce_across_warps(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}) {
  %r = kiln.make_range {end = 512 : i32, start = 0 : i32} : tensor<512xi32>
  %p = kiln.splat %x : tensor<512x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<512x!kiln.ptr<f32>>, tensor<512xi32>
  %v = kiln.load %ps : tensor<512x!kiln.ptr<f32>>
  %s = kiln.reduce(%v) axis = 0 {
  ^bb0(%a: f32, %b: f32):
    %t = arith.addf %a, %b : f32
    kiln.reduce.return %t : f32
  } : (tensor<512xf32>) -> f32
  kiln.store %x, %s : !kiln.ptr<f32>
  return
}

// -----

// In a loop the reduction runs again: the shared-scratch analysis finds the previous
// iteration's reads of the partials outstanding at the loop header (the back edge), so the
// writes start with a barrier; none follows the reads.
// CHECK: llvm.mlir.global internal @__kiln_scratch() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<16 x i8>
// CHECK-LABEL: llvm.func @reduce_in_loop(
// CHECK: nvvm.barrier0
// CHECK: llvm.store {{.*}} : f32, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: llvm.load {{.*}} : !llvm.ptr<3> -> f32
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.return
func.func @reduce_in_loop(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %n: i32) {
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
    %next = arith.addf %acc, %s : f32
    scf.yield %next : f32
  }
  kiln.store %x, %t : !kiln.ptr<f32>
  return
}

// -----

// A scalar store is done once, by thread 0, not by every thread of the program.
// CHECK-LABEL: llvm.func @scalar_store_once(
// CHECK: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK: %[[ONE:.*]] = llvm.icmp "eq" %[[TID]], %[[ZERO]] : i32
// CHECK: llvm.inline_asm has_side_effects "@$0 st.global.b32 [ $1 + 0 ], $2;", "b,l,r" %[[ONE]]
func.func @scalar_store_once(%x: !kiln.ptr<f32>, %v: f32) {
  kiln.store %x, %v : !kiln.ptr<f32>
  return
}

// -----

// Two cross-warp reductions in one loop body: each one's barrier separates the other's reads
// from its next writes, so no trailing barriers — two barriers per iteration, not four.
// CHECK-LABEL: llvm.func @two_reductions_in_loop(
// CHECK-COUNT-2: nvvm.barrier0
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
      %u = arith.maxnumf %a, %b : f32
      kiln.reduce.return %u : f32
    } : (tensor<512xf32>) -> f32
    %sm = arith.addf %s, %m : f32
    %next = arith.addf %acc, %sm : f32
    scf.yield %next : f32
  }
  kiln.store %x, %t : !kiln.ptr<f32>
  return
}
