// RUN: kiln-opt %s -kiln-peel-dot-loops -split-input-file | FileCheck %s

// FlashAttention-3's order after -kiln-warp-specialize (the consumers' loop): n + 1
// iterations issue q @ k_j and p_(j-1) @ v_(j-1). Peeled, the first iteration's p @ v (of
// the zeros p starts as) goes, so does its wait for the previous p @ v (on the constant acc
// starts as: ptxas would serialize every wgmma, C7515; acc then enters the loop as that
// constant), and the q @ k wait before the softmax waits for everything (pending 1 -> 0); the last iteration (j = n: no keys, the softmax's result unread) keeps
// only p @ v, whose own wait lets one group run instead of two. The loop runs 1 .. n.
// CHECK-LABEL: func.func @fa3(
// CHECK-SAME: %[[Q:[^:]+]]: !kiln_gpu.shared<[1, 64, 64], f16>, %[[K:[^:]+]]: !kiln_gpu.shared<[3, 64, 64], f16>, %[[V:[^:]+]]: !kiln_gpu.shared<[3, 64, 64], f16>, %[[N:[^:]+]]: i32
// CHECK: %[[N1:.*]] = arith.addi %[[N]], %{{.*}} : i32
// CHECK: %[[ANY:.*]] = arith.cmpi sgt, %[[N1]], %{{.*}} : i32
// CHECK: %[[TWO:.*]] = arith.cmpi sgt, %[[N1]], %{{.*}} : i32
// CHECK: %[[FIRST:.*]] = scf.if %[[ANY]]
// CHECK-NOT: kiln_gpu.dot_wait
// CHECK: %[[QK0:.*]] = kiln_gpu.shared_dot %[[Q]][%{{.*}}], %[[K]][%{{.*}}], %{{.*}} {pending = 1 : i32}
// CHECK-NOT: kiln_gpu.shared_dot
// CHECK: kiln_gpu.dot_wait %[[QK0]] : tensor<64x64xf32>
// CHECK: math.exp2
// CHECK: } else {
// CHECK: %[[LOOP:.*]]:2 = scf.for %{{.*}} = %{{.*}} to %[[N]] step %{{.*}} iter_args(%{{.*}} = %[[ZERO:[^,]+]], %{{.*}} = %[[FIRST]])
// CHECK: kiln_gpu.shared_dot %[[Q]]
// CHECK: kiln_gpu.shared_dot %{{.*}}, %[[V]][%{{.*}}], %{{.*}} {pending = 2 : i32}
// CHECK: kiln_gpu.dot_wait %{{.*}} {pending = 1 : i32}
// CHECK: } {kiln.warp_specialize}
// CHECK: %[[LAST:.*]] = scf.if %[[TWO]] -> (tensor<64x64xf32>) {
// CHECK-NOT: %[[Q]]
// CHECK-NOT: math.exp2
// CHECK: %[[PV:.*]] = kiln_gpu.shared_dot %{{.*}}, %[[V]][%{{.*}}], %{{.*}} {pending = 1 : i32}
// CHECK-NEXT: scf.yield %[[PV]]
// CHECK: } else {
// CHECK-NEXT: scf.yield %[[LOOP]]#0
// CHECK: kiln_gpu.dot_wait %[[LAST]] : tensor<64x64xf32>
module attributes {kiln_gpu.consumer_warps = 4 : i32} {
  func.func @fa3(%q: !kiln_gpu.shared<[1, 64, 64], f16>, %k: !kiln_gpu.shared<[3, 64, 64], f16>,
                 %v: !kiln_gpu.shared<[3, 64, 64], f16>, %n: i32) {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
    %n1 = arith.addi %n, %c1 : i32
    %r:2 = scf.for %j = %c0 to %n1 step %c1 iter_args(%acc = %zero, %p = %zero) -> (tensor<64x64xf32>, tensor<64x64xf32>) : i32 {
      %has = arith.cmpi slt, %j, %n : i32
      %a = kiln_gpu.dot_wait %acc : tensor<64x64xf32>
      %qk = kiln_gpu.shared_dot %q[%c0], %k[%c0], %zero {pending = 1 : i32} : !kiln_gpu.shared<[1, 64, 64], f16>, !kiln_gpu.shared<[3, 64, 64], f16>, tensor<64x64xf32>
      %ph = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xf16>
      %pv = kiln_gpu.shared_dot %ph, %v[%c0], %a {pending = 2 : i32} : tensor<64x64xf16>, !kiln_gpu.shared<[3, 64, 64], f16>, tensor<64x64xf32>
      %s = kiln_gpu.dot_wait %qk {pending = 1 : i32} : tensor<64x64xf32>
      %e = math.exp2 %s : tensor<64x64xf32>
      %hs = kiln.splat %has : tensor<64x64xi1>
      %pn = arith.select %hs, %e, %zero : tensor<64x64xi1>, tensor<64x64xf32>
      scf.yield %pv, %pn : tensor<64x64xf32>, tensor<64x64xf32>
    } {kiln.warp_specialize}
    %done = kiln_gpu.dot_wait %r#0 : tensor<64x64xf32>
    return
  }
}

