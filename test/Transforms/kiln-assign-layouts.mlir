// RUN: kiln-opt %s -kiln-assign-layouts -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-assign-layouts=num-warps=8 -split-input-file | FileCheck %s --check-prefix=W8
// RUN: kiln-opt %s -kiln-assign-layouts="num-warps=8 wgmma=true" -split-input-file | FileCheck %s --check-prefix=WG

// 1-D, pointers and n divisible by 16: 4 f32 (128 bits) per thread, 32 lanes, 4 warps.
// CHECK-DAG: #[[B1:.*]] = #kiln_gpu.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
// CHECK-LABEL: func.func @aligned_1d
// CHECK: kiln.make_range {{.*}} : tensor<1024xi32, #[[B1]]>
// CHECK: kiln.load {{.*}} : tensor<1024x!kiln.ptr<f32>, #[[B1]]>
// W8: sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [8]
// W8: module attributes {kiln_gpu.num_warps = 8 : i32}
func.func @aligned_1d(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %n: i32 {kiln.divisibility = 16 : i32}) {
  %r = kiln.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
  %nv = kiln.splat %n : tensor<1024xi32>
  %m = arith.cmpi slt, %r, %nv : tensor<1024xi32>
  %p = kiln.splat %x : tensor<1024x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
  %v = kiln.load %ps, %m : tensor<1024x!kiln.ptr<f32>>
  kiln.store %ps, %v, %m : tensor<1024x!kiln.ptr<f32>>
  return
}

// -----

// Unknown alignment: one element per thread. (Each split's layout aliases print before its
// function, so their checks precede its label.)
// CHECK: #blocked = #kiln_gpu.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
// CHECK-LABEL: func.func @unaligned_1d
func.func @unaligned_1d(%x: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 256 : i32, start = 0 : i32} : tensor<256xi32>
  %p = kiln.splat %x : tensor<256x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<256x!kiln.ptr<f32>>, tensor<256xi32>
  %v = kiln.load %ps : tensor<256x!kiln.ptr<f32>>
  kiln.store %ps, %v : tensor<256x!kiln.ptr<f32>>
  return
}

// -----

// fp16: 8 elements make 128 bits.
// CHECK: #blocked = #kiln_gpu.blocked<{sizePerThread = [8], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
// CHECK-LABEL: func.func @aligned_f16
func.func @aligned_f16(%x: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}) {
  %r = kiln.make_range {end = 4096 : i32, start = 0 : i32} : tensor<4096xi32>
  %p = kiln.splat %x : tensor<4096x!kiln.ptr<f16>>
  %ps = kiln.addptr %p, %r : tensor<4096x!kiln.ptr<f16>>, tensor<4096xi32>
  %v = kiln.load %ps : tensor<4096x!kiln.ptr<f16>>
  kiln.store %ps, %v : tensor<4096x!kiln.ptr<f16>>
  return
}

// -----

