// RUN: kiln-opt %s -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm=maxnreg=40 | FileCheck %s
// RUN: kiln-opt %s -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s --check-prefix=NONE
// RUN: not kiln-opt %s -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm=maxnreg=300 2>&1 | FileCheck %s --check-prefix=BAD

// The pass's maxnreg option (Triton's maxnreg, CompileOptions::maxnreg) caps the registers
// per thread of each kernel: nvvm.maxnreg beside nvvm.maxntid (ptxas's .maxnreg).
// CHECK-LABEL: llvm.func @capped(
// CHECK-SAME: nvvm.kernel
// CHECK-SAME: nvvm.maxnreg = 40 : i32
// CHECK-SAME: nvvm.maxntid = array<i32: 128, 1, 1>

// Without it, no cap.
// NONE-LABEL: llvm.func @capped(
// NONE-NOT: nvvm.maxnreg
// NONE: llvm.return

// ptxas takes 16 to 255 registers per thread.
// BAD: error: maxnreg = 300: expected a register count per thread from 16 to 255
func.func @capped(%x: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %p = kiln.splat %x : tensor<128x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %v = kiln.load %ps : tensor<128x!kiln.ptr<f32>>
  kiln.store %ps, %v : tensor<128x!kiln.ptr<f32>>
  return
}