// -----

// Where no dot goes (p starts as a value the loop does not know, and every iteration's
// q @ k is read), the loop stays as it was.
// CHECK-LABEL: func.func @kept(
// CHECK-NOT: scf.if
// CHECK: scf.for
// CHECK-COUNT-2: kiln_gpu.shared_dot
// CHECK: } {kiln.warp_specialize}
// CHECK-NOT: scf.if
module attributes {kiln_gpu.consumer_warps = 4 : i32} {
  func.func @kept(%q: !kiln_gpu.shared<[1, 64, 64], f16>, %k: !kiln_gpu.shared<[3, 64, 64], f16>,
                  %v: !kiln_gpu.shared<[3, 64, 64], f16>, %n: i32, %p0: tensor<64x64xf32>) {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
    %r:2 = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %zero, %p = %p0) -> (tensor<64x64xf32>, tensor<64x64xf32>) : i32 {
      %a = kiln_gpu.dot_wait %acc : tensor<64x64xf32>
      %qk = kiln_gpu.shared_dot %q[%c0], %k[%c0], %zero {pending = 1 : i32} : !kiln_gpu.shared<[1, 64, 64], f16>, !kiln_gpu.shared<[3, 64, 64], f16>, tensor<64x64xf32>
      %ph = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xf16>
      %pv = kiln_gpu.shared_dot %ph, %v[%c0], %a {pending = 2 : i32} : tensor<64x64xf16>, !kiln_gpu.shared<[3, 64, 64], f16>, tensor<64x64xf32>
      %s = kiln_gpu.dot_wait %qk {pending = 1 : i32} : tensor<64x64xf32>
      %e = math.exp2 %s : tensor<64x64xf32>
      scf.yield %pv, %e : tensor<64x64xf32>, tensor<64x64xf32>
    } {kiln.warp_specialize}
    %done = kiln_gpu.dot_wait %r#0 : tensor<64x64xf32>
    %sum = kiln_gpu.dot_wait %r#1 : tensor<64x64xf32>
    return
  }
}

// -----

