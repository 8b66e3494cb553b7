// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s --check-prefix=GPU
// RUN: kiln-opt %s -split-input-file -kiln-convert-to-host | FileCheck %s --check-prefix=HOST

// kiln.ptr_cast: an address loaded as an i64 becomes a pointer (llvm.inttoptr; tutorial 08's
// grouped GEMM loads its operands' addresses), a pointer an i64 (llvm.ptrtoint), and a
// pointer to f16 a pointer to i16 keeps its value. On the host, an access through a pointer
// the kernel computed from an integer is not checked against the launch's buffers (it is in
// none of them): the load of %addrs and the store to %out call the runtime's range check, the load through
// %q does not.
// GPU-LABEL: llvm.func @casts(
// GPU: llvm.inttoptr %{{.*}} : i64 to !llvm.ptr<1>
// GPU: llvm.ptrtoint %{{.*}} : !llvm.ptr<1> to i64
// GPU-NOT: kiln.ptr_cast
// HOST-LABEL: func.func private @casts(
// HOST: llvm.call
// HOST: llvm.load %{{.*}} {alignment = 8 : i64} : !llvm.ptr -> i64
// HOST: %[[P:.*]] = llvm.inttoptr %{{.*}} : i64 to !llvm.ptr
// HOST-NEXT: scf.if
// HOST-NEXT: llvm.load %[[P]] {alignment = 2 : i64} : !llvm.ptr -> i16
// HOST-NOT: llvm.call
// HOST: llvm.ptrtoint %[[P]] : !llvm.ptr to i64
// HOST: llvm.call
// HOST-NOT: kiln.ptr_cast
// HOST: return
func.func @casts(%addrs: !kiln.ptr<i64> {kiln.divisibility = 16 : i32},
                 %out: !kiln.ptr<i64> {kiln.divisibility = 16 : i32}) {
  %a = kiln.load %addrs : !kiln.ptr<i64>
  %p = kiln.ptr_cast %a : i64 -> !kiln.ptr<f16>
  %q = kiln.ptr_cast %p : !kiln.ptr<f16> -> !kiln.ptr<i16>
  %x = kiln.load %q : !kiln.ptr<i16>
  %b = kiln.ptr_cast %q : !kiln.ptr<i16> -> i64
  %xe = arith.extsi %x : i16 to i64
  %s = arith.addi %b, %xe : i64
  kiln.store %out, %s : !kiln.ptr<i64>
  return
}
