// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s

// trans moves its tile through the shared scratch pool: each owned element stored at its
// transposed row-major index (padded by index / 32), a barrier, then each element of the
// result loaded by its own index. Nothing ran before it, so no barrier comes first. reshape
// (34 f16 each, 80 bytes with alignment) takes the pool's second slot (from byte 128): the
// trans's reads still outstanding do not touch it, so it needs no barrier first either.
// CHECK: llvm.mlir.global internal @__kiln_scratch() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<208 x i8>
// CHECK-LABEL: llvm.func @t(
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.lshr %{{.*}}, %{{.*}} : i32
// CHECK: llvm.store %{{.*}}, %{{.*}} : f16, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> f16
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.getelementptr %{{.*}}[128] : (!llvm.ptr<3>) -> !llvm.ptr<3>, i8
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.store %{{.*}}, %{{.*}} : f16, !llvm.ptr<3>
// CHECK: nvvm.barrier0
// CHECK: llvm.load %{{.*}} : !llvm.ptr<3> -> f16
func.func @t(%p: !kiln.ptr<f16>) {
  %ps = kiln.splat %p : tensor<4x8x!kiln.ptr<f16>>
  %v = kiln.load %ps : tensor<4x8x!kiln.ptr<f16>>
  %t = kiln.trans %v {order = array<i32: 1, 0>} : tensor<4x8xf16> -> tensor<8x4xf16>
  %r = kiln.reshape %t : tensor<8x4xf16> -> tensor<4x8xf16>
  kiln.store %ps, %r : tensor<4x8x!kiln.ptr<f16>>
  return
}
