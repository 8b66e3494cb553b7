// KL divergence, elementwise: out[i] = p[i] * (log p[i] - log q[i]) for i < n.
// log goes through libdevice (__nv_logf), linked in process.
module {
  func.func @kl_div(%p: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
                    %q: !kiln.ptr<f32> {kiln.divisibility = 16 : i32},
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
    %pp = kiln.splat %p : tensor<1024x!kiln.ptr<f32>>
    %pps = kiln.addptr %pp, %offs : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
    %qp = kiln.splat %q : tensor<1024x!kiln.ptr<f32>>
    %qps = kiln.addptr %qp, %offs : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
    %one = arith.constant dense<1.0> : tensor<1024xf32>
    %pv = kiln.load %pps, %mask, %one : tensor<1024x!kiln.ptr<f32>>
    %qv = kiln.load %qps, %mask, %one : tensor<1024x!kiln.ptr<f32>>
    %lp = math.log %pv : tensor<1024xf32>
    %lq = math.log %qv : tensor<1024xf32>
    %d = arith.subf %lp, %lq : tensor<1024xf32>
    %kl = arith.mulf %pv, %d : tensor<1024xf32>
    %op = kiln.splat %out : tensor<1024x!kiln.ptr<f32>>
    %ops = kiln.addptr %op, %offs : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
    kiln.store %ops, %kl, %mask : tensor<1024x!kiln.ptr<f32>>
    return
  }
}
