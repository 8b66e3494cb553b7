// RUN: kiln-opt %s -split-input-file -kiln-convert-to-llvm -verify-diagnostics | FileCheck %s

// The wgmma lowerings (WgmmaDotToLLVM.cpp, sm_90a: the module has kiln_gpu.wgmma and the
// accumulators the warpgroup layout): kiln_gpu.shared_dot with its operands in ring slots (or
// A in registers), and kiln.dot with operands stored to shared memory by the lowering itself.
// One wgmma.mma_async per (64-row block of the warpgroup, N chunk of at most 256, k step of
// 32 bytes), between wgmma.fence and wgmma.commit_group, as inline PTX whose operands are the
// n accumulator registers (outputs), the same n tied as inputs, A (a 64-bit descriptor, or 4
// registers), B's descriptor and scale-d (the first k step's: 0 over a zero C, the
// `accumulate` bit when given, else 1). A matrix descriptor is ((addr >> 4) & 0x3FFF) | LBO >> 4
// << 16 | SBO >> 4 << 32 | mode << 62, mode 1/2/3 for the 128/64/32-byte swizzle, SBO = 8 rows
// of S bytes, LBO (MN-major only) = K * S; each further sub-matrix adds its byte offset / 16.

// f16, A K-major 64x64 (rows of 128 bytes: mode 1, SBO 1024: 0x4000004000000000), B N-major
// 64x64 (mode 1, SBO 1024, LBO 64 * 128 = 8192: 0x4000004002000000); C is zero, so the
// accumulator registers start undefined and the first wgmma has scale-d 0. K = 64 is 4 k16
// steps: A advances 32 bytes (2) along K-major rows, B 16 rows of 128 bytes (128) per step.
// Transpose flags: A 0 (K-major), B 1 (N-major). With pending = 0 the accumulators pass
// through wgmma.wait_group 0 (all 32 registers tied), so nothing reads them earlier.
// CHECK-LABEL: llvm.func @ring_f16(
// CHECK-SAME: %[[PC:[^:]*]]: !llvm.ptr<1>, %[[S:[^:]*]]: i32)
// Rings at their offsets in the dynamic shared memory (two 8 KiB slots each).
// CHECK: %[[RA:.*]] = llvm.getelementptr %{{.*}}[0] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK: %[[RB:.*]] = llvm.getelementptr %{{.*}}[16384] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK: %[[SB:.*]] = llvm.mlir.constant(8192 : i32) : i32
// CHECK-NEXT: %[[BOFF:.*]] = llvm.mul %[[S]], %[[SB]] : i32
// CHECK-NEXT: %[[RBI:.*]] = llvm.ptrtoint %[[RB]] : !llvm.ptr<3> to i32
// CHECK-NEXT: %[[BSLOT:.*]] = llvm.add %[[RBI]], %[[BOFF]] : i32
// CHECK: %[[SA:.*]] = llvm.mlir.constant(8192 : i32) : i32
// CHECK-NEXT: %[[AOFF:.*]] = llvm.mul %[[S]], %[[SA]] : i32
// CHECK-NEXT: %[[RAI:.*]] = llvm.ptrtoint %[[RA]] : !llvm.ptr<3> to i32
// CHECK-NEXT: %[[ASLOT:.*]] = llvm.add %[[RAI]], %[[AOFF]] : i32
// The warpgroup's first row of A: (warp >> 2) * 64 rows of 128 bytes.
// CHECK: %[[TWO:.*]] = llvm.mlir.constant(2 : i32) : i32
// CHECK-NEXT: %[[GROUP:.*]] = llvm.lshr %{{.*}}, %[[TWO]] : i32
// CHECK-NEXT: %[[C64:.*]] = llvm.mlir.constant(64 : i32) : i32
// CHECK-NEXT: %[[GROW:.*]] = llvm.mul %[[GROUP]], %[[C64]] : i32
// CHECK-NEXT: %[[C128:.*]] = llvm.mlir.constant(128 : i32) : i32
// CHECK-NEXT: %[[GBYTES:.*]] = llvm.mul %[[GROW]], %[[C128]] : i32
// CHECK-NEXT: %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK-NEXT: %[[U:.*]] = llvm.mlir.undef : f32
// CHECK-COUNT-31: llvm.mlir.undef : f32
// CHECK-NEXT: %[[AADDR:.*]] = llvm.add %[[ASLOT]], %[[GBYTES]] : i32
// The start address (16-byte units) unmasked, added to the fixed fields (an add, not an or:
// ptxas makes the later per-k adds one UIADD3.64 each).
// CHECK-NEXT: %[[FOUR:.*]] = llvm.mlir.constant(4 : i32) : i32
// CHECK-NEXT: %[[A16:.*]] = llvm.lshr %[[AADDR]], %[[FOUR]] : i32
// CHECK-NEXT: %[[AW:.*]] = llvm.zext %[[A16]] : i32 to i64
// CHECK-NEXT: %[[AFIX:.*]] = llvm.mlir.constant(4611686293305294848 : i64) : i64
// CHECK-NEXT: %[[ADESC:.*]] = llvm.add %[[AW]], %[[AFIX]] : i64
// CHECK-NEXT: llvm.mlir.constant(4 : i32)
// CHECK-NEXT: %[[B16:.*]] = llvm.lshr %[[BSLOT]], %{{.*}} : i32
// CHECK-NEXT: %[[BW:.*]] = llvm.zext %[[B16]] : i32 to i64
// CHECK-NEXT: %[[BFIX:.*]] = llvm.mlir.constant(4611686293338849280 : i64) : i64
// CHECK-NEXT: %[[BDESC:.*]] = llvm.add %[[BW]], %[[BFIX]] : i64
// CHECK-NEXT: llvm.inline_asm has_side_effects "wgmma.fence.sync.aligned;", ""
// k = 0: scale-d 0, the undefined registers in.
// CHECK-NEXT: %[[D0:.*]] = llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $66, 0;\0Awgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, $64, $65, p, 1, 1, 0, 1;\0A}", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,l,l,r" %[[U]], {{.*}}, %[[ADESC]], %[[BDESC]], %[[ZERO]] : (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, i64, i64, i32) -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK-COUNT-32: llvm.extractvalue %[[D0]][{{[0-9]+}}]
// k = 16
// CHECK-NEXT: %[[K1A:.*]] = llvm.mlir.constant(2 : i64) : i64
// CHECK-NEXT: %[[A1:.*]] = llvm.add %[[ADESC]], %[[K1A]] : i64
// CHECK-NEXT: %[[K1B:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK-NEXT: %[[B1:.*]] = llvm.add %[[BDESC]], %[[K1B]] : i64
// CHECK-NEXT: llvm.inline_asm has_side_effects "{{.*}}m64n64k16.f32.f16.f16 {{.*}}, $64, $65, p, 1, 1, 0, 1;{{.*}}", "{{.*}}" %{{.*}}, %[[A1]], %[[B1]], %[[ONE]] :
// k = 32, 48
// CHECK: llvm.mlir.constant(4 : i64) : i64
// CHECK-NEXT: %[[A2:.*]] = llvm.add %[[ADESC]]
// CHECK-NEXT: llvm.mlir.constant(256 : i64) : i64
// CHECK-NEXT: %[[B2:.*]] = llvm.add %[[BDESC]]
// CHECK-NEXT: llvm.inline_asm has_side_effects "{{.*}}m64n64k16{{.*}}" %{{.*}}, %[[A2]], %[[B2]], %[[ONE]] :
// CHECK: llvm.mlir.constant(6 : i64) : i64
// CHECK-NEXT: %[[A3:.*]] = llvm.add %[[ADESC]]
// CHECK-NEXT: llvm.mlir.constant(384 : i64) : i64
// CHECK-NEXT: %[[B3:.*]] = llvm.add %[[BDESC]]
// CHECK-NEXT: %[[D3:.*]] = llvm.inline_asm has_side_effects "{{.*}}m64n64k16{{.*}}" %{{.*}}, %[[A3]], %[[B3]], %[[ONE]] :
// CHECK-COUNT-32: llvm.extractvalue %[[D3]]
// CHECK-NEXT: llvm.inline_asm has_side_effects "wgmma.commit_group.sync.aligned;", ""
// CHECK-NEXT: %[[W:.*]] = llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 0;", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31" {{.*}} : (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) -> !llvm.struct<(f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32)>
// CHECK-NOT: wgmma
// CHECK: llvm.return
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.threads_per_warp = 32 : i32, kiln_gpu.wgmma} {
  func.func @ring_f16(%pc: !kiln.ptr<f32>, %s: i32) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 64], f16>
    %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[2, 64, 64], f16>
    %z = arith.constant dense<0.0> : tensor<64x64xf32, #wg>
    %d = kiln_gpu.shared_dot %a[%s], %b[%s], %z : !kiln_gpu.shared<[2, 64, 64], f16>, !kiln_gpu.shared<[2, 64, 64], f16>, tensor<64x64xf32, #wg>
    %p = kiln.splat %pc : tensor<64x64x!kiln.ptr<f32>, #wg>
    kiln.store %p, %d : tensor<64x64x!kiln.ptr<f32>, #wg>
    return
  }
}