// 2-D row-major tile: contiguous along dim 1, lanes spread along it, warps along dim 0;
// the 1-D ranges become slices of the 2-D layout.
// CHECK-DAG: #[[B2:.*]] = #kiln_gpu.blocked<{sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}>
// CHECK-DAG: #[[S1:.*]] = #kiln_gpu.slice<{dim = 1, parent = #[[B2]]}>
// CHECK-DAG: #[[S0:.*]] = #kiln_gpu.slice<{dim = 0, parent = #[[B2]]}>
// CHECK-LABEL: func.func @tile_2d
// CHECK: kiln.expand_dims {{.*}} : tensor<32xi32, #[[S1]]> -> tensor<32x1xi32, #[[B2]]>
// CHECK: kiln.expand_dims {{.*}} : tensor<64xi32, #[[S0]]> -> tensor<1x64xi32, #[[B2]]>
func.func @tile_2d(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %s: i32 {kiln.divisibility = 16 : i32}) {
  %a = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  %b = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %a2 = kiln.expand_dims %a {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
  %b2 = kiln.expand_dims %b {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  %sv = kiln.splat %s : tensor<32x1xi32>
  %ro = arith.muli %a2, %sv : tensor<32x1xi32>
  %rob = kiln.broadcast %ro : tensor<32x1xi32> -> tensor<32x64xi32>
  %cob = kiln.broadcast %b2 : tensor<1x64xi32> -> tensor<32x64xi32>
  %off = arith.addi %rob, %cob : tensor<32x64xi32>
  %p = kiln.splat %x : tensor<32x64x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %off : tensor<32x64x!kiln.ptr<f32>>, tensor<32x64xi32>
  %v = kiln.load %ps : tensor<32x64x!kiln.ptr<f32>>
  kiln.store %ps, %v : tensor<32x64x!kiln.ptr<f32>>
  return
}

// -----

// One range used as both x[:, None] and x[None, :]: each use gets its own copy of the
// range, so no layout conversion is needed.
// CHECK-LABEL: func.func @range_used_twice
// CHECK-COUNT-2: kiln.make_range
func.func @range_used_twice(%x: !kiln.ptr<f32>) {
  %a = kiln.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
  %r = kiln.expand_dims %a {axis = 1 : i32} : tensor<16xi32> -> tensor<16x1xi32>
  %c = kiln.expand_dims %a {axis = 0 : i32} : tensor<16xi32> -> tensor<1x16xi32>
  %rb = kiln.broadcast %r : tensor<16x1xi32> -> tensor<16x16xi32>
  %cb = kiln.broadcast %c : tensor<1x16xi32> -> tensor<16x16xi32>
  %off = arith.addi %rb, %cb : tensor<16x16xi32>
  %p = kiln.splat %x : tensor<16x16x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %off : tensor<16x16x!kiln.ptr<f32>>, tensor<16x16xi32>
  %v = kiln.load %ps : tensor<16x16x!kiln.ptr<f32>>
  kiln.store %ps, %v : tensor<16x16x!kiln.ptr<f32>>
  return
}

// -----

// Loop-carried tiles share the layout of their init and yield.
// CHECK-LABEL: func.func @loop_carried
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}) -> (tensor<128xf32, #blocked
func.func @loop_carried(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %n: i32) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %p = kiln.splat %x : tensor<128x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %zero = arith.constant dense<0.0> : tensor<128xf32>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %acc = scf.for %i = %c0 to %n step %c1 iter_args(%a = %zero) -> (tensor<128xf32>) : i32 {
    %v = kiln.load %ps : tensor<128x!kiln.ptr<f32>>
    %s = arith.addf %a, %v : tensor<128xf32>
    scf.yield %s : tensor<128xf32>
  }
  kiln.store %ps, %acc : tensor<128x!kiln.ptr<f32>>
  return
}

// -----

// On warpgroup tensor cores (wgmma) the accumulator takes the wgmma accumulator layout and its
// row reduction the slice of it; the store's pointers follow the accumulator.
// WG-DAG: #[[ACC:blocked[0-9]*]] = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [8, 1], order = [1, 0], wgmma = true}>
// WG-DAG: #[[ROW:slice[0-9]*]] = #kiln_gpu.slice<{dim = 1, parent = #[[ACC]]}>
// WG-LABEL: func.func @wgmma_accumulator
// WG: kiln.dot {{.*}} -> tensor<128x128xf32, #[[ACC]]>
// WG: } : (tensor<128x128xf32, #[[ACC]]>) -> tensor<128xf32, #[[ROW]]>
// WG: kiln.store {{.*}} : tensor<128x128x!kiln.ptr<f32>, #[[ACC]]>
func.func @wgmma_accumulator(%pa: !kiln.ptr<f16>, %pb: !kiln.ptr<f16>, %pc: !kiln.ptr<f32>,
                             %pm: !kiln.ptr<f32>) {
  %ra = kiln.splat %pa : tensor<128x64x!kiln.ptr<f16>>
  %rb = kiln.splat %pb : tensor<64x128x!kiln.ptr<f16>>
  %a = kiln.load %ra : tensor<128x64x!kiln.ptr<f16>>
  %b = kiln.load %rb : tensor<64x128x!kiln.ptr<f16>>
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %d = kiln.dot %a, %b, %zero : tensor<128x64xf16> * tensor<64x128xf16> -> tensor<128x128xf32>
  %m = kiln.reduce(%d) axis = 1 {
  ^bb0(%x: f32, %y: f32):
    %s = arith.maximumf %x, %y : f32
    kiln.reduce.return %s : f32
  } : (tensor<128x128xf32>) -> tensor<128xf32>
  %p = kiln.splat %pc : tensor<128x128x!kiln.ptr<f32>>
  %q = kiln.splat %pm : tensor<128x!kiln.ptr<f32>>
  kiln.store %p, %d : tensor<128x128x!kiln.ptr<f32>>
  kiln.store %q, %m : tensor<128x!kiln.ptr<f32>>
  return
}

