// kernels/cpp/attention.cpp's attentionFa3 (FlashAttention-3's order, descriptors made in the kernel,
// for_range_ws) as the C++ DSL traces it for contiguous fp16 (4, 32, 4096, 128): input of
// wgmma-not-serialized.test.
module {
  func.func @attention_fa3(%arg0: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %arg1: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %arg2: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %arg3: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %arg4: f32, %arg5: i32 {kiln.divisibility = 16 : i32}, %arg6: i32 {kiln.divisibility = 16 : i32}, %arg7: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 104, 2, 128, 128, 5, -129, -129, 0>}, %arg8: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 1, 104, 2, 128, 128, 5, -129, -129, 0>}, %arg9: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 2, 104, 2, 128, 128, 5, -129, -129, 0>}, %arg10: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 3, 104, 2, 128, 128, 5, -129, -129, 0>}) {
    %0 = kiln.program_id x : i32
    %1 = kiln.program_id y : i32
    %c128_i32 = arith.constant 128 : i32
    %2 = arith.muli %0, %c128_i32 : i32
    %3 = arith.muli %1, %arg6 : i32
    %4 = arith.addi %3, %2 : i32
    %5 = arith.muli %1, %arg6 : i32
    %c0_i32 = arith.constant 0 : i32
    %c128_i64 = arith.constant 128 : i64
    %c128_i32_0 = arith.constant 128 : i32
    %6 = kiln.descriptor_load %arg7, %arg0[%4, %c0_i32] shape[%arg5, %c128_i32_0] strides[%c128_i64] : <f16> -> tensor<128x128xf16>
    %cst = arith.constant 1.44269502 : f32
    %7 = arith.mulf %arg4, %cst : f32
    %c128_i32_1 = arith.constant 128 : i32
    %8 = arith.divsi %arg6, %c128_i32_1 : i32
    %cst_2 = arith.constant 0.000000e+00 : f32
    %9 = kiln.splat %cst_2 : tensor<128x128xf32>
    %cst_3 = arith.constant 0.000000e+00 : f32
    %10 = kiln.splat %cst_3 : tensor<128xf32>
    %cst_4 = arith.constant 0xFF800000 : f32
    %11 = kiln.splat %cst_4 : tensor<128xf32>
    %cst_5 = arith.constant 0.000000e+00 : f32
    %12 = kiln.splat %cst_5 : tensor<128x128xf32>
    %cst_6 = arith.constant 1.000000e+00 : f32
    %13 = kiln.splat %cst_6 : tensor<128xf32>
    %c1_i32 = arith.constant 1 : i32
    %14 = arith.addi %8, %c1_i32 : i32
    %c0_i32_7 = arith.constant 0 : i32
    %c1_i32_8 = arith.constant 1 : i32
    %15:5 = scf.for %arg11 = %c0_i32_7 to %14 step %c1_i32_8 iter_args(%arg12 = %9, %arg13 = %10, %arg14 = %11, %arg15 = %12, %arg16 = %13) -> (tensor<128x128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x128xf32>, tensor<128xf32>)  : i32 {
      %c128_i32_12 = arith.constant 128 : i32
      %20 = arith.muli %arg11, %c128_i32_12 : i32
      %21 = arith.cmpi slt, %arg11, %8 : i32
      %c128_i32_13 = arith.constant 128 : i32
      %22 = arith.subi %arg6, %c128_i32_13 : i32
      %23 = arith.minsi %20, %22 : i32
      %24 = arith.addi %5, %23 : i32
      %c0_i32_14 = arith.constant 0 : i32
      %c128_i64_15 = arith.constant 128 : i64
      %c128_i32_16 = arith.constant 128 : i32
      %25 = kiln.descriptor_load %arg8, %arg1[%24, %c0_i32_14] shape[%arg5, %c128_i32_16] strides[%c128_i64_15] : <f16> -> tensor<128x128xf16>
      %26 = kiln.trans %25 {order = array<i32: 1, 0>} : tensor<128x128xf16> -> tensor<128x128xf16>
      %c128_i32_17 = arith.constant 128 : i32
      %27 = arith.subi %20, %c128_i32_17 : i32
      %c0_i32_18 = arith.constant 0 : i32
      %28 = arith.maxsi %27, %c0_i32_18 : i32
      %29 = arith.addi %5, %28 : i32
      %c0_i32_19 = arith.constant 0 : i32
      %c128_i64_20 = arith.constant 128 : i64
      %c128_i32_21 = arith.constant 128 : i32
      %30 = kiln.descriptor_load %arg9, %arg2[%29, %c0_i32_19] shape[%arg5, %c128_i32_21] strides[%c128_i64_20] : <f16> -> tensor<128x128xf16>
      %cst_22 = arith.constant 0.000000e+00 : f32
      %31 = kiln.splat %cst_22 : tensor<128x128xf32>
      %32 = kiln.dot %6, %26, %31 : tensor<128x128xf16> * tensor<128x128xf16> -> tensor<128x128xf32>
      %33 = kiln.expand_dims %arg16 {axis = 1 : i32} : tensor<128xf32> -> tensor<128x1xf32>
      %34 = kiln.broadcast %33 : tensor<128x1xf32> -> tensor<128x128xf32>
      %35 = arith.mulf %arg12, %34 : tensor<128x128xf32>
      %36 = arith.truncf %arg15 : tensor<128x128xf32> to tensor<128x128xf16>
      %37 = kiln.dot %36, %30, %35 : tensor<128x128xf16> * tensor<128x128xf16> -> tensor<128x128xf32>
      %38 = kiln.reduce(%32) axis = 1 {
      ^bb0(%arg17: f32, %arg18: f32):
        %61 = arith.maxnumf %arg17, %arg18 : f32
        kiln.reduce.return %61 : f32
      } : (tensor<128x128xf32>) -> tensor<128xf32>
      %39 = kiln.splat %7 : tensor<128xf32>
      %40 = arith.mulf %38, %39 : tensor<128xf32>
      %41 = arith.maxnumf %arg14, %40 : tensor<128xf32>
      %42 = kiln.splat %21 : tensor<128xi1>
      %43 = arith.select %42, %41, %arg14 : tensor<128xi1>, tensor<128xf32>
      %44 = kiln.expand_dims %43 {axis = 1 : i32} : tensor<128xf32> -> tensor<128x1xf32>
      %45 = kiln.splat %7 : tensor<128x128xf32>
      %46 = arith.mulf %32, %45 : tensor<128x128xf32>
      %47 = kiln.broadcast %44 : tensor<128x1xf32> -> tensor<128x128xf32>
      %48 = arith.subf %46, %47 : tensor<128x128xf32>
      %49 = math.exp2 %48 : tensor<128x128xf32>
      %50 = arith.subf %arg14, %43 : tensor<128xf32>
      %51 = math.exp2 %50 : tensor<128xf32>
      %cst_23 = arith.constant 1.000000e+00 : f32
      %52 = kiln.splat %cst_23 : tensor<128xf32>
      %53 = kiln.splat %21 : tensor<128xi1>
      %54 = arith.select %53, %51, %52 : tensor<128xi1>, tensor<128xf32>
      %55 = kiln.reduce(%49) axis = 1 {
      ^bb0(%arg17: f32, %arg18: f32):
        %61 = arith.addf %arg17, %arg18 : f32
        kiln.reduce.return %61 : f32
      } : (tensor<128x128xf32>) -> tensor<128xf32>
      %cst_24 = arith.constant 0.000000e+00 : f32
      %56 = kiln.splat %cst_24 : tensor<128xf32>
      %57 = kiln.splat %21 : tensor<128xi1>
      %58 = arith.select %57, %55, %56 : tensor<128xi1>, tensor<128xf32>
      %59 = arith.mulf %arg13, %54 : tensor<128xf32>
      %60 = arith.addf %59, %58 : tensor<128xf32>
      scf.yield %37, %60, %43, %49, %54 : tensor<128x128xf32>, tensor<128xf32>, tensor<128xf32>, tensor<128x128xf32>, tensor<128xf32>
    } {kiln.warp_specialize}
    %16 = kiln.expand_dims %15#1 {axis = 1 : i32} : tensor<128xf32> -> tensor<128x1xf32>
    %17 = kiln.broadcast %16 : tensor<128x1xf32> -> tensor<128x128xf32>
    %18 = arith.divf %15#0, %17 : tensor<128x128xf32>
    %19 = arith.truncf %18 : tensor<128x128xf32> to tensor<128x128xf16>
    %c0_i32_9 = arith.constant 0 : i32
    %c128_i64_10 = arith.constant 128 : i64
    %c128_i32_11 = arith.constant 128 : i32
    kiln.descriptor_store %arg10, %arg3[%4, %c0_i32_9], %19 shape[%arg5, %c128_i32_11] strides[%c128_i64_10] : <f16>, tensor<128x128xf16>
    return
  }
}

