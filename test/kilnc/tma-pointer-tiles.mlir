// kilnc --tma-pointer-tiles: Triton's tutorial matmul through pointers (this is the C++ DSL's
// kernels/cpp/matmul.cpp as traced for contiguous fp16 matrices, strides 1 specialized) takes
// its A and B tiles and its C store to the TMA on sm_90a, as the Python front end and the C++
// DSL compile it: three tensor maps appended after the 12 parameters, each with its recipe
// (base parameter, 'h' = 104 for f16, rank 2, block rows and columns, extents and row stride
// as parameter numbers: A = arg0 over M (3) x K (5) rows of arg6 elements).
// RUN: kilnc %s --arch=sm_90a --num-warps=8 --tma-pointer-tiles --emit=launch | FileCheck %s
// CHECK: kernel matmul
// CHECK-NEXT: threads 256
// CHECK-NEXT: shared_bytes 98304
// CHECK-NEXT: tma_box_rows 0 0 0 0 0 0 0 0 0 0 0 0 128 64 128
// CHECK-NEXT: tensor_map 12 0 104 2 128 64 3 5 6
// CHECK-NEXT: tensor_map 13 1 104 2 64 128 5 4 8
// CHECK-NEXT: tensor_map 14 2 104 2 128 128 3 4 10
// RUN: kilnc %s --arch=sm_90a --num-warps=8 --tma-pointer-tiles | FileCheck %s --check-prefix=PTX
// PTX: .entry matmul(
// PTX: .param .u32 matmul_param_11,
// PTX-NEXT: .param .align 64 .b8 matmul_param_12[128],
// PTX-NEXT: .param .align 64 .b8 matmul_param_13[128],
// PTX-NEXT: .param .align 64 .b8 matmul_param_14[128]
// PTX: cp.async.bulk.tensor.2d.shared::cluster.global
// PTX: cp.async.bulk.tensor.2d.global.shared::cta
// A map the input already carries (a recipe on parameter 0, which shifts the kernel's own by
// one) is listed under its own number, and the appended ones under theirs.
// RUN: sed 's/func.func @matmul(/func.func @matmul(%%m: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 1, 104, 2, 128, 64, 4, 6, 7>}, /' %s \
// RUN:   | kilnc - --arch=sm_90a --num-warps=8 --tma-pointer-tiles --emit=launch | FileCheck %s --check-prefix=CARRIED
// CARRIED: tma_box_rows 0 0 0 0 0 0 0 0 0 0 0 0 0 128 64 128
// CARRIED-NEXT: tensor_map 0 1 104 2 128 64 4 6 7
// CARRIED-NEXT: tensor_map 13 1 104 2 128 64 4 6 7
// CARRIED-NEXT: tensor_map 14 2 104 2 64 128 6 5 9
// CARRIED-NEXT: tensor_map 15 3 104 2 128 128 4 5 11
// Without the option (and off sm_90a) the kernel keeps its 12 parameters and cp.async rings.
// RUN: kilnc %s --arch=sm_90a --num-warps=8 --emit=launch | FileCheck %s --check-prefix=PLAIN
// RUN: kilnc %s --arch=sm_90 --num-warps=8 --tma-pointer-tiles --emit=launch | FileCheck %s --check-prefix=PLAIN
// PLAIN: kernel matmul
// PLAIN-NOT: tensor_map
// RUN: kilnc %s --arch=sm_90 --num-warps=8 --tma-pointer-tiles | FileCheck %s --check-prefix=NOTMA
// NOTMA-NOT: cp.async.bulk.tensor

