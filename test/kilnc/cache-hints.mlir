// Cache operators and eviction policies on masked vector accesses, alone and together: the
// policy is an L2 cache hint made by createpolicy; ptxas accepts every combination.
// RUN: kilnc %s --arch=sm_90 -o %t.ptx && FileCheck %s < %t.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_90 %t.ptx -o /dev/null %}
// RUN: kilnc %s --arch=sm_80 -o %t80.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_80 %t80.ptx -o /dev/null %}

// CHECK: @%p{{[0-9]+}} ld.global.cg.v4.b32
// CHECK: createpolicy.fractional.L2::evict_first.b64 %kiln_policy, 1.0;
// CHECK: ld.global.cg.L2::cache_hint.v4.b32 {{.*}}, %kiln_policy;
// CHECK: createpolicy.fractional.L2::evict_last.b64 %kiln_policy, 1.0;
// CHECK: st.global.cs.L2::cache_hint.v4.b32 {{.*}}, %kiln_policy;
func.func @hints(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %n: i32 {kiln.divisibility = 16 : i32}) {
  %r = kiln.make_range {end = 512 : i32, start = 0 : i32} : tensor<512xi32>
  %nv = kiln.splat %n : tensor<512xi32>
  %m = arith.cmpi slt, %r, %nv : tensor<512xi32>
  %p = kiln.splat %x : tensor<512x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<512x!kiln.ptr<f32>>, tensor<512xi32>
  %a = kiln.load %ps, %m cache = cg : tensor<512x!kiln.ptr<f32>>
  %b = kiln.load %ps, %m cache = cg evict = evict_first : tensor<512x!kiln.ptr<f32>>
  %s = arith.addf %a, %b : tensor<512xf32>
  kiln.store %ps, %s, %m cache = cs evict = evict_last : tensor<512x!kiln.ptr<f32>>
  return
}
