// RUN: kiln-opt %s -split-input-file -kiln-lower-descriptors=tma-stores=true | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-lower-descriptors="tma-stores=true shared-budget=65536" | FileCheck %s --check-prefix=SMALL

// A store inside a loop (a persistent kernel's epilogue, one tile per iteration) goes through
// the TMA too: its one-slot buffer is allocated at the kernel's entry, live beside the rings
// of the loop (-kiln-convert-to-llvm gives them disjoint bytes), when all of them fit the
// shared-memory budget (here a 96 KiB ring and the 32 KiB buffer). With a 64 KiB budget the
// store stays the masked store of the block.
// CHECK-LABEL: func.func @epilogue_in_loop(
// CHECK-NEXT: %[[BUF:.*]] = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : <[1, 128, 128], f16>
// CHECK: %[[RING:.*]] = kiln_gpu.local_alloc
// CHECK: scf.for
// CHECK: kiln_gpu.tma_store %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}}, %[[BUF]] : !kiln.tensormap, tensor<128x128xf16>, <[1, 128, 128], f16>
// CHECK-NOT: kiln.store
// SMALL-LABEL: func.func @epilogue_in_loop(
// SMALL-NOT: kiln_gpu.tma_store
// SMALL: kiln.store
func.func @epilogue_in_loop(%d: !kiln.tensormap, %base: !kiln.ptr<f16>, %m: i32, %n: i32,
                            %s: i64, %tiles: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c128 = arith.constant 128 : i32
  %ring = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[3, 128, 128], f16>
  %v = arith.constant dense<1.0> : tensor<128x128xf16>
  scf.for %t = %c0 to %tiles step %c1 : i32 {
    %i = arith.muli %t, %c128 : i32
    kiln.descriptor_store %d, %base[%i, %c0], %v shape [%m, %n] strides [%s]
        : !kiln.ptr<f16>, tensor<128x128xf16>
  }
  return
}

// -----

// A store under scf.if but in no loop (-kiln-pointer-tiles-to-descriptors' versioned C store)
// allocates its buffer at the store, as at the top level: it may reuse the bytes of rings dead
// by then, so it needs no room beside them (the SMALL budget takes it too).
// CHECK-LABEL: func.func @guarded_epilogue(
// CHECK: %[[RING:.*]] = kiln_gpu.local_alloc {operand = 1 : i32} : <[3, 128, 128], f16>
// CHECK: scf.if
// CHECK-NEXT: %[[BUF:.*]] = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : <[1, 128, 128], f16>
// CHECK-NEXT: kiln_gpu.tma_store %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}}, %[[BUF]]
// SMALL-LABEL: func.func @guarded_epilogue(
// SMALL: kiln_gpu.tma_store
func.func @guarded_epilogue(%d: !kiln.tensormap, %base: !kiln.ptr<f16>, %m: i32, %n: i32,
                            %s: i64, %go: i1) {
  %c0 = arith.constant 0 : i32
  %ring = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[3, 128, 128], f16>
  %v = arith.constant dense<1.0> : tensor<128x128xf16>
  scf.if %go {
    kiln.descriptor_store %d, %base[%c0, %c0], %v shape [%m, %n] strides [%s]
        : !kiln.ptr<f16>, tensor<128x128xf16>
  }
  return
}
