// RUN: kiln-opt %s -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s

// A scan of 8 elements: log2(8) = 3 Hillis-Steele rounds through the shared scratch pool
// (9 i32, 48 bytes with alignment), each publishing the elements (barrier, stores, barrier)
// and combining every element with the one d = 1, 2, 4 before it where there is one (icmp
// sge c, d; select). The first round's leading barrier is left out: nothing ran before.
// CHECK: llvm.mlir.global internal @__kiln_scratch() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<48 x i8>
// CHECK-LABEL: llvm.func @cumsum(
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.store {{.*}} : i32, !llvm.ptr<3>
// CHECK-COUNT-1: nvvm.barrier0
// CHECK: %[[HAS:.*]] = llvm.icmp "sge"
// CHECK: llvm.select %[[HAS]]
// CHECK-COUNT-2: nvvm.barrier0
// CHECK: llvm.icmp "sge"
// CHECK-COUNT-2: nvvm.barrier0
// CHECK: llvm.icmp "sge"
// CHECK-NOT: nvvm.barrier0
// CHECK: llvm.return
func.func @cumsum(%p: !kiln.ptr<i32>) {
  %r = kiln.make_range {end = 8 : i32, start = 0 : i32} : tensor<8xi32>
  %ps = kiln.splat %p : tensor<8x!kiln.ptr<i32>>
  %q = kiln.addptr %ps, %r : tensor<8x!kiln.ptr<i32>>, tensor<8xi32>
  %x = kiln.load %q : tensor<8x!kiln.ptr<i32>>
  %c = kiln.scan(%x) axis = 0 {
  ^bb0(%a: i32, %b: i32):
    %t = arith.addi %a, %b : i32
    kiln.scan.return %t : i32
  } : (tensor<8xi32>) -> tensor<8xi32>
  kiln.store %q, %c : tensor<8x!kiln.ptr<i32>>
  return
}
