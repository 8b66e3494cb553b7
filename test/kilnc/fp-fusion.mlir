// Floating-point multiply-adds contract to fma by default, as in Triton (enable_fp_fusion);
// --fp-fusion=false (CompileOptions::fpFusion) keeps them apart (add.rn / mul.rn, which ptxas
// does not fuse either).
// RUN: kilnc %s --arch=sm_90 | FileCheck %s --check-prefix=FUSED
// RUN: kilnc %s --arch=sm_90 --fp-fusion=false | FileCheck %s --check-prefix=APART
// FUSED: fma.rn.f32
// FUSED-NOT: mul.rn.f32
// APART: mul.rn.f32
// APART: add.rn.f32
// APART-NOT: fma.rn.f32
module {
  func.func @axpy(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %y: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %a: f32) {
    %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
    %px = kiln.splat %x : tensor<128x!kiln.ptr<f32>>
    %xs = kiln.addptr %px, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
    %py = kiln.splat %y : tensor<128x!kiln.ptr<f32>>
    %ys = kiln.addptr %py, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
    %vx = kiln.load %xs : tensor<128x!kiln.ptr<f32>>
    %vy = kiln.load %ys : tensor<128x!kiln.ptr<f32>>
    %va = kiln.splat %a : tensor<128xf32>
    %m = arith.mulf %va, %vx : tensor<128xf32>
    %s = arith.addf %m, %vy : tensor<128xf32>
    kiln.store %ys, %s : tensor<128x!kiln.ptr<f32>>
    return
  }
}
