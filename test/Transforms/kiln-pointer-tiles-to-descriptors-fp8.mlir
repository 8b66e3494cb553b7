// RUN: kiln-opt %s -split-input-file -kiln-pointer-tiles-to-descriptors=attention-tiles=1 | FileCheck %s

// 8-bit tiles contiguous along the dot's K (fp8 here, int8 last): A [32, 64] (rows %sa apart, K contiguous) and a
// column-major B [64, 32] (K contiguous down its rows, columns %sb apart: the transpose of
// the descriptor block [32, 64]). Both become descriptor loads of maps with dtype code 'e'
// (101: e4m3, bytes to the TMA), the blocks K-major as wgmma reads 8-bit operands.
// CHECK-LABEL: func.func @fp8_k_major(
// CHECK-SAME: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 101, 2, 32, 64, -2147483648, -2147483648, 2>}, %{{.*}}: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 1, 101, 2, 32, 64, -2147483648, -2147483648, 3>})
// CHECK: scf.if
// CHECK: kiln.descriptor_load {{.*}} : <f8E4M3FN> -> tensor<32x64xf8E4M3FN>
// CHECK: %[[BT:.*]] = kiln.descriptor_load {{.*}} : <f8E4M3FN> -> tensor<32x64xf8E4M3FN>
// CHECK: kiln.trans %[[BT]] {order = array<i32: 1, 0>} : tensor<32x64xf8E4M3FN> -> tensor<64x32xf8E4M3FN>
// CHECK: kiln.dot
func.func @fp8_k_major(%a: !kiln.ptr<f8E4M3FN> {kiln.divisibility = 16 : i32},
                       %b: !kiln.ptr<f8E4M3FN> {kiln.divisibility = 16 : i32},
                       %sa: i32 {kiln.divisibility = 16 : i32},
                       %sb: i32 {kiln.divisibility = 16 : i32}, %k: i32, %c: !kiln.ptr<f32>) {
  %rm = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %rk = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  // a_ptrs = a + rm[:, None] * sa + rk[None, :]
  %m2 = kiln.expand_dims %rm {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %sas = kiln.splat %sa : tensor<32x1xi32>
  %mo = arith.muli %m2, %sas : tensor<32x1xi32>
  %k2 = kiln.expand_dims %rk {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  %mob = kiln.broadcast %mo : tensor<32x1xi32> -> tensor<32x64xi32>
  %kob = kiln.broadcast %k2 : tensor<1x64xi32> -> tensor<32x64xi32>
  %aoff = arith.addi %mob, %kob : tensor<32x64xi32>
  %ab = kiln.splat %a : tensor<32x64x!kiln.ptr<f8E4M3FN>>
  %aptrs = kiln.addptr %ab, %aoff : tensor<32x64x!kiln.ptr<f8E4M3FN>>, tensor<32x64xi32>
  // b_ptrs = b + rk[:, None] + rn[None, :] * sb
  %kc = kiln.expand_dims %rk {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %n2 = kiln.expand_dims %rm {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %sbs = kiln.splat %sb : tensor<1x32xi32>
  %no = arith.muli %n2, %sbs : tensor<1x32xi32>
  %kcb = kiln.broadcast %kc : tensor<64x1xi32> -> tensor<64x32xi32>
  %nob = kiln.broadcast %no : tensor<1x32xi32> -> tensor<64x32xi32>
  %boff = arith.addi %kcb, %nob : tensor<64x32xi32>
  %bb = kiln.splat %b : tensor<64x32x!kiln.ptr<f8E4M3FN>>
  %bptrs = kiln.addptr %bb, %boff : tensor<64x32x!kiln.ptr<f8E4M3FN>>, tensor<64x32xi32>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<32x32xf32>
  %c0 = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %res:3 = scf.for %i = %c0 to %k step %one iter_args(%pa = %aptrs, %acc = %acc0, %pb = %bptrs)
      -> (tensor<32x64x!kiln.ptr<f8E4M3FN>>, tensor<32x32xf32>, tensor<64x32x!kiln.ptr<f8E4M3FN>>) : i32 {
    %x = kiln.load %pa : tensor<32x64x!kiln.ptr<f8E4M3FN>>
    %y = kiln.load %pb : tensor<64x32x!kiln.ptr<f8E4M3FN>>
    %d = kiln.dot %x, %y, %acc : tensor<32x64xf8E4M3FN> * tensor<64x32xf8E4M3FN> -> tensor<32x32xf32>
    %sa2 = kiln.splat %c64 : tensor<32x64xi32>
    %pa2 = kiln.addptr %pa, %sa2 : tensor<32x64x!kiln.ptr<f8E4M3FN>>, tensor<32x64xi32>
    %sb2 = kiln.splat %c64 : tensor<64x32xi32>
    %pb2 = kiln.addptr %pb, %sb2 : tensor<64x32x!kiln.ptr<f8E4M3FN>>, tensor<64x32xi32>
    scf.yield %pa2, %d, %pb2 : tensor<32x64x!kiln.ptr<f8E4M3FN>>, tensor<32x32xf32>, tensor<64x32x!kiln.ptr<f8E4M3FN>>
  }
  %cp = kiln.splat %c : tensor<32x32x!kiln.ptr<f32>>
  kiln.store %cp, %res#1 : tensor<32x32x!kiln.ptr<f32>>
  return
}

// -----

// A row-major fp8 B (N contiguous) would sit in its ring N-major, which 8-bit wgmma cannot
// read and the TMA cannot transpose: B stays a pointer load, and so does A (a loop's operands
// go all by the TMA or all by cp.async).
// CHECK-LABEL: func.func @fp8_n_major_b(
// CHECK-NOT: tensormap
// CHECK-NOT: kiln.descriptor_load
// CHECK: kiln.load
// CHECK: kiln.load
func.func @fp8_n_major_b(%a: !kiln.ptr<f8E4M3FN> {kiln.divisibility = 16 : i32},
                         %b: !kiln.ptr<f8E4M3FN> {kiln.divisibility = 16 : i32},
                         %sa: i32 {kiln.divisibility = 16 : i32},
                         %sb: i32 {kiln.divisibility = 16 : i32}, %k: i32, %c: !kiln.ptr<f32>) {
  %rm = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %rk = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %m2 = kiln.expand_dims %rm {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %sas = kiln.splat %sa : tensor<32x1xi32>
  %mo = arith.muli %m2, %sas : tensor<32x1xi32>
  %k2 = kiln.expand_dims %rk {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  %mob = kiln.broadcast %mo : tensor<32x1xi32> -> tensor<32x64xi32>
  %kob = kiln.broadcast %k2 : tensor<1x64xi32> -> tensor<32x64xi32>
  %aoff = arith.addi %mob, %kob : tensor<32x64xi32>
  %ab = kiln.splat %a : tensor<32x64x!kiln.ptr<f8E4M3FN>>
  %aptrs = kiln.addptr %ab, %aoff : tensor<32x64x!kiln.ptr<f8E4M3FN>>, tensor<32x64xi32>
  // b_ptrs = b + rk[:, None] * sb + rn[None, :]
  %kc = kiln.expand_dims %rk {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %sbs = kiln.splat %sb : tensor<64x1xi32>
  %ko = arith.muli %kc, %sbs : tensor<64x1xi32>
  %n2 = kiln.expand_dims %rm {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %kob2 = kiln.broadcast %ko : tensor<64x1xi32> -> tensor<64x32xi32>
  %nb = kiln.broadcast %n2 : tensor<1x32xi32> -> tensor<64x32xi32>
  %boff = arith.addi %kob2, %nb : tensor<64x32xi32>
  %bb = kiln.splat %b : tensor<64x32x!kiln.ptr<f8E4M3FN>>
  %bptrs = kiln.addptr %bb, %boff : tensor<64x32x!kiln.ptr<f8E4M3FN>>, tensor<64x32xi32>
  %zero = arith.constant 0.000000e+00 : f32
  %acc0 = kiln.splat %zero : tensor<32x32xf32>
  %c0 = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %step = arith.muli %sb, %c64 : i32
  %res:3 = scf.for %i = %c0 to %k step %one iter_args(%pa = %aptrs, %acc = %acc0, %pb = %bptrs)
      -> (tensor<32x64x!kiln.ptr<f8E4M3FN>>, tensor<32x32xf32>, tensor<64x32x!kiln.ptr<f8E4M3FN>>) : i32 {
    %x = kiln.load %pa : tensor<32x64x!kiln.ptr<f8E4M3FN>>
    %y = kiln.load %pb : tensor<64x32x!kiln.ptr<f8E4M3FN>>
    %d = kiln.dot %x, %y, %acc : tensor<32x64xf8E4M3FN> * tensor<64x32xf8E4M3FN> -> tensor<32x32xf32>
    %sa2 = kiln.splat %c64 : tensor<32x64xi32>
    %pa2 = kiln.addptr %pa, %sa2 : tensor<32x64x!kiln.ptr<f8E4M3FN>>, tensor<32x64xi32>
    %sb2 = kiln.splat %step : tensor<64x32xi32>
    %pb2 = kiln.addptr %pb, %sb2 : tensor<64x32x!kiln.ptr<f8E4M3FN>>, tensor<64x32xi32>
    scf.yield %pa2, %d, %pb2 : tensor<32x64x!kiln.ptr<f8E4M3FN>>, tensor<32x32xf32>, tensor<64x32x!kiln.ptr<f8E4M3FN>>
  }
  %cp = kiln.splat %c : tensor<32x32x!kiln.ptr<f32>>
  kiln.store %cp, %res#1 : tensor<32x32x!kiln.ptr<f32>>
  return
}

// -----

// int8 the same way: dtype code 'c' (99, bytes to the TMA).
// CHECK-LABEL: func.func @i8_k_major(
// CHECK-SAME: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 99, 2, 32, 64, -2147483648, -2147483648, 2>}, %{{.*}}: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 1, 99, 2, 32, 64, -2147483648, -2147483648, 3>})
// CHECK: kiln.descriptor_load {{.*}} : <i8> -> tensor<32x64xi8>
// CHECK: %[[BT:.*]] = kiln.descriptor_load {{.*}} : <i8> -> tensor<32x64xi8>
// CHECK: kiln.trans %[[BT]] {order = array<i32: 1, 0>} : tensor<32x64xi8> -> tensor<64x32xi8>
// CHECK: kiln.dot
func.func @i8_k_major(%a: !kiln.ptr<i8> {kiln.divisibility = 16 : i32},
                       %b: !kiln.ptr<i8> {kiln.divisibility = 16 : i32},
                       %sa: i32 {kiln.divisibility = 16 : i32},
                       %sb: i32 {kiln.divisibility = 16 : i32}, %k: i32, %c: !kiln.ptr<i32>) {
  %rm = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %rk = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  // a_ptrs = a + rm[:, None] * sa + rk[None, :]
  %m2 = kiln.expand_dims %rm {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %sas = kiln.splat %sa : tensor<32x1xi32>
  %mo = arith.muli %m2, %sas : tensor<32x1xi32>
  %k2 = kiln.expand_dims %rk {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  %mob = kiln.broadcast %mo : tensor<32x1xi32> -> tensor<32x64xi32>
  %kob = kiln.broadcast %k2 : tensor<1x64xi32> -> tensor<32x64xi32>
  %aoff = arith.addi %mob, %kob : tensor<32x64xi32>
  %ab = kiln.splat %a : tensor<32x64x!kiln.ptr<i8>>
  %aptrs = kiln.addptr %ab, %aoff : tensor<32x64x!kiln.ptr<i8>>, tensor<32x64xi32>
  // b_ptrs = b + rk[:, None] + rn[None, :] * sb
  %kc = kiln.expand_dims %rk {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  %n2 = kiln.expand_dims %rm {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  %sbs = kiln.splat %sb : tensor<1x32xi32>
  %no = arith.muli %n2, %sbs : tensor<1x32xi32>
  %kcb = kiln.broadcast %kc : tensor<64x1xi32> -> tensor<64x32xi32>
  %nob = kiln.broadcast %no : tensor<1x32xi32> -> tensor<64x32xi32>
  %boff = arith.addi %kcb, %nob : tensor<64x32xi32>
  %bb = kiln.splat %b : tensor<64x32x!kiln.ptr<i8>>
  %bptrs = kiln.addptr %bb, %boff : tensor<64x32x!kiln.ptr<i8>>, tensor<64x32xi32>
  %zero = arith.constant 0 : i32
  %acc0 = kiln.splat %zero : tensor<32x32xi32>
  %c0 = arith.constant 0 : i32
  %one = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %res:3 = scf.for %i = %c0 to %k step %one iter_args(%pa = %aptrs, %acc = %acc0, %pb = %bptrs)
      -> (tensor<32x64x!kiln.ptr<i8>>, tensor<32x32xi32>, tensor<64x32x!kiln.ptr<i8>>) : i32 {
    %x = kiln.load %pa : tensor<32x64x!kiln.ptr<i8>>
    %y = kiln.load %pb : tensor<64x32x!kiln.ptr<i8>>
    %d = kiln.dot %x, %y, %acc : tensor<32x64xi8> * tensor<64x32xi8> -> tensor<32x32xi32>
    %sa2 = kiln.splat %c64 : tensor<32x64xi32>
    %pa2 = kiln.addptr %pa, %sa2 : tensor<32x64x!kiln.ptr<i8>>, tensor<32x64xi32>
    %sb2 = kiln.splat %c64 : tensor<64x32xi32>
    %pb2 = kiln.addptr %pb, %sb2 : tensor<64x32x!kiln.ptr<i8>>, tensor<64x32xi32>
    scf.yield %pa2, %d, %pb2 : tensor<32x64x!kiln.ptr<i8>>, tensor<32x32xi32>, tensor<64x32x!kiln.ptr<i8>>
  }
  %cp = kiln.splat %c : tensor<32x32x!kiln.ptr<i32>>
  kiln.store %cp, %res#1 : tensor<32x32x!kiln.ptr<i32>>
  return
}
