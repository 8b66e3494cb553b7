// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts | FileCheck %s --check-prefix=LAYOUT

// f16 x f16 -> f32 on tensor cores: the accumulator takes the mma fragment layout (a 2 x 2
// warp grid: square warp regions), operands go through padded shared memory ([M][K + 8], B
// transposed), and each warp's 32x32 region of a 64x64x32 tile is 2 k-steps x 2 row pairs x
// 4 column bands of mma.sync.m16n8k16.
// LAYOUT: #[[MMA:.*]] = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [2, 2], order = [1, 0]}>
// LAYOUT-LABEL: func.func @f16(
// LAYOUT: kiln.dot {{.*}} -> tensor<64x64xf32, #[[MMA]]>
// A and B (64 x 40 f16 each) are parts of the shared scratch pool, B from byte 5120; the
// stores need no barrier first (nothing ran before), one after.
// CHECK: llvm.mlir.global internal @__kiln_scratch() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<10240 x i8>
// CHECK-LABEL: llvm.func @f16(
// CHECK: llvm.getelementptr %{{.*}}[5120] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.store {{.*}} : f16, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK-COUNT-16: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-NOT: mma.sync
func.func @f16(%pa: !kiln.ptr<f16>, %pb: !kiln.ptr<f16>, %pc: !kiln.ptr<f32>) {
  %a = kiln.splat %pa : tensor<64x32x!kiln.ptr<f16>>
  %b = kiln.splat %pb : tensor<32x64x!kiln.ptr<f16>>
  %c = kiln.splat %pc : tensor<64x64x!kiln.ptr<f32>>
  %x = kiln.load %a : tensor<64x32x!kiln.ptr<f16>>
  %y = kiln.load %b : tensor<32x64x!kiln.ptr<f16>>
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %d = kiln.dot %x, %y, %z : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
  kiln.store %c, %d : tensor<64x64x!kiln.ptr<f32>>
  return
}

// -----

// fp32 inputs go through tf32 by default (rounded with cvt.rna) on m16n8k8.
// CHECK-LABEL: llvm.func @tf32(
// CHECK: cvt.rna.tf32.f32
// CHECK: mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
func.func @tf32(%pa: !kiln.ptr<f32>, %pc: !kiln.ptr<f32>) {
  %a = kiln.splat %pa : tensor<32x16x!kiln.ptr<f32>>
  %b = kiln.splat %pa : tensor<16x32x!kiln.ptr<f32>>
  %c = kiln.splat %pc : tensor<32x32x!kiln.ptr<f32>>
  %x = kiln.load %a : tensor<32x16x!kiln.ptr<f32>>
  %y = kiln.load %b : tensor<16x32x!kiln.ptr<f32>>
  %z = arith.constant dense<0.0> : tensor<32x32xf32>
  %d = kiln.dot %x, %y, %z : tensor<32x16xf32> * tensor<16x32xf32> -> tensor<32x32xf32>
  kiln.store %c, %d : tensor<32x32x!kiln.ptr<f32>>
  return
}

// -----

// fp32 with inputPrecision = ieee and i8 -> i32 run on the CUDA cores: a loop over K.
// CHECK-LABEL: llvm.func @ieee(
// CHECK-NOT: mma.sync
// CHECK: llvm.intr.fma
func.func @ieee(%pa: !kiln.ptr<f32>, %pc: !kiln.ptr<f32>) {
  %a = kiln.splat %pa : tensor<16x16x!kiln.ptr<f32>>
  %c = kiln.splat %pc : tensor<16x16x!kiln.ptr<f32>>
  %x = kiln.load %a : tensor<16x16x!kiln.ptr<f32>>
  %z = arith.constant dense<0.0> : tensor<16x16xf32>
  %d = kiln.dot %x, %x, %z inputPrecision = ieee : tensor<16x16xf32> * tensor<16x16xf32> -> tensor<16x16xf32>
  kiln.store %c, %d : tensor<16x16x!kiln.ptr<f32>>
  return
}

// -----

// int8 with K = 16 (below one m16n8k32) stays on the CUDA cores.
// CHECK-LABEL: llvm.func @int8(
// CHECK-NOT: mma.sync
// CHECK: llvm.sext
// CHECK: llvm.mul
func.func @int8(%pa: !kiln.ptr<i8>, %pc: !kiln.ptr<i32>) {
  %a = kiln.splat %pa : tensor<16x16x!kiln.ptr<i8>>
  %c = kiln.splat %pc : tensor<16x16x!kiln.ptr<i32>>
  %x = kiln.load %a : tensor<16x16x!kiln.ptr<i8>>
  %z = arith.constant dense<0> : tensor<16x16xi32>
  %d = kiln.dot %x, %x, %z : tensor<16x16xi8> * tensor<16x16xi8> -> tensor<16x16xi32>
  kiln.store %c, %d : tensor<16x16x!kiln.ptr<i32>>
  return
}

// -----

