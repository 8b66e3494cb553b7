// Template of kernels/matmul.mlir for kiln-bench --only=matmul: BM x BN tiles of C per program,
// BK-wide K steps; kiln-bench compiles it with num_stages = the configuration's stages (ring
// slots of the dot operands) and every loop load prefetched.
module {
  func.func @matmul(%A: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                    %B: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                    %C: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                    %M: i32, %N: i32 {kiln.divisibility = 16 : i32},
                    %K: i32 {kiln.divisibility = 16 : i32}) {
    %pid_m = kiln.program_id x : i32
    %pid_n = kiln.program_id y : i32
    %cbm = arith.constant BM : i32
    %cbn = arith.constant BN : i32
    %row0 = arith.muli %pid_m, %cbm : i32
    %col0 = arith.muli %pid_n, %cbn : i32
    %rbn = kiln.make_range {end = BN : i32, start = 0 : i32} : tensor<BNxi32>
    %rbm = kiln.make_range {end = BM : i32, start = 0 : i32} : tensor<BMxi32>
    %rbk = kiln.make_range {end = BK : i32, start = 0 : i32} : tensor<BKxi32>
    %row0v = kiln.splat %row0 : tensor<BMxi32>
    %col0v = kiln.splat %col0 : tensor<BNxi32>
    %rows = arith.addi %rbm, %row0v : tensor<BMxi32>
    %cols = arith.addi %rbn, %col0v : tensor<BNxi32>
    %rows2 = kiln.expand_dims %rows {axis = 1 : i32} : tensor<BMxi32> -> tensor<BMx1xi32>
    %cols2 = kiln.expand_dims %cols {axis = 0 : i32} : tensor<BNxi32> -> tensor<1xBNxi32>
    %Mv = kiln.splat %M : tensor<BMx1xi32>
    %Nv = kiln.splat %N : tensor<1xBNxi32>
    %rowok = arith.cmpi slt, %rows2, %Mv : tensor<BMx1xi32>
    %colok = arith.cmpi slt, %cols2, %Nv : tensor<1xBNxi32>
    %Kv = kiln.splat %K : tensor<BMx1xi32>
    %arow = arith.muli %rows2, %Kv : tensor<BMx1xi32>
    %acc0 = arith.constant dense<0.0> : tensor<BMxBNxf32>
    %c0 = arith.constant 0 : i32
    %cbk = arith.constant BK : i32
    %acc = scf.for %k = %c0 to %K step %cbk iter_args(%acc_i = %acc0) -> (tensor<BMxBNxf32>) : i32 {
      %kv = kiln.splat %k : tensor<BKxi32>
      %ks = arith.addi %rbk, %kv : tensor<BKxi32>
      %ksr = kiln.expand_dims %ks {axis = 0 : i32} : tensor<BKxi32> -> tensor<1xBKxi32>
      %ksc = kiln.expand_dims %ks {axis = 1 : i32} : tensor<BKxi32> -> tensor<BKx1xi32>
      %Kr = kiln.splat %K : tensor<1xBKxi32>
      %Kc = kiln.splat %K : tensor<BKx1xi32>
      %kokr = arith.cmpi slt, %ksr, %Kr : tensor<1xBKxi32>
      %kokc = arith.cmpi slt, %ksc, %Kc : tensor<BKx1xi32>
      // a tile: 64 x 32
      %aro = kiln.broadcast %arow : tensor<BMx1xi32> -> tensor<BMxBKxi32>
      %akb = kiln.broadcast %ksr : tensor<1xBKxi32> -> tensor<BMxBKxi32>
      %aoff = arith.addi %aro, %akb : tensor<BMxBKxi32>
      %amr = kiln.broadcast %rowok : tensor<BMx1xi1> -> tensor<BMxBKxi1>
      %amk = kiln.broadcast %kokr : tensor<1xBKxi1> -> tensor<BMxBKxi1>
      %am = arith.andi %amr, %amk : tensor<BMxBKxi1>
      %ap = kiln.splat %A : tensor<BMxBKx!kiln.ptr<f16>>
      %aps = kiln.addptr %ap, %aoff : tensor<BMxBKx!kiln.ptr<f16>>, tensor<BMxBKxi32>
      %zero_a = arith.constant dense<0.0> : tensor<BMxBKxf16>
      %a = kiln.load %aps, %am, %zero_a : tensor<BMxBKx!kiln.ptr<f16>>
      // b tile: 32 x 64
      %Nc = kiln.splat %N : tensor<BKx1xi32>
      %bro = arith.muli %ksc, %Nc : tensor<BKx1xi32>
      %brob = kiln.broadcast %bro : tensor<BKx1xi32> -> tensor<BKxBNxi32>
      %bcb = kiln.broadcast %cols2 : tensor<1xBNxi32> -> tensor<BKxBNxi32>
      %boff = arith.addi %brob, %bcb : tensor<BKxBNxi32>
      %bmk = kiln.broadcast %kokc : tensor<BKx1xi1> -> tensor<BKxBNxi1>
      %bmc = kiln.broadcast %colok : tensor<1xBNxi1> -> tensor<BKxBNxi1>
      %bm = arith.andi %bmk, %bmc : tensor<BKxBNxi1>
      %bp = kiln.splat %B : tensor<BKxBNx!kiln.ptr<f16>>
      %bps = kiln.addptr %bp, %boff : tensor<BKxBNx!kiln.ptr<f16>>, tensor<BKxBNxi32>
      %zero_b = arith.constant dense<0.0> : tensor<BKxBNxf16>
      %b = kiln.load %bps, %bm, %zero_b : tensor<BKxBNx!kiln.ptr<f16>>
      %next = kiln.dot %a, %b, %acc_i : tensor<BMxBKxf16> * tensor<BKxBNxf16> -> tensor<BMxBNxf32>
      scf.yield %next : tensor<BMxBNxf32>
    }
    %Nr = kiln.splat %N : tensor<BMx1xi32>
    %crow = arith.muli %rows2, %Nr : tensor<BMx1xi32>
    %crowb = kiln.broadcast %crow : tensor<BMx1xi32> -> tensor<BMxBNxi32>
    %ccolb = kiln.broadcast %cols2 : tensor<1xBNxi32> -> tensor<BMxBNxi32>
    %coff = arith.addi %crowb, %ccolb : tensor<BMxBNxi32>
    %cmr = kiln.broadcast %rowok : tensor<BMx1xi1> -> tensor<BMxBNxi1>
    %cmc = kiln.broadcast %colok : tensor<1xBNxi1> -> tensor<BMxBNxi1>
    %cm = arith.andi %cmr, %cmc : tensor<BMxBNxi1>
    %cp = kiln.splat %C : tensor<BMxBNx!kiln.ptr<f32>>
    %cps = kiln.addptr %cp, %coff : tensor<BMxBNx!kiln.ptr<f32>>, tensor<BMxBNxi32>
    kiln.store %cps, %acc, %cm : tensor<BMxBNx!kiln.ptr<f32>>
    return
  }
}
