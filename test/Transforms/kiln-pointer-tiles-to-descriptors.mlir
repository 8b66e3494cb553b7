// RUN: kiln-opt %s -split-input-file -kiln-pointer-tiles-to-descriptors | FileCheck %s

// Triton's tutorial matmul, B stored N x K: rows taken % M (% N), columns masked by
// k < K - i * 64. Each operand becomes a descriptor load of a tensor map appended to the
// function with its recipe [base, 'h', rank, block, extents, row stride]; the loop is versioned
// on the facts that takes (starts >= 0, start + block <= M, extents and stride > 0).
// CHECK-LABEL: func.func @matmul_nt(
// CHECK-SAME: %[[A:[a-z0-9]+]]: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %[[B:[a-z0-9]+]]: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %[[M:[a-z0-9]+]]: i32 {kiln.divisibility = 16 : i32}, %[[N:[a-z0-9]+]]: i32 {kiln.divisibility = 16 : i32}, %[[K:[a-z0-9]+]]: i32 {kiln.divisibility = 16 : i32}, %[[SA:[a-z0-9]+]]: i32 {kiln.divisibility = 16 : i32}, %[[SB:[a-z0-9]+]]: i32 {kiln.divisibility = 16 : i32}
// CHECK-SAME: %[[MA:[a-z0-9]+]]: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 104, 2, 16, 32, 2, 4, 5>}, %[[MB:[a-z0-9]+]]: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 1, 104, 2, 32, 32, 3, 4, 6>})
// CHECK: %[[G0:.*]] = arith.cmpi sge, %[[R0:.*]], %{{.*}} : i32
// CHECK: arith.cmpi sle, %{{.*}}, %{{.*}} : i64
// CHECK: arith.cmpi sgt, %[[M]], %{{.*}} : i32
// CHECK: arith.cmpi sgt, %[[K]], %{{.*}} : i32
// CHECK: arith.cmpi sgt, %[[SA]], %{{.*}} : i32
// CHECK: arith.cmpi sgt, %[[SB]], %{{.*}} : i32
// CHECK-NEXT: %[[GUARD:.*]] = arith.andi
// CHECK-NEXT: %[[IF:.*]]:3 = scf.if %[[GUARD]] -> (tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xf32>, tensor<32x32x!kiln.ptr<f16>>) {
// CHECK: scf.for %[[I:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[PA:.*]] = %{{.*}}, %{{.*}} = %{{.*}}, %[[PB:.*]] = %{{.*}})
// CHECK: kiln.splat %{{.*}} : tensor<16x32xf16>
// CHECK-NEXT: %[[Z:.*]] = arith.constant 0 : i32
// CHECK-NEXT: %[[C32:.*]] = arith.constant 32 : i32
// CHECK-NEXT: %[[KA:.*]] = arith.muli %[[I]], %[[C32]] : i32
// CHECK-NEXT: %[[COL:.*]] = arith.addi %[[Z]], %[[KA]] : i32
// CHECK: %[[SA64:.*]] = arith.extsi %[[SA]] : i32 to i64
// CHECK: kiln.descriptor_load %[[MA]], %[[A]][%[[R0]], %[[COL]]] shape[%[[M]], %[[K]]] strides[%[[SA64]]] : <f16> -> tensor<16x32xf16>
// CHECK: kiln.descriptor_load %[[MB]], %[[B]][%{{.*}}, %{{.*}}] shape[%[[N]], %[[K]]] strides[%{{.*}}] : <f16> -> tensor<32x32xf16>
// CHECK-NOT: kiln.load
// CHECK: scf.yield %[[PA]], %{{.*}}, %[[PB]]
// CHECK: } else {
// CHECK: scf.for
// CHECK: kiln.load
// CHECK: kiln.load
// CHECK: kiln.store %{{.*}}, %[[IF]]#1
func.func @matmul_nt(%a: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                     %b: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                     %m: i32 {kiln.divisibility = 16 : i32}, %n: i32 {kiln.divisibility = 16 : i32},
                     %k: i32 {kiln.divisibility = 16 : i32},
                     %sa: i32 {kiln.divisibility = 16 : i32}, %sb: i32 {kiln.divisibility = 16 : i32},
                     %c: !kiln.ptr<f32>) {
  %pid = kiln.program_id x : i32
  %c16 = arith.constant 16 : i32
  %row0 = arith.muli %pid, %c16 : i32
  %r = kiln.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
  %rs = kiln.splat %row0 : tensor<16xi32>
  %ra = arith.addi %rs, %r : tensor<16xi32>
  %ms = kiln.splat %m : tensor<16xi32>
  %rows = arith.remsi %ra, %ms : tensor<16xi32>
  %cn = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %ns = kiln.splat %n : tensor<32xi32>
  %cols = arith.remsi %cn, %ns : tensor<32xi32>
  %kr = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  // a_ptrs = a + rows[:, None] * sa + kr[None, :]
  %r2 = kiln.expand_dims %rows {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %sas = kiln.splat %sa : tensor<16x1xi32>
  %ro = arith.muli %r2, %sas : tensor<16x1xi32>
  %ab = kiln.splat %a : tensor<16x1x!kiln.ptr<f16>>
  %ap1 = kiln.addptr %ab, %ro : tensor<16x1x!kiln.ptr<f16>>, tensor<16x1xi32>
  %k2 = kiln.expand_dims %kr {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %one = arith.constant 1 : i32
  %ones = kiln.splat %one : tensor<1x32xi32>
  %ko = arith.muli %k2, %ones : tensor<1x32xi32>
  %apb = kiln.broadcast %ap1 : tensor<16x1x!kiln.ptr<f16>> -> tensor<16x32x!kiln.ptr<f16>>
  %kob = kiln.broadcast %ko : tensor<1x32xi32> -> tensor<16x32xi32>
  %aptrs = kiln.addptr %apb, %kob : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xi32>
  // b_ptrs = b + cols[:, None] * sb + kr[None, :]
  %c2 = kiln.expand_dims %cols {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %sbs = kiln.splat %sb : tensor<32x1xi32>
  %co = arith.muli %c2, %sbs : tensor<32x1xi32>
  %bb = kiln.splat %b : tensor<32x1x!kiln.ptr<f16>>
  %bp1 = kiln.addptr %bb, %co : tensor<32x1x!kiln.ptr<f16>>, tensor<32x1xi32>
  %bpb = kiln.broadcast %bp1 : tensor<32x1x!kiln.ptr<f16>> -> tensor<32x32x!kiln.ptr<f16>>
  %kob2 = kiln.broadcast %ko : tensor<1x32xi32> -> tensor<32x32xi32>
  %bptrs = kiln.addptr %bpb, %kob2 : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<16x32xf32>
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %c31 = arith.constant 31 : i32
  %kp = arith.addi %k, %c31 : i32
  %nk = arith.divsi %kp, %c32 : i32
  %res:3 = scf.for %i = %c0 to %nk step %one iter_args(%pa = %aptrs, %acc = %acc0, %pb = %bptrs)
      -> (tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xf32>, tensor<32x32x!kiln.ptr<f16>>) : i32 {
    %ke = kiln.expand_dims %kr {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %done = arith.muli %i, %c32 : i32
    %left = arith.subi %k, %done : i32
    %ls = kiln.splat %left : tensor<1x32xi32>
    %in = arith.cmpi slt, %ke, %ls : tensor<1x32xi32>
    %ina = kiln.broadcast %in : tensor<1x32xi1> -> tensor<16x32xi1>
    %h0 = arith.constant 0.000000e+00 : f16
    %za = kiln.splat %h0 : tensor<16x32xf16>
    %x = kiln.load %pa, %ina, %za : tensor<16x32x!kiln.ptr<f16>>
    %inb = kiln.broadcast %in : tensor<1x32xi1> -> tensor<32x32xi1>
    %zb = kiln.splat %h0 : tensor<32x32xf16>
    %y = kiln.load %pb, %inb, %zb : tensor<32x32x!kiln.ptr<f16>>
    %yt = kiln.trans %y {order = array<i32: 1, 0>} : tensor<32x32xf16> -> tensor<32x32xf16>
    %d = kiln.dot %x, %yt, %acc : tensor<16x32xf16> * tensor<32x32xf16> -> tensor<16x32xf32>
    %s32a = kiln.splat %c32 : tensor<16x32xi32>
    %pa2 = kiln.addptr %pa, %s32a : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xi32>
    %s32b = kiln.splat %c32 : tensor<32x32xi32>
    %pb2 = kiln.addptr %pb, %s32b : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    scf.yield %pa2, %d, %pb2 : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xf32>, tensor<32x32x!kiln.ptr<f16>>
  }
  %cp = kiln.splat %c : tensor<16x32x!kiln.ptr<f32>>
  kiln.store %cp, %res#1 : tensor<16x32x!kiln.ptr<f32>>
  return
}

// -----

// Tutorial 03's edge tiles: the rows of A taken % M and of B (stored N x K) % N reach memory
// only through C's store masked by ra < M and cn < N (through leaky_relu and .to(f16)), so
// the rows that wrap are never stored: the guard does not ask start + block <= M (or N), and
// the descriptors read those rows as zeros past the tensor's end.
// CHECK-LABEL: func.func @matmul_edge_tiles(
// CHECK-NOT: arith.cmpi sle
// CHECK: scf.if
// CHECK: kiln.descriptor_load
// CHECK: kiln.descriptor_load
// CHECK: } else {
// CHECK: kiln.load
func.func @matmul_edge_tiles(%a: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                     %b: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                     %m: i32 {kiln.divisibility = 16 : i32}, %n: i32 {kiln.divisibility = 16 : i32},
                     %k: i32 {kiln.divisibility = 16 : i32},
                     %sa: i32 {kiln.divisibility = 16 : i32}, %sb: i32 {kiln.divisibility = 16 : i32},
                     %c: !kiln.ptr<f16>) {
  %pid = kiln.program_id x : i32
  %c16 = arith.constant 16 : i32
  %row0 = arith.muli %pid, %c16 : i32
  %r = kiln.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
  %rs = kiln.splat %row0 : tensor<16xi32>
  %ra = arith.addi %rs, %r : tensor<16xi32>
  %ms = kiln.splat %m : tensor<16xi32>
  %rows = arith.remsi %ra, %ms : tensor<16xi32>
  %cn = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %ns = kiln.splat %n : tensor<32xi32>
  %cols = arith.remsi %cn, %ns : tensor<32xi32>
  %kr = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  // a_ptrs = a + rows[:, None] * sa + kr[None, :]
  %r2 = kiln.expand_dims %rows {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %sas = kiln.splat %sa : tensor<16x1xi32>
  %ro = arith.muli %r2, %sas : tensor<16x1xi32>
  %ab = kiln.splat %a : tensor<16x1x!kiln.ptr<f16>>
  %ap1 = kiln.addptr %ab, %ro : tensor<16x1x!kiln.ptr<f16>>, tensor<16x1xi32>
  %k2 = kiln.expand_dims %kr {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %one = arith.constant 1 : i32
  %ones = kiln.splat %one : tensor<1x32xi32>
  %ko = arith.muli %k2, %ones : tensor<1x32xi32>
  %apb = kiln.broadcast %ap1 : tensor<16x1x!kiln.ptr<f16>> -> tensor<16x32x!kiln.ptr<f16>>
  %kob = kiln.broadcast %ko : tensor<1x32xi32> -> tensor<16x32xi32>
  %aptrs = kiln.addptr %apb, %kob : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xi32>
  // b_ptrs = b + cols[:, None] * sb + kr[None, :]
  %c2 = kiln.expand_dims %cols {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %sbs = kiln.splat %sb : tensor<32x1xi32>
  %co = arith.muli %c2, %sbs : tensor<32x1xi32>
  %bb = kiln.splat %b : tensor<32x1x!kiln.ptr<f16>>
  %bp1 = kiln.addptr %bb, %co : tensor<32x1x!kiln.ptr<f16>>, tensor<32x1xi32>
  %bpb = kiln.broadcast %bp1 : tensor<32x1x!kiln.ptr<f16>> -> tensor<32x32x!kiln.ptr<f16>>
  %kob2 = kiln.broadcast %ko : tensor<1x32xi32> -> tensor<32x32xi32>
  %bptrs = kiln.addptr %bpb, %kob2 : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<16x32xf32>
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %c31 = arith.constant 31 : i32
  %kp = arith.addi %k, %c31 : i32
  %nk = arith.divsi %kp, %c32 : i32
  %res:3 = scf.for %i = %c0 to %nk step %one iter_args(%pa = %aptrs, %acc = %acc0, %pb = %bptrs)
      -> (tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xf32>, tensor<32x32x!kiln.ptr<f16>>) : i32 {
    %ke = kiln.expand_dims %kr {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %done = arith.muli %i, %c32 : i32
    %left = arith.subi %k, %done : i32
    %ls = kiln.splat %left : tensor<1x32xi32>
    %in = arith.cmpi slt, %ke, %ls : tensor<1x32xi32>
    %ina = kiln.broadcast %in : tensor<1x32xi1> -> tensor<16x32xi1>
    %h0 = arith.constant 0.000000e+00 : f16
    %za = kiln.splat %h0 : tensor<16x32xf16>
    %x = kiln.load %pa, %ina, %za : tensor<16x32x!kiln.ptr<f16>>
    %inb = kiln.broadcast %in : tensor<1x32xi1> -> tensor<32x32xi1>
    %zb = kiln.splat %h0 : tensor<32x32xf16>
    %y = kiln.load %pb, %inb, %zb : tensor<32x32x!kiln.ptr<f16>>
    %yt = kiln.trans %y {order = array<i32: 1, 0>} : tensor<32x32xf16> -> tensor<32x32xf16>
    %d = kiln.dot %x, %yt, %acc : tensor<16x32xf16> * tensor<32x32xf16> -> tensor<16x32xf32>
    %s32a = kiln.splat %c32 : tensor<16x32xi32>
    %pa2 = kiln.addptr %pa, %s32a : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xi32>
    %s32b = kiln.splat %c32 : tensor<32x32xi32>
    %pb2 = kiln.addptr %pb, %s32b : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    scf.yield %pa2, %d, %pb2 : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xf32>, tensor<32x32x!kiln.ptr<f16>>
  }
  // c + ra[:, None] * n + cn[None, :], leaky_relu, .to(f16), masked
  %cr2 = kiln.expand_dims %ra {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %nss = kiln.splat %n : tensor<16x1xi32>
  %cro = arith.muli %cr2, %nss : tensor<16x1xi32>
  %crb = kiln.broadcast %cro : tensor<16x1xi32> -> tensor<16x32xi32>
  %cc2 = kiln.expand_dims %cn {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %ccb = kiln.broadcast %cc2 : tensor<1x32xi32> -> tensor<16x32xi32>
  %coff = arith.addi %crb, %ccb : tensor<16x32xi32>
  %cbase = kiln.splat %c : tensor<16x32x!kiln.ptr<f16>>
  %cp = kiln.addptr %cbase, %coff : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xi32>
  %rok = arith.cmpi slt, %ra, %ms : tensor<16xi32>
  %rok2 = kiln.expand_dims %rok {axis = 1 : i32} : tensor<16xi1> -> tensor<16x1xi1>
  %rokb = kiln.broadcast %rok2 : tensor<16x1xi1> -> tensor<16x32xi1>
  %cok = arith.cmpi slt, %cn, %ns : tensor<32xi32>
  %cok2 = kiln.expand_dims %cok {axis = 0 : i32} : tensor<32xi1> -> tensor<1x32xi1>
  %cokb = kiln.broadcast %cok2 : tensor<1x32xi1> -> tensor<16x32xi1>
  %cmask = arith.andi %rokb, %cokb : tensor<16x32xi1>
  %zf = kiln.splat %zero : tensor<16x32xf32>
  %pos = arith.cmpf ogt, %res#1, %zf : tensor<16x32xf32>
  %slope = arith.constant 0.0100000002 : f32
  %slopes = kiln.splat %slope : tensor<16x32xf32>
  %neg = arith.mulf %res#1, %slopes : tensor<16x32xf32>
  %act = arith.select %pos, %res#1, %neg : tensor<16x32xi1>, tensor<16x32xf32>
  %h = arith.truncf %act : tensor<16x32xf32> to tensor<16x32xf16>
  kiln.store %cp, %h, %cmask : tensor<16x32x!kiln.ptr<f16>>
  return
}


// -----

// The same with C's store masked by its rows only: the columns B's wrapped rows make are
// stored, so B's wrap still needs the run-time fact (one start + block <= N check).
// CHECK-LABEL: func.func @matmul_edge_rows_only(
// CHECK: arith.cmpi sle
// CHECK-NOT: arith.cmpi sle
// CHECK: scf.if
func.func @matmul_edge_rows_only(%a: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                     %b: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                     %m: i32 {kiln.divisibility = 16 : i32}, %n: i32 {kiln.divisibility = 16 : i32},
                     %k: i32 {kiln.divisibility = 16 : i32},
                     %sa: i32 {kiln.divisibility = 16 : i32}, %sb: i32 {kiln.divisibility = 16 : i32},
                     %c: !kiln.ptr<f16>) {
  %pid = kiln.program_id x : i32
  %c16 = arith.constant 16 : i32
  %row0 = arith.muli %pid, %c16 : i32
  %r = kiln.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
  %rs = kiln.splat %row0 : tensor<16xi32>
  %ra = arith.addi %rs, %r : tensor<16xi32>
  %ms = kiln.splat %m : tensor<16xi32>
  %rows = arith.remsi %ra, %ms : tensor<16xi32>
  %cn = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %ns = kiln.splat %n : tensor<32xi32>
  %cols = arith.remsi %cn, %ns : tensor<32xi32>
  %kr = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  // a_ptrs = a + rows[:, None] * sa + kr[None, :]
  %r2 = kiln.expand_dims %rows {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %sas = kiln.splat %sa : tensor<16x1xi32>
  %ro = arith.muli %r2, %sas : tensor<16x1xi32>
  %ab = kiln.splat %a : tensor<16x1x!kiln.ptr<f16>>
  %ap1 = kiln.addptr %ab, %ro : tensor<16x1x!kiln.ptr<f16>>, tensor<16x1xi32>
  %k2 = kiln.expand_dims %kr {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %one = arith.constant 1 : i32
  %ones = kiln.splat %one : tensor<1x32xi32>
  %ko = arith.muli %k2, %ones : tensor<1x32xi32>
  %apb = kiln.broadcast %ap1 : tensor<16x1x!kiln.ptr<f16>> -> tensor<16x32x!kiln.ptr<f16>>
  %kob = kiln.broadcast %ko : tensor<1x32xi32> -> tensor<16x32xi32>
  %aptrs = kiln.addptr %apb, %kob : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xi32>
  // b_ptrs = b + cols[:, None] * sb + kr[None, :]
  %c2 = kiln.expand_dims %cols {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %sbs = kiln.splat %sb : tensor<32x1xi32>
  %co = arith.muli %c2, %sbs : tensor<32x1xi32>
  %bb = kiln.splat %b : tensor<32x1x!kiln.ptr<f16>>
  %bp1 = kiln.addptr %bb, %co : tensor<32x1x!kiln.ptr<f16>>, tensor<32x1xi32>
  %bpb = kiln.broadcast %bp1 : tensor<32x1x!kiln.ptr<f16>> -> tensor<32x32x!kiln.ptr<f16>>
  %kob2 = kiln.broadcast %ko : tensor<1x32xi32> -> tensor<32x32xi32>
  %bptrs = kiln.addptr %bpb, %kob2 : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<16x32xf32>
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %c31 = arith.constant 31 : i32
  %kp = arith.addi %k, %c31 : i32
  %nk = arith.divsi %kp, %c32 : i32
  %res:3 = scf.for %i = %c0 to %nk step %one iter_args(%pa = %aptrs, %acc = %acc0, %pb = %bptrs)
      -> (tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xf32>, tensor<32x32x!kiln.ptr<f16>>) : i32 {
    %ke = kiln.expand_dims %kr {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %done = arith.muli %i, %c32 : i32
    %left = arith.subi %k, %done : i32
    %ls = kiln.splat %left : tensor<1x32xi32>
    %in = arith.cmpi slt, %ke, %ls : tensor<1x32xi32>
    %ina = kiln.broadcast %in : tensor<1x32xi1> -> tensor<16x32xi1>
    %h0 = arith.constant 0.000000e+00 : f16
    %za = kiln.splat %h0 : tensor<16x32xf16>
    %x = kiln.load %pa, %ina, %za : tensor<16x32x!kiln.ptr<f16>>
    %inb = kiln.broadcast %in : tensor<1x32xi1> -> tensor<32x32xi1>
    %zb = kiln.splat %h0 : tensor<32x32xf16>
    %y = kiln.load %pb, %inb, %zb : tensor<32x32x!kiln.ptr<f16>>
    %yt = kiln.trans %y {order = array<i32: 1, 0>} : tensor<32x32xf16> -> tensor<32x32xf16>
    %d = kiln.dot %x, %yt, %acc : tensor<16x32xf16> * tensor<32x32xf16> -> tensor<16x32xf32>
    %s32a = kiln.splat %c32 : tensor<16x32xi32>
    %pa2 = kiln.addptr %pa, %s32a : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xi32>
    %s32b = kiln.splat %c32 : tensor<32x32xi32>
    %pb2 = kiln.addptr %pb, %s32b : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    scf.yield %pa2, %d, %pb2 : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xf32>, tensor<32x32x!kiln.ptr<f16>>
  }
  // c + ra[:, None] * n + cn[None, :], leaky_relu, .to(f16), masked
  %cr2 = kiln.expand_dims %ra {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %nss = kiln.splat %n : tensor<16x1xi32>
  %cro = arith.muli %cr2, %nss : tensor<16x1xi32>
  %crb = kiln.broadcast %cro : tensor<16x1xi32> -> tensor<16x32xi32>
  %cc2 = kiln.expand_dims %cn {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %ccb = kiln.broadcast %cc2 : tensor<1x32xi32> -> tensor<16x32xi32>
  %coff = arith.addi %crb, %ccb : tensor<16x32xi32>
  %cbase = kiln.splat %c : tensor<16x32x!kiln.ptr<f16>>
  %cp = kiln.addptr %cbase, %coff : tensor<16x32x!kiln.ptr<f16>>, tensor<16x32xi32>
  %rok = arith.cmpi slt, %ra, %ms : tensor<16xi32>
  %rok2 = kiln.expand_dims %rok {axis = 1 : i32} : tensor<16xi1> -> tensor<16x1xi1>
  %rokb = kiln.broadcast %rok2 : tensor<16x1xi1> -> tensor<16x32xi1>
  %zf = kiln.splat %zero : tensor<16x32xf32>
  %pos = arith.cmpf ogt, %res#1, %zf : tensor<16x32xf32>
  %slope = arith.constant 0.0100000002 : f32
  %slopes = kiln.splat %slope : tensor<16x32xf32>
  %neg = arith.mulf %res#1, %slopes : tensor<16x32xf32>
  %act = arith.select %pos, %res#1, %neg : tensor<16x32xi1>, tensor<16x32xf32>
  %h = arith.truncf %act : tensor<16x32xf32> to tensor<16x32xf16>
  kiln.store %cp, %h, %rokb : tensor<16x32x!kiln.ptr<f16>>
  return
}


// -----

// Tutorial 03's B, stored K x N: rows k advanced by 32 * stride_bk, columns n contiguous and
// taken % N; the mask bounds the rows.
// CHECK-LABEL: func.func @matmul_kn(
// CHECK-SAME: %{{.*}}: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 72, 2, 32, 32, 2, 1, 3>})
// CHECK: scf.if
// CHECK: kiln.descriptor_load %{{.*}}[%{{.*}}, %{{.*}}] shape[%{{.*}}, %{{.*}}] strides[%{{.*}}] : <bf16> -> tensor<32x32xbf16>
// CHECK: } else {
// CHECK: kiln.load
func.func @matmul_kn(%b: !kiln.ptr<bf16> {kiln.divisibility = 16 : i32},
                     %n: i32 {kiln.divisibility = 16 : i32}, %k: i32 {kiln.divisibility = 16 : i32},
                     %sb: i32 {kiln.divisibility = 16 : i32}, %c: !kiln.ptr<f32>) {
  %pid = kiln.program_id x : i32
  %c32 = arith.constant 32 : i32
  %col0 = arith.muli %pid, %c32 : i32
  %r = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %cs = kiln.splat %col0 : tensor<32xi32>
  %ca = arith.addi %cs, %r : tensor<32xi32>
  %ns = kiln.splat %n : tensor<32xi32>
  %cols = arith.remsi %ca, %ns : tensor<32xi32>
  %k2 = kiln.expand_dims %r {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %sbs = kiln.splat %sb : tensor<32x1xi32>
  %ko = arith.muli %k2, %sbs : tensor<32x1xi32>
  %c2 = kiln.expand_dims %cols {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %kob = kiln.broadcast %ko : tensor<32x1xi32> -> tensor<32x32xi32>
  %cob = kiln.broadcast %c2 : tensor<1x32xi32> -> tensor<32x32xi32>
  %off = arith.addi %kob, %cob : tensor<32x32xi32>
  %bb = kiln.splat %b : tensor<32x32x!kiln.ptr<bf16>>
  %bptrs = kiln.addptr %bb, %off : tensor<32x32x!kiln.ptr<bf16>>, tensor<32x32xi32>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<32x32xf32>
  %c0 = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %nk = arith.divsi %k, %c32 : i32
  %step = arith.muli %c32, %sb : i32
  %res:2 = scf.for %i = %c0 to %nk step %one iter_args(%pb = %bptrs, %acc = %acc0)
      -> (tensor<32x32x!kiln.ptr<bf16>>, tensor<32x32xf32>) : i32 {
    %done = arith.muli %i, %c32 : i32
    %left = arith.subi %k, %done : i32
    %ls = kiln.splat %left : tensor<32xi32>
    %in = arith.cmpi slt, %r, %ls : tensor<32xi32>
    %in2 = kiln.expand_dims %in {axis = 1 : i32} : tensor<32xi1> -> tensor<32x1xi1>
    %inb = kiln.broadcast %in2 : tensor<32x1xi1> -> tensor<32x32xi1>
    %h0 = arith.constant 0.000000e+00 : bf16
    %zb = kiln.splat %h0 : tensor<32x32xbf16>
    %y = kiln.load %pb, %inb, %zb : tensor<32x32x!kiln.ptr<bf16>>
    %d = kiln.dot %y, %y, %acc : tensor<32x32xbf16> * tensor<32x32xbf16> -> tensor<32x32xf32>
    %ss = kiln.splat %step : tensor<32x32xi32>
    %pb2 = kiln.addptr %pb, %ss : tensor<32x32x!kiln.ptr<bf16>>, tensor<32x32xi32>
    scf.yield %pb2, %d : tensor<32x32x!kiln.ptr<bf16>>, tensor<32x32xf32>
  }
  %cp = kiln.splat %c : tensor<32x32x!kiln.ptr<f32>>
  kiln.store %cp, %res#1 : tensor<32x32x!kiln.ptr<f32>>
  return
}

// -----

// Left alone, all the loads of the loop (whose dots the rings feed all by the TMA or all by
// cp.async): bases not known 16-byte aligned (masked and not); a mask bounding a dimension
// the loop does not advance by the induction variable; other not zero.
// CHECK-LABEL: func.func @left_alone(
// CHECK-NOT: kiln.tensormap
// CHECK-NOT: scf.if
// CHECK-NOT: kiln.descriptor_load
func.func @left_alone(%a: !kiln.ptr<f16>, %b: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                      %k: i32, %sa: i32 {kiln.divisibility = 16 : i32}, %c: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %r2 = kiln.expand_dims %r {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %sas = kiln.splat %sa : tensor<32x1xi32>
  %ro = arith.muli %r2, %sas : tensor<32x1xi32>
  %k2 = kiln.expand_dims %r {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %rob = kiln.broadcast %ro : tensor<32x1xi32> -> tensor<32x32xi32>
  %kob = kiln.broadcast %k2 : tensor<1x32xi32> -> tensor<32x32xi32>
  %off = arith.addi %rob, %kob : tensor<32x32xi32>
  %ab = kiln.splat %a : tensor<32x32x!kiln.ptr<f16>>
  %aptrs = kiln.addptr %ab, %off : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
  %bb = kiln.splat %b : tensor<32x32x!kiln.ptr<f16>>
  %bptrs = kiln.addptr %bb, %off : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<32x32xf32>
  %c0 = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %c32 = arith.constant 32 : i32
  %res:5 = scf.for %i = %c0 to %k step %one
      iter_args(%pa = %aptrs, %pb = %aptrs, %pc = %bptrs, %pd = %bptrs, %acc = %acc0)
      -> (tensor<32x32x!kiln.ptr<f16>>, tensor<32x32x!kiln.ptr<f16>>, tensor<32x32x!kiln.ptr<f16>>,
          tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xf32>) : i32 {
    %done = arith.muli %i, %c32 : i32
    %left = arith.subi %k, %done : i32
    %ls = kiln.splat %left : tensor<32xi32>
    %in = arith.cmpi slt, %r, %ls : tensor<32xi32>
    %inc = kiln.expand_dims %in {axis = 0 : i32} : tensor<32xi1> -> tensor<1x32xi1>
    %mcol = kiln.broadcast %inc : tensor<1x32xi1> -> tensor<32x32xi1>
    %inr = kiln.expand_dims %in {axis = 1 : i32} : tensor<32xi1> -> tensor<32x1xi1>
    %mrow = kiln.broadcast %inr : tensor<32x1xi1> -> tensor<32x32xi1>
    %h0 = arith.constant 0.000000e+00 : f16
    %h1 = arith.constant 1.000000e+00 : f16
    %z = kiln.splat %h0 : tensor<32x32xf16>
    %o = kiln.splat %h1 : tensor<32x32xf16>
    %x = kiln.load %pa, %mcol, %z : tensor<32x32x!kiln.ptr<f16>>
    %y = kiln.load %pb : tensor<32x32x!kiln.ptr<f16>>
    %w = kiln.load %pc, %mrow, %z : tensor<32x32x!kiln.ptr<f16>>
    %v = kiln.load %pd, %mcol, %o : tensor<32x32x!kiln.ptr<f16>>
    %d0 = kiln.dot %x, %y, %acc : tensor<32x32xf16> * tensor<32x32xf16> -> tensor<32x32xf32>
    %d1 = kiln.dot %w, %v, %d0 : tensor<32x32xf16> * tensor<32x32xf16> -> tensor<32x32xf32>
    %s = kiln.splat %c32 : tensor<32x32xi32>
    %pa2 = kiln.addptr %pa, %s : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    %pb2 = kiln.addptr %pb, %s : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    %pc2 = kiln.addptr %pc, %s : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    %pd2 = kiln.addptr %pd, %s : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    scf.yield %pa2, %pb2, %pc2, %pd2, %d1 : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32x!kiln.ptr<f16>>,
        tensor<32x32x!kiln.ptr<f16>>, tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xf32>
  }
  %cp = kiln.splat %c : tensor<32x32x!kiln.ptr<f32>>
  kiln.store %cp, %res#4 : tensor<32x32x!kiln.ptr<f32>>
  return
}

// -----

// A matmul's C store: rows and columns masked by M and N on the store's own indices. It
// becomes a descriptor store of a map [M, N] with row stride %sc, under scf.if on the facts it
// takes (row start >= 0, extents and stride > 0); the pointer store stays for the else branch.
// A store masked on its rows only writes every column: extent 2^31 - 1. An fp32 store and
// one of a value no dot computed (an elementwise kernel's store stays coalesced) are left
// alone.
// CHECK-LABEL: func.func @store_c(
// CHECK-SAME: %[[C:[a-z0-9]+]]: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %[[M:[a-z0-9]+]]: i32, %[[N:[a-z0-9]+]]: i32, %[[SC:[a-z0-9]+]]: i32 {kiln.divisibility = 16 : i32}
// CHECK-SAME: %[[MAP:[a-z0-9]+]]: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 104, 2, 32, 64, 1, 2, 3>}, %[[MAP2:[a-z0-9]+]]: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 104, 2, 32, 64, 1, -2147483648, 3>})
// CHECK: %[[V:.*]] = arith.truncf
// CHECK: %[[ROW0:.*]] = arith.muli
// CHECK: arith.cmpi sge, %[[ROW0]]
// CHECK: scf.if
// CHECK: kiln.descriptor_store %[[MAP]], %[[C]][%[[ROW0]], %{{.*}}], %[[V]] shape[%[[M]], %[[N]]] strides[%{{.*}}] : <f16>, tensor<32x64xf16>
// CHECK-NEXT: } else {
// CHECK-NEXT: kiln.store %{{.*}}, %{{.*}}, %{{.*}} : tensor<32x64x!kiln.ptr<f16>>
// CHECK: kiln.store %{{.*}}, %{{.*}}, %{{.*}} : tensor<32x64x!kiln.ptr<f32>>
// CHECK: scf.if
// CHECK: kiln.descriptor_store %[[MAP2]]
// CHECK: } else {
// CHECK-NEXT: kiln.store %{{.*}}, %[[V]], %{{.*}} : tensor<32x64x!kiln.ptr<f16>>
// CHECK: kiln.store %{{.*}}, %{{.*}}, %{{.*}} : tensor<32x64x!kiln.ptr<f16>>
// CHECK-NOT: descriptor_store
func.func @store_c(%c: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %m: i32, %n: i32,
                   %sc: i32 {kiln.divisibility = 16 : i32},
                   %c32p: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %x: tensor<32x16xf16>,
                   %y: tensor<16x64xf16>, %u: tensor<32x64xf16>) {
  %zero = arith.constant 0.000000e+00 : f32
  %acc = kiln.splat %zero : tensor<32x64xf32>
  %w = kiln.dot %x, %y, %acc : tensor<32x16xf16> * tensor<16x64xf16> -> tensor<32x64xf32>
  %v = arith.truncf %w : tensor<32x64xf32> to tensor<32x64xf16>
  %pid = kiln.program_id x : i32
  %c32 = arith.constant 32 : i32
  %row0 = arith.muli %pid, %c32 : i32
  %r = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %rs = kiln.splat %row0 : tensor<32xi32>
  %rows = arith.addi %rs, %r : tensor<32xi32>
  %cols = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %scs = kiln.splat %sc : tensor<32x1xi32>
  %r2 = kiln.expand_dims %rows {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %ro = arith.muli %scs, %r2 : tensor<32x1xi32>
  %c2 = kiln.expand_dims %cols {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  %rob = kiln.broadcast %ro : tensor<32x1xi32> -> tensor<32x64xi32>
  %cob = kiln.broadcast %c2 : tensor<1x64xi32> -> tensor<32x64xi32>
  %off = arith.addi %rob, %cob : tensor<32x64xi32>
  %cb = kiln.splat %c : tensor<32x64x!kiln.ptr<f16>>
  %ptrs = kiln.addptr %cb, %off : tensor<32x64x!kiln.ptr<f16>>, tensor<32x64xi32>
  %ms = kiln.splat %m : tensor<32x1xi32>
  %inr = arith.cmpi slt, %r2, %ms : tensor<32x1xi32>
  %ns = kiln.splat %n : tensor<1x64xi32>
  %inc = arith.cmpi slt, %c2, %ns : tensor<1x64xi32>
  %inrb = kiln.broadcast %inr : tensor<32x1xi1> -> tensor<32x64xi1>
  %incb = kiln.broadcast %inc : tensor<1x64xi1> -> tensor<32x64xi1>
  %mask = arith.andi %inrb, %incb : tensor<32x64xi1>
  kiln.store %ptrs, %v, %mask : tensor<32x64x!kiln.ptr<f16>>
  %fb = kiln.splat %c32p : tensor<32x64x!kiln.ptr<f32>>
  %fptrs = kiln.addptr %fb, %off : tensor<32x64x!kiln.ptr<f32>>, tensor<32x64xi32>
  kiln.store %fptrs, %w, %mask : tensor<32x64x!kiln.ptr<f32>>
  kiln.store %ptrs, %v, %inrb : tensor<32x64x!kiln.ptr<f16>>
  kiln.store %ptrs, %u, %mask : tensor<32x64x!kiln.ptr<f16>>
  return
}

// -----

// Unmasked tiles (kernels that assume K a multiple of BLOCK_K): every coordinate is read, as
// the pointer load reads every address: extents 2^31 - 1 (-1 - value: -2147483648). Only the
// row stride's sign is left to check at run time.
// CHECK-LABEL: func.func @unmasked(
// CHECK-SAME: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 104, 2, 32, 32, -2147483648, -2147483648, 1>})
// CHECK: %[[G:.*]] = arith.cmpi sgt, %{{.*}}, %{{.*}} : i32
// CHECK: scf.if
// CHECK: kiln.descriptor_load
func.func @unmasked(%a: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                    %sa: i32 {kiln.divisibility = 16 : i32}, %k: i32, %c: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %r2 = kiln.expand_dims %r {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %sas = kiln.splat %sa : tensor<32x1xi32>
  %ro = arith.muli %r2, %sas : tensor<32x1xi32>
  %k2 = kiln.expand_dims %r {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %rob = kiln.broadcast %ro : tensor<32x1xi32> -> tensor<32x32xi32>
  %kob = kiln.broadcast %k2 : tensor<1x32xi32> -> tensor<32x32xi32>
  %off = arith.addi %rob, %kob : tensor<32x32xi32>
  %ab = kiln.splat %a : tensor<32x32x!kiln.ptr<f16>>
  %aptrs = kiln.addptr %ab, %off : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<32x32xf32>
  %c0 = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %c32 = arith.constant 32 : i32
  %res:2 = scf.for %i = %c0 to %k step %one iter_args(%pa = %aptrs, %acc = %acc0)
      -> (tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xf32>) : i32 {
    %x = kiln.load %pa : tensor<32x32x!kiln.ptr<f16>>
    %d = kiln.dot %x, %x, %acc : tensor<32x32xf16> * tensor<32x32xf16> -> tensor<32x32xf32>
    %s = kiln.splat %c32 : tensor<32x32xi32>
    %pa2 = kiln.addptr %pa, %s : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    scf.yield %pa2, %d : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xf32>
  }
  %cp = kiln.splat %c : tensor<32x32x!kiln.ptr<f32>>
  kiln.store %cp, %res#1 : tensor<32x32x!kiln.ptr<f32>>
  return
}