// -----

// A wgmma accumulator stored through pointers contiguous along the columns but not proven
// aligned (a row stride of unknown divisibility): the fragment layout would write one element
// at a time, 8 rows of a warp at once, so the store goes through a convert_layout to a blocked
// layout of its own, a warp writing 32 consecutive elements of a row, warps along the rows.
// With the pointer and the stride divisible by 16 the fragment layout would write pairs (4
// bytes); the store converts all the same, to 16 bytes a thread and 128 bytes a warp's row
// (8 lanes: the conversion then moves bands of 64 columns), as the conversion's 18 KiB of
// scratch fit beside the rings without costing a block per SM. With rings that leave no room
// for it (7 slots of 32 KiB), the store keeps the fragment layout.
// WG-DAG: #[[ACC:blocked[0-9]*]] = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [8, 1], order = [1, 0], wgmma = true}>
// WG-DAG: #[[ROWS:blocked[0-9]*]] = #kiln_gpu.blocked<{sizePerThread = [1, 1], threadsPerWarp = [1, 32], warpsPerCTA = [8, 1], order = [1, 0]}>
// WG-DAG: #[[LINES:blocked[0-9]*]] = #kiln_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [8, 1], order = [1, 0]}>
// WG-LABEL: func.func @unaligned_accumulator_store
// WG: kiln.dot {{.*}} -> tensor<128x256xf32, #[[ACC]]>
// WG: arith.truncf {{.*}} : tensor<128x256xf32, #[[ACC]]> to tensor<128x256xf16, #[[ACC]]>
// WG: kiln_gpu.convert_layout {{.*}} : tensor<128x256xf16, #[[ACC]]> -> tensor<128x256xf16, #[[ROWS]]>
// WG: kiln.store {{.*}} : tensor<128x256x!kiln.ptr<f16>, #[[ROWS]]>
// WG-LABEL: func.func @aligned_accumulator_store
// WG: kiln_gpu.convert_layout {{.*}} : tensor<128x256xf16, #[[ACC]]> -> tensor<128x256xf16, #[[LINES]]>
// WG: kiln.store {{.*}} : tensor<128x256x!kiln.ptr<f16>, #[[LINES]]>
// WG-LABEL: func.func @aligned_accumulator_store_full_shared
// WG-NOT: kiln_gpu.convert_layout
// WG: kiln.store {{.*}} : tensor<128x256x!kiln.ptr<f16>, #[[ACC]]>
func.func @unaligned_accumulator_store(%pa: !kiln.ptr<f16>, %pb: !kiln.ptr<f16>,
                                       %pc: !kiln.ptr<f16>, %ldc: i32) {
  %ra = kiln.splat %pa : tensor<128x64x!kiln.ptr<f16>>
  %rb = kiln.splat %pb : tensor<64x256x!kiln.ptr<f16>>
  %a = kiln.load %ra : tensor<128x64x!kiln.ptr<f16>>
  %b = kiln.load %rb : tensor<64x256x!kiln.ptr<f16>>
  %zero = arith.constant dense<0.0> : tensor<128x256xf32>
  %d = kiln.dot %a, %b, %zero : tensor<128x64xf16> * tensor<64x256xf16> -> tensor<128x256xf32>
  %h = arith.truncf %d : tensor<128x256xf32> to tensor<128x256xf16>
  %rm = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %rn = kiln.make_range {end = 256 : i32, start = 0 : i32} : tensor<256xi32>
  %em = kiln.expand_dims %rm {axis = 1 : i32} : tensor<128xi32> -> tensor<128x1xi32>
  %ldcs = kiln.splat %ldc : tensor<128x1xi32>
  %om = arith.muli %em, %ldcs : tensor<128x1xi32>
  %omb = kiln.broadcast %om : tensor<128x1xi32> -> tensor<128x256xi32>
  %en = kiln.expand_dims %rn {axis = 0 : i32} : tensor<256xi32> -> tensor<1x256xi32>
  %onb = kiln.broadcast %en : tensor<1x256xi32> -> tensor<128x256xi32>
  %off = arith.addi %omb, %onb : tensor<128x256xi32>
  %p = kiln.splat %pc : tensor<128x256x!kiln.ptr<f16>>
  %ps = kiln.addptr %p, %off : tensor<128x256x!kiln.ptr<f16>>, tensor<128x256xi32>
  kiln.store %ps, %h : tensor<128x256x!kiln.ptr<f16>>
  return
}
func.func @aligned_accumulator_store(%pa: !kiln.ptr<f16>, %pb: !kiln.ptr<f16>,
                                     %pc: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                                     %ldc: i32 {kiln.divisibility = 16 : i32}) {
  %ra = kiln.splat %pa : tensor<128x64x!kiln.ptr<f16>>
  %rb = kiln.splat %pb : tensor<64x256x!kiln.ptr<f16>>
  %a = kiln.load %ra : tensor<128x64x!kiln.ptr<f16>>
  %b = kiln.load %rb : tensor<64x256x!kiln.ptr<f16>>
  %zero = arith.constant dense<0.0> : tensor<128x256xf32>
  %d = kiln.dot %a, %b, %zero : tensor<128x64xf16> * tensor<64x256xf16> -> tensor<128x256xf32>
  %h = arith.truncf %d : tensor<128x256xf32> to tensor<128x256xf16>
  %rm = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %rn = kiln.make_range {end = 256 : i32, start = 0 : i32} : tensor<256xi32>
  %em = kiln.expand_dims %rm {axis = 1 : i32} : tensor<128xi32> -> tensor<128x1xi32>
  %ldcs = kiln.splat %ldc : tensor<128x1xi32>
  %om = arith.muli %em, %ldcs : tensor<128x1xi32>
  %omb = kiln.broadcast %om : tensor<128x1xi32> -> tensor<128x256xi32>
  %en = kiln.expand_dims %rn {axis = 0 : i32} : tensor<256xi32> -> tensor<1x256xi32>
  %onb = kiln.broadcast %en : tensor<1x256xi32> -> tensor<128x256xi32>
  %off = arith.addi %omb, %onb : tensor<128x256xi32>
  %p = kiln.splat %pc : tensor<128x256x!kiln.ptr<f16>>
  %ps = kiln.addptr %p, %off : tensor<128x256x!kiln.ptr<f16>>, tensor<128x256xi32>
  kiln.store %ps, %h : tensor<128x256x!kiln.ptr<f16>>
  return
}
func.func @aligned_accumulator_store_full_shared(%pa: !kiln.ptr<f16>, %pb: !kiln.ptr<f16>,
                                     %pc: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                                     %ldc: i32 {kiln.divisibility = 16 : i32}) {
  %ring = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[7, 128, 128], f16>
  %ra = kiln.splat %pa : tensor<128x64x!kiln.ptr<f16>>
  %rb = kiln.splat %pb : tensor<64x256x!kiln.ptr<f16>>
  %a = kiln.load %ra : tensor<128x64x!kiln.ptr<f16>>
  %b = kiln.load %rb : tensor<64x256x!kiln.ptr<f16>>
  %zero = arith.constant dense<0.0> : tensor<128x256xf32>
  %d = kiln.dot %a, %b, %zero : tensor<128x64xf16> * tensor<64x256xf16> -> tensor<128x256xf32>
  %h = arith.truncf %d : tensor<128x256xf32> to tensor<128x256xf16>
  %rm = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %rn = kiln.make_range {end = 256 : i32, start = 0 : i32} : tensor<256xi32>
  %em = kiln.expand_dims %rm {axis = 1 : i32} : tensor<128xi32> -> tensor<128x1xi32>
  %ldcs = kiln.splat %ldc : tensor<128x1xi32>
  %om = arith.muli %em, %ldcs : tensor<128x1xi32>
  %omb = kiln.broadcast %om : tensor<128x1xi32> -> tensor<128x256xi32>
  %en = kiln.expand_dims %rn {axis = 0 : i32} : tensor<256xi32> -> tensor<1x256xi32>
  %onb = kiln.broadcast %en : tensor<1x256xi32> -> tensor<128x256xi32>
  %off = arith.addi %omb, %onb : tensor<128x256xi32>
  %p = kiln.splat %pc : tensor<128x256x!kiln.ptr<f16>>
  %ps = kiln.addptr %p, %off : tensor<128x256x!kiln.ptr<f16>>, tensor<128x256xi32>
  kiln.store %ps, %h : tensor<128x256x!kiln.ptr<f16>>
  return
}