// -----

// bf16, M = 128 under 4 warps (one warpgroup, two 64-row blocks), both rings K-major with
// K = 32 (rows of 64 bytes: mode 2, SBO 512: 0x8000002000000000). The second row block starts
// 64 rows of 64 bytes later in A (+256). C is not zero: its registers go in as they are, and
// `accumulate %flag` is the first k step's scale-d of each row block (zext of the flag); the
// second k step (+32 bytes: +2) accumulates. Transpose flags 0, 0. With pending = 1 the
// accumulators do not pass through the wait: a bare wait_group 1.
// CHECK-LABEL: llvm.func @bf16_accumulate(
// CHECK-SAME: %[[FLAG:[^:]*]]: i1)
// CHECK: %[[GROUP:.*]] = llvm.lshr %{{.*}}, %{{.*}} : i32
// CHECK-NEXT: llvm.mlir.constant(64 : i32) : i32
// CHECK-NEXT: %[[GROW:.*]] = llvm.mul %[[GROUP]], %{{.*}} : i32
// CHECK-NEXT: llvm.mlir.constant(64 : i32) : i32
// CHECK-NEXT: llvm.mul %[[GROW]], %{{.*}} : i32
// CHECK-NEXT: %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: llvm.mlir.constant(0 : i32) : i32
// CHECK-NOT: llvm.mlir.undef : f32
// CHECK-NEXT: %[[SCALE:.*]] = llvm.zext %[[FLAG]] : i1 to i32
// CHECK: %[[AFIX:.*]] = llvm.mlir.constant(-9223371899415822336 : i64) : i64
// CHECK-NEXT: %[[ADESC:.*]] = llvm.add %{{.*}}, %[[AFIX]] : i64
// CHECK: %[[BFIX:.*]] = llvm.mlir.constant(-9223371899415822336 : i64) : i64
// CHECK-NEXT: %[[BDESC:.*]] = llvm.add %{{.*}}, %[[BFIX]] : i64
// CHECK-NEXT: "wgmma.fence.sync.aligned;"
// CHECK-NEXT: llvm.inline_asm has_side_effects "{{.*}}wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, $64, $65, p, 1, 1, 0, 0;{{.*}}" %{{.*}}, %[[ADESC]], %[[BDESC]], %[[SCALE]] :
// CHECK: llvm.mlir.constant(2 : i64)
// CHECK-NEXT: %[[A01:.*]] = llvm.add %[[ADESC]]
// CHECK-NEXT: llvm.mlir.constant(2 : i64)
// CHECK-NEXT: %[[B01:.*]] = llvm.add %[[BDESC]]
// CHECK-NEXT: "{{.*}}m64n64k16.f32.bf16.bf16{{.*}}" %{{.*}}, %[[A01]], %[[B01]], %[[ONE]] :
// CHECK: llvm.mlir.constant(256 : i64)
// CHECK-NEXT: %[[A10:.*]] = llvm.add %[[ADESC]]
// CHECK-NEXT: "{{.*}}m64n64k16.f32.bf16.bf16{{.*}}" %{{.*}}, %[[A10]], %[[BDESC]], %[[SCALE]] :
// CHECK: llvm.mlir.constant(258 : i64)
// CHECK-NEXT: %[[A11:.*]] = llvm.add %[[ADESC]]
// CHECK-NEXT: llvm.mlir.constant(2 : i64)
// CHECK-NEXT: %[[B11:.*]] = llvm.add %[[BDESC]]
// CHECK-NEXT: "{{.*}}m64n64k16.f32.bf16.bf16{{.*}}" %{{.*}}, %[[A11]], %[[B11]], %[[ONE]] :
// CHECK-NOT: wgmma.mma_async
// CHECK: llvm.inline_asm has_side_effects "wgmma.commit_group.sync.aligned;", ""
// CHECK-NEXT: llvm.inline_asm has_side_effects "wgmma.wait_group.sync.aligned 1;", ""  : () -> !llvm.void
// CHECK-NOT: wgmma
// CHECK: llvm.return
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @bf16_accumulate(%pc: !kiln.ptr<f32>, %s: i32, %flag: i1) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[2, 128, 32], bf16>
    %b = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], bf16>
    %c = arith.constant dense<1.0> : tensor<128x64xf32, #wg>
    %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c accumulate %flag {pending = 1 : i32} : !kiln_gpu.shared<[2, 128, 32], bf16>, !kiln_gpu.shared<[2, 32, 64], bf16>, tensor<128x64xf32, #wg>
    %p = kiln.splat %pc : tensor<128x64x!kiln.ptr<f32>, #wg>
    kiln.store %p, %d : tensor<128x64x!kiln.ptr<f32>, #wg>
    return
  }
}

