// Scans of a 32 x 64 tile per program of an M x 64 matrix (grid: cdiv(M, 32)):
//   sums[i, j] = x[i, 0] + ... + x[i, j]              (cumsum along axis 1, i32)
//   maxs[i, j] = max(y[i, j], y[i + 1, j], ..., y[31, j])  (reverse running max along axis 0
//                                                          of the tile, f32)
module {
  func.func @cumsum(%x: !kiln.ptr<i32> {kiln.divisibility = 16 : i32},
                    %y: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                    %sums: !kiln.ptr<i32> {kiln.divisibility = 16 : i32},
                    %maxs: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %M: i32) {
    %pid = kiln.program_id x : i32
    %c32 = arith.constant 32 : i32
    %row0 = arith.muli %pid, %c32 : i32
    %ar = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
    %ac = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
    %row0v = kiln.splat %row0 : tensor<32xi32>
    %rows = arith.addi %ar, %row0v : tensor<32xi32>
    %r2 = kiln.expand_dims %rows {axis = 1 : i32} : tensor<32xi32> -> tensor<32x1xi32>
    %c2 = kiln.expand_dims %ac {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
    %c64 = arith.constant dense<64> : tensor<32x1xi32>
    %ro = arith.muli %r2, %c64 : tensor<32x1xi32>
    %rob = kiln.broadcast %ro : tensor<32x1xi32> -> tensor<32x64xi32>
    %cb = kiln.broadcast %c2 : tensor<1x64xi32> -> tensor<32x64xi32>
    %off = arith.addi %rob, %cb : tensor<32x64xi32>
    %Mv = kiln.splat %M : tensor<32x1xi32>
    %rok = arith.cmpi slt, %r2, %Mv : tensor<32x1xi32>
    %mask = kiln.broadcast %rok : tensor<32x1xi1> -> tensor<32x64xi1>
    %xs = kiln.splat %x : tensor<32x64x!kiln.ptr<i32>>
    %xp = kiln.addptr %xs, %off : tensor<32x64x!kiln.ptr<i32>>, tensor<32x64xi32>
    %zero = arith.constant dense<0> : tensor<32x64xi32>
    %xv = kiln.load %xp, %mask, %zero : tensor<32x64x!kiln.ptr<i32>>
    %s = kiln.scan(%xv) axis = 1 {
    ^bb0(%a: i32, %b: i32):
      %t = arith.addi %a, %b : i32
      kiln.scan.return %t : i32
    } : (tensor<32x64xi32>) -> tensor<32x64xi32>
    %ss = kiln.splat %sums : tensor<32x64x!kiln.ptr<i32>>
    %sp = kiln.addptr %ss, %off : tensor<32x64x!kiln.ptr<i32>>, tensor<32x64xi32>
    kiln.store %sp, %s, %mask : tensor<32x64x!kiln.ptr<i32>>
    %ys = kiln.splat %y : tensor<32x64x!kiln.ptr<f32>>
    %yp = kiln.addptr %ys, %off : tensor<32x64x!kiln.ptr<f32>>, tensor<32x64xi32>
    %ninf = arith.constant dense<0xFF800000> : tensor<32x64xf32>
    %yv = kiln.load %yp, %mask, %ninf : tensor<32x64x!kiln.ptr<f32>>
    %m = kiln.scan(%yv) axis = 0 reverse {
    ^bb0(%a: f32, %b: f32):
      %t = arith.maximumf %a, %b : f32
      kiln.scan.return %t : f32
    } : (tensor<32x64xf32>) -> tensor<32x64xf32>
    %ms = kiln.splat %maxs : tensor<32x64x!kiln.ptr<f32>>
    %mp = kiln.addptr %ms, %off : tensor<32x64x!kiln.ptr<f32>>, tensor<32x64xi32>
    kiln.store %mp, %m, %mask : tensor<32x64x!kiln.ptr<f32>>
    return
  }
}
