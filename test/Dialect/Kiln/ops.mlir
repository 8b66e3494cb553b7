// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | FileCheck %s --check-prefix=GENERIC

// Round trip of every kiln op with each of its optional parts, in the custom form and through
// the generic form (which must parse back to the same custom form).

// CHECK-LABEL: func.func @grid
func.func @grid() -> (i32, i32, i32, i32, i32, i32) {
  // CHECK: kiln.program_id x : i32
  // CHECK: kiln.program_id y : i32
  // CHECK: kiln.program_id z : i32
  // CHECK: kiln.num_programs x : i32
  // CHECK: kiln.num_programs y : i32
  // CHECK: kiln.num_programs z : i32
  // GENERIC: "kiln.program_id"() <{axis = 1 : i32}> : () -> i32
  %0 = kiln.program_id x : i32
  %1 = kiln.program_id y : i32
  %2 = kiln.program_id z : i32
  %3 = kiln.num_programs x : i32
  %4 = kiln.num_programs y : i32
  %5 = kiln.num_programs z : i32
  return %0, %1, %2, %3, %4, %5 : i32, i32, i32, i32, i32, i32
}

// CHECK-LABEL: func.func @tiles
// CHECK-SAME: (%[[X:.*]]: f32, %[[P:.*]]: !kiln.ptr<f16>)
func.func @tiles(%x: f32, %p: !kiln.ptr<f16>) {
  // CHECK: kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  // CHECK: kiln.make_range {end = 80 : i32, start = 16 : i32} : tensor<64xi32>
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %r2 = kiln.make_range {end = 80 : i32, start = 16 : i32} : tensor<64xi32>
  // CHECK: kiln.splat %[[X]] : tensor<1x64xf32>
  // CHECK: kiln.splat %[[P]] : tensor<8x!kiln.ptr<f16>>
  %s = kiln.splat %x : tensor<1x64xf32>
  %sp = kiln.splat %p : tensor<8x!kiln.ptr<f16>>
  // CHECK: %[[B:.*]] = kiln.broadcast %{{.*}} : tensor<1x64xf32> -> tensor<32x64xf32>
  %b = kiln.broadcast %s : tensor<1x64xf32> -> tensor<32x64xf32>
  // CHECK: kiln.expand_dims %{{.*}} {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  // CHECK: kiln.expand_dims %{{.*}} {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  %e1 = kiln.expand_dims %r2 {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %e0 = kiln.expand_dims %r2 {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  // CHECK: kiln.reshape %[[B]] : tensor<32x64xf32> -> tensor<2048xf32>
  // CHECK: kiln.reshape %[[B]] allow_reorder : tensor<32x64xf32> -> tensor<64x32xf32>
  // GENERIC: "kiln.reshape"(%{{.*}}) <{allow_reorder}> : (tensor<32x64xf32>) -> tensor<64x32xf32>
  %f = kiln.reshape %b : tensor<32x64xf32> -> tensor<2048xf32>
  %g = kiln.reshape %b allow_reorder : tensor<32x64xf32> -> tensor<64x32xf32>
  // CHECK: kiln.trans %[[B]] {order = array<i32: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  %t = kiln.trans %b {order = array<i32: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
  // CHECK: kiln.trans %{{.*}} {order = array<i32: 2, 0, 1>} : tensor<2x4x8xf32> -> tensor<8x2x4xf32>
  %b3 = kiln.reshape %f : tensor<2048xf32> -> tensor<2x4x256xf32>
  %c3 = kiln.splat %x : tensor<2x4x8xf32>
  %t3 = kiln.trans %c3 {order = array<i32: 2, 0, 1>} : tensor<2x4x8xf32> -> tensor<8x2x4xf32>
  return
}