// -----

// A in registers (a 64x16 f16 tile under the accumulator layout): per 64-row block and k16
// step, 4 registers of two f16 each, packed before the fence in wgmma's A-fragment order:
// (row, k), (row + 8, k), (row, k + 8), (row + 8, k + 8), i.e. elements {0, 1}, {4, 5},
// {2, 3}, {6, 7} of the thread's 8. The wgmma takes them as {$64, $65, $66, $67}, B's
// descriptor as $68 and scale-d as $69; only B has a transpose flag (1: N-major).
// CHECK-LABEL: llvm.func @register_a(
// CHECK: %[[E0:.*]] = llvm.extractvalue %[[A:.*]][0] : !llvm.struct<(f16, f16, f16, f16, f16, f16, f16, f16)>
// CHECK-NEXT: %[[E1:.*]] = llvm.extractvalue %[[A]][1]
// CHECK-NEXT: %[[E2:.*]] = llvm.extractvalue %[[A]][2]
// CHECK-NEXT: %[[E3:.*]] = llvm.extractvalue %[[A]][3]
// CHECK-NEXT: %[[E4:.*]] = llvm.extractvalue %[[A]][4]
// CHECK-NEXT: %[[E5:.*]] = llvm.extractvalue %[[A]][5]
// CHECK-NEXT: %[[E6:.*]] = llvm.extractvalue %[[A]][6]
// CHECK-NEXT: %[[E7:.*]] = llvm.extractvalue %[[A]][7]
// CHECK: llvm.mlir.undef : vector<2xf16>
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[V00:.*]] = llvm.insertelement %[[E0]], %{{.*}} : vector<2xf16>
// CHECK-NEXT: llvm.mlir.constant(1 : i32)
// CHECK-NEXT: %[[V01:.*]] = llvm.insertelement %[[E1]], %[[V00]]
// CHECK-NEXT: %[[R0:.*]] = llvm.bitcast %[[V01]] : vector<2xf16> to i32
// CHECK-NEXT: llvm.mlir.undef : vector<2xf16>
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[V10:.*]] = llvm.insertelement %[[E4]]
// CHECK-NEXT: llvm.mlir.constant(1 : i32)
// CHECK-NEXT: %[[V11:.*]] = llvm.insertelement %[[E5]], %[[V10]]
// CHECK-NEXT: %[[R1:.*]] = llvm.bitcast %[[V11]] : vector<2xf16> to i32
// CHECK-NEXT: llvm.mlir.undef : vector<2xf16>
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[V20:.*]] = llvm.insertelement %[[E2]]
// CHECK-NEXT: llvm.mlir.constant(1 : i32)
// CHECK-NEXT: %[[V21:.*]] = llvm.insertelement %[[E3]], %[[V20]]
// CHECK-NEXT: %[[R2:.*]] = llvm.bitcast %[[V21]] : vector<2xf16> to i32
// CHECK-NEXT: llvm.mlir.undef : vector<2xf16>
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[V30:.*]] = llvm.insertelement %[[E6]]
// CHECK-NEXT: llvm.mlir.constant(1 : i32)
// CHECK-NEXT: %[[V31:.*]] = llvm.insertelement %[[E7]], %[[V30]]
// CHECK-NEXT: %[[R3:.*]] = llvm.bitcast %[[V31]] : vector<2xf16> to i32
// CHECK: %[[BFIX:.*]] = llvm.mlir.constant(4611686293313683456 : i64) : i64
// CHECK-NEXT: %[[BDESC:.*]] = llvm.add %{{.*}}, %[[BFIX]] : i64
// CHECK-NEXT: "wgmma.fence.sync.aligned;"
// CHECK-NEXT: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $69, 0;\0Awgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31}, {$64, $65, $66, $67}, $68, p, 1, 1, 1;\0A}", "=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,r,r,r,r,l,r" {{.*}}, %[[R0]], %[[R1]], %[[R2]], %[[R3]], %[[BDESC]], %{{.*}} : (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, i32, i32, i32, i32, i64, i32) ->
// CHECK-NOT: wgmma.mma_async
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-NEXT: "wgmma.wait_group.sync.aligned 0;"
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @register_a(%pa: !kiln.ptr<f16>, %pc: !kiln.ptr<f32>, %s: i32) {
    %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[2, 16, 64], f16>
    %pat = kiln.splat %pa : tensor<64x16x!kiln.ptr<f16>, #wg>
    %x = kiln.load %pat : tensor<64x16x!kiln.ptr<f16>, #wg>
    %z = arith.constant dense<0.0> : tensor<64x64xf32, #wg>
    %d = kiln_gpu.shared_dot %x, %b[%s], %z : tensor<64x16xf16, #wg>, !kiln_gpu.shared<[2, 16, 64], f16>, tensor<64x64xf32, #wg>
    %p = kiln.splat %pc : tensor<64x64x!kiln.ptr<f32>, #wg>
    kiln.store %p, %d : tensor<64x64x!kiln.ptr<f32>, #wg>
    return
  }
}

