// --emit=launch prints what launching the compiled kernel needs. A matmul through tensor
// descriptors on sm_90a: 8 warps, 4 rings slots of 128x64 and 64x128 fp16 (128 KiB of dynamic
// shared memory; C's store buffer reuses it), and each tensor map parameter's box rows (the
// whole block: 128 for A and C, 64 for B; 0 for the other parameters).
// RUN: kilnc %s --arch=sm_90a --num-warps=8 --num-stages=4 --emit=launch | FileCheck %s
// CHECK: kernel tma_matmul
// CHECK-NEXT: threads 256
// CHECK-NEXT: shared_bytes 131072
// CHECK-NEXT: tma_box_rows 128 0 64 0 128 0 0 0 0 0 0 0 0 0 0
// The host backend launches through the runtime: no launch information to print.
// RUN: not kilnc %s --arch=cpu --emit=launch 2>&1 | FileCheck %s --check-prefix=HOST
// HOST: kilnc: error: --emit=launch does not apply to --arch=cpu

func.func @tma_matmul(%ad: !kiln.tensormap, %ab: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                      %bd: !kiln.tensormap, %bb: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                      %cd: !kiln.tensormap, %cb: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                      %m: i32, %n: i32, %k: i32, %sa: i64, %sb: i64, %sc: i64, %om: i32,
                      %on: i32, %kt: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %acc = scf.for %i = %c0 to %kt step %c1 iter_args(%c = %zero) -> (tensor<128x128xf32>) : i32 {
    %ok = arith.muli %i, %c64 : i32
    %a = kiln.descriptor_load %ad, %ab[%om, %ok] shape [%m, %k] strides [%sa]
        : !kiln.ptr<f16> -> tensor<128x64xf16>
    %b = kiln.descriptor_load %bd, %bb[%ok, %on] shape [%k, %n] strides [%sb]
        : !kiln.ptr<f16> -> tensor<64x128xf16>
    %d = kiln.dot %a, %b, %c : tensor<128x64xf16> * tensor<64x128xf16> -> tensor<128x128xf32>
    scf.yield %d : tensor<128x128xf32>
  }
  %h = arith.truncf %acc : tensor<128x128xf32> to tensor<128x128xf16>
  kiln.descriptor_store %cd, %cb[%om, %on], %h shape [%m, %n] strides [%sc]
      : !kiln.ptr<f16>, tensor<128x128xf16>
  return
}