// CHECK-LABEL: func.func @addptr
func.func @addptr(%p: !kiln.ptr<f32>, %i: i32, %j: i64) -> (!kiln.ptr<f32>, !kiln.ptr<f32>, tensor<128x!kiln.ptr<f32>>) {
  // CHECK: kiln.addptr %{{.*}}, %{{.*}} : !kiln.ptr<f32>, i32
  // CHECK: kiln.addptr %{{.*}}, %{{.*}} : !kiln.ptr<f32>, i64
  // CHECK: kiln.addptr %{{.*}}, %{{.*}} : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %q = kiln.addptr %p, %i : !kiln.ptr<f32>, i32
  %q2 = kiln.addptr %p, %j : !kiln.ptr<f32>, i64
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<f32>>
  %qs = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  return %q, %q2, %qs : !kiln.ptr<f32>, !kiln.ptr<f32>, tensor<128x!kiln.ptr<f32>>
}

// CHECK-LABEL: func.func @pointer_types
// CHECK-SAME: !kiln.ptr<!kiln.ptr<i8>>, %{{.*}}: !kiln.ptr<bf16>, %{{.*}}: !kiln.ptr<i1>, %{{.*}}: !kiln.ptr<f64>
func.func @pointer_types(%a: !kiln.ptr<!kiln.ptr<i8>>, %b: !kiln.ptr<bf16>, %c: !kiln.ptr<i1>,
                         %d: !kiln.ptr<f64>) -> !kiln.ptr<i8> {
  // CHECK: kiln.load %{{.*}} : !kiln.ptr<!kiln.ptr<i8>>
  %v = kiln.load %a : !kiln.ptr<!kiln.ptr<i8>>
  return %v : !kiln.ptr<i8>
}

// CHECK-LABEL: func.func @load
// CHECK-SAME: (%[[P:.*]]: tensor<128x!kiln.ptr<f32>>, %[[M:.*]]: tensor<128xi1>, %[[O:.*]]: tensor<128xf32>, %[[S:.*]]: !kiln.ptr<f32>)
func.func @load(%p: tensor<128x!kiln.ptr<f32>>, %m: tensor<128xi1>, %o: tensor<128xf32>,
                %s: !kiln.ptr<f32>) {
  // CHECK: kiln.load %[[P]] : tensor<128x!kiln.ptr<f32>>
  %0 = kiln.load %p : tensor<128x!kiln.ptr<f32>>
  // CHECK: kiln.load %[[P]], %[[M]] : tensor<128x!kiln.ptr<f32>>
  %1 = kiln.load %p, %m : tensor<128x!kiln.ptr<f32>>
  // CHECK: kiln.load %[[P]], %[[M]], %[[O]] : tensor<128x!kiln.ptr<f32>>
  %2 = kiln.load %p, %m, %o : tensor<128x!kiln.ptr<f32>>
  // CHECK: kiln.load %[[P]], %[[M]], %[[O]] cache = cg : tensor<128x!kiln.ptr<f32>>
  %3 = kiln.load %p, %m, %o cache = cg : tensor<128x!kiln.ptr<f32>>
  // CHECK: kiln.load %[[P]] cache = ca : tensor<128x!kiln.ptr<f32>>
  // CHECK: kiln.load %[[P]] cache = cs : tensor<128x!kiln.ptr<f32>>
  // CHECK: kiln.load %[[P]] cache = cv : tensor<128x!kiln.ptr<f32>>
  // CHECK: kiln.load %[[P]] cache = none : tensor<128x!kiln.ptr<f32>>
  %4 = kiln.load %p cache = ca : tensor<128x!kiln.ptr<f32>>
  %5 = kiln.load %p cache = cs : tensor<128x!kiln.ptr<f32>>
  %6 = kiln.load %p cache = cv : tensor<128x!kiln.ptr<f32>>
  %7 = kiln.load %p cache = none : tensor<128x!kiln.ptr<f32>>
  // CHECK: kiln.load %[[P]] evict = evict_last : tensor<128x!kiln.ptr<f32>>
  // CHECK: kiln.load %[[P]] evict = normal : tensor<128x!kiln.ptr<f32>>
  %8 = kiln.load %p evict = evict_last : tensor<128x!kiln.ptr<f32>>
  %9 = kiln.load %p evict = normal : tensor<128x!kiln.ptr<f32>>
  // CHECK: kiln.load %[[P]], %[[M]] volatile : tensor<128x!kiln.ptr<f32>>
  %10 = kiln.load %p, %m volatile : tensor<128x!kiln.ptr<f32>>
  // CHECK: kiln.load %[[P]], %[[M]], %[[O]] volatile : tensor<128x!kiln.ptr<f32>>
  %11 = kiln.load %p, %m, %o volatile : tensor<128x!kiln.ptr<f32>>
  // GENERIC: "kiln.load"(%{{.*}}, %{{.*}}, %{{.*}}) <{isVolatile, operandSegmentSizes = array<i32: 1, 1, 1>}>
  // CHECK: kiln.load %[[S]] : !kiln.ptr<f32>
  %12 = kiln.load %s : !kiln.ptr<f32>
  return
}