// -----

// int8 -> int32: k32 steps (32 bytes of K), s32.s8.s8 with "r" registers, no input scales
// and no transpose flags; both rings K-major with 64-byte rows (mode 2). K = 64: two wgmmas,
// the second 32 bytes (2) further along both operands' rows. One-slot buffers (filled once,
// read in a loop) get that offset added inside the asm (da, db), where LLVM cannot hoist it
// out of a loop: only the base descriptors stay live across it.
// CHECK-LABEL: llvm.func @int8(
// CHECK: %[[AFIX:.*]] = llvm.mlir.constant(-9223371899415822336 : i64) : i64
// CHECK-NEXT: %[[ADESC:.*]] = llvm.add %{{.*}}, %[[AFIX]]
// CHECK: %[[BFIX:.*]] = llvm.mlir.constant(-9223371899415822336 : i64) : i64
// CHECK-NEXT: %[[BDESC:.*]] = llvm.add %{{.*}}, %[[BFIX]]
// CHECK-NEXT: "wgmma.fence.sync.aligned;"
// CHECK-NEXT: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $34, 0;\0Awgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {$0, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15}, $32, $33, p;\0A}", "=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,l,l,r" %{{.*}}, %[[ADESC]], %[[BDESC]], %{{.*}} : (i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i64, i64, i32) -> !llvm.struct<(i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32)>
// CHECK-NOT: llvm.add %[[ADESC]]
// CHECK: "{\0A.reg .pred p;\0A.reg .b64 da;\0Aadd.s64 da, $32, 2;\0A.reg .b64 db;\0Aadd.s64 db, $33, 2;\0Asetp.ne.b32 p, $34, 0;\0Awgmma.mma_async.sync.aligned.m64n32k32.s32.s8.s8 {{.*}}, da, db, p;\0A}", {{.*}}, %[[ADESC]], %[[BDESC]], %{{.*}} :
// CHECK-NOT: wgmma.mma_async
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-NEXT: "wgmma.wait_group.sync.aligned 0;", "=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,=r,0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15" {{.*}} : (i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32) -> !llvm.struct<(i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32, i32)>
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @int8(%pc: !kiln.ptr<i32>, %s: i32) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[1, 64, 64], i8>
    %b = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : !kiln_gpu.shared<[1, 64, 32], i8>
    %z = arith.constant dense<0> : tensor<64x32xi32, #wg>
    %d = kiln_gpu.shared_dot %a[%s], %b[%s], %z : !kiln_gpu.shared<[1, 64, 64], i8>, !kiln_gpu.shared<[1, 64, 32], i8>, tensor<64x32xi32, #wg>
    %p = kiln.splat %pc : tensor<64x32x!kiln.ptr<i32>, #wg>
    kiln.store %p, %d : tensor<64x32x!kiln.ptr<i32>, #wg>
    return
  }
}

// -----

