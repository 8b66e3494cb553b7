// Masked 2-D strided copy of an M x N fp32 matrix, 32 x 64 tile per program (grid: M/32 x N/64):
//   rows = pid_m * 32 + arange(32);  cols = pid_n * 64 + arange(64)
//   mask = (rows[:, None] < M) & (cols[None, :] < N)
//   dst[rows[:, None] * dst_stride + cols[None, :]] = src[rows[:, None] * src_stride + cols[None, :]]
// Row strides and N are divisible by 16, so rows are contiguous, aligned runs.
module {
  func.func @copy_2d(%src: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                     %dst: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                     %M: i32, %N: i32 {kiln.divisibility = 16 : i32},
                     %src_stride: i32 {kiln.divisibility = 16 : i32},
                     %dst_stride: i32 {kiln.divisibility = 16 : i32}) {
    %pid_m = kiln.program_id x : i32
    %pid_n = kiln.program_id y : i32
    %c32 = arith.constant 32 : i32
    %c64 = arith.constant 64 : i32
    %row0 = arith.muli %pid_m, %c32 : i32
    %col0 = arith.muli %pid_n, %c64 : i32
    %ar = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
    %ac = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
    %row0v = kiln.splat %row0 : tensor<32xi32>
    %col0v = kiln.splat %col0 : tensor<64xi32>
    %rows = arith.addi %row0v, %ar : tensor<32xi32>
    %cols = arith.addi %col0v, %ac : tensor<64xi32>
    %r2 = kiln.expand_dims %rows {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
    %c2 = kiln.expand_dims %cols {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
    %Mv = kiln.splat %M : tensor<32x1xi32>
    %Nv = kiln.splat %N : tensor<1x64xi32>
    %mr = arith.cmpi slt, %r2, %Mv : tensor<32x1xi32>
    %mc = arith.cmpi slt, %c2, %Nv : tensor<1x64xi32>
    %mrb = kiln.broadcast %mr : tensor<32x1xi1> -> tensor<32x64xi1>
    %mcb = kiln.broadcast %mc : tensor<1x64xi1> -> tensor<32x64xi1>
    %mask = arith.andi %mrb, %mcb : tensor<32x64xi1>
    %cb = kiln.broadcast %c2 : tensor<1x64xi32> -> tensor<32x64xi32>
    // Source pointers.
    %ss = kiln.splat %src_stride : tensor<32x1xi32>
    %soff_r = arith.muli %r2, %ss : tensor<32x1xi32>
    %soff_rb = kiln.broadcast %soff_r : tensor<32x1xi32> -> tensor<32x64xi32>
    %soff = arith.addi %soff_rb, %cb : tensor<32x64xi32>
    %sp = kiln.splat %src : tensor<32x64x!kiln.ptr<f32>>
    %sps = kiln.addptr %sp, %soff : tensor<32x64x!kiln.ptr<f32>>, tensor<32x64xi32>
    %v = kiln.load %sps, %mask : tensor<32x64x!kiln.ptr<f32>>
    // Destination pointers.
    %ds = kiln.splat %dst_stride : tensor<32x1xi32>
    %doff_r = arith.muli %r2, %ds : tensor<32x1xi32>
    %doff_rb = kiln.broadcast %doff_r : tensor<32x1xi32> -> tensor<32x64xi32>
    %doff = arith.addi %doff_rb, %cb : tensor<32x64xi32>
    %dp = kiln.splat %dst : tensor<32x64x!kiln.ptr<f32>>
    %dps = kiln.addptr %dp, %doff : tensor<32x64x!kiln.ptr<f32>>, tensor<32x64xi32>
    kiln.store %dps, %v, %mask : tensor<32x64x!kiln.ptr<f32>>
    return
  }
}
