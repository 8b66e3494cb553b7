// Masked transpose of an M x N fp32 matrix (row-major, N divisible by 16) into N x M
// (row-major), a 32 x 64 tile per program (grid: cdiv(M, 32) x cdiv(N, 64)):
//   x = src[rows[:, None] * N + cols[None, :]]      (rows along dim 0, coalesced along cols)
//   dst[cols[:, None] * M + rows[None, :]] = trans(x)  (coalesced along rows)
// The load and the store want different layouts: trans moves the tile through shared memory.
module {
  func.func @transpose(%src: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                       %dst: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                       %M: i32, %N: i32 {kiln.divisibility = 16 : i32}) {
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
    %Mv = kiln.splat %M : tensor<32xi32>
    %Nv = kiln.splat %N : tensor<64xi32>
    %rok = arith.cmpi slt, %rows, %Mv : tensor<32xi32>
    %cok = arith.cmpi slt, %cols, %Nv : tensor<64xi32>
    // Load the 32 x 64 tile.
    %r2 = kiln.expand_dims %rows {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
    %c2 = kiln.expand_dims %cols {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
    %Ns = kiln.splat %N : tensor<32x1xi32>
    %roff = arith.muli %r2, %Ns : tensor<32x1xi32>
    %roffb = kiln.broadcast %roff : tensor<32x1xi32> -> tensor<32x64xi32>
    %cb = kiln.broadcast %c2 : tensor<1x64xi32> -> tensor<32x64xi32>
    %soff = arith.addi %roffb, %cb : tensor<32x64xi32>
    %rok2 = kiln.expand_dims %rok {axis = 1 : i32} : tensor<32xi1> -> tensor<32x1xi1>
    %cok2 = kiln.expand_dims %cok {axis = 0 : i32} : tensor<64xi1> -> tensor<1x64xi1>
    %rokb = kiln.broadcast %rok2 : tensor<32x1xi1> -> tensor<32x64xi1>
    %cokb = kiln.broadcast %cok2 : tensor<1x64xi1> -> tensor<32x64xi1>
    %lmask = arith.andi %rokb, %cokb : tensor<32x64xi1>
    %sp = kiln.splat %src : tensor<32x64x!kiln.ptr<f32>>
    %sps = kiln.addptr %sp, %soff : tensor<32x64x!kiln.ptr<f32>>, tensor<32x64xi32>
    %x = kiln.load %sps, %lmask : tensor<32x64x!kiln.ptr<f32>>
    %t = kiln.trans %x {order = array<i32: 1, 0>} : tensor<32x64xf32> -> tensor<64x32xf32>
    // Store the 64 x 32 transposed tile.
    %c2t = kiln.expand_dims %cols {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
    %r2t = kiln.expand_dims %rows {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
    %Ms = kiln.splat %M : tensor<64x1xi32>
    %doffc = arith.muli %c2t, %Ms : tensor<64x1xi32>
    %doffcb = kiln.broadcast %doffc : tensor<64x1xi32> -> tensor<64x32xi32>
    %rbt = kiln.broadcast %r2t : tensor<1x32xi32> -> tensor<64x32xi32>
    %doff = arith.addi %doffcb, %rbt : tensor<64x32xi32>
    %cokt = kiln.expand_dims %cok {axis = 1 : i32} : tensor<64xi1> -> tensor<64x1xi1>
    %rokt = kiln.expand_dims %rok {axis = 0 : i32} : tensor<32xi1> -> tensor<1x32xi1>
    %cokbt = kiln.broadcast %cokt : tensor<64x1xi1> -> tensor<64x32xi1>
    %rokbt = kiln.broadcast %rokt : tensor<1x32xi1> -> tensor<64x32xi1>
    %smask = arith.andi %cokbt, %rokbt : tensor<64x32xi1>
    %dp = kiln.splat %dst : tensor<64x32x!kiln.ptr<f32>>
    %dps = kiln.addptr %dp, %doff : tensor<64x32x!kiln.ptr<f32>>, tensor<64x32xi32>
    kiln.store %dps, %t, %smask : tensor<64x32x!kiln.ptr<f32>>
    return
  }
}
