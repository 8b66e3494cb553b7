// RUN: kiln-opt %s -split-input-file -kiln-expand-fp8="hardware-cvt=1" -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s

// sm_89+: fp8 conversions through PTX's cvt of pairs. A thread's 4 owned elements of 512
// (128 threads) are 2 pairs: f32 -> e4m3 rounds and saturates two at a time (the second
// element into the upper byte), e4m3 -> f16 widens two at a time and f16 -> f32 is exact.
// CHECK-LABEL: llvm.func @roundtrip(
// CHECK-COUNT-2: llvm.inline_asm "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", "=h,f,f" {{.*}} : (f32, f32) -> i16
// CHECK-NOT: cvt.rn.satfinite
// CHECK-COUNT-2: llvm.inline_asm "cvt.rn.f16x2.e4m3x2 $0, $1;", "=r,h" {{.*}} : (i16) -> i32
// CHECK: llvm.fpext %{{.*}} : f16 to f32
// CHECK-NOT: arith.
func.func @roundtrip(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}) {
  %r = kiln.make_range {end = 512 : i32, start = 0 : i32} : tensor<512xi32>
  %p = kiln.splat %x : tensor<512x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<512x!kiln.ptr<f32>>, tensor<512xi32>
  %v = kiln.load %ps : tensor<512x!kiln.ptr<f32>>
  %q = arith.truncf %v : tensor<512xf32> to tensor<512xf8E4M3FN>
  %w = arith.extf %q : tensor<512xf8E4M3FN> to tensor<512xf32>
  kiln.store %ps, %w : tensor<512x!kiln.ptr<f32>>
  return
}

// -----

// e5m2 from f16 pairs (one 32-bit register) and back to bf16 through f32 (exact); a scalar
// is paired with itself.
// CHECK-LABEL: llvm.func @e5m2(
// CHECK: %[[LO:.*]] = llvm.extractvalue %[[V:.*]][0] : !llvm.struct<(f16, f16)>
// CHECK: %[[HI:.*]] = llvm.extractvalue %[[V]][1] : !llvm.struct<(f16, f16)>
// CHECK: %[[P0:.*]] = llvm.insertelement %[[LO]], %{{.*}}[%{{.*}} : i32] : vector<2xf16>
// CHECK: %[[P1:.*]] = llvm.insertelement %[[HI]], %[[P0]][%{{.*}} : i32] : vector<2xf16>
// CHECK: %[[W:.*]] = llvm.bitcast %[[P1]] : vector<2xf16> to i32
// CHECK: llvm.inline_asm "cvt.rn.satfinite.e5m2x2.f16x2 $0, $1;", "=h,r" %[[W]] : (i32) -> i16
// CHECK: llvm.inline_asm "cvt.rn.f16x2.e5m2x2 $0, $1;", "=r,h"
// CHECK: llvm.fptrunc %{{.*}} : f32 to bf16
// CHECK: llvm.inline_asm "cvt.rn.satfinite.e5m2x2.f32 $0, $1, $2;", "=h,f,f" %[[S:.*]], %[[S]] :
func.func @e5m2(%x: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                %y: !kiln.ptr<bf16> {kiln.divisibility = 16 : i32}, %s: f32,
                %z: !kiln.ptr<f8E5M2>) {
  %r = kiln.make_range {end = 256 : i32, start = 0 : i32} : tensor<256xi32>
  %p = kiln.splat %x : tensor<256x!kiln.ptr<f16>>
  %ps = kiln.addptr %p, %r : tensor<256x!kiln.ptr<f16>>, tensor<256xi32>
  %v = kiln.load %ps : tensor<256x!kiln.ptr<f16>>
  %q = arith.truncf %v : tensor<256xf16> to tensor<256xf8E5M2>
  %w = arith.extf %q : tensor<256xf8E5M2> to tensor<256xbf16>
  %py = kiln.splat %y : tensor<256x!kiln.ptr<bf16>>
  %pys = kiln.addptr %py, %r : tensor<256x!kiln.ptr<bf16>>, tensor<256xi32>
  kiln.store %pys, %w : tensor<256x!kiln.ptr<bf16>>
  %t = arith.truncf %s : f32 to f8E5M2
  kiln.store %z, %t : !kiln.ptr<f8E5M2>
  return
}
