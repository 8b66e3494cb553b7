// kilnc compiles a loop marked kiln.warp_specialize (what tl.range(..., warp_specialize=True)
// writes) with a producer warpgroup on sm_90a: the launch takes 12 warps (384 threads), the
// producer gives registers back (setmaxnreg), the consumers' two warpgroups take turns at
// named barriers (bar.sync / bar.arrive). With --maxnreg the roles cannot move registers: no
// split, 256 threads.
// RUN: kilnc %s --arch=sm_90a --num-warps=8 --num-stages=3 --emit=launch | FileCheck %s --check-prefix=LAUNCH
// RUN: kilnc %s --arch=sm_90a --num-warps=8 --num-stages=3 | FileCheck %s
// RUN: kilnc %s --arch=sm_90a --num-warps=8 --num-stages=3 --maxnreg=128 --emit=launch | FileCheck %s --check-prefix=CAPPED
// LAUNCH: kernel fa3
// LAUNCH-NEXT: threads 384
// CAPPED: kernel fa3
// CAPPED-NEXT: threads 256
// CHECK-LABEL: .visible .entry fa3(
// CHECK: .maxntid 384, 1, 1
// CHECK: setmaxnreg.dec.sync.aligned.u32 24;
// CHECK: setmaxnreg.inc.sync.aligned.u32 240;
// CHECK: bar.arrive
// CHECK: bar.sync {{.*}}, 256;
// CHECK: bar.arrive

func.func @fa3(%qd: !kiln.tensormap, %Q: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
               %kd: !kiln.tensormap, %K: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
               %vd: !kiln.tensormap, %V: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %O: !kiln.ptr<f32>, %rows: i32, %s: i64, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zero_s = arith.constant dense<0.0> : tensor<128x64xf32>
  %acc0 = arith.constant dense<0.0> : tensor<128x64xf32>
  %q = kiln.descriptor_load %qd, %Q[%c0, %c0] shape [%rows, %c64] strides [%s] : !kiln.ptr<f16> -> tensor<128x64xf16>
  %some = arith.cmpi sgt, %n, %c0 : i32
  %acc = scf.if %some -> (tensor<128x64xf32>) {
    %hi = arith.addi %n, %c64 : i32
    %last = arith.subi %n, %c64 : i32
    %r:2 = scf.for %j = %c0 to %hi step %c64 iter_args(%o = %acc0, %p = %zero_s) -> (tensor<128x64xf32>, tensor<128x64xf32>) : i32 {
      %jk = arith.minsi %j, %last : i32
      %jv0 = arith.subi %j, %c64 : i32
      %jv = arith.maxsi %jv0, %c0 : i32
      %kt = kiln.descriptor_load %kd, %K[%c0, %jk] shape [%c64, %rows] strides [%s] : !kiln.ptr<f16> -> tensor<64x64xf16>
      %v = kiln.descriptor_load %vd, %V[%jv, %c0] shape [%rows, %c64] strides [%s] : !kiln.ptr<f16> -> tensor<64x64xf16>
      %sc = kiln.dot %q, %kt, %zero_s : tensor<128x64xf16> * tensor<64x64xf16> -> tensor<128x64xf32>
      %p16 = arith.truncf %p : tensor<128x64xf32> to tensor<128x64xf16>
      %d = kiln.dot %p16, %v, %o : tensor<128x64xf16> * tensor<64x64xf16> -> tensor<128x64xf32>
      %e = math.exp2 %sc : tensor<128x64xf32>
      scf.yield %d, %e : tensor<128x64xf32>, tensor<128x64xf32>
    } {kiln.warp_specialize}
    scf.yield %r#0 : tensor<128x64xf32>
  } else {
    scf.yield %acc0 : tensor<128x64xf32>
  }
  %po = kiln.splat %O : tensor<128x64x!kiln.ptr<f32>>
  kiln.store %po, %acc : tensor<128x64x!kiln.ptr<f32>>
  return
}
