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
