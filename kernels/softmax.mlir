// Row softmax, one row per program (Triton's fused-softmax tutorial), rows of up to 1024;
// n_cols is specialized as divisible by 16 (as Triton does for such values):
//   x = load(in + row * in_stride + offs, offs < n_cols, other = -inf)
//   y = exp(x - max(x)) / sum(exp(x - max(x)))
//   store(out + row * out_stride + offs, y, offs < n_cols)
module {
  func.func @softmax(%out: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                     %in: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                     %in_stride: i32 {kiln.divisibility = 16 : i32},
                     %out_stride: i32 {kiln.divisibility = 16 : i32},
                     %n_cols: i32 {kiln.divisibility = 16 : i32}) {
    %row = kiln.program_id x : i32
    %offs = kiln.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
    %nv = kiln.splat %n_cols : tensor<1024xi32>
    %mask = arith.cmpi slt, %offs, %nv : tensor<1024xi32>
    %in_row = arith.muli %row, %in_stride : i32
    %in_base = kiln.addptr %in, %in_row : !kiln.ptr<f32>, i32
    %in_ptrs0 = kiln.splat %in_base : tensor<1024x!kiln.ptr<f32>>
    %in_ptrs = kiln.addptr %in_ptrs0, %offs : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
    %ninf = arith.constant dense<0xFF800000> : tensor<1024xf32>
    %x = kiln.load %in_ptrs, %mask, %ninf : tensor<1024x!kiln.ptr<f32>>
    %m = kiln.reduce(%x) axis = 0 {
    ^bb0(%a: f32, %b: f32):
      %t = arith.maxnumf %a, %b : f32
      kiln.reduce.return %t : f32
    } : (tensor<1024xf32>) -> f32
    %mv = kiln.splat %m : tensor<1024xf32>
    %z = arith.subf %x, %mv : tensor<1024xf32>
    %num = math.exp %z : tensor<1024xf32>
    %s = kiln.reduce(%num) axis = 0 {
    ^bb0(%a: f32, %b: f32):
      %t = arith.addf %a, %b : f32
      kiln.reduce.return %t : f32
    } : (tensor<1024xf32>) -> f32
    %sv = kiln.splat %s : tensor<1024xf32>
    %y = arith.divf %num, %sv : tensor<1024xf32>
    %out_row = arith.muli %row, %out_stride : i32
    %out_base = kiln.addptr %out, %out_row : !kiln.ptr<f32>, i32
    %out_ptrs0 = kiln.splat %out_base : tensor<1024x!kiln.ptr<f32>>
    %out_ptrs = kiln.addptr %out_ptrs0, %offs : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
    kiln.store %out_ptrs, %y, %mask : tensor<1024x!kiln.ptr<f32>>
    return
  }
}
