// Histogram with atomics: bins[x[i] & 63] += 1 for i < n (masked tile atomics), and a scalar
// atomic counter of programs: count += 1 once per program.
module {
  func.func @histogram(%x: !kiln.ptr<i32> {kiln.divisibility = 16 : i32},
                       %bins: !kiln.ptr<i32> {kiln.divisibility = 16 : i32},
                       %count: !kiln.ptr<i32>, %n: i32) {
    %pid = kiln.program_id x : i32
    %c256 = arith.constant 256 : i32
    %start = arith.muli %pid, %c256 : i32
    %r = kiln.make_range {end = 256 : i32, start = 0 : i32} : tensor<256xi32>
    %sv = kiln.splat %start : tensor<256xi32>
    %offs = arith.addi %sv, %r : tensor<256xi32>
    %nv = kiln.splat %n : tensor<256xi32>
    %mask = arith.cmpi slt, %offs, %nv : tensor<256xi32>
    %xp = kiln.splat %x : tensor<256x!kiln.ptr<i32>>
    %xps = kiln.addptr %xp, %offs : tensor<256x!kiln.ptr<i32>>, tensor<256xi32>
    %v = kiln.load %xps, %mask : tensor<256x!kiln.ptr<i32>>
    %c63 = arith.constant dense<63> : tensor<256xi32>
    %bin = arith.andi %v, %c63 : tensor<256xi32>
    %bp = kiln.splat %bins : tensor<256x!kiln.ptr<i32>>
    %bps = kiln.addptr %bp, %bin : tensor<256x!kiln.ptr<i32>>, tensor<256xi32>
    %one = arith.constant dense<1> : tensor<256xi32>
    %old = kiln.atomic_rmw add, relaxed, gpu, %bps, %one, %mask : tensor<256x!kiln.ptr<i32>>
    %c1 = arith.constant 1 : i32
    %prev = kiln.atomic_rmw add, acq_rel, gpu, %count, %c1 : !kiln.ptr<i32>
    return
  }
}
