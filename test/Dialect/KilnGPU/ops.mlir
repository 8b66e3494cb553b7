// RUN: kiln-opt %s | kiln-opt | FileCheck %s
// RUN: kiln-opt %s --mlir-print-op-generic | kiln-opt | FileCheck %s

// Round trip of the kiln_gpu layouts (as tensor encodings, printed through their aliases)
// and of kiln_gpu.convert_layout.

// CHECK-DAG: #[[B1:.*]] = #kiln_gpu.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
// CHECK-DAG: #[[B2:.*]] = #kiln_gpu.blocked<{sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}>
// CHECK-DAG: #[[B3:.*]] = #kiln_gpu.blocked<{sizePerThread = [2, 1, 1], threadsPerWarp = [1, 4, 8], warpsPerCTA = [2, 2, 8], order = [0, 2, 1]}>
// CHECK-DAG: #[[S1:.*]] = #kiln_gpu.slice<{dim = 1, parent = #[[B2]]}>
// CHECK-DAG: #[[S0:.*]] = #kiln_gpu.slice<{dim = 0, parent = #[[B2]]}>
// CHECK-DAG: #[[S3:.*]] = #kiln_gpu.slice<{dim = 2, parent = #[[B3]]}>
// CHECK-DAG: #[[SS:.*]] = #kiln_gpu.slice<{dim = 0, parent = #[[S3]]}>
// CHECK-DAG: #[[WG:.*]] = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [8, 1], order = [1, 0], wgmma = true}>
// CHECK-DAG: #[[WS:.*]] = #kiln_gpu.slice<{dim = 1, parent = #[[WG]]}>
#b1 = #kiln_gpu.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#b2 = #kiln_gpu.blocked<{sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}>
#b3 = #kiln_gpu.blocked<{sizePerThread = [2, 1, 1], threadsPerWarp = [1, 4, 8], warpsPerCTA = [2, 2, 8], order = [0, 2, 1]}>
#s1 = #kiln_gpu.slice<{dim = 1, parent = #b2}>
#s0 = #kiln_gpu.slice<{dim = 0, parent = #b2}>
#s3 = #kiln_gpu.slice<{dim = 2, parent = #b3}>
#ss = #kiln_gpu.slice<{dim = 0, parent = #s3}>
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [8, 1], order = [1, 0], wgmma = true}>
#ws = #kiln_gpu.slice<{dim = 1, parent = #wg}>

// CHECK-LABEL: func.func @encodings
// CHECK-SAME: tensor<512xf32, #[[B1]]>
// CHECK-SAME: tensor<8x64x!kiln.ptr<f16>, #[[B2]]>
// CHECK-SAME: tensor<8xi32, #[[S1]]>
// CHECK-SAME: tensor<64xi1, #[[S0]]>
// CHECK-SAME: tensor<4x16xf16, #[[S3]]>
// CHECK-SAME: tensor<16xbf16, #[[SS]]>
// CHECK-SAME: tensor<128x256xf32, #[[WG]]>
// CHECK-SAME: tensor<128xf32, #[[WS]]>
func.func @encodings(%a: tensor<512xf32, #b1>, %b: tensor<8x64x!kiln.ptr<f16>, #b2>,
                     %c: tensor<8xi32, #s1>, %d: tensor<64xi1, #s0>,
                     %e: tensor<4x16xf16, #s3>, %f: tensor<16xbf16, #ss>,
                     %g: tensor<128x256xf32, #wg>, %h: tensor<128xf32, #ws>) {
  return
}

// Layouts stay on the values kiln ops produce.
// CHECK-LABEL: func.func @kiln_ops_with_layouts
// CHECK: kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32, #[[S0]]>
// CHECK: kiln.expand_dims %{{.*}} {axis = 0 : i32} : tensor<64xi32, #[[S0]]> -> tensor<1x64xi32, #[[B2]]>
// CHECK: kiln.broadcast %{{.*}} : tensor<1x64xi32, #[[B2]]> -> tensor<8x64xi32, #[[B2]]>
// CHECK: kiln.addptr %{{.*}}, %{{.*}} : tensor<8x64x!kiln.ptr<f16>, #[[B2]]>, tensor<8x64xi32, #[[B2]]>
// CHECK: kiln.load %{{.*}} : tensor<8x64x!kiln.ptr<f16>, #[[B2]]>
func.func @kiln_ops_with_layouts(%p: tensor<8x64x!kiln.ptr<f16>, #b2>) -> tensor<8x64xf16, #b2> {
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32, #s0>
  %e = kiln.expand_dims %r {axis = 0 : i32} : tensor<64xi32, #s0> -> tensor<1x64xi32, #b2>
  %o = kiln.broadcast %e : tensor<1x64xi32, #b2> -> tensor<8x64xi32, #b2>
  %q = kiln.addptr %p, %o : tensor<8x64x!kiln.ptr<f16>, #b2>, tensor<8x64xi32, #b2>
  %v = kiln.load %q : tensor<8x64x!kiln.ptr<f16>, #b2>
  return %v : tensor<8x64xf16, #b2>
}

