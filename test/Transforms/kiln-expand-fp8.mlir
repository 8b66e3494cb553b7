// RUN: kiln-opt %s -split-input-file -kiln-expand-fp8 | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-expand-fp8="wgmma=1 num-warps=4" | FileCheck %s --check-prefix=WGMMA
// RUN: kiln-opt %s -split-input-file -kiln-expand-fp8="hardware-cvt=1" | FileCheck %s --check-prefix=HW

// hardware-cvt (sm_89+): the conversions stay for the LLVM conversion's cvt instructions.
// HW-LABEL: func.func @extend(
// HW-NEXT: arith.extf %{{.*}} : tensor<64xf8E4M3FN> to tensor<64xf32>
// HW-NOT: arith.extui
// HW-LABEL: func.func @truncate(
// HW-NEXT: arith.truncf %{{.*}} : f32 to f8E5M2
// HW-NOT: arith.bitcast

// fp8 -> f32: the bits, zero-extended; normal numbers rebias the exponent field (+120 for
// e4m3fn), subnormals are m * 2^-9, the all-ones code is NaN.
// CHECK-LABEL: func.func @extend(
// CHECK: %[[B:.*]] = arith.bitcast %{{.*}} : tensor<64xf8E4M3FN> to tensor<64xi8>
// CHECK: arith.extui %[[B]] : tensor<64xi8> to tensor<64xi32>
// CHECK-DAG: arith.constant dense<120> : tensor<64xi32>
// CHECK-DAG: arith.constant dense<0.001953125> : tensor<64xf32>
// CHECK-DAG: arith.constant dense<2143289344> : tensor<64xi32>
// CHECK: %[[R:.*]] = arith.bitcast %{{.*}} : tensor<64xi32> to tensor<64xf32>
// CHECK-NOT: arith.extf
// CHECK: return %[[R]]
func.func @extend(%x: tensor<64xf8E4M3FN>) -> tensor<64xf32> {
  %y = arith.extf %x : tensor<64xf8E4M3FN> to tensor<64xf32>
  return %y : tensor<64xf32>
}

// -----

// f32 -> e5m2: round to nearest even on the 21 dropped mantissa bits, subnormals through
// |x| * 2^16 + 2^23, saturation to 0x7B (57344), NaN to 0x7F; the sign comes back last.
// CHECK-LABEL: func.func @truncate(
// CHECK: arith.bitcast %{{.*}} : f32 to i32
// CHECK-DAG: arith.constant 1048576 : i32
// CHECK-DAG: arith.constant 6.553600e+04 : f32
// CHECK-DAG: arith.constant 0x4B000000 : f32
// CHECK-DAG: arith.constant 123 : i32
// CHECK-DAG: arith.constant 127 : i32
// CHECK: %[[T:.*]] = arith.trunci %{{.*}} : i32 to i8
// CHECK: %[[R:.*]] = arith.bitcast %[[T]] : i8 to f8E5M2
// CHECK-NOT: arith.truncf
// CHECK: return %[[R]]
func.func @truncate(%x: f32) -> f8E5M2 {
  %y = arith.truncf %x : f32 to f8E5M2
  return %y : f8E5M2
}

// -----

// A dot of fp8 tiles: without wgmma its operands become f16 (exactly) and it runs as an f16
// dot; with wgmma on a warpgroup tile it stays fp8.
// CHECK-LABEL: func.func @dot(
// CHECK: arith.truncf %{{.*}} : tensor<64x32xf32> to tensor<64x32xf16>
// CHECK: arith.truncf %{{.*}} : tensor<32x64xf32> to tensor<32x64xf16>
// CHECK: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
// HW-LABEL: func.func @dot(
// HW-NEXT: arith.extf %{{.*}} : tensor<64x32xf8E4M3FN> to tensor<64x32xf16>
// HW-NEXT: arith.extf %{{.*}} : tensor<32x64xf8E4M3FN> to tensor<32x64xf16>
// HW-NEXT: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
// WGMMA-LABEL: func.func @dot(
// WGMMA-NOT: arith.truncf
// WGMMA: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf8E4M3FN> * tensor<32x64xf8E4M3FN> -> tensor<64x64xf32>
func.func @dot(%a: tensor<64x32xf8E4M3FN>, %b: tensor<32x64xf8E4M3FN>, %c: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %d = kiln.dot %a, %b, %c : tensor<64x32xf8E4M3FN> * tensor<32x64xf8E4M3FN> -> tensor<64x64xf32>
  return %d : tensor<64x64xf32>
}

// -----

// e4m3 x e5m2 (Triton takes fp8 formats in any pairing): f16 operands on every target, with
// wgmma too.
// WGMMA-LABEL: func.func @dot_mixed(
// WGMMA: arith.truncf %{{.*}} : tensor<64x32xf32> to tensor<64x32xf16>
// WGMMA: arith.truncf %{{.*}} : tensor<32x64xf32> to tensor<32x64xf16>
// WGMMA: kiln.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
// HW-LABEL: func.func @dot_mixed(
// HW-NEXT: arith.extf %{{.*}} : tensor<64x32xf8E4M3FN> to tensor<64x32xf16>
// HW-NEXT: arith.extf %{{.*}} : tensor<32x64xf8E5M2> to tensor<32x64xf16>
func.func @dot_mixed(%a: tensor<64x32xf8E4M3FN>, %b: tensor<32x64xf8E5M2>, %c: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %d = kiln.dot %a, %b, %c : tensor<64x32xf8E4M3FN> * tensor<32x64xf8E5M2> -> tensor<64x64xf32>
  return %d : tensor<64x64xf32>
}
