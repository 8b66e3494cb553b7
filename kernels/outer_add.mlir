// Outer sum of one loaded vector with itself: out[i, j] = x[i] + x[j], 64 x 64, one program.
// The loaded x is used as a column (x[:, None]) and as a row (x[None, :]): the two uses need
// different layouts, so layout assignment converts one of them through shared memory.
module {
  func.func @outer_add(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                       %out: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}) {
    %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
    %xs = kiln.splat %x : tensor<64x!kiln.ptr<f32>>
    %xp = kiln.addptr %xs, %r : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
    %v = kiln.load %xp : tensor<64x!kiln.ptr<f32>>
    %col = kiln.expand_dims %v {axis = 1 : i32} : tensor<64xf32> -> tensor<64x1xf32>
    %row = kiln.expand_dims %v {axis = 0 : i32} : tensor<64xf32> -> tensor<1x64xf32>
    %cb = kiln.broadcast %col : tensor<64x1xf32> -> tensor<64x64xf32>
    %rb = kiln.broadcast %row : tensor<1x64xf32> -> tensor<64x64xf32>
    %s = arith.addf %cb, %rb : tensor<64x64xf32>
    %ri = kiln.expand_dims %r {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
    %ci = kiln.expand_dims %r {axis = 0 : i32} : tensor<64xi32> -> tensor<1x64xi32>
    %c64 = arith.constant dense<64> : tensor<64x1xi32>
    %ro = arith.muli %ri, %c64 : tensor<64x1xi32>
    %rob = kiln.broadcast %ro : tensor<64x1xi32> -> tensor<64x64xi32>
    %cib = kiln.broadcast %ci : tensor<1x64xi32> -> tensor<64x64xi32>
    %off = arith.addi %rob, %cib : tensor<64x64xi32>
    %os = kiln.splat %out : tensor<64x64x!kiln.ptr<f32>>
    %op = kiln.addptr %os, %off : tensor<64x64x!kiln.ptr<f32>>, tensor<64x64xi32>
    kiln.store %op, %s : tensor<64x64x!kiln.ptr<f32>>
    return
  }
}