// fp8 (e4m3 and e5m2) -> f32: k32 steps with input scales but no transpose flags (8-bit
// operands are K-major), 32-byte rows (mode 3, SBO 256: 0xC000001000000000). The second dot
// accumulates onto the first's result (not a constant zero): scale-d 1.
// CHECK-LABEL: llvm.func @fp8(
// CHECK: llvm.lshr
// CHECK-NEXT: llvm.mlir.constant(64 : i32)
// CHECK-NEXT: llvm.mul
// CHECK-NEXT: llvm.mlir.constant(32 : i32)
// CHECK-NEXT: llvm.mul
// CHECK-NEXT: llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[ZERO:.*]] = llvm.mlir.constant(0 : i32) : i32
// CHECK: llvm.mlir.constant(-4611685949707911168 : i64) : i64
// CHECK: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $18, 0;\0Awgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {$0, $1, $2, $3, $4, $5, $6, $7}, $16, $17, p, 1, 1;\0A}", "=f,=f,=f,=f,=f,=f,=f,=f,0,1,2,3,4,5,6,7,l,l,r" {{.*}}, %[[ZERO]] : (f32, f32, f32, f32, f32, f32, f32, f32, i64, i64, i32)
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: llvm.lshr
// CHECK-NEXT: llvm.mlir.constant(64 : i32)
// CHECK-NEXT: llvm.mul
// CHECK-NEXT: llvm.mlir.constant(32 : i32)
// CHECK-NEXT: llvm.mul
// CHECK-NEXT: %[[ONE:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NOT: llvm.mlir.undef : f32
// CHECK: llvm.mlir.constant(-4611685949707911168 : i64) : i64
// CHECK: "{{.*}}m64n16k32.f32.e5m2.e5m2 {{.*}}, $16, $17, p, 1, 1;{{.*}}", "{{.*}}" {{.*}}, %[[ONE]] : (
// CHECK-NOT: wgmma.mma_async
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @fp8(%pc: !kiln.ptr<f32>, %s: i32) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[1, 64, 32], f8E4M3FN>
    %b = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : !kiln_gpu.shared<[1, 32, 16], f8E4M3FN>
    %a2 = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[1, 64, 32], f8E5M2>
    %b2 = kiln_gpu.local_alloc {k_major = true, operand = 1 : i32} : !kiln_gpu.shared<[1, 32, 16], f8E5M2>
    %z = arith.constant dense<0.0> : tensor<64x16xf32, #wg>
    %d = kiln_gpu.shared_dot %a[%s], %b[%s], %z : !kiln_gpu.shared<[1, 64, 32], f8E4M3FN>, !kiln_gpu.shared<[1, 32, 16], f8E4M3FN>, tensor<64x16xf32, #wg>
    %e = kiln_gpu.shared_dot %a2[%s], %b2[%s], %d : !kiln_gpu.shared<[1, 64, 32], f8E5M2>, !kiln_gpu.shared<[1, 32, 16], f8E5M2>, tensor<64x16xf32, #wg>
    %p = kiln.splat %pc : tensor<64x16x!kiln.ptr<f32>, #wg>
    kiln.store %p, %e : tensor<64x16x!kiln.ptr<f32>, #wg>
    return
  }
}

// -----

// N = 512 is two n256 wgmmas per k step (128 registers each: A $256, B $257, scale-d $258),
// the second with B's descriptor 256 columns on: 4 strips of 64 columns x 16 rows x 128
// bytes = 8192 bytes (+512, added inside the asm: a one-slot buffer).
// CHECK-LABEL: llvm.func @n512(
// CHECK: %[[ADESC:.*]] = llvm.add %{{.*}}, %{{.*}} : i64
// CHECK: %[[BFIX:.*]] = llvm.mlir.constant(4611686293313683456 : i64) : i64
// CHECK-NEXT: %[[BDESC:.*]] = llvm.add %{{.*}}, %[[BFIX]] : i64
// CHECK-NEXT: "wgmma.fence.sync.aligned;"
// CHECK-NEXT: llvm.inline_asm has_side_effects "{\0A.reg .pred p;\0Asetp.ne.b32 p, $258, 0;\0Awgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16 {$0, $1, {{(\$[0-9]+, ){125}\$}}127}, $256, $257, p, 1, 1, 0, 1;\0A}", "{{(=f,){128}0}},1,{{([0-9]+,){125}1}}27,l,l,r" {{.*}}, %[[ADESC]], %[[BDESC]], %{{.*}} : ({{(f32, ){128}i}}64, i64, i32)
// CHECK-NEXT: llvm.extractvalue
// CHECK: "{\0A.reg .pred p;\0A.reg .b64 db;\0Aadd.s64 db, $257, 512;\0Asetp.ne.b32 p, $258, 0;\0A{{.*}}m64n256k16.f32.f16.f16{{.*}}, $256, db, p, 1, 1, 0, 1;\0A}", {{.*}}, %[[ADESC]], %[[BDESC]], %{{.*}} :
// CHECK-NOT: wgmma.mma_async
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-NEXT: "wgmma.wait_group.sync.aligned 0;", "{{(=f,){128}(=f,){128}0}},1,{{([0-9]+,){200}([0-9]+,){53}2}}55" {{.*}} : ({{(f32, ){200}(f32, ){55}f}}32)
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @n512(%pc: !kiln.ptr<f32>, %s: i32) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[1, 64, 16], f16>
    %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[1, 16, 512], f16>
    %z = arith.constant dense<0.0> : tensor<64x512xf32, #wg>
    %d = kiln_gpu.shared_dot %a[%s], %b[%s], %z : !kiln_gpu.shared<[1, 64, 16], f16>, !kiln_gpu.shared<[1, 16, 512], f16>, tensor<64x512xf32, #wg>
    %p = kiln.splat %pc : tensor<64x512x!kiln.ptr<f32>, #wg>
    kiln.store %p, %d : tensor<64x512x!kiln.ptr<f32>, #wg>
    return
  }
}

// -----