// CHECK-LABEL: func.func @scalar_masked_load
func.func @scalar_masked_load(%s: !kiln.ptr<i64>, %m: i1, %o: i64) -> i64 {
  // CHECK: kiln.load %{{.*}}, %{{.*}}, %{{.*}} : !kiln.ptr<i64>
  %0 = kiln.load %s, %m, %o : !kiln.ptr<i64>
  return %0 : i64
}

// CHECK-LABEL: func.func @store
// CHECK-SAME: (%[[P:.*]]: tensor<16x16x!kiln.ptr<f16>>, %[[V:.*]]: tensor<16x16xf16>, %[[M:.*]]: tensor<16x16xi1>, %[[S:.*]]: !kiln.ptr<i32>, %[[X:.*]]: i32)
func.func @store(%p: tensor<16x16x!kiln.ptr<f16>>, %v: tensor<16x16xf16>, %m: tensor<16x16xi1>,
                 %s: !kiln.ptr<i32>, %x: i32) {
  // CHECK: kiln.store %[[P]], %[[V]] : tensor<16x16x!kiln.ptr<f16>>
  kiln.store %p, %v : tensor<16x16x!kiln.ptr<f16>>
  // CHECK: kiln.store %[[P]], %[[V]], %[[M]] : tensor<16x16x!kiln.ptr<f16>>
  kiln.store %p, %v, %m : tensor<16x16x!kiln.ptr<f16>>
  // CHECK: kiln.store %[[P]], %[[V]], %[[M]] cache = wb : tensor<16x16x!kiln.ptr<f16>>
  kiln.store %p, %v, %m cache = wb : tensor<16x16x!kiln.ptr<f16>>
  // CHECK: kiln.store %[[P]], %[[V]], %[[M]] evict = evict_first : tensor<16x16x!kiln.ptr<f16>>
  kiln.store %p, %v, %m evict = evict_first : tensor<16x16x!kiln.ptr<f16>>
  // CHECK: kiln.store %[[P]], %[[V]] cache = wt : tensor<16x16x!kiln.ptr<f16>>
  // CHECK: kiln.store %[[P]], %[[V]] cache = cs : tensor<16x16x!kiln.ptr<f16>>
  // CHECK: kiln.store %[[P]], %[[V]] evict = evict_last : tensor<16x16x!kiln.ptr<f16>>
  kiln.store %p, %v cache = wt : tensor<16x16x!kiln.ptr<f16>>
  kiln.store %p, %v cache = cs : tensor<16x16x!kiln.ptr<f16>>
  kiln.store %p, %v evict = evict_last : tensor<16x16x!kiln.ptr<f16>>
  // GENERIC: "kiln.store"(%{{.*}}, %{{.*}}, %{{.*}}) <{cache = 5 : i32}>
  // GENERIC: "kiln.store"(%{{.*}}, %{{.*}}, %{{.*}}) <{evict = 1 : i32}>
  // CHECK: kiln.store %[[S]], %[[X]] : !kiln.ptr<i32>
  kiln.store %s, %x : !kiln.ptr<i32>
  return
}

