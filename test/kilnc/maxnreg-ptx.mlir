// kilnc --maxnreg caps the registers per thread (Triton's maxnreg): .maxnreg in the PTX; the
// range is ptxas's, 16 to 255.
// RUN: kilnc %kernels/vector_add.mlir --arch=sm_90 --maxnreg=40 | FileCheck %s
// RUN: kilnc %kernels/vector_add.mlir --arch=sm_90 | FileCheck %s --check-prefix=NONE
// RUN: not kilnc %kernels/vector_add.mlir --arch=sm_90 --maxnreg=300 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK-LABEL: .visible .entry vector_add(
// CHECK: .maxnreg 40
// NONE-NOT: .maxnreg
// BAD: error: maxnreg = 300: expected a register count per thread from 16 to 255
