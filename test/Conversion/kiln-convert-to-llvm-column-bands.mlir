// RUN: kiln-opt %s -kiln-convert-to-llvm | FileCheck %s

// A wgmma accumulator tile (128 x 256 f16, 8 warps) on its way to a store whose warps write
// 32 consecutive elements of a row moves through shared memory one band of 64 columns at a
// time: 16 KiB of band plus 16 bytes of padding a row (rows 72 elements apart, 18432 bytes of
// scratch, not the whole tile's 66 KiB), each thread's column pair stored as one 4-byte
// vector, the result's elements loaded one by one; a barrier between the stores and the loads
// of a band and before each later band's stores. Nothing ran before, so none comes first.
// CHECK: llvm.mlir.global internal @__kiln_scratch() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<18432 x i8>
// CHECK-LABEL: llvm.func @bands(
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.mlir.constant(72 : i32)
// CHECK-NOT: nvvm.barrier0
// CHECK-COUNT-16: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<3>
// CHECK-NOT: llvm.store {{.*}} !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK-COUNT-32: llvm.load %{{.*}} {alignment = 2 : i64} : !llvm.ptr<3> -> f16
// CHECK: nvvm.barrier0
// CHECK-COUNT-16: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: nvvm.barrier0
// CHECK: nvvm.barrier0
// CHECK: nvvm.barrier0
// CHECK: nvvm.barrier0
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.return
#acc = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [8, 1], order = [1, 0], wgmma = true}>
#rows = #kiln_gpu.blocked<{sizePerThread = [1, 1], threadsPerWarp = [1, 32], warpsPerCTA = [8, 1], order = [1, 0]}>
module attributes {kiln_gpu.num_warps = 8 : i32, kiln_gpu.wgmma} {
func.func @bands(%pa: !kiln.ptr<f16>, %pc: !kiln.ptr<f16>) {
  %q = kiln.splat %pa : tensor<128x256x!kiln.ptr<f16>, #acc>
  %x = kiln.load %q : tensor<128x256x!kiln.ptr<f16>, #acc>
  %y = kiln_gpu.convert_layout %x : tensor<128x256xf16, #acc> -> tensor<128x256xf16, #rows>
  %p = kiln.splat %pc : tensor<128x256x!kiln.ptr<f16>, #rows>
  kiln.store %p, %y : tensor<128x256x!kiln.ptr<f16>, #rows>
  return
}
}
