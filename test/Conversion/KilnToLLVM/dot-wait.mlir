// RUN: kiln-opt %s -split-input-file -kiln-convert-to-llvm | FileCheck %s

// kiln_gpu.dot_wait (WgmmaDotToLLVM.cpp): wgmma.wait_group `pending` as inline PTX through
// which every accumulator register of its operand passes (n outputs "=f" or "=r", tied to
// the n inputs "0".."n-1", in the order of the tile's registers), so that no use of the
// registers moves above the wait; the result is the asm's outputs, repacked. A shared_dot
// left running (pending = 1) itself ends with a bare wait_group 1 over no registers.

// A 64x16 f32 accumulator under 4 warps: 8 registers per thread.
// CHECK-LABEL: llvm.func @wait(
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-NEXT: llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 1;", ""  : () -> !llvm.void
// CHECK: %[[D:.*]] = llvm.insertvalue %{{.*}}[7] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK-NEXT: %[[E0:.*]] = llvm.extractvalue %[[D]][0]
// CHECK-NEXT: %[[E1:.*]] = llvm.extractvalue %[[D]][1]
// CHECK-NEXT: %[[E2:.*]] = llvm.extractvalue %[[D]][2]
// CHECK-NEXT: %[[E3:.*]] = llvm.extractvalue %[[D]][3]
// CHECK-NEXT: %[[E4:.*]] = llvm.extractvalue %[[D]][4]
// CHECK-NEXT: %[[E5:.*]] = llvm.extractvalue %[[D]][5]
// CHECK-NEXT: %[[E6:.*]] = llvm.extractvalue %[[D]][6]
// CHECK-NEXT: %[[E7:.*]] = llvm.extractvalue %[[D]][7]
// CHECK-NEXT: %[[W:.*]] = llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;", "=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7" %[[E0]], %[[E1]], %[[E2]], %[[E3]], %[[E4]], %[[E5]], %[[E6]], %[[E7]] : (f32, f32, f32, f32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK-NEXT: %[[W0:.*]] = llvm.extractvalue %[[W]][0]
// CHECK-NEXT: %[[W1:.*]] = llvm.extractvalue %[[W]][1]
// CHECK-NEXT: %[[W2:.*]] = llvm.extractvalue %[[W]][2]
// CHECK-NEXT: %[[W3:.*]] = llvm.extractvalue %[[W]][3]
// CHECK-NEXT: %[[W4:.*]] = llvm.extractvalue %[[W]][4]
// CHECK-NEXT: %[[W5:.*]] = llvm.extractvalue %[[W]][5]
// CHECK-NEXT: %[[W6:.*]] = llvm.extractvalue %[[W]][6]
// CHECK-NEXT: %[[W7:.*]] = llvm.extractvalue %[[W]][7]
// CHECK-NEXT: %[[P:.*]] = llvm.mlir.undef : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK-NEXT: %[[P0:.*]] = llvm.insertvalue %[[W0]], %[[P]][0]
// CHECK-NEXT: %[[P1:.*]] = llvm.insertvalue %[[W1]], %[[P0]][1]
// CHECK-NEXT: %[[P2:.*]] = llvm.insertvalue %[[W2]], %[[P1]][2]
// CHECK-NEXT: %[[P3:.*]] = llvm.insertvalue %[[W3]], %[[P2]][3]
// CHECK-NEXT: %[[P4:.*]] = llvm.insertvalue %[[W4]], %[[P3]][4]
// CHECK-NEXT: %[[P5:.*]] = llvm.insertvalue %[[W5]], %[[P4]][5]
// CHECK-NEXT: %[[P6:.*]] = llvm.insertvalue %[[W6]], %[[P5]][6]
// CHECK-NEXT: %[[P7:.*]] = llvm.insertvalue %[[W7]], %[[P6]][7]
// The store writes the waited registers.
// CHECK: %[[S0:.*]] = llvm.extractvalue %[[P7]][0]
// CHECK: llvm.store %[[S0]], %{{.*}} : f32, !llvm.ptr<1>
// CHECK-NOT: wgmma.
// CHECK: llvm.return
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @wait(%pc: !kiln.ptr<f32>, %s: i32) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 16], f16>
    %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[2, 16, 16], f16>
    %z = arith.constant dense<0.0> : tensor<64x16xf32, #wg>
    %d = kiln_gpu.shared_dot %a[%s], %b[%s], %z {pending = 1 : i32} : !kiln_gpu.shared<[2, 64, 16], f16>, !kiln_gpu.shared<[2, 16, 16], f16>, tensor<64x16xf32, #wg>
    %w = kiln_gpu.dot_wait %d : tensor<64x16xf32, #wg>
    %p = kiln.splat %pc : tensor<64x16x!kiln.ptr<f32>, #wg>
    kiln.store %p, %w : tensor<64x16x!kiln.ptr<f32>, #wg>
    return
  }
}