// A loop without warp specialization (the pointer path's rotated loop, step 64: its last
// index is not known, but what its last iteration computes from q @ k is only p, which
// nothing reads after the loop): the first iteration loses its p @ v of zeros, the last its
// q @ k.
// CHECK-LABEL: func.func @rotated(
// CHECK: scf.if
// CHECK: kiln_gpu.shared_dot %{{.*}}, %{{.*}}, %{{.*}} {pending = 1 : i32}
// CHECK-NOT: kiln_gpu.shared_dot
// CHECK: kiln_gpu.dot_wait %{{.*}} : tensor<64x64xf32>
// CHECK: } else {
// CHECK: scf.for
// CHECK-COUNT-2: kiln_gpu.shared_dot
// CHECK: scf.if
// CHECK-NEXT: kiln_gpu.shared_dot %{{.*}}#1, %{{.*}}, %{{.*}}#0 {pending = 1 : i32}
// CHECK-NOT: kiln_gpu.shared_dot
// CHECK: return
module {
  func.func @rotated(%q: !kiln_gpu.shared<[1, 64, 64], f16>, %k: !kiln_gpu.shared<[3, 64, 64], f16>,
                     %v: !kiln_gpu.shared<[3, 64, 64], f16>, %hi: i32) -> tensor<64x64xf32> {
    %c0 = arith.constant 0 : i32
    %c64 = arith.constant 64 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
    %zh = arith.constant dense<0.000000e+00> : tensor<64x64xf16>
    %end = arith.addi %hi, %c64 : i32
    %r:2 = scf.for %s = %c0 to %end step %c64 iter_args(%acc = %zero, %p = %zh) -> (tensor<64x64xf32>, tensor<64x64xf16>) : i32 {
      %has = arith.cmpi slt, %s, %hi : i32
      %qk = kiln_gpu.shared_dot %q[%c0], %k[%c0], %zero {pending = 1 : i32} : !kiln_gpu.shared<[1, 64, 64], f16>, !kiln_gpu.shared<[3, 64, 64], f16>, tensor<64x64xf32>
      %pv = kiln_gpu.shared_dot %p, %v[%c0], %acc {pending = 2 : i32} : tensor<64x64xf16>, !kiln_gpu.shared<[3, 64, 64], f16>, tensor<64x64xf32>
      %sc = kiln_gpu.dot_wait %qk {pending = 1 : i32} : tensor<64x64xf32>
      %a = kiln_gpu.dot_wait %pv : tensor<64x64xf32>
      %hs = kiln.splat %has : tensor<64x64xi1>
      %e = arith.select %hs, %sc, %zero : tensor<64x64xi1>, tensor<64x64xf32>
      %pn = arith.truncf %e : tensor<64x64xf32> to tensor<64x64xf16>
      scf.yield %a, %pn : tensor<64x64xf32>, tensor<64x64xf16>
    }
    return %r#0 : tensor<64x64xf32>
  }
}

// -----

// A wait in a region after the idle dot (no loop the pipeliner makes has one) would keep its
// count if the dot went: the dot stays, and with no dot gone the loop is not peeled.
// CHECK-LABEL: func.func @nested_wait(
// CHECK-NOT: scf.if %{{.*}} -> (tensor<64x64xf32>, tensor<64x64xf16>)
// CHECK: scf.for
// CHECK-COUNT-2: kiln_gpu.shared_dot
module {
  func.func @nested_wait(%q: !kiln_gpu.shared<[1, 64, 64], f16>, %k: !kiln_gpu.shared<[3, 64, 64], f16>,
                         %v: !kiln_gpu.shared<[3, 64, 64], f16>, %n: i32, %c: i1) -> tensor<64x64xf32> {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
    %zh = arith.constant dense<0.000000e+00> : tensor<64x64xf16>
    %r:2 = scf.for %j = %c0 to %n step %c1 iter_args(%acc = %zero, %p = %zh) -> (tensor<64x64xf32>, tensor<64x64xf16>) : i32 {
      %qk = kiln_gpu.shared_dot %q[%c0], %k[%c0], %zero {pending = 1 : i32} : !kiln_gpu.shared<[1, 64, 64], f16>, !kiln_gpu.shared<[3, 64, 64], f16>, tensor<64x64xf32>
      %pv = kiln_gpu.shared_dot %p, %v[%c0], %acc {pending = 2 : i32} : tensor<64x64xf16>, !kiln_gpu.shared<[3, 64, 64], f16>, tensor<64x64xf32>
      %sc = scf.if %c -> (tensor<64x64xf32>) {
        %w = kiln_gpu.dot_wait %qk {pending = 1 : i32} : tensor<64x64xf32>
        scf.yield %w : tensor<64x64xf32>
      } else {
        %w = kiln_gpu.dot_wait %qk {pending = 1 : i32} : tensor<64x64xf32>
        scf.yield %w : tensor<64x64xf32>
      }
      %a = kiln_gpu.dot_wait %pv : tensor<64x64xf32>
      %pn = arith.truncf %sc : tensor<64x64xf32> to tensor<64x64xf16>
      scf.yield %a, %pn : tensor<64x64xf32>, tensor<64x64xf16>
    }
    return %r#0 : tensor<64x64xf32>
  }
}
