// Vector add: out[i] = x[i] + y[i] for i < n, BLOCK = 1024 elements per program.
// The pointers and n are declared divisible by 16 (Triton's specialization), so the compiler
// may use 128-bit accesses.
module {
  func.func @vector_add(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                        %y: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                        %out: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                        %n: i32 {kiln.divisibility = 16 : i32}) {
    %pid = kiln.program_id x : i32
    %block = arith.constant 1024 : i32
    %start = arith.muli %pid, %block : i32
    %range = kiln.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
    %startv = kiln.splat %start : tensor<1024xi32>
    %offs = arith.addi %startv, %range : tensor<1024xi32>
    %nv = kiln.splat %n : tensor<1024xi32>
    %mask = arith.cmpi slt, %offs, %nv : tensor<1024xi32>
    %xp = kiln.splat %x : tensor<1024x!kiln.ptr<f32>>
    %xps = kiln.addptr %xp, %offs : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
    %yp = kiln.splat %y : tensor<1024x!kiln.ptr<f32>>
    %yps = kiln.addptr %yp, %offs : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
    %a = kiln.load %xps, %mask : tensor<1024x!kiln.ptr<f32>>
    %b = kiln.load %yps, %mask : tensor<1024x!kiln.ptr<f32>>
    %sum = arith.addf %a, %b : tensor<1024xf32>
    %op = kiln.splat %out : tensor<1024x!kiln.ptr<f32>>
    %ops = kiln.addptr %op, %offs : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
    kiln.store %ops, %sum, %mask : tensor<1024x!kiln.ptr<f32>>
    return
  }
}
