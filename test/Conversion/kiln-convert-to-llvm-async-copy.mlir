// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s

// A thread's 16-byte copies into a 128-byte-swizzled slot: the first one's address is
// swizzled (one xor); the others lie whole 8-row groups further (16 rows under 4 warps), so
// they are that address plus an immediate, not a swizzle of their own each.
// CHECK-LABEL: llvm.func @copy_rows(
// CHECK: llvm.xor
// CHECK-NOT: llvm.xor
// CHECK: llvm.inline_asm has_side_effects "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r" %[[FIRST:[0-9]+]],
// CHECK: %[[C:.*]] = llvm.mlir.constant(2048 : i32) : i32
// CHECK: %[[NEXT:.*]] = llvm.add %[[FIRST]], %[[C]] : i32
// CHECK: llvm.inline_asm has_side_effects "cp.async.cg.shared.global [$0], [$1], 16, $2;", "r,l,r" %[[NEXT]],
// CHECK: llvm.mlir.constant(14336 : i32) : i32
// CHECK: llvm.add %[[FIRST]],
// CHECK-NOT: llvm.xor
func.func @copy_rows(%pa: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}) {
  %ra = kiln_gpu.local_alloc {operand = 0 : i32} : <[2, 128, 64], f16>
  %c1 = arith.constant 1 : i32
  %rows = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %cols = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  %r2 = kiln.expand_dims %rows {axis = 1 : i32} : tensor<128xi32> -> tensor<128x1xi32>
  %c2 = kiln.expand_dims %cols {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  %c64 = arith.constant dense<64> : tensor<128x1xi32>
  %rs = arith.muli %r2, %c64 : tensor<128x1xi32>
  %rb = kiln.broadcast %rs : tensor<128x1xi32> -> tensor<128x64xi32>
  %cb = kiln.broadcast %c2 : tensor<1x64xi32> -> tensor<128x64xi32>
  %off = arith.addi %rb, %cb : tensor<128x64xi32>
  %p = kiln.splat %pa : tensor<128x64x!kiln.ptr<f16>>
  %ps = kiln.addptr %p, %off : tensor<128x64x!kiln.ptr<f16>>, tensor<128x64xi32>
  kiln_gpu.async_copy %ra[%c1], %ps : <[2, 128, 64], f16>, tensor<128x64x!kiln.ptr<f16>>
  kiln_gpu.async_commit
  kiln_gpu.async_wait {pending = 0 : i32}
  return
}