module {
  func.func @matmul(%arg0: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %arg1: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %arg2: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %arg3: i32 {kiln.divisibility = 16 : i32}, %arg4: i32 {kiln.divisibility = 16 : i32}, %arg5: i32 {kiln.divisibility = 16 : i32}, %arg6: i32 {kiln.divisibility = 16 : i32}, %arg7: i32, %arg8: i32 {kiln.divisibility = 16 : i32}, %arg9: i32, %arg10: i32 {kiln.divisibility = 16 : i32}, %arg11: i32) {
    %c1_i32 = arith.constant 1 : i32
    %c1_i32_0 = arith.constant 1 : i32
    %c1_i32_1 = arith.constant 1 : i32
    %0 = kiln.program_id x : i32
    %c128_i32 = arith.constant 128 : i32
    %1 = arith.addi %arg3, %c128_i32 : i32
    %c1_i32_2 = arith.constant 1 : i32
    %2 = arith.subi %1, %c1_i32_2 : i32
    %c128_i32_3 = arith.constant 128 : i32
    %3 = arith.divsi %2, %c128_i32_3 : i32
    %c128_i32_4 = arith.constant 128 : i32
    %4 = arith.addi %arg4, %c128_i32_4 : i32
    %c1_i32_5 = arith.constant 1 : i32
    %5 = arith.subi %4, %c1_i32_5 : i32
    %c128_i32_6 = arith.constant 128 : i32
    %6 = arith.divsi %5, %c128_i32_6 : i32
    %c8_i32 = arith.constant 8 : i32
    %7 = arith.muli %c8_i32, %6 : i32
    %8 = arith.divsi %0, %7 : i32
    %c8_i32_7 = arith.constant 8 : i32
    %9 = arith.muli %8, %c8_i32_7 : i32
    %10 = arith.subi %3, %9 : i32
    %c8_i32_8 = arith.constant 8 : i32
    %11 = arith.minsi %10, %c8_i32_8 : i32
    %12 = arith.remsi %0, %7 : i32
    %13 = arith.remsi %12, %11 : i32
    %14 = arith.addi %9, %13 : i32
    %15 = arith.remsi %0, %7 : i32
    %16 = arith.divsi %15, %11 : i32
    %17 = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
    %c128_i32_9 = arith.constant 128 : i32
    %18 = arith.muli %14, %c128_i32_9 : i32
    %19 = kiln.splat %18 : tensor<128xi32>
    %20 = arith.addi %19, %17 : tensor<128xi32>
    %21 = kiln.splat %arg3 : tensor<128xi32>
    %22 = arith.remsi %20, %21 : tensor<128xi32>
    %23 = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
    %c128_i32_10 = arith.constant 128 : i32
    %24 = arith.muli %16, %c128_i32_10 : i32
    %25 = kiln.splat %24 : tensor<128xi32>
    %26 = arith.addi %25, %23 : tensor<128xi32>
    %27 = kiln.splat %arg4 : tensor<128xi32>
    %28 = arith.remsi %26, %27 : tensor<128xi32>
    %29 = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
    %30 = kiln.expand_dims %29 {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
    %31 = kiln.splat %c1_i32 : tensor<1x64xi32>
    %32 = arith.muli %30, %31 : tensor<1x64xi32>
    %33 = kiln.expand_dims %22 {axis = 1 : i32} : tensor<128xi32> -> tensor<128x1xi32>
    %34 = kiln.splat %arg6 : tensor<128x1xi32>
    %35 = arith.muli %33, %34 : tensor<128x1xi32>
    %36 = kiln.broadcast %35 : tensor<128x1xi32> -> tensor<128x64xi32>
    %37 = kiln.broadcast %32 : tensor<1x64xi32> -> tensor<128x64xi32>
    %38 = arith.addi %36, %37 : tensor<128x64xi32>
    %39 = kiln.splat %arg0 : tensor<128x64x!kiln.ptr<f16>>
    %40 = kiln.addptr %39, %38 : tensor<128x64x!kiln.ptr<f16>>, tensor<128x64xi32>
    %41 = kiln.expand_dims %28 {axis = 0 : i32} : tensor<128xi32> -> tensor<1x128xi32>
    %42 = kiln.splat %c1_i32_0 : tensor<1x128xi32>
    %43 = arith.muli %41, %42 : tensor<1x128xi32>
    %44 = kiln.expand_dims %29 {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
    %45 = kiln.splat %arg8 : tensor<64x1xi32>
    %46 = arith.muli %44, %45 : tensor<64x1xi32>
    %47 = kiln.broadcast %46 : tensor<64x1xi32> -> tensor<64x128xi32>
    %48 = kiln.broadcast %43 : tensor<1x128xi32> -> tensor<64x128xi32>
    %49 = arith.addi %47, %48 : tensor<64x128xi32>
    %50 = kiln.splat %arg1 : tensor<64x128x!kiln.ptr<f16>>
    %51 = kiln.addptr %50, %49 : tensor<64x128x!kiln.ptr<f16>>, tensor<64x128xi32>
    %cst = arith.constant 0.000000e+00 : f32
    %52 = kiln.splat %cst : tensor<128x128xf32>
    %c64_i32 = arith.constant 64 : i32
    %53 = arith.addi %arg5, %c64_i32 : i32
    %c1_i32_11 = arith.constant 1 : i32
    %54 = arith.subi %53, %c1_i32_11 : i32
    %c64_i32_12 = arith.constant 64 : i32
    %55 = arith.divsi %54, %c64_i32_12 : i32
    %c0_i32 = arith.constant 0 : i32
    %c1_i32_13 = arith.constant 1 : i32
    %56:3 = scf.for %arg12 = %c0_i32 to %55 step %c1_i32_13 iter_args(%arg13 = %52, %arg14 = %40, %arg15 = %51) -> (tensor<128x128xf32>, tensor<128x64x!kiln.ptr<f16>>, tensor<64x128x!kiln.ptr<f16>>)  : i32 {
      %c64_i32_16 = arith.constant 64 : i32
      %86 = arith.muli %arg12, %c64_i32_16 : i32
      %87 = arith.subi %arg5, %86 : i32
      %88 = kiln.expand_dims %29 {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
      %89 = kiln.splat %87 : tensor<1x64xi32>
      %90 = arith.cmpi slt, %88, %89 : tensor<1x64xi32>
      %91 = kiln.broadcast %90 : tensor<1x64xi1> -> tensor<128x64xi1>
      %cst_17 = arith.constant 0.000000e+00 : f16
      %92 = kiln.splat %cst_17 : tensor<128x64xf16>
      %93 = kiln.load %arg14, %91, %92 : tensor<128x64x!kiln.ptr<f16>>
      %c64_i32_18 = arith.constant 64 : i32
      %94 = arith.muli %arg12, %c64_i32_18 : i32
      %95 = arith.subi %arg5, %94 : i32
      %96 = kiln.expand_dims %29 {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
      %97 = kiln.splat %95 : tensor<64x1xi32>
      %98 = arith.cmpi slt, %96, %97 : tensor<64x1xi32>
      %99 = kiln.broadcast %98 : tensor<64x1xi1> -> tensor<64x128xi1>
      %cst_19 = arith.constant 0.000000e+00 : f16
      %100 = kiln.splat %cst_19 : tensor<64x128xf16>
      %101 = kiln.load %arg15, %99, %100 : tensor<64x128x!kiln.ptr<f16>>
      %102 = kiln.dot %93, %101, %arg13 : tensor<128x64xf16> * tensor<64x128xf16> -> tensor<128x128xf32>
      %c64_i32_20 = arith.constant 64 : i32
      %103 = arith.muli %c64_i32_20, %c1_i32 : i32
      %104 = kiln.splat %103 : tensor<128x64xi32>
      %105 = kiln.addptr %arg14, %104 : tensor<128x64x!kiln.ptr<f16>>, tensor<128x64xi32>
      %c64_i32_21 = arith.constant 64 : i32
      %106 = arith.muli %c64_i32_21, %arg8 : i32
      %107 = kiln.splat %106 : tensor<64x128xi32>
      %108 = kiln.addptr %arg15, %107 : tensor<64x128x!kiln.ptr<f16>>, tensor<64x128xi32>
      scf.yield %102, %105, %108 : tensor<128x128xf32>, tensor<128x64x!kiln.ptr<f16>>, tensor<64x128x!kiln.ptr<f16>>
    }
    %57 = arith.truncf %56#0 : tensor<128x128xf32> to tensor<128x128xf16>
    %58 = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
    %c128_i32_14 = arith.constant 128 : i32
    %59 = arith.muli %14, %c128_i32_14 : i32
    %60 = kiln.splat %59 : tensor<128xi32>
    %61 = arith.addi %60, %58 : tensor<128xi32>
    %62 = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
    %c128_i32_15 = arith.constant 128 : i32
    %63 = arith.muli %16, %c128_i32_15 : i32
    %64 = kiln.splat %63 : tensor<128xi32>
    %65 = arith.addi %64, %62 : tensor<128xi32>
    %66 = kiln.expand_dims %65 {axis = 0 : i32} : tensor<128xi32> -> tensor<1x128xi32>
    %67 = kiln.splat %c1_i32_1 : tensor<1x128xi32>
    %68 = arith.muli %67, %66 : tensor<1x128xi32>
    %69 = kiln.expand_dims %61 {axis = 1 : i32} : tensor<128xi32> -> tensor<128x1xi32>
    %70 = kiln.splat %arg10 : tensor<128x1xi32>
    %71 = arith.muli %70, %69 : tensor<128x1xi32>
    %72 = kiln.broadcast %71 : tensor<128x1xi32> -> tensor<128x128xi32>
    %73 = kiln.broadcast %68 : tensor<1x128xi32> -> tensor<128x128xi32>
    %74 = arith.addi %72, %73 : tensor<128x128xi32>
    %75 = kiln.splat %arg2 : tensor<128x128x!kiln.ptr<f16>>
    %76 = kiln.addptr %75, %74 : tensor<128x128x!kiln.ptr<f16>>, tensor<128x128xi32>
    %77 = kiln.expand_dims %65 {axis = 0 : i32} : tensor<128xi32> -> tensor<1x128xi32>
    %78 = kiln.splat %arg4 : tensor<1x128xi32>
    %79 = arith.cmpi slt, %77, %78 : tensor<1x128xi32>
    %80 = kiln.expand_dims %61 {axis = 1 : i32} : tensor<128xi32> -> tensor<128x1xi32>
    %81 = kiln.splat %arg3 : tensor<128x1xi32>
    %82 = arith.cmpi slt, %80, %81 : tensor<128x1xi32>
    %83 = kiln.broadcast %82 : tensor<128x1xi1> -> tensor<128x128xi1>
    %84 = kiln.broadcast %79 : tensor<1x128xi1> -> tensor<128x128xi1>
    %85 = arith.andi %83, %84 : tensor<128x128xi1>
    kiln.store %76, %57, %85 : tensor<128x128x!kiln.ptr<f16>>
    return
  }
}