// CHECK-LABEL: func.func @atomics
func.func @atomics(%pf: tensor<64x!kiln.ptr<f32>>, %vf: tensor<64xf32>, %m: tensor<64xi1>,
                   %pi: !kiln.ptr<i32>, %vi: i32) {
  // CHECK: kiln.atomic_rmw fadd, acq_rel, gpu, %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x!kiln.ptr<f32>>
  %0 = kiln.atomic_rmw fadd, acq_rel, gpu, %pf, %vf, %m : tensor<64x!kiln.ptr<f32>>
  // CHECK: kiln.atomic_rmw max, relaxed, cta, %{{.*}}, %{{.*}} : tensor<64x!kiln.ptr<f32>>
  %1 = kiln.atomic_rmw max, relaxed, cta, %pf, %vf : tensor<64x!kiln.ptr<f32>>
  // CHECK: kiln.atomic_rmw min, acquire, sys, %{{.*}}, %{{.*}} : tensor<64x!kiln.ptr<f32>>
  %2 = kiln.atomic_rmw min, acquire, sys, %pf, %vf : tensor<64x!kiln.ptr<f32>>
  // CHECK: kiln.atomic_rmw xchg, release, gpu, %{{.*}}, %{{.*}} : tensor<64x!kiln.ptr<f32>>
  %3 = kiln.atomic_rmw xchg, release, gpu, %pf, %vf : tensor<64x!kiln.ptr<f32>>
  // CHECK: kiln.atomic_rmw and, acq_rel, gpu, %{{.*}}, %{{.*}} : !kiln.ptr<i32>
  // CHECK: kiln.atomic_rmw or, acq_rel, gpu, %{{.*}}, %{{.*}} : !kiln.ptr<i32>
  // CHECK: kiln.atomic_rmw xor, acq_rel, gpu, %{{.*}}, %{{.*}} : !kiln.ptr<i32>
  // CHECK: kiln.atomic_rmw add, acq_rel, gpu, %{{.*}}, %{{.*}} : !kiln.ptr<i32>
  // CHECK: kiln.atomic_rmw max, acq_rel, gpu, %{{.*}}, %{{.*}} : !kiln.ptr<i32>
  // CHECK: kiln.atomic_rmw min, acq_rel, gpu, %{{.*}}, %{{.*}} : !kiln.ptr<i32>
  // CHECK: kiln.atomic_rmw umax, acq_rel, gpu, %{{.*}}, %{{.*}} : !kiln.ptr<i32>
  // CHECK: kiln.atomic_rmw umin, acq_rel, gpu, %{{.*}}, %{{.*}} : !kiln.ptr<i32>
  // CHECK: kiln.atomic_rmw xchg, acq_rel, gpu, %{{.*}}, %{{.*}} : !kiln.ptr<i32>
  %4 = kiln.atomic_rmw and, acq_rel, gpu, %pi, %vi : !kiln.ptr<i32>
  %5 = kiln.atomic_rmw or, acq_rel, gpu, %pi, %vi : !kiln.ptr<i32>
  %6 = kiln.atomic_rmw xor, acq_rel, gpu, %pi, %vi : !kiln.ptr<i32>
  %7 = kiln.atomic_rmw add, acq_rel, gpu, %pi, %vi : !kiln.ptr<i32>
  %8 = kiln.atomic_rmw max, acq_rel, gpu, %pi, %vi : !kiln.ptr<i32>
  %9 = kiln.atomic_rmw min, acq_rel, gpu, %pi, %vi : !kiln.ptr<i32>
  %10 = kiln.atomic_rmw umax, acq_rel, gpu, %pi, %vi : !kiln.ptr<i32>
  %11 = kiln.atomic_rmw umin, acq_rel, gpu, %pi, %vi : !kiln.ptr<i32>
  %12 = kiln.atomic_rmw xchg, acq_rel, gpu, %pi, %vi : !kiln.ptr<i32>
  // GENERIC: "kiln.atomic_rmw"(%{{.*}}, %{{.*}}) <{kind = 0 : i32, scope = 0 : i32, sem = 3 : i32}> : (!kiln.ptr<i32>, i32) -> i32
  // CHECK: kiln.atomic_cas acq_rel, gpu, %{{.*}}, %{{.*}}, %{{.*}} : !kiln.ptr<i32>
  %13 = kiln.atomic_cas acq_rel, gpu, %pi, %vi, %vi : !kiln.ptr<i32>
  // CHECK: kiln.atomic_cas relaxed, sys, %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x!kiln.ptr<f32>>
  %14 = kiln.atomic_cas relaxed, sys, %pf, %vf, %vf : tensor<64x!kiln.ptr<f32>>
  return
}