// 8 warps are two warpgroups: M = 128 is one 64-row block each (one wgmma per k step), warp
// group g's A rows starting at g * 64 rows of 32 bytes. B N-major with N = 32: 64-byte rows
// (mode 2, LBO 16 * 64 = 1024, SBO 512: 0x8000002000400000).
// CHECK-LABEL: llvm.func @two_warpgroups(
// CHECK-SAME: nvvm.maxntid = array<i32: 256, 1, 1>
// CHECK: %[[GROUP:.*]] = llvm.lshr %{{.*}}, %{{.*}} : i32
// CHECK-NEXT: %[[C64:.*]] = llvm.mlir.constant(64 : i32) : i32
// CHECK-NEXT: %[[GROW:.*]] = llvm.mul %[[GROUP]], %[[C64]] : i32
// CHECK-NEXT: %[[C32:.*]] = llvm.mlir.constant(32 : i32) : i32
// CHECK-NEXT: %[[GBYTES:.*]] = llvm.mul %[[GROW]], %[[C32]] : i32
// CHECK: llvm.add %{{.*}}, %[[GBYTES]] : i32
// CHECK: llvm.mlir.constant(-4611685949707911168 : i64)
// CHECK: llvm.mlir.constant(-9223371899411628032 : i64)
// CHECK: "{{.*}}wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {{.*}}, $32, $33, p, 1, 1, 0, 1;{{.*}}"
// CHECK-NOT: wgmma.mma_async
#wg8 = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [8, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 8 : i32, kiln_gpu.wgmma} {
  func.func @two_warpgroups(%pc: !kiln.ptr<f32>, %s: i32) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[1, 128, 16], f16>
    %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[1, 16, 32], f16>
    %z = arith.constant dense<0.0> : tensor<128x32xf32, #wg8>
    %d = kiln_gpu.shared_dot %a[%s], %b[%s], %z : !kiln_gpu.shared<[1, 128, 16], f16>, !kiln_gpu.shared<[1, 16, 32], f16>, tensor<128x32xf32, #wg8>
    %p = kiln.splat %pc : tensor<128x32x!kiln.ptr<f32>, #wg8>
    kiln.store %p, %d : tensor<128x32x!kiln.ptr<f32>, #wg8>
    return
  }
}

// -----

// kiln.dot on wgmma: the lowering gives the dot the static 1024-aligned shared pool the
// dots without a hoisted A share (A 64x16 f16 = 2048 bytes, then B 16x64 f16 = 2048), and, between two barriers (the
// previous dot's reads, then the stores), every thread stores its operand elements in
// 16-byte vectors (runs of 8 along each operand's contiguous dimension: A K-major, B
// N-major), then fences the generic proxy's writes for the tensor cores. A has 32-byte rows
// (mode 3, SBO 256: 0xC000001000000000); B's descriptor points 2048 bytes (+128) into the
// buffer (N-major, mode 1, LBO 16 * 128 = 2048, SBO 1024: 0x4000004000800000).
// CHECK: llvm.mlir.global internal @[[BUF:__kiln_wgmma_smem_pool]]() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<4096 x i8>
// CHECK-LABEL: llvm.func @dot(
// CHECK: %[[B:.*]] = llvm.mlir.addressof @[[BUF]] : !llvm.ptr<3>
// CHECK-NEXT: %[[BASE:.*]] = llvm.ptrtoint %[[B]] : !llvm.ptr<3> to i32
// CHECK-NEXT: nvvm.barrier0
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.getelementptr %[[B]][%{{.*}}] : (!llvm.ptr<3>, i32) -> !llvm.ptr<3>, i8
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<8xf16>, !llvm.ptr<3>
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<8xf16>, !llvm.ptr<3>
// CHECK-NEXT: llvm.inline_asm has_side_effects "fence.proxy.async.shared::cta;", ""
// CHECK-NEXT: nvvm.barrier0
// CHECK: %[[AFIX:.*]] = llvm.mlir.constant(-4611685949707911168 : i64) : i64
// CHECK-NEXT: %[[ADESC:.*]] = llvm.add %{{.*}}, %[[AFIX]] : i64
// CHECK: llvm.lshr %[[BASE]]
// CHECK: %[[BFIX:.*]] = llvm.mlir.constant(4611686293313683456 : i64) : i64
// CHECK-NEXT: %[[BD0:.*]] = llvm.add %{{.*}}, %[[BFIX]] : i64
// CHECK-NEXT: "wgmma.fence.sync.aligned;"
// CHECK-NEXT: %[[OFF:.*]] = llvm.mlir.constant(128 : i64) : i64
// CHECK-NEXT: %[[BDESC:.*]] = llvm.add %[[BD0]], %[[OFF]] : i64
// CHECK-NEXT: "{{.*}}m64n64k16.f32.f16.f16 {{.*}}, $64, $65, p, 1, 1, 0, 1;{{.*}}" {{.*}}, %[[ADESC]], %[[BDESC]], %{{.*}} :
// CHECK-NOT: wgmma.mma_async
// CHECK: "wgmma.commit_group.sync.aligned;"
// CHECK-NEXT: "wgmma.wait_group.sync.aligned 0;"
#la = #kiln_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [16, 2], warpsPerCTA = [4, 1], order = [1, 0]}>
#lb = #kiln_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @dot(%pa: !kiln.ptr<f16>, %pb: !kiln.ptr<f16>, %pc: !kiln.ptr<f32>) {
    %a = kiln.splat %pa : tensor<64x16x!kiln.ptr<f16>, #la>
    %b = kiln.splat %pb : tensor<16x64x!kiln.ptr<f16>, #lb>
    %c = kiln.splat %pc : tensor<64x64x!kiln.ptr<f32>, #wg>
    %x = kiln.load %a : tensor<64x16x!kiln.ptr<f16>, #la>
    %y = kiln.load %b : tensor<16x64x!kiln.ptr<f16>, #lb>
    %z = arith.constant dense<0.0> : tensor<64x64xf32, #wg>
    %d = kiln.dot %x, %y, %z : tensor<64x16xf16, #la> * tensor<16x64xf16, #lb> -> tensor<64x64xf32, #wg>
    kiln.store %c, %d : tensor<64x64x!kiln.ptr<f32>, #wg>
    return
  }
}

// -----

