// RUN: kiln-opt %s -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s

// The lowering of a warp-specialized kernel (-kiln-warp-specialize's output): the launch's
// warps (kiln_gpu.launch_warps) give maxntid, and the registers a thread starts with (65536 /
// 384 rounded down to 8: 168) maxnreg, so that ptxas knows the count setmaxnreg changes (without
// it ptxas may ignore setmaxnreg, C7508); the warp id is read once from lane 0; the set-up
// both roles run keeps bar.sync 0 (kiln_gpu.all_threads: the mbarriers' init barrier and the
// barrier op); the producer gives registers back and its first thread (warp 8's lane 0, thread
// 256) issues the expect_tx; the consumers take the registers, and their barriers are named
// barrier 1 over their 256 threads; their named barriers take the value's id.
// CHECK-LABEL: llvm.func @roles(
// CHECK-SAME: nvvm.maxnreg = 168 : i32
// CHECK-SAME: nvvm.maxntid = array<i32: 384, 1, 1>
// CHECK: %[[W:.*]] = llvm.inline_asm {kiln_gpu.uniform_warp_id = "thread_id / 32"} "shfl.sync.idx.b32
// CHECK: "fence.mbarrier_init.release.cluster;"
// CHECK-NEXT: nvvm.barrier0
// CHECK-NEXT: nvvm.barrier0
// CHECK: %[[P:.*]] = llvm.icmp "uge" %[[W]], %{{.*}} : i32
// CHECK-NEXT: llvm.cond_br %[[P]], ^[[PRODUCER:.*]], ^[[CONSUMER:[^ ]*]]
// CHECK: ^[[PRODUCER]]:
// CHECK-NEXT: "setmaxnreg.dec.sync.aligned.u32 40;"
// CHECK: %[[LEADER:.*]] = llvm.mlir.constant(256 : i32) : i32
// CHECK-NEXT: %[[TID:.*]] = nvvm.read.ptx.sreg.tid.x : i32
// CHECK-NEXT: llvm.icmp "eq" %[[TID]], %[[LEADER]] : i32
// CHECK: "mbarrier.arrive.expect_tx.shared::cta.b64 _, [$0], $1;"
// CHECK: ^[[CONSUMER]]:
// CHECK-NEXT: "setmaxnreg.inc.sync.aligned.u32 232;"
// CHECK-NEXT: %[[ID:.*]] = llvm.mlir.constant(1 : i32) : i32
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(256 : i32) : i32
// CHECK-NEXT: nvvm.barrier id = %[[ID]] number_of_threads = %[[N]]
// The consumers' warpgroups take turns at named barriers whose id is a value (ping-pong):
// bar.sync, and bar.arrive as PTX text.
// CHECK-NEXT: %[[T:.*]] = llvm.mlir.constant(256 : i32) : i32
// CHECK-NEXT: nvvm.barrier id = %arg0 number_of_threads = %[[T]]
// CHECK-NEXT: %[[T2:.*]] = llvm.mlir.constant(256 : i32) : i32
// CHECK-NEXT: llvm.inline_asm has_side_effects "bar.arrive $0, $1;", "r,r" %arg0, %[[T2]]
// CHECK-NOT: nvvm.barrier0
module attributes {kiln_gpu.num_warps = 8 : i32, kiln_gpu.consumer_warps = 8 : i32, kiln_gpu.launch_warps = 12 : i32, kiln_gpu.wgmma} {
  func.func @roles(%s: i32, %pred: i1) {
    %bars = kiln_gpu.mbarrier_alloc {kiln_gpu.all_threads} : <2>
    kiln_gpu.barrier {kiln_gpu.all_threads}
    %w = kiln_gpu.warp_id : i32
    %c8 = arith.constant 8 : i32
    %p = arith.cmpi uge, %w, %c8 : i32
    scf.if %p {
      kiln_gpu.set_max_registers 40
      kiln_gpu.mbarrier_expect %bars[%s], %pred {bytes = 1024 : i32, kiln_gpu.leader_warp = 8 : i32} : <2>
    } else {
      kiln_gpu.set_max_registers 232 increase
      kiln_gpu.barrier
      kiln_gpu.named_barrier %s, 256
      kiln_gpu.named_barrier %s, 256 arrive
    }
    return
  }
}