// CHECK-LABEL: func.func @dot
func.func @dot(%a16: tensor<64x32xf16>, %b16: tensor<32x16xf16>, %c16: tensor<64x16xf16>,
               %c32: tensor<64x16xf32>, %abf: tensor<64x32xbf16>, %bbf: tensor<32x16xbf16>,
               %a32: tensor<64x32xf32>, %b32: tensor<32x16xf32>, %a8: tensor<64x32xi8>,
               %b8: tensor<32x16xi8>, %ci: tensor<64x16xi32>) {
  // CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf16> * tensor<32x16xf16> -> tensor<64x16xf16>
  // CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf16> * tensor<32x16xf16> -> tensor<64x16xf32>
  // CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xbf16> * tensor<32x16xbf16> -> tensor<64x16xf32>
  // CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf32> * tensor<32x16xf32> -> tensor<64x16xf32>
  // CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} inputPrecision = tf32x3 : tensor<64x32xf32> * tensor<32x16xf32> -> tensor<64x16xf32>
  // CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} inputPrecision = ieee : tensor<64x32xf32> * tensor<32x16xf32> -> tensor<64x16xf32>
  // CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} {maxNumImpreciseAcc = 32 : i32} : tensor<64x32xf32> * tensor<32x16xf32> -> tensor<64x16xf32>
  // CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xi8> * tensor<32x16xi8> -> tensor<64x16xi32>
  %0 = kiln.dot %a16, %b16, %c16 : tensor<64x32xf16> * tensor<32x16xf16> -> tensor<64x16xf16>
  %1 = kiln.dot %a16, %b16, %c32 : tensor<64x32xf16> * tensor<32x16xf16> -> tensor<64x16xf32>
  %2 = kiln.dot %abf, %bbf, %c32 : tensor<64x32xbf16> * tensor<32x16xbf16> -> tensor<64x16xf32>
  %3 = kiln.dot %a32, %b32, %c32 inputPrecision = tf32 : tensor<64x32xf32> * tensor<32x16xf32> -> tensor<64x16xf32>
  %4 = kiln.dot %a32, %b32, %c32 inputPrecision = tf32x3 : tensor<64x32xf32> * tensor<32x16xf32> -> tensor<64x16xf32>
  %5 = kiln.dot %a32, %b32, %c32 inputPrecision = ieee : tensor<64x32xf32> * tensor<32x16xf32> -> tensor<64x16xf32>
  %6 = kiln.dot %a32, %b32, %c32 {maxNumImpreciseAcc = 32 : i32} : tensor<64x32xf32> * tensor<32x16xf32> -> tensor<64x16xf32>
  %7 = kiln.dot %a8, %b8, %ci : tensor<64x32xi8> * tensor<32x16xi8> -> tensor<64x16xi32>
  // GENERIC: "kiln.dot"(%{{.*}}, %{{.*}}, %{{.*}}) <{inputPrecision = 2 : i32, maxNumImpreciseAcc = 0 : i32}>
  return
}

