// RUN: kiln-opt %s -split-input-file -kiln-pointer-tiles-to-descriptors=attention-tiles=1 | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-pointer-tiles-to-descriptors | FileCheck %s --check-prefix=PLAIN
// RUN: kiln-opt %s -split-input-file -kiln-pointer-tiles-to-descriptors=attention-tiles=1 -cse | FileCheck %s --check-prefix=CSE

// Tutorial 06's forward by pointers: the program moves K's base by off (its batch and head),
// K is loaded transposed (a [D, BLOCK_N] tile contiguous along its rows, keys strided by
// %sk) and advanced by BLOCK_N keys an iteration. With attention-tiles the load becomes the
// transpose of the descriptor block [BLOCK_N, D] = [32, 64] of the map over K's rows
// (recipe: base %K, rows then columns, extents unbounded, row stride %sk), at row coordinate
// off / sk + 32 t; the loop is versioned on off >= 0, off % sk == 0, the last row coordinate
// within int32 and sk > 0. Without the option the loop is left as it is.
// CHECK-LABEL: func.func @attention_kt(
// CHECK-SAME: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 104, 2, 32, 64, -2147483648, -2147483648, 1>})
// CHECK: %[[OFF:.*]] = arith.muli %{{.*}}, %{{.*}} : i64
// CHECK: %[[Q:.*]] = arith.divsi %[[OFF]], %{{.*}} : i64
// CHECK: arith.cmpi sge, %[[OFF]], %{{.*}} : i64
// CHECK: %[[BACK:.*]] = arith.muli %[[Q]], %{{.*}} : i64
// CHECK: arith.cmpi eq, %[[BACK]], %[[OFF]] : i64
// CHECK: arith.cmpi sle, %{{.*}}, %{{.*}} : i64
// CHECK: scf.if
// CHECK: %[[ROWS64:.*]] = arith.divsi %[[OFF]], %{{.*}} : i64
// CHECK: %[[ROWS:.*]] = arith.trunci %[[ROWS64]] : i64 to i32
// CHECK: scf.for
// CHECK: %[[AT:.*]] = arith.addi %{{.*}}, %[[ROWS]] : i32
// CHECK: %[[BLOCK:.*]] = kiln.descriptor_load %{{.*}}, %arg0[%[[AT]], %{{.*}}] shape[%{{.*}}, %{{.*}}] strides[%{{.*}}] : <f16> -> tensor<32x64xf16>
// CHECK: %[[KT:.*]] = kiln.trans %[[BLOCK]] {order = array<i32: 1, 0>} : tensor<32x64xf16> -> tensor<64x32xf16>
// CHECK: kiln.dot %{{.*}}, %[[KT]], %{{.*}}
// CHECK: } else {
// CHECK: kiln.load