// CHECK-LABEL: func.func @convert_layout
// CHECK-SAME: (%[[X:.*]]: tensor<64xf32, #[[S1]]>, %[[Y:.*]]: tensor<8x64xf16, #[[B2]]>)
// CHECK: kiln_gpu.convert_layout %[[X]] : tensor<64xf32, #[[S1]]> -> tensor<64xf32, #[[B1]]>
// CHECK: kiln_gpu.convert_layout %[[Y]] : tensor<8x64xf16, #[[B2]]> -> tensor<8x64xf16>
// CHECK: kiln_gpu.convert_layout %{{.*}} : tensor<8x64xf16> -> tensor<8x64xf16, #[[B2]]>
func.func @convert_layout(%x: tensor<64xf32, #s1>, %y: tensor<8x64xf16, #b2>)
    -> (tensor<64xf32, #b1>, tensor<8x64xf16, #b2>) {
  %0 = kiln_gpu.convert_layout %x : tensor<64xf32, #s1> -> tensor<64xf32, #b1>
  %1 = kiln_gpu.convert_layout %y : tensor<8x64xf16, #b2> -> tensor<8x64xf16>
  %2 = kiln_gpu.convert_layout %1 : tensor<8x64xf16> -> tensor<8x64xf16, #b2>
  return %0, %2 : tensor<64xf32, #b1>, tensor<8x64xf16, #b2>
}

// The module attributes the pipeline sets.
// CHECK: module attributes {kiln_gpu.num_warps = 8 : i32, kiln_gpu.threads_per_warp = 32 : i32}
module attributes {kiln_gpu.num_warps = 8 : i32, kiln_gpu.threads_per_warp = 32 : i32} {
}

// The ops of shared rings; shared_dot takes A from a ring slot or from registers.
// CHECK-LABEL: func.func @rings
// CHECK: %[[A:.*]] = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : <[1, 64, 32], f16>
// CHECK: %[[B:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 32, 64], f16>
// CHECK: kiln_gpu.async_copy %[[B]][%{{.*}}], %{{.*}}, %{{.*}} : <[3, 32, 64], f16>, tensor<32x64x!kiln.ptr<f16>>, tensor<32x64xi1>
// CHECK: kiln_gpu.async_commit
// CHECK: kiln_gpu.async_wait {pending = 1 : i32}
// CHECK: %[[D:.*]] = kiln_gpu.shared_dot %[[A]][%{{.*}}], %[[B]][%{{.*}}], %{{.*}} {pending = 1 : i32} : !kiln_gpu.shared<[1, 64, 32], f16>, <[3, 32, 64], f16>, tensor<64x64xf32>
// CHECK: %[[W:.*]] = kiln_gpu.dot_wait %[[D]] : tensor<64x64xf32>
// CHECK: kiln_gpu.dot_wait %[[D]] {pending = 1 : i32} : tensor<64x64xf32>
// CHECK: kiln_gpu.shared_dot %{{.*}}, %[[B]][%{{.*}}], %[[W]] : tensor<64x32xf16>, <[3, 32, 64], f16>, tensor<64x64xf32>
// CHECK: kiln_gpu.shared_dot %[[A]][%{{.*}}], %[[B]][%{{.*}}], %{{.*}} accumulate %{{.*}} {pending = 1 : i32} : !kiln_gpu.shared<[1, 64, 32], f16>, <[3, 32, 64], f16>, tensor<64x64xf32>
// B read as the transpose of its slot (K 64 x N 32 from a 32 x 64 slot):
// CHECK: kiln_gpu.shared_dot %{{.*}}, %[[B]][%{{.*}}], %{{.*}} {b_transposed} : tensor<64x64xf16>, <[3, 32, 64], f16>, tensor<64x32xf32>
func.func @rings(%p: tensor<32x64x!kiln.ptr<f16>>, %m: tensor<32x64xi1>, %r: tensor<64x32xf16>,
                 %c: tensor<64x64xf32>, %first: i1) -> tensor<64x64xf32> {
  %a = kiln_gpu.local_alloc {operand = 0 : i32, k_major = true} : !kiln_gpu.shared<[1, 64, 32], f16>
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[3, 32, 64], f16>
  %s = arith.constant 0 : i32
  kiln_gpu.async_copy %b[%s], %p, %m : !kiln_gpu.shared<[3, 32, 64], f16>, tensor<32x64x!kiln.ptr<f16>>, tensor<32x64xi1>
  kiln_gpu.async_commit
  kiln_gpu.async_wait {pending = 1 : i32}
  %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c {pending = 1 : i32} : !kiln_gpu.shared<[1, 64, 32], f16>, !kiln_gpu.shared<[3, 32, 64], f16>, tensor<64x64xf32>
  %w = kiln_gpu.dot_wait %d : tensor<64x64xf32>
  %w1 = kiln_gpu.dot_wait %d {pending = 1 : i32} : tensor<64x64xf32>
  %e = kiln_gpu.shared_dot %r, %b[%s], %w : tensor<64x32xf16>, !kiln_gpu.shared<[3, 32, 64], f16>, tensor<64x64xf32>
  %f = kiln_gpu.shared_dot %a[%s], %b[%s], %e accumulate %first {pending = 1 : i32} : !kiln_gpu.shared<[1, 64, 32], f16>, !kiln_gpu.shared<[3, 32, 64], f16>, tensor<64x64xf32>
  %ds = arith.constant dense<1.0> : tensor<64x64xf16>
  %c2 = arith.constant dense<0.0> : tensor<64x32xf32>
  %g = kiln_gpu.shared_dot %ds, %b[%s], %c2 {b_transposed} : tensor<64x64xf16>, !kiln_gpu.shared<[3, 32, 64], f16>, tensor<64x32xf32>
  return %f : tensor<64x64xf32>
}

// The barriers of TMA rings: a transaction barrier per slot (one arrival), a barrier every
// warp arrives on when done with a slot, and the waits on both (all threads, or thread 0
// where a predicate holds).
// CHECK-LABEL: func.func @mbarriers
// CHECK: %[[FULL:.*]] = kiln_gpu.mbarrier_alloc : <4>
// CHECK: %[[EMPTY:.*]] = kiln_gpu.mbarrier_alloc {arrivals = 8 : i32} : <4>
// CHECK: kiln_gpu.mbarrier_expect %[[FULL]][%{{.*}}], %{{.*}} {bytes = 32768 : i32} : <4>
// CHECK: kiln_gpu.mbarrier_wait %[[FULL]][%{{.*}}], %{{.*}} : <4>
// CHECK: kiln_gpu.mbarrier_arrive %[[EMPTY]][%{{.*}}], %{{.*}} : <4>
// CHECK: kiln_gpu.mbarrier_wait %[[EMPTY]][%{{.*}}], %{{.*}} if %{{.*}} : <4>
func.func @mbarriers(%slot: i32, %phase: i32, %p: i1) {
  %full = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<4>
  %empty = kiln_gpu.mbarrier_alloc {arrivals = 8 : i32} : !kiln_gpu.mbarriers<4>
  kiln_gpu.mbarrier_expect %full[%slot], %p {bytes = 32768 : i32} : !kiln_gpu.mbarriers<4>
  kiln_gpu.mbarrier_wait %full[%slot], %phase : !kiln_gpu.mbarriers<4>
  kiln_gpu.mbarrier_arrive %empty[%slot], %p : !kiln_gpu.mbarriers<4>
  kiln_gpu.mbarrier_wait %empty[%slot], %phase if %p : !kiln_gpu.mbarriers<4>
  return
}

// The ops of a warp-specialized kernel: the warp's index, read once from lane 0, and the
// registers a warpgroup gives back or takes (setmaxnreg).
// CHECK-LABEL: func.func @warp_roles(
// CHECK: %[[W:.*]] = kiln_gpu.warp_id : i32
// CHECK: kiln_gpu.set_max_registers 40
// CHECK-NEXT: kiln_gpu.set_max_registers 232 increase
func.func @warp_roles() -> i32 {
  %w = kiln_gpu.warp_id : i32
  kiln_gpu.set_max_registers 40
  kiln_gpu.set_max_registers 232 increase
  return %w : i32
}

// Named barriers with a thread count: a consumer warpgroup waits for its turn at one and
// hands the turn over at the other (ping-pong).
// CHECK-LABEL: func.func @ping_pong(
// CHECK: kiln_gpu.named_barrier %{{.*}}, 256
// CHECK-NEXT: kiln_gpu.named_barrier %{{.*}}, 256 arrive
func.func @ping_pong(%mine: i32, %other: i32) {
  kiln_gpu.named_barrier %mine, 256
  kiln_gpu.named_barrier %other, 256 arrive
  return
}
