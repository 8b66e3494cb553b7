// Row and column sums of a 64 x 128 fp32 tile (row-major, row stride 128):
//   rows[i] = sum_j x[i, j]  (reduce along axis 1)
//   cols[j] = sum_i x[i, j]  (reduce along axis 0)
// Both results live in slice layouts of the tile's layout and are stored from there.
module {
  func.func @sum_2d(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                    %rows: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                    %cols: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}) {
    %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
    %c = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
    %r2 = kiln.expand_dims %r {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
    %c2 = kiln.expand_dims %c {axis = 0 : i32} : tensor<128xi32> -> tensor<1x128xi32>
    %stride = arith.constant dense<128> : tensor<64x1xi32>
    %ro = arith.muli %r2, %stride : tensor<64x1xi32>
    %rob = kiln.broadcast %ro : tensor<64x1xi32> -> tensor<64x128xi32>
    %cob = kiln.broadcast %c2 : tensor<1x128xi32> -> tensor<64x128xi32>
    %off = arith.addi %rob, %cob : tensor<64x128xi32>
    %xp = kiln.splat %x : tensor<64x128x!kiln.ptr<f32>>
    %xps = kiln.addptr %xp, %off : tensor<64x128x!kiln.ptr<f32>>, tensor<64x128xi32>
    %v = kiln.load %xps : tensor<64x128x!kiln.ptr<f32>>
    %rs = kiln.reduce(%v) axis = 1 {
    ^bb0(%a: f32, %b: f32):
      %t = arith.addf %a, %b : f32
      kiln.reduce.return %t : f32
    } : (tensor<64x128xf32>) -> tensor<64xf32>
    %cs = kiln.reduce(%v) axis = 0 {
    ^bb0(%a: f32, %b: f32):
      %t = arith.addf %a, %b : f32
      kiln.reduce.return %t : f32
    } : (tensor<64x128xf32>) -> tensor<128xf32>
    %rr = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
    %rp = kiln.splat %rows : tensor<64x!kiln.ptr<f32>>
    %rps = kiln.addptr %rp, %rr : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
    kiln.store %rps, %rs : tensor<64x!kiln.ptr<f32>>
    %cc = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
    %cp = kiln.splat %cols : tensor<128x!kiln.ptr<f32>>
    %cps = kiln.addptr %cp, %cc : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
    kiln.store %cps, %cs : tensor<128x!kiln.ptr<f32>>
    return
  }
}