// The guard and the rewritten loop divide the base's offset by the row stride with the same
// ops: after CSE, one division a program (and no remainder).
// CSE-LABEL: func.func @attention_kt(
// CSE: %[[OFF:.*]] = arith.muli %{{.*}}, %{{.*}} : i64
// CSE: arith.divsi %[[OFF]],
// CSE-NOT: arith.divsi %[[OFF]],
// CSE-NOT: arith.remsi
// CSE: return
// PLAIN-LABEL: func.func @attention_kt(
// PLAIN-NOT: kiln.descriptor_load
// PLAIN-NOT: scf.if
func.func @attention_kt(%K: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                        %sk: i32 {kiln.divisibility = 16 : i32}, %sz: i64, %z: i64,
                        %n: i32, %q: tensor<128x64xf16>, %c: !kiln.ptr<f32>) {
  %off = arith.muli %z, %sz : i64
  %Kz = kiln.addptr %K, %off : !kiln.ptr<f16>, i64
  %rd = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %rn = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %d2 = kiln.expand_dims %rd {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %n2 = kiln.expand_dims %rn {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %sks = kiln.splat %sk : tensor<1x32xi32>
  %no = arith.muli %n2, %sks : tensor<1x32xi32>
  %db = kiln.broadcast %d2 : tensor<64x1xi32> -> tensor<64x32xi32>
  %nb = kiln.broadcast %no : tensor<1x32xi32> -> tensor<64x32xi32>
  %o = arith.addi %db, %nb : tensor<64x32xi32>
  %kb = kiln.splat %Kz : tensor<64x32x!kiln.ptr<f16>>
  %kptrs = kiln.addptr %kb, %o : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<128x32xf32>
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %step = arith.muli %sk, %c32 : i32
  %res:2 = scf.for %i = %c0 to %n step %c32 iter_args(%pk = %kptrs, %acc = %acc0)
      -> (tensor<64x32x!kiln.ptr<f16>>, tensor<128x32xf32>) : i32 {
    %kt = kiln.load %pk : tensor<64x32x!kiln.ptr<f16>>
    %s = kiln.dot %q, %kt, %acc : tensor<128x64xf16> * tensor<64x32xf16> -> tensor<128x32xf32>
    %inc = kiln.splat %step : tensor<64x32xi32>
    %pk2 = kiln.addptr %pk, %inc : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
    scf.yield %pk2, %s : tensor<64x32x!kiln.ptr<f16>>, tensor<128x32xf32>
  }
  %cp = kiln.splat %c : tensor<128x32x!kiln.ptr<f32>>
  kiln.store %cp, %res#1 : tensor<128x32x!kiln.ptr<f32>>
  return
}

// -----

// A transposed tile that a second dot also reads is left alone when its rows are narrower
// than 256 bytes (64 here): several dots' shared TMA rings of such blocks ran slower than
// cp.async's on the H100 (tutorial 06's backward at D 64).
// CHECK-LABEL: func.func @kt_two_dots(
// CHECK-NOT: kiln.descriptor_load
// CHECK: return
func.func @kt_two_dots(%K: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                       %sk: i32 {kiln.divisibility = 16 : i32}, %n: i32,
                       %q: tensor<32x32xf16>, %c: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %d2 = kiln.expand_dims %r {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %n2 = kiln.expand_dims %r {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %sks = kiln.splat %sk : tensor<1x32xi32>
  %no = arith.muli %n2, %sks : tensor<1x32xi32>
  %db = kiln.broadcast %d2 : tensor<32x1xi32> -> tensor<32x32xi32>
  %nb = kiln.broadcast %no : tensor<1x32xi32> -> tensor<32x32xi32>
  %o = arith.addi %db, %nb : tensor<32x32xi32>
  %kb = kiln.splat %K : tensor<32x32x!kiln.ptr<f16>>
  %kptrs = kiln.addptr %kb, %o : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<32x32xf32>
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %step = arith.muli %sk, %c32 : i32
  %res:2 = scf.for %i = %c0 to %n step %c32 iter_args(%pk = %kptrs, %acc = %acc0)
      -> (tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xf32>) : i32 {
    %kt = kiln.load %pk : tensor<32x32x!kiln.ptr<f16>>
    %s = kiln.dot %q, %kt, %acc : tensor<32x32xf16> * tensor<32x32xf16> -> tensor<32x32xf32>
    %s2 = kiln.dot %kt, %q, %s : tensor<32x32xf16> * tensor<32x32xf16> -> tensor<32x32xf32>
    %inc = kiln.splat %step : tensor<32x32xi32>
    %pk2 = kiln.addptr %pk, %inc : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xi32>
    scf.yield %pk2, %s2 : tensor<32x32x!kiln.ptr<f16>>, tensor<32x32xf32>
  }
  %cp = kiln.splat %c : tensor<32x32x!kiln.ptr<f32>>
  kiln.store %cp, %res#1 : tensor<32x32x!kiln.ptr<f32>>
  return
}

// -----

// A row-contiguous tile stepping along its contiguous dimension (B loaded [K, N] from
// N x K storage, 64 elements of K an iteration) with its rows masked (n < N): taken with the
// base as it is (the mask's bound is the map's row extent, %n), left alone when the program
// moves the base (the mask counts the tile's own indices, which the map's row coordinates,
// shifted by off / sk, do not).
// CHECK-LABEL: func.func @masked_rows(
// CHECK-SAME: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 104, 2, 32, 64, 3, -2147483648, 1>})
// CHECK: kiln.descriptor_load
func.func @masked_rows(%K: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                       %sk: i32 {kiln.divisibility = 16 : i32}, %t: i32, %n: i32,
                       %q: tensor<128x64xf16>, %c: !kiln.ptr<f32>) {
  %rd = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %rn = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %d2 = kiln.expand_dims %rd {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %n2 = kiln.expand_dims %rn {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %sks = kiln.splat %sk : tensor<1x32xi32>
  %no = arith.muli %n2, %sks : tensor<1x32xi32>
  %db = kiln.broadcast %d2 : tensor<64x1xi32> -> tensor<64x32xi32>
  %nb = kiln.broadcast %no : tensor<1x32xi32> -> tensor<64x32xi32>
  %o = arith.addi %db, %nb : tensor<64x32xi32>
  %kb = kiln.splat %K : tensor<64x32x!kiln.ptr<f16>>
  %kptrs = kiln.addptr %kb, %o : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
  %ns = kiln.splat %n : tensor<32xi32>
  %ok = arith.cmpi slt, %rn, %ns : tensor<32xi32>
  %ok2 = kiln.expand_dims %ok {axis = 0 : i32} : tensor<32xi1> -> tensor<1x32xi1>
  %mask = kiln.broadcast %ok2 : tensor<1x32xi1> -> tensor<64x32xi1>
  %z16 = arith.constant 0.000000e+00 : f16
  %other = kiln.splat %z16 : tensor<64x32xf16>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<128x32xf32>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %res:2 = scf.for %i = %c0 to %t step %c1 iter_args(%pk = %kptrs, %acc = %acc0)
      -> (tensor<64x32x!kiln.ptr<f16>>, tensor<128x32xf32>) : i32 {
    %kt = kiln.load %pk, %mask, %other : tensor<64x32x!kiln.ptr<f16>>
    %s = kiln.dot %q, %kt, %acc : tensor<128x64xf16> * tensor<64x32xf16> -> tensor<128x32xf32>
    %inc = kiln.splat %c64 : tensor<64x32xi32>
    %pk2 = kiln.addptr %pk, %inc : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
    scf.yield %pk2, %s : tensor<64x32x!kiln.ptr<f16>>, tensor<128x32xf32>
  }
  %cp = kiln.splat %c : tensor<128x32x!kiln.ptr<f32>>
  kiln.store %cp, %res#1 : tensor<128x32x!kiln.ptr<f32>>
  return
}

// -----

// CHECK-LABEL: func.func @moved_base_masked_rows(
// CHECK-NOT: kiln.descriptor_load
// CHECK: return
func.func @moved_base_masked_rows(%K: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                                  %sk: i32 {kiln.divisibility = 16 : i32}, %t: i32, %n: i32,
                                  %q: tensor<128x64xf16>, %c: !kiln.ptr<f32>, %off: i64) {
  %Kz = kiln.addptr %K, %off : !kiln.ptr<f16>, i64
  %rd = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %rn = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %d2 = kiln.expand_dims %rd {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %n2 = kiln.expand_dims %rn {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %sks = kiln.splat %sk : tensor<1x32xi32>
  %no = arith.muli %n2, %sks : tensor<1x32xi32>
  %db = kiln.broadcast %d2 : tensor<64x1xi32> -> tensor<64x32xi32>
  %nb = kiln.broadcast %no : tensor<1x32xi32> -> tensor<64x32xi32>
  %o = arith.addi %db, %nb : tensor<64x32xi32>
  %kb = kiln.splat %Kz : tensor<64x32x!kiln.ptr<f16>>
  %kptrs = kiln.addptr %kb, %o : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
  %ns = kiln.splat %n : tensor<32xi32>
  %ok = arith.cmpi slt, %rn, %ns : tensor<32xi32>
  %ok2 = kiln.expand_dims %ok {axis = 0 : i32} : tensor<32xi1> -> tensor<1x32xi1>
  %mask = kiln.broadcast %ok2 : tensor<1x32xi1> -> tensor<64x32xi1>
  %z16 = arith.constant 0.000000e+00 : f16
  %other = kiln.splat %z16 : tensor<64x32xf16>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<128x32xf32>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %res:2 = scf.for %i = %c0 to %t step %c1 iter_args(%pk = %kptrs, %acc = %acc0)
      -> (tensor<64x32x!kiln.ptr<f16>>, tensor<128x32xf32>) : i32 {
    %kt = kiln.load %pk, %mask, %other : tensor<64x32x!kiln.ptr<f16>>
    %s = kiln.dot %q, %kt, %acc : tensor<128x64xf16> * tensor<64x32xf16> -> tensor<128x32xf32>
    %inc = kiln.splat %c64 : tensor<64x32xi32>
    %pk2 = kiln.addptr %pk, %inc : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
    scf.yield %pk2, %s : tensor<64x32x!kiln.ptr<f16>>, tensor<128x32xf32>
  }
  %cp = kiln.splat %c : tensor<128x32x!kiln.ptr<f32>>
  kiln.store %cp, %res#1 : tensor<128x32x!kiln.ptr<f32>>
  return
}

// -----

// Tutorial 06's backward: qT, a [128, 32] tile loaded transposed (rows of 256 bytes), is read
// by k @ qT and, transposed back, by ds @ qT^T. It becomes the descriptor block [32, 128]:
// its transpose for the first dot, the block itself for the second (no transpose left).
// CHECK-LABEL: func.func @qt_two_dots(
// CHECK: scf.if
// CHECK: scf.for
// CHECK: %[[BLOCK:.*]] = kiln.descriptor_load %{{.*}} : <f16> -> tensor<32x128xf16>
// CHECK: %[[QT:.*]] = kiln.trans %[[BLOCK]] {order = array<i32: 1, 0>} : tensor<32x128xf16> -> tensor<128x32xf16>
// CHECK: kiln.dot %{{.*}}, %[[QT]], %{{.*}} : tensor<64x128xf16> * tensor<128x32xf16>
// CHECK-NOT: kiln.trans
// CHECK: kiln.dot %{{.*}}, %[[BLOCK]], %{{.*}} : tensor<64x32xf16> * tensor<32x128xf16>
// CHECK: } else {
// CHECK: kiln.load
func.func @qt_two_dots(%Q: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                       %sq: i32 {kiln.divisibility = 16 : i32}, %n: i32,
                       %k: tensor<64x128xf16>, %c: !kiln.ptr<f32>) {
  %rd = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %rm = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %d2 = kiln.expand_dims %rd {axis = 1 : i32} : tensor<128xi32> -> tensor<128x1xi32>
  %m2 = kiln.expand_dims %rm {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %sqs = kiln.splat %sq : tensor<1x32xi32>
  %mo = arith.muli %m2, %sqs : tensor<1x32xi32>
  %db = kiln.broadcast %d2 : tensor<128x1xi32> -> tensor<128x32xi32>
  %mb = kiln.broadcast %mo : tensor<1x32xi32> -> tensor<128x32xi32>
  %o = arith.addi %db, %mb : tensor<128x32xi32>
  %qb = kiln.splat %Q : tensor<128x32x!kiln.ptr<f16>>
  %qptrs = kiln.addptr %qb, %o : tensor<128x32x!kiln.ptr<f16>>, tensor<128x32xi32>
  %zero = arith.constant 0.000000e+00 : f32
  %s0 = kiln.splat %zero : tensor<64x32xf32>
  %dk0 = kiln.splat %zero : tensor<64x128xf32>
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %step = arith.muli %sq, %c32 : i32
  %res:2 = scf.for %i = %c0 to %n step %c32 iter_args(%pq = %qptrs, %dk = %dk0)
      -> (tensor<128x32x!kiln.ptr<f16>>, tensor<64x128xf32>) : i32 {
    %qt = kiln.load %pq : tensor<128x32x!kiln.ptr<f16>>
    %st = kiln.dot %k, %qt, %s0 : tensor<64x128xf16> * tensor<128x32xf16> -> tensor<64x32xf32>
    %ds = arith.truncf %st : tensor<64x32xf32> to tensor<64x32xf16>
    %q = kiln.trans %qt {order = array<i32: 1, 0>} : tensor<128x32xf16> -> tensor<32x128xf16>
    %dk2 = kiln.dot %ds, %q, %dk : tensor<64x32xf16> * tensor<32x128xf16> -> tensor<64x128xf32>
    %inc = kiln.splat %step : tensor<128x32xi32>
    %pq2 = kiln.addptr %pq, %inc : tensor<128x32x!kiln.ptr<f16>>, tensor<128x32xi32>
    scf.yield %pq2, %dk2 : tensor<128x32x!kiln.ptr<f16>>, tensor<64x128xf32>
  }
  %cp = kiln.splat %c : tensor<64x128x!kiln.ptr<f32>>
  kiln.store %cp, %res#1 : tensor<64x128x!kiln.ptr<f32>>
  return
}

// -----

// K^T's pointers computed in the body from the induction variable (kiln_kernels' pointer
// forward: cols = start_n + arange, K + d[:, None] + cols[None, :] * sk) rather than carried
// and advanced: the row coordinate is the body's own start_n (plus the base's rows), the
// guard asks start_n's least value, lo, not to be negative, and the last row within int32.
// CHECK-LABEL: func.func @attention_kt_iv(
// CHECK-SAME: %{{.*}}: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 104, 2, 32, 64, -2147483648, -2147483648, 1>})
// CHECK: %[[LO:.*]] = arith.extsi %arg4 : i32 to i64
// CHECK: arith.cmpi sge, %[[LO]], %{{.*}} : i64
// CHECK: scf.if
// CHECK: %[[ROWS:.*]] = arith.trunci %{{.*}} : i64 to i32
// CHECK: scf.for %[[IV:.*]] = %arg4 to %arg5
// CHECK: %[[AT:.*]] = arith.addi %[[IV]], %[[ROWS]] : i32
// CHECK: kiln.descriptor_load %{{.*}}, %arg0[%[[AT]], %{{.*}}] {{.*}} -> tensor<32x64xf16>
// CHECK: } else {
// CHECK: kiln.load
func.func @attention_kt_iv(%K: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                           %sk: i32 {kiln.divisibility = 16 : i32}, %sz: i64, %z: i64,
                           %lo: i32, %n: i32, %q: tensor<128x64xf16>, %c: !kiln.ptr<f32>) {
  %off = arith.muli %z, %sz : i64
  %Kz = kiln.addptr %K, %off : !kiln.ptr<f16>, i64
  %rd = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %rn = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %d2 = kiln.expand_dims %rd {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %db = kiln.broadcast %d2 : tensor<64x1xi32> -> tensor<64x32xi32>
  %kb = kiln.splat %Kz : tensor<64x32x!kiln.ptr<f16>>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<128x32xf32>
  %c32 = arith.constant 32 : i32
  %res = scf.for %i = %lo to %n step %c32 iter_args(%acc = %acc0) -> (tensor<128x32xf32>) : i32 {
    %is = kiln.splat %i : tensor<32xi32>
    %cols = arith.addi %is, %rn : tensor<32xi32>
    %n2 = kiln.expand_dims %cols {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %sks = kiln.splat %sk : tensor<1x32xi32>
    %no = arith.muli %n2, %sks : tensor<1x32xi32>
    %nb = kiln.broadcast %no : tensor<1x32xi32> -> tensor<64x32xi32>
    %o = arith.addi %db, %nb : tensor<64x32xi32>
    %kptrs = kiln.addptr %kb, %o : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
    %ns = kiln.splat %n : tensor<32xi32>
    %ok = arith.cmpi slt, %cols, %ns : tensor<32xi32>
    %ok2 = kiln.expand_dims %ok {axis = 0 : i32} : tensor<32xi1> -> tensor<1x32xi1>
    %okb = kiln.broadcast %ok2 : tensor<1x32xi1> -> tensor<64x32xi1>
    %h0 = arith.constant 0.000000e+00 : f16
    %zk = kiln.splat %h0 : tensor<64x32xf16>
    %kt = kiln.load %kptrs : tensor<64x32x!kiln.ptr<f16>>
    %s = kiln.dot %q, %kt, %acc : tensor<128x64xf16> * tensor<64x32xf16> -> tensor<128x32xf32>
    scf.yield %s : tensor<128x32xf32>
  }
  %cp = kiln.splat %c : tensor<128x32x!kiln.ptr<f32>>
  kiln.store %cp, %res : tensor<128x32x!kiln.ptr<f32>>
  return
}

// -----

// The same with the keys masked (cols < n): a moved base's rows must be unmasked (the map's
// extent cannot bound one head's rows), so the loop is left as it is.
// CHECK-LABEL: func.func @attention_kt_iv_masked(
// CHECK-NOT: kiln.descriptor_load
// CHECK: return
func.func @attention_kt_iv_masked(%K: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                           %sk: i32 {kiln.divisibility = 16 : i32}, %sz: i64, %z: i64,
                           %lo: i32, %n: i32, %q: tensor<128x64xf16>, %c: !kiln.ptr<f32>) {
  %off = arith.muli %z, %sz : i64
  %Kz = kiln.addptr %K, %off : !kiln.ptr<f16>, i64
  %rd = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %rn = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %d2 = kiln.expand_dims %rd {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %db = kiln.broadcast %d2 : tensor<64x1xi32> -> tensor<64x32xi32>
  %kb = kiln.splat %Kz : tensor<64x32x!kiln.ptr<f16>>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<128x32xf32>
  %c32 = arith.constant 32 : i32
  %res = scf.for %i = %lo to %n step %c32 iter_args(%acc = %acc0) -> (tensor<128x32xf32>) : i32 {
    %is = kiln.splat %i : tensor<32xi32>
    %cols = arith.addi %is, %rn : tensor<32xi32>
    %n2 = kiln.expand_dims %cols {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %sks = kiln.splat %sk : tensor<1x32xi32>
    %no = arith.muli %n2, %sks : tensor<1x32xi32>
    %nb = kiln.broadcast %no : tensor<1x32xi32> -> tensor<64x32xi32>
    %o = arith.addi %db, %nb : tensor<64x32xi32>
    %kptrs = kiln.addptr %kb, %o : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
    %ns = kiln.splat %n : tensor<32xi32>
    %ok = arith.cmpi slt, %cols, %ns : tensor<32xi32>
    %ok2 = kiln.expand_dims %ok {axis = 0 : i32} : tensor<32xi1> -> tensor<1x32xi1>
    %okb = kiln.broadcast %ok2 : tensor<1x32xi1> -> tensor<64x32xi1>
    %h0 = arith.constant 0.000000e+00 : f16
    %zk = kiln.splat %h0 : tensor<64x32xf16>
    %kt = kiln.load %kptrs, %okb, %zk : tensor<64x32x!kiln.ptr<f16>>
    %s = kiln.dot %q, %kt, %acc : tensor<128x64xf16> * tensor<64x32xf16> -> tensor<128x32xf32>
    scf.yield %s : tensor<128x32xf32>
  }
  %cp = kiln.splat %c : tensor<128x32x!kiln.ptr<f32>>
  kiln.store %cp, %res : tensor<128x32x!kiln.ptr<f32>>
  return
}