// CHECK-LABEL: func.func @reduce
func.func @reduce(%x: tensor<128xf32>, %y: tensor<32x64xf32>, %i: tensor<32x64xi32>) -> f32 {
  // CHECK: %[[S:.*]] = kiln.reduce(%{{.*}}) axis = 0 {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32):
  // CHECK-NEXT: %[[T:.*]] = arith.addf %[[A]], %[[B]] : f32
  // CHECK-NEXT: kiln.reduce.return %[[T]] : f32
  // CHECK-NEXT: } : (tensor<128xf32>) -> f32
  %s = kiln.reduce(%x) axis = 0 {
  ^bb0(%a: f32, %b: f32):
    %t = arith.addf %a, %b : f32
    kiln.reduce.return %t : f32
  } : (tensor<128xf32>) -> f32
  // CHECK: kiln.reduce(%{{.*}}) axis = 1 {
  // CHECK: } : (tensor<32x64xf32>) -> tensor<32xf32>
  %r = kiln.reduce(%y) axis = 1 {
  ^bb0(%a: f32, %b: f32):
    %t = arith.maximumf %a, %b : f32
    kiln.reduce.return %t : f32
  } : (tensor<32x64xf32>) -> tensor<32xf32>
  // Argmax-style reduction of two operands: 2N = 4 region arguments, N = 2 results.
  // CHECK: kiln.reduce(%{{.*}}, %{{.*}}) axis = 0 {
  // CHECK-NEXT: ^bb0(%{{.*}}: f32, %{{.*}}: i32, %{{.*}}: f32, %{{.*}}: i32):
  // CHECK: kiln.reduce.return %{{.*}}, %{{.*}} : f32, i32
  // CHECK: } : (tensor<32x64xf32>, tensor<32x64xi32>) -> (tensor<64xf32>, tensor<64xi32>)
  %v, %idx = kiln.reduce(%y, %i) axis = 0 {
  ^bb0(%a: f32, %ai: i32, %b: f32, %bi: i32):
    %gt = arith.cmpf ogt, %b, %a : f32
    %m = arith.select %gt, %b, %a : f32
    %mi = arith.select %gt, %bi, %ai : i32
    kiln.reduce.return %m, %mi : f32, i32
  } : (tensor<32x64xf32>, tensor<32x64xi32>) -> (tensor<64xf32>, tensor<64xi32>)
  return %s : f32
}

// CHECK-LABEL: func.func @scan
func.func @scan(%x: tensor<64xi32>, %y: tensor<4x16xf32>) {
  // CHECK: kiln.scan(%{{.*}}) axis = 0 {
  // CHECK-NEXT: ^bb0(%[[A:.*]]: i32, %[[B:.*]]: i32):
  // CHECK-NEXT: %[[T:.*]] = arith.addi %[[A]], %[[B]] : i32
  // CHECK-NEXT: kiln.scan.return %[[T]] : i32
  // CHECK-NEXT: } : (tensor<64xi32>) -> tensor<64xi32>
  %c = kiln.scan(%x) axis = 0 {
  ^bb0(%a: i32, %b: i32):
    %t = arith.addi %a, %b : i32
    kiln.scan.return %t : i32
  } : (tensor<64xi32>) -> tensor<64xi32>
  // CHECK: kiln.scan(%{{.*}}) axis = 1 reverse {
  // CHECK: kiln.scan.return %{{.*}} : f32
  // CHECK: } : (tensor<4x16xf32>) -> tensor<4x16xf32>
  // GENERIC: "kiln.scan"(%{{.*}}) <{axis = 1 : i32, reverse}> ({
  %d = kiln.scan(%y) axis = 1 reverse {
  ^bb0(%a: f32, %b: f32):
    %t = arith.mulf %a, %b : f32
    kiln.scan.return %t : f32
  } : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return
}

// CHECK-LABEL: func.func @debug
func.func @debug(%x: tensor<16xi32>, %y: f32, %ok: tensor<64xi1>, %b: i1) {
  // CHECK: kiln.print " x: " hex %{{.*}} : tensor<16xi32>
  kiln.print " x: " hex %x : tensor<16xi32>
  // CHECK: kiln.print "x, y" %{{.*}}, %{{.*}} : tensor<16xi32>, f32
  kiln.print "x, y" %x, %y : tensor<16xi32>, f32
  // CHECK: kiln.print "no args"
  // CHECK-NOT: hex
  kiln.print "no args"
  // CHECK: kiln.assert %{{.*}}, "index out of range" : tensor<64xi1>
  kiln.assert %ok, "index out of range" : tensor<64xi1>
  // CHECK: kiln.assert %{{.*}}, "scalar" : i1
  kiln.assert %b, "scalar" : i1
  return
}

// -----

