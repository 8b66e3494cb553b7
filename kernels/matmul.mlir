// C = A @ B for row-major A (M x K, f16), B (K x N, f16) and C (M x N, f32), a 64 x 64 tile of
// C per program (grid: cdiv(M, 64) x cdiv(N, 64)), K in steps of 32 with masked edges:
//   acc = zeros(64, 64)
//   for k in range(0, K, 32):
//     a = load(A + rows[:, None] * K + (k + ks)[None, :], mask, other = 0)
//     b = load(B + (k + ks)[:, None] * N + cols[None, :], mask, other = 0)
//     acc = dot(a, b, acc)
//   store(C + rows[:, None] * N + cols[None, :], acc, mask)
// The dot runs on tensor cores (mma.sync.m16n8k16, f32 accumulators).
module {
  func.func @matmul(%A: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                    %B: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                    %C: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                    %M: i32, %N: i32 {kiln.divisibility = 16 : i32},
                    %K: i32 {kiln.divisibility = 16 : i32}) {
    %pid_m = kiln.program_id x : i32
    %pid_n = kiln.program_id y : i32
    %c64 = arith.constant 64 : i32
    %row0 = arith.muli %pid_m, %c64 : i32
    %col0 = arith.muli %pid_n, %c64 : i32
    %r64 = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
    %r32 = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
    %row0v = kiln.splat %row0 : tensor<64xi32>
    %col0v = kiln.splat %col0 : tensor<64xi32>
    %rows = arith.addi %r64, %row0v : tensor<64xi32>
    %cols = arith.addi %r64, %col0v : tensor<64xi32>
    %rows2 = kiln.expand_dims %rows {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
    %cols2 = kiln.expand_dims %cols {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
    %Mv = kiln.splat %M : tensor<64x1xi32>
    %Nv = kiln.splat %N : tensor<1x64xi32>
    %rowok = arith.cmpi slt, %rows2, %Mv : tensor<64x1xi32>
    %colok = arith.cmpi slt, %cols2, %Nv : tensor<1x64xi32>
    %Kv = kiln.splat %K : tensor<64x1xi32>
    %arow = arith.muli %rows2, %Kv : tensor<64x1xi32>
    %acc0 = arith.constant dense<0.0> : tensor<64x64xf32>
    %c0 = arith.constant 0 : i32
    %c32 = arith.constant 32 : i32
    %acc = scf.for %k = %c0 to %K step %c32 iter_args(%acc_i = %acc0) -> (tensor<64x64xf32>) : i32 {
      %kv = kiln.splat %k : tensor<32xi32>
      %ks = arith.addi %r32, %kv : tensor<32xi32>
      %ksr = kiln.expand_dims %ks {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
      %ksc = kiln.expand_dims %ks {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
      %Kr = kiln.splat %K : tensor<1x32xi32>
      %Kc = kiln.splat %K : tensor<32x1xi32>
      %kokr = arith.cmpi slt, %ksr, %Kr : tensor<1x32xi32>
      %kokc = arith.cmpi slt, %ksc, %Kc : tensor<32x1xi32>
      // a tile: 64 x 32
      %aro = kiln.broadcast %arow : tensor<64x1xi32> -> tensor<64x32xi32>
      %akb = kiln.broadcast %ksr : tensor<1x32xi32> -> tensor<64x32xi32>
      %aoff = arith.addi %aro, %akb : tensor<64x32xi32>
      %amr = kiln.broadcast %rowok : tensor<64x1xi1> -> tensor<64x32xi1>
      %amk = kiln.broadcast %kokr : tensor<1x32xi1> -> tensor<64x32xi1>
      %am = arith.andi %amr, %amk : tensor<64x32xi1>
      %ap = kiln.splat %A : tensor<64x32x!kiln.ptr<f16>>
      %aps = kiln.addptr %ap, %aoff : tensor<64x32x!kiln.ptr<f16>>, tensor<64x32xi32>
      %zero_a = arith.constant dense<0.0> : tensor<64x32xf16>
      %a = kiln.load %aps, %am, %zero_a : tensor<64x32x!kiln.ptr<f16>>
      // b tile: 32 x 64
      %Nc = kiln.splat %N : tensor<32x1xi32>
      %bro = arith.muli %ksc, %Nc : tensor<32x1xi32>
      %brob = kiln.broadcast %bro : tensor<32x1xi32> -> tensor<32x64xi32>
      %bcb = kiln.broadcast %cols2 : tensor<1x64xi32> -> tensor<32x64xi32>
      %boff = arith.addi %brob, %bcb : tensor<32x64xi32>
      %bmk = kiln.broadcast %kokc : tensor<32x1xi1> -> tensor<32x64xi1>
      %bmc = kiln.broadcast %colok : tensor<1x64xi1> -> tensor<32x64xi1>
      %bm = arith.andi %bmk, %bmc : tensor<32x64xi1>
      %bp = kiln.splat %B : tensor<32x64x!kiln.ptr<f16>>
      %bps = kiln.addptr %bp, %boff : tensor<32x64x!kiln.ptr<f16>>, tensor<32x64xi32>
      %zero_b = arith.constant dense<0.0> : tensor<32x64xf16>
      %b = kiln.load %bps, %bm, %zero_b : tensor<32x64x!kiln.ptr<f16>>
      %next = kiln.dot %a, %b, %acc_i : tensor<64x32xf16> * tensor<32x64xf16> -> tensor<64x64xf32>
      scf.yield %next : tensor<64x64xf32>
    }
    %Nr = kiln.splat %N : tensor<64x1xi32>
    %crow = arith.muli %rows2, %Nr : tensor<64x1xi32>
    %crowb = kiln.broadcast %crow : tensor<64x1xi32> -> tensor<64x64xi32>
    %ccolb = kiln.broadcast %cols2 : tensor<1x64xi32> -> tensor<64x64xi32>
    %coff = arith.addi %crowb, %ccolb : tensor<64x64xi32>
    %cmr = kiln.broadcast %rowok : tensor<64x1xi1> -> tensor<64x64xi1>
    %cmc = kiln.broadcast %colok : tensor<1x64xi1> -> tensor<64x64xi1>
    %cm = arith.andi %cmr, %cmc : tensor<64x64xi1>
    %cp = kiln.splat %C : tensor<64x64x!kiln.ptr<f32>>
    %cps = kiln.addptr %cp, %coff : tensor<64x64x!kiln.ptr<f32>>, tensor<64x64xi32>
    kiln.store %cps, %acc, %cm : tensor<64x64x!kiln.ptr<f32>>
    return
  }
}