// Two dots one after the other share the pool, sized for the larger (A 64x32 and B 32x64
// f16: 8192 bytes); each stores its operands after a barrier and waits for its wgmmas.
// CHECK: llvm.mlir.global internal @__kiln_wgmma_smem_pool() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<8192 x i8>
// CHECK-NOT: llvm.mlir.global internal @__kiln_wgmma_smem
// CHECK-LABEL: llvm.func @two_dots(
// CHECK: llvm.mlir.addressof @__kiln_wgmma_smem_pool
// CHECK: "wgmma.wait_group.sync.aligned 0;"
// CHECK: llvm.mlir.addressof @__kiln_wgmma_smem_pool
// CHECK: "wgmma.wait_group.sync.aligned 0;"
#la = #kiln_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [16, 2], warpsPerCTA = [4, 1], order = [1, 0]}>
#lb = #kiln_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @two_dots(%pa: !kiln.ptr<f16>, %pb: !kiln.ptr<f16>, %pc: !kiln.ptr<f32>) {
    %a = kiln.splat %pa : tensor<64x16x!kiln.ptr<f16>, #la>
    %b = kiln.splat %pb : tensor<16x64x!kiln.ptr<f16>, #lb>
    %a2 = kiln.splat %pa : tensor<64x32x!kiln.ptr<f16>, #la>
    %b2 = kiln.splat %pb : tensor<32x64x!kiln.ptr<f16>, #lb>
    %c = kiln.splat %pc : tensor<64x64x!kiln.ptr<f32>, #wg>
    %x = kiln.load %a : tensor<64x16x!kiln.ptr<f16>, #la>
    %y = kiln.load %b : tensor<16x64x!kiln.ptr<f16>, #lb>
    %x2 = kiln.load %a2 : tensor<64x32x!kiln.ptr<f16>, #la>
    %y2 = kiln.load %b2 : tensor<32x64x!kiln.ptr<f16>, #lb>
    %z = arith.constant dense<0.0> : tensor<64x64xf32, #wg>
    %d = kiln.dot %x, %y, %z : tensor<64x16xf16, #la> * tensor<16x64xf16, #lb> -> tensor<64x64xf32, #wg>
    %e = kiln.dot %x2, %y2, %d : tensor<64x32xf16, #la> * tensor<32x64xf16, #lb> -> tensor<64x64xf32, #wg>
    kiln.store %c, %e : tensor<64x64x!kiln.ptr<f32>, #wg>
    return
  }
}

// -----

// Dots whose A is stored where it is defined (kiln_gpu.invariant_a) get bytes of the hoisted
// pool: the two dots of %x share one buffer (A stored once), %w, defined after %x's last use,
// reuses its bytes (offset 0; A 2048 + B 2048 bytes). In @overlap %w is defined while %x is
// still live: its buffer starts at the next 1024-aligned byte after %x's (4096; pool 8192).
// CHECK: llvm.mlir.global internal @__kiln_wgmma_smem_hoisted() {addr_space = 3 : i32, alignment = 1024 : i64} : !llvm.array<8192 x i8>
// CHECK-NOT: llvm.mlir.global internal @__kiln_wgmma_smem
// CHECK-LABEL: llvm.func @hoisted(
// CHECK-COUNT-5: llvm.mlir.addressof @__kiln_wgmma_smem_hoisted
// CHECK-NOT: llvm.getelementptr %{{.*}}[4096]
// CHECK-LABEL: llvm.func @overlap(
// CHECK: llvm.getelementptr %{{.*}}[4096] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
#la = #kiln_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [16, 2], warpsPerCTA = [4, 1], order = [1, 0]}>
#lb = #kiln_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @hoisted(%pa: !kiln.ptr<f16>, %pb: !kiln.ptr<f16>, %pc: !kiln.ptr<f32>) {
    %a = kiln.splat %pa : tensor<64x16x!kiln.ptr<f16>, #la>
    %b = kiln.splat %pb : tensor<16x64x!kiln.ptr<f16>, #lb>
    %c = kiln.splat %pc : tensor<64x64x!kiln.ptr<f32>, #wg>
    %x = kiln.load %a : tensor<64x16x!kiln.ptr<f16>, #la>
    %y = kiln.load %b : tensor<16x64x!kiln.ptr<f16>, #lb>
    %z = arith.constant dense<0.0> : tensor<64x64xf32, #wg>
    %d = kiln.dot %x, %y, %z {kiln_gpu.invariant_a} : tensor<64x16xf16, #la> * tensor<16x64xf16, #lb> -> tensor<64x64xf32, #wg>
    %e = kiln.dot %x, %y, %d {kiln_gpu.invariant_a} : tensor<64x16xf16, #la> * tensor<16x64xf16, #lb> -> tensor<64x64xf32, #wg>
    %w = kiln.load %a : tensor<64x16x!kiln.ptr<f16>, #la>
    %f = kiln.dot %w, %y, %e {kiln_gpu.invariant_a} : tensor<64x16xf16, #la> * tensor<16x64xf16, #lb> -> tensor<64x64xf32, #wg>
    kiln.store %c, %f : tensor<64x64x!kiln.ptr<f32>, #wg>
    return
  }
  func.func @overlap(%pa: !kiln.ptr<f16>, %pb: !kiln.ptr<f16>, %pc: !kiln.ptr<f32>) {
    %a = kiln.splat %pa : tensor<64x16x!kiln.ptr<f16>, #la>
    %b = kiln.splat %pb : tensor<16x64x!kiln.ptr<f16>, #lb>
    %c = kiln.splat %pc : tensor<64x64x!kiln.ptr<f32>, #wg>
    %x = kiln.load %a : tensor<64x16x!kiln.ptr<f16>, #la>
    %y = kiln.load %b : tensor<16x64x!kiln.ptr<f16>, #lb>
    %w = kiln.load %a : tensor<64x16x!kiln.ptr<f16>, #la>
    %z = arith.constant dense<0.0> : tensor<64x64xf32, #wg>
    %d = kiln.dot %x, %y, %z {kiln_gpu.invariant_a} : tensor<64x16xf16, #la> * tensor<16x64xf16, #lb> -> tensor<64x64xf32, #wg>
    %f = kiln.dot %w, %y, %d {kiln_gpu.invariant_a} : tensor<64x16xf16, #la> * tensor<16x64xf16, #lb> -> tensor<64x64xf32, #wg>
    %e = kiln.dot %x, %y, %f {kiln_gpu.invariant_a} : tensor<64x16xf16, #la> * tensor<16x64xf16, #lb> -> tensor<64x64xf32, #wg>
    kiln.store %c, %e : tensor<64x64x!kiln.ptr<f32>, #wg>
    return
  }
}