// compare-and-swap on a pointer to pointers (64-bit).
// CHECK-LABEL: func.func @cas_pointer
// CHECK: kiln.atomic_cas acq_rel, gpu, %{{.*}}, %{{.*}}, %{{.*}} : !kiln.ptr<!kiln.ptr<i32>>
func.func @cas_pointer(%p: !kiln.ptr<!kiln.ptr<i32>>, %v: !kiln.ptr<i32>) {
  %0 = kiln.atomic_cas acq_rel, gpu, %p, %v, %v : !kiln.ptr<!kiln.ptr<i32>>
  return
}

// -----

// extern_elementwise on tiles and scalars (pure or not), the hardware registers and grid
// dependency control.
// CHECK-LABEL: func.func @extern_and_registers
// CHECK: kiln.extern_elementwise @__nv_asinf(%{{.*}}) pure : (tensor<128xf32>) -> tensor<128xf32>
// CHECK: kiln.extern_elementwise @__nv_powif(%{{.*}}, %{{.*}}) pure : (f32, i32) -> f32
// CHECK: kiln.extern_elementwise @my_function(%{{.*}}) : (f64) -> f64
// CHECK: kiln.globaltimer : i64
// CHECK: kiln.smid : i32
// CHECK: kiln.grid_dependency wait
// CHECK: kiln.grid_dependency launch_dependents
func.func @extern_and_registers(%t: tensor<128xf32>, %x: f32, %n: i32, %d: f64) {
  %0 = kiln.extern_elementwise @__nv_asinf(%t) pure : (tensor<128xf32>) -> tensor<128xf32>
  %1 = kiln.extern_elementwise @__nv_powif(%x, %n) pure : (f32, i32) -> f32
  %2 = kiln.extern_elementwise @my_function(%d) : (f64) -> f64
  %3 = kiln.globaltimer : i64
  %4 = kiln.smid : i32
  kiln.grid_dependency wait
  kiln.grid_dependency launch_dependents
  return
}

// inline_asm_elementwise: tiles (pure, several results, 8-bit values packed), scalars (not
// pure).
// CHECK-LABEL: func.func @inline_asm
// CHECK: %{{.*}}:2 = kiln.inline_asm_elementwise(%{{.*}}) "op $0, $1, $2, $3, $4, $5;", "=r,=r,=r,=r,=r,r" pure pack = 4 : (tensor<128xi8>) -> (tensor<128xi32>, tensor<128xi8>)
// CHECK: kiln.inline_asm_elementwise(%{{.*}}) "mov.b32 $0, $1;", "=r,r" pack = 1 : (f32) -> i32
func.func @inline_asm(%t: tensor<128xi8>, %x: f32) {
  %0:2 = kiln.inline_asm_elementwise(%t) "op $0, $1, $2, $3, $4, $5;", "=r,=r,=r,=r,=r,r" pure pack = 4 : (tensor<128xi8>) -> (tensor<128xi32>, tensor<128xi8>)
  %1 = kiln.inline_asm_elementwise(%x) "mov.b32 $0, $1;", "=r,r" pack = 1 : (f32) -> i32
  return
}

// CHECK-LABEL: func.func @ptr_cast
// CHECK: kiln.ptr_cast %{{.*}} : i64 -> !kiln.ptr<f16>
// CHECK: kiln.ptr_cast %{{.*}} : tensor<64x!kiln.ptr<f16>> -> tensor<64x!kiln.ptr<f32>>
// CHECK: kiln.ptr_cast %{{.*}} : tensor<64x!kiln.ptr<f16>> -> tensor<64xi64>
func.func @ptr_cast(%a: i64, %ps: tensor<64x!kiln.ptr<f16>>) {
  %p = kiln.ptr_cast %a : i64 -> !kiln.ptr<f16>
  %q = kiln.ptr_cast %ps : tensor<64x!kiln.ptr<f16>> -> tensor<64x!kiln.ptr<f32>>
  %i = kiln.ptr_cast %ps : tensor<64x!kiln.ptr<f16>> -> tensor<64xi64>
  return
}
