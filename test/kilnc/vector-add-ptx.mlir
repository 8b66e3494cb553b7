// The vector-add kernel's pointers and n are divisible by 16: every access is 128 bits wide,
// predicated by the mask.
// RUN: kilnc %kernels/vector_add.mlir --arch=sm_90 | FileCheck %s
// RUN: kilnc %kernels/vector_add.mlir --arch=sm_80 | FileCheck %s --check-prefix=SM80

// CHECK: .target sm_90
// CHECK-LABEL: .visible .entry vector_add(
// CHECK: .maxntid 128, 1, 1
// CHECK-COUNT-4: @%p{{[0-9]+}} ld.global.v4.b32 { %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}} }
// CHECK-NOT: ld.global.b32
// CHECK-COUNT-2: @%p{{[0-9]+}} st.global.v4.b32
// CHECK-NOT: st.global.b32

// SM80: .target sm_80
// SM80: ld.global.v4.b32