// int8 x int8 -> int32 with K a multiple of 32 runs on mma.sync.m16n8k32: the f16 fragment
// pattern in bytes (A and B 32 x 48 bytes each: a 16-byte pad per row), 4 warps in a 2 x 2
// grid, one k-step x 1 row pair x 2 column bands per warp (the accumulator in the mma
// fragment layout, as for f16).
// CHECK: llvm.mlir.global internal @__kiln_scratch() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<3072 x i8>
// CHECK-LABEL: llvm.func @int8_mma(
// CHECK-COUNT-2: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};", "=r,=r,=r,=r,r,r,r,r,r,r,0,1,2,3"
// CHECK-NOT: mma.sync
func.func @int8_mma(%pa: !kiln.ptr<i8>, %pc: !kiln.ptr<i32>) {
  %a = kiln.splat %pa : tensor<32x32x!kiln.ptr<i8>>
  %c = kiln.splat %pc : tensor<32x32x!kiln.ptr<i32>>
  %x = kiln.load %a : tensor<32x32x!kiln.ptr<i8>>
  %z = arith.constant dense<0> : tensor<32x32xi32>
  %d = kiln.dot %x, %x, %z : tensor<32x32xi8> * tensor<32x32xi8> -> tensor<32x32xi32>
  kiln.store %c, %d : tensor<32x32x!kiln.ptr<i32>>
  return
}

// -----

// A dot reading rings without wgmma (as -kiln-pipeline-dot-operands="wgmma=false" leaves it):
// the mma.sync accumulator layout, no proxy fence after the copies' wait (ldmatrix reads
// through the generic proxy), and per k-step of the 2 x 2 warp grid's 32x32 regions two
// ldmatrix.x4 of A (K-major: row layout) and two x4.trans of B (N-major slot: col layout)
// before each warp's 8 mma.sync.
// LAYOUT: #[[SMMA:.*]] = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [2, 2], order = [1, 0]}>
// LAYOUT-LABEL: func.func @shared_mma(
// LAYOUT: kiln_gpu.local_alloc {k_major = true, operand = 0 : i32}
// LAYOUT: kiln_gpu.local_alloc {k_major = false, operand = 1 : i32}
// LAYOUT: kiln_gpu.shared_dot {{.*}}, tensor<64x64xf32, #[[SMMA]]>
// CHECK-LABEL: llvm.func @shared_mma(
// CHECK: cp.async.wait_group 0;
// CHECK-NOT: fence.proxy.async
// CHECK: nvvm.barrier0
// CHECK-COUNT-2: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>, num = 4
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4
// CHECK-COUNT-4: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4
// CHECK-COUNT-4: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// CHECK-COUNT-2: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>, num = 4
// CHECK-NOT: nvvm.ldmatrix {{.*}}num = 2
func.func @shared_mma(%pa: !kiln.ptr<f16>, %pb: !kiln.ptr<f16>, %pc: !kiln.ptr<f32>) {
  %ra = kiln_gpu.local_alloc {operand = 0 : i32} : <[2, 64, 32], f16>
  %rb = kiln_gpu.local_alloc {operand = 1 : i32} : <[2, 32, 64], f16>
  %c1 = arith.constant 1 : i32
  %a = kiln.splat %pa : tensor<64x32x!kiln.ptr<f16>>
  %b = kiln.splat %pb : tensor<32x64x!kiln.ptr<f16>>
  kiln_gpu.async_copy %ra[%c1], %a : <[2, 64, 32], f16>, tensor<64x32x!kiln.ptr<f16>>
  kiln_gpu.async_copy %rb[%c1], %b : <[2, 32, 64], f16>, tensor<32x64x!kiln.ptr<f16>>
  kiln_gpu.async_commit
  kiln_gpu.async_wait {pending = 0 : i32}
  %z = arith.constant dense<0.0> : tensor<64x64xf32>
  %d = kiln_gpu.shared_dot %ra[%c1], %rb[%c1], %z : !kiln_gpu.shared<[2, 64, 32], f16>, <[2, 32, 64], f16>, tensor<64x64xf32>
  %c = kiln.splat %pc : tensor<64x64x!kiln.ptr<f32>>
  kiln.store %c, %d : tensor<64x64x!kiln.ptr<f32>>
  return
}

// -----

// int8 rings (K-major) on m16n8k32: the 16-byte matrix rows hold 16 k. A 64x8 tile gives each
// of the 4 warps one column band, read with an ldmatrix.x2 (b0, b1); A with one x4.
// CHECK-LABEL: llvm.func @shared_mma_i8(
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 2
// CHECK: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>, num = 4
// CHECK: mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32
// CHECK-NOT: mma.sync
func.func @shared_mma_i8(%pa: !kiln.ptr<i8>, %pb: !kiln.ptr<i8>, %pc: !kiln.ptr<i32>) {
  %ra = kiln_gpu.local_alloc {operand = 0 : i32} : <[1, 64, 32], i8>
  %rb = kiln_gpu.local_alloc {operand = 1 : i32} : <[1, 32, 8], i8>
  %c0 = arith.constant 0 : i32
  %a = kiln.splat %pa : tensor<64x32x!kiln.ptr<i8>>
  %b = kiln.splat %pb : tensor<32x8x!kiln.ptr<i8>>
  kiln_gpu.async_copy %ra[%c0], %a : <[1, 64, 32], i8>, tensor<64x32x!kiln.ptr<i8>>
  kiln_gpu.async_copy %rb[%c0], %b : <[1, 32, 8], i8>, tensor<32x8x!kiln.ptr<i8>>
  kiln_gpu.async_commit
  kiln_gpu.async_wait {pending = 0 : i32}
  %z = arith.constant dense<0> : tensor<64x8xi32>
  %d = kiln_gpu.shared_dot %ra[%c0], %rb[%c0], %z : !kiln_gpu.shared<[1, 64, 32], i8>, <[1, 32, 8], i8>, tensor<64x8xi32>
  %c = kiln.splat %pc : tensor<64x8x!kiln.ptr<i32>>
  kiln.store %c, %d : tensor<64x8x!kiln.ptr<i32>>
  return
}