// -----

// The lowering's own checks on shared_dot. An accumulator in neither the warpgroup nor the
// mma.sync layout:
#bl = #kiln_gpu.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @blocked_accumulator(%pc: !kiln.ptr<f32>, %s: i32) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[1, 64, 16], f16>
    %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[1, 16, 32], f16>
    %z = arith.constant dense<0.0> : tensor<64x32xf32, #bl>
    // expected-error @below {{'kiln_gpu.shared_dot' op expected the warpgroup (wgmma) or the mma.sync accumulator layout, found 'tensor<64x32xf32, #kiln_gpu.blocked<{sizePerThread = [1, 4], threadsPerWarp = [4, 8], warpsPerCTA = [4, 1], order = [1, 0]}>>'}}
    // expected-error @below {{failed to legalize operation 'kiln_gpu.shared_dot'}}
    %d = kiln_gpu.shared_dot %a[%s], %b[%s], %z : !kiln_gpu.shared<[1, 64, 16], f16>, !kiln_gpu.shared<[1, 16, 32], f16>, tensor<64x32xf32, #bl>
    %p = kiln.splat %pc : tensor<64x32x!kiln.ptr<f32>, #bl>
    kiln.store %p, %d : tensor<64x32x!kiln.ptr<f32>, #bl>
    return
  }
}

// -----

// A in registers must be in the accumulator layout (wgmma's A fragments).
#bl = #kiln_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [16, 2], warpsPerCTA = [4, 1], order = [1, 0]}>
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.wgmma} {
  func.func @register_a_layout(%pa: !kiln.ptr<f16>, %pc: !kiln.ptr<f32>, %s: i32) {
    %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[1, 16, 64], f16>
    %pat = kiln.splat %pa : tensor<64x16x!kiln.ptr<f16>, #bl>
    %x = kiln.load %pat : tensor<64x16x!kiln.ptr<f16>, #bl>
    %z = arith.constant dense<0.0> : tensor<64x64xf32, #wg>
    // expected-error @below {{'kiln_gpu.shared_dot' op expected A in registers under the warpgroup accumulator layout (run -kiln-assign-layouts), found 'tensor<64x16xf16, #kiln_gpu.blocked<{sizePerThread = [1, 8], threadsPerWarp = [16, 2], warpsPerCTA = [4, 1], order = [1, 0]}>>'}}
    // expected-error @below {{failed to legalize operation 'kiln_gpu.shared_dot'}}
    %d = kiln_gpu.shared_dot %x, %b[%s], %z : tensor<64x16xf16, #bl>, !kiln_gpu.shared<[1, 16, 64], f16>, tensor<64x64xf32, #wg>
    %p = kiln.splat %pc : tensor<64x64x!kiln.ptr<f32>, #wg>
    kiln.store %p, %d : tensor<64x64x!kiln.ptr<f32>, #wg>
    return
  }
}

// -----

// One B ring read by two dots: as it holds its slots (32 x 64, N-major: wgmma's B transpose
// flag 1) and, with b_transposed, as their transpose (K 64 x N 32 of the same bytes: K-major,
// flag 0, the K-major descriptor 0x4000004000000000).
// CHECK-LABEL: llvm.func @b_transposed
// CHECK-COUNT-2: m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0, 1;
// CHECK: llvm.mlir.constant(4611686293305294848 : i64)
// CHECK-COUNT-4: m64n32k16.f32.f16.f16 {{.*}}, p, 1, 1, 0, 0;
#wg = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [4, 1], order = [1, 0], wgmma = true}>
module attributes {kiln_gpu.num_warps = 4 : i32, kiln_gpu.threads_per_warp = 32 : i32, kiln_gpu.wgmma} {
  func.func @b_transposed(%pc: !kiln.ptr<f32>, %s: i32) {
    %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], f16>
    %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], f16>
    %z = arith.constant dense<0.0> : tensor<64x64xf32, #wg>
    %d = kiln_gpu.shared_dot %a[%s], %b[%s], %z : !kiln_gpu.shared<[2, 64, 32], f16>, !kiln_gpu.shared<[2, 32, 64], f16>, tensor<64x64xf32, #wg>
    %a2 = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 64], f16>
    %z2 = arith.constant dense<0.0> : tensor<64x32xf32, #wg>
    %e = kiln_gpu.shared_dot %a2[%s], %b[%s], %z2 {b_transposed} : !kiln_gpu.shared<[2, 64, 64], f16>, !kiln_gpu.shared<[2, 32, 64], f16>, tensor<64x32xf32, #wg>
    %p = kiln.splat %pc : tensor<64x64x!kiln.ptr<f32>, #wg>
    kiln.store %p, %d : tensor<64x64x!kiln.ptr<f32>, #wg>
    %p2 = kiln.splat %pc : tensor<64x32x!kiln.ptr<f32>, #wg>
    kiln.store %p2, %e : tensor<64x32x!kiln.ptr<f32>, #wg>
    return
  }
}