// -----

// Two dots left running back to back (as flash attention's): the first one's result is
// waited for with pending = 1 (the second may still run), the second's with 0, in program
// order; each wait carries only its own operand's registers.
// CHECK-LABEL: llvm.func @two_in_flight(
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-NEXT: "wgmma.wait_group.sync.aligned 1;", ""
// CHECK: %[[D1:.*]] = llvm.insertvalue %{{.*}}[7] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-NEXT: "wgmma.wait_group.sync.aligned 1;", ""
// CHECK: %[[D2:.*]] = llvm.insertvalue %{{.*}}[7] : !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK-NEXT: %[[X0:.*]] = llvm.extractvalue %[[D1]][0]
// CHECK: %[[W1:.*]] = llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 1;", "=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7" %[[X0]], {{.*}} : (f32, f32, f32, f32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK: %[[Y0:.*]] = llvm.extractvalue %[[D2]][0]
// CHECK: %[[W2:.*]] = llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;", "=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7" %[[Y0]], {{.*}} : (f32, f32, f32, f32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK-NOT: wgmma.
// CHECK: llvm.return
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @two_in_flight(%pc: !kiln.ptr<f32>, %s: i32) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 16], f16>
    %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[2, 16, 16], f16>
    %z = arith.constant dense<0.0> : tensor<64x16xf32, #wg>
    %d1 = kiln_gpu.shared_dot %a[%s], %b[%s], %z {pending = 1 : i32} : !kiln_gpu.shared<[2, 64, 16], f16>, !kiln_gpu.shared<[2, 16, 16], f16>, tensor<64x16xf32, #wg>
    %d2 = kiln_gpu.shared_dot %a[%s], %b[%s], %z {pending = 1 : i32} : !kiln_gpu.shared<[2, 64, 16], f16>, !kiln_gpu.shared<[2, 16, 16], f16>, tensor<64x16xf32, #wg>
    %w1 = kiln_gpu.dot_wait %d1 {pending = 1 : i32} : tensor<64x16xf32, #wg>
    %w2 = kiln_gpu.dot_wait %d2 : tensor<64x16xf32, #wg>
    %sum = arith.addf %w1, %w2 : tensor<64x16xf32, #wg>
    %p = kiln.splat %pc : tensor<64x16x!kiln.ptr<f32>, #wg>
    kiln.store %p, %sum : tensor<64x16x!kiln.ptr<f32>, #wg>
    return
  }
}

// -----

// Integer accumulators pass through "=r" registers; the count is the op's (7, the most).
// CHECK-LABEL: llvm.func @int_wait(
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-NEXT: "wgmma.wait_group.sync.aligned 1;", ""
// CHECK: llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 7;", "=r,=r,=r,=r,=r,=r,=r,=r,0,1,2,3,4,5,6,7" {{.*}} : (i32, i32, i32, i32, i32, i32, i32, i32) -> !llvm.struct<(i32, i32, i32, i32, i32, i32, i32, i32)>
// CHECK-NOT: wgmma.
// CHECK: llvm.return
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @int_wait(%pc: !kiln.ptr<i32>, %s: i32) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], i8>
    %b = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 16], i8>
    %z = arith.constant dense<0> : tensor<64x16xi32, #wg>
    %d = kiln_gpu.shared_dot %a[%s], %b[%s], %z {pending = 1 : i32} : !kiln_gpu.shared<[2, 64, 32], i8>, !kiln_gpu.shared<[2, 32, 16], i8>, tensor<64x16xi32, #wg>
    %w = kiln_gpu.dot_wait %d {pending = 7 : i32} : tensor<64x16xi32, #wg>
    %p = kiln.splat %pc : tensor<64x16x!kiln.ptr<i32>, #wg>
    kiln.store %p, %w : tensor<64x16x!kiln.ptr<i32>, #wg>
    return
  }
}
