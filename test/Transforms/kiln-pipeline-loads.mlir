// RUN: kiln-opt %s -kiln-pipeline-loads -split-input-file | FileCheck %s
// RUN: kiln-opt %s -kiln-pipeline-loads=num-stages=1 -split-input-file | FileCheck %s --check-prefix=OFF

// A row loop: the row's load is issued one iteration early. The first iteration's load sits
// before the loop under `lb < ub`; inside, the next row's load comes first under
// `iv + step < ub` and its value is carried to the next iteration.
// CHECK-LABEL: func.func @row_loop(
// CHECK-SAME: %[[X:.*]]: !kiln.ptr<f32>, %[[OUT:.*]]: !kiln.ptr<f32>, %[[LB:.*]]: i32, %[[UB:.*]]: i32)
// CHECK: %[[FIRST:.*]] = arith.cmpi slt, %[[LB]], %[[UB]] : i32
// CHECK: %[[M0:.*]] = kiln.splat %[[FIRST]] : tensor<128xi1>
// CHECK: %[[V0:.*]] = kiln.load %{{.*}}, %[[M0]] : tensor<128x!kiln.ptr<f32>>
// CHECK: scf.for %[[IV:.*]] = %[[LB]] to %[[UB]] step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}, %[[CUR:.*]] = %[[V0]])
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[IV]], %{{.*}} : i32
// CHECK-NEXT: %[[IN:.*]] = arith.cmpi slt, %[[NEXT]], %[[UB]] : i32
// CHECK: %[[VN:.*]] = kiln.load %{{.*}}, %{{.*}} : tensor<128x!kiln.ptr<f32>>
// CHECK: arith.addf %[[ACC]], %[[CUR]]
// CHECK: scf.yield %{{.*}}, %[[VN]]
// OFF-LABEL: func.func @row_loop(
// OFF: scf.for
// OFF-NEXT: arith.muli
func.func @row_loop(%x: !kiln.ptr<f32>, %out: !kiln.ptr<f32>, %lb: i32, %ub: i32) {
  %c1 = arith.constant 1 : i32
  %c128 = arith.constant 128 : i32
  %zero = arith.constant dense<0.0> : tensor<128xf32>
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %acc = scf.for %i = %lb to %ub step %c1 iter_args(%a = %zero) -> (tensor<128xf32>) : i32 {
    %row = arith.muli %i, %c128 : i32
    %base = kiln.addptr %x, %row : !kiln.ptr<f32>, i32
    %ps = kiln.splat %base : tensor<128x!kiln.ptr<f32>>
    %p = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
    %v = kiln.load %p : tensor<128x!kiln.ptr<f32>>
    %s = arith.addf %a, %v : tensor<128xf32>
    scf.yield %s : tensor<128xf32>
  }
  %o = kiln.splat %out : tensor<128x!kiln.ptr<f32>>
  %op = kiln.addptr %o, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  kiln.store %op, %acc : tensor<128x!kiln.ptr<f32>>
  return
}

// -----

// A load whose address depends on a loop-carried value (pointer chasing) stays in place, and
// so does a volatile load.
// CHECK-LABEL: func.func @not_pipelined(
// CHECK: scf.for
// CHECK: kiln.load %{{.*}} : !kiln.ptr<i32>
// CHECK: kiln.load %{{.*}} volatile : !kiln.ptr<i32>
func.func @not_pipelined(%x: !kiln.ptr<i32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %last = scf.for %i = %c0 to %n step %c1 iter_args(%j = %c0) -> (i32) : i32 {
    %p = kiln.addptr %x, %j : !kiln.ptr<i32>, i32
    %next = kiln.load %p : !kiln.ptr<i32>
    %q = kiln.addptr %x, %i : !kiln.ptr<i32>, i32
    %v = kiln.load %q volatile : !kiln.ptr<i32>
    %s = arith.addi %next, %v : i32
    scf.yield %s : i32
  }
  kiln.store %x, %last : !kiln.ptr<i32>
  return
}

// -----

// With num-stages = 1 the loads feeding dots are prefetched, and in a loop of dots the other
// loads when their prefetched values take at most 8 registers a thread: the dot's operand
// load moves ahead, the 64 x 64 f32 row load that feeds an add (32 registers a thread on
// 4 warps) stays in place.
// OFF-LABEL: func.func @dot_operands_only(
// OFF: %[[FIRST:.*]] = kiln.load %{{.*}}, %{{.*}} : tensor<16x16x!kiln.ptr<f16>>
// OFF: scf.for %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}, %[[S:.*]] = %{{.*}}, %[[CUR:.*]] = %[[FIRST]])
// OFF: kiln.load %{{.*}}, %{{.*}} : tensor<16x16x!kiln.ptr<f16>>
// OFF: kiln.load %{{.*}} : tensor<64x64x!kiln.ptr<f32>>
// OFF: kiln.dot %{{.*}}, %[[CUR]], %[[ACC]]
func.func @dot_operands_only(%a: !kiln.ptr<f16>, %x: !kiln.ptr<f32>, %n: i32) -> (tensor<16x16xf32>, tensor<64x64xf32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %zero64 = arith.constant dense<0.0> : tensor<64x64xf32>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %lhs = kiln.load %pa : tensor<16x16x!kiln.ptr<f16>>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero, %s = %zero64) -> (tensor<16x16xf32>, tensor<64x64xf32>) : i32 {
    %off = kiln.splat %i : tensor<16x16xi32>
    %pb = kiln.addptr %pa, %off : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    %b = kiln.load %pb : tensor<16x16x!kiln.ptr<f16>>
    %off64 = kiln.splat %i : tensor<64x64xi32>
    %px = kiln.splat %x : tensor<64x64x!kiln.ptr<f32>>
    %pxi = kiln.addptr %px, %off64 : tensor<64x64x!kiln.ptr<f32>>, tensor<64x64xi32>
    %v = kiln.load %pxi : tensor<64x64x!kiln.ptr<f32>>
    %s2 = arith.addf %s, %v : tensor<64x64xf32>
    %d = kiln.dot %lhs, %b, %acc : tensor<16x16xf16> * tensor<16x16xf16> -> tensor<16x16xf32>
    scf.yield %d, %s2 : tensor<16x16xf32>, tensor<64x64xf32>
  }
  return %r#0, %r#1 : tensor<16x16xf32>, tensor<64x64xf32>
}

// -----

// In a loop of dots a small load beside them is prefetched too (tutorial 06's backward loads
// a row statistic beside each tile), here through an offset the loop advances by a fixed step
// (an induction, not the induction variable): the first iteration's load reads at the initial
// offset, the next one's at the offset plus the step, computed at the top of the body.
// OFF-LABEL: func.func @small_load_beside_dot(
// OFF: %[[M0:.*]] = kiln.load %{{.*}}, %{{.*}} : tensor<16x!kiln.ptr<f32>>
// OFF: scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %[[CUR:.*]] = %{{.*}}, %[[OFF:.*]] = %{{.*}}, %{{.*}} = %[[M0]]
// OFF: %[[NOFF:.*]] = arith.addi %[[OFF]], %{{.*}} : i32
// OFF: %[[NR:.*]] = kiln.splat %[[NOFF]] : tensor<16xi32>
// OFF: kiln.load %{{.*}}, %{{.*}} : tensor<16x!kiln.ptr<f32>>
// OFF: kiln.dot
func.func @small_load_beside_dot(%a: !kiln.ptr<f16>, %m: !kiln.ptr<f32>, %n: i32, %step: i32) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %lhs = kiln.load %pa : tensor<16x16x!kiln.ptr<f16>>
  %pm = kiln.splat %m : tensor<16x!kiln.ptr<f32>>
  %r:3 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero, %cur = %zero, %o = %c0) -> (tensor<16x16xf32>, tensor<16x16xf32>, i32) : i32 {
    %ov = kiln.splat %o : tensor<16xi32>
    %pmi = kiln.addptr %pm, %ov : tensor<16x!kiln.ptr<f32>>, tensor<16xi32>
    %row = kiln.load %pmi : tensor<16x!kiln.ptr<f32>>
    %row2 = kiln.expand_dims %row {axis = 0 : i32} : tensor<16xf32> -> tensor<1x16xf32>
    %rowb = kiln.broadcast %row2 : tensor<1x16xf32> -> tensor<16x16xf32>
    %d = kiln.dot %lhs, %lhs, %acc : tensor<16x16xf16> * tensor<16x16xf16> -> tensor<16x16xf32>
    %e = arith.addf %d, %rowb : tensor<16x16xf32>
    %o2 = arith.addi %o, %step : i32
    scf.yield %d, %e, %o2 : tensor<16x16xf32>, tensor<16x16xf32>, i32
  }
  return %r#1 : tensor<16x16xf32>
}

// -----

// A loop whose dots already hold many registers (a 128 x 256 f32 result: 256 a thread on 4
// warps) does not carry a small load across iterations; the load (and its address) moves to
// the top of the body instead, ahead of the ring's wait and barrier, so that its latency runs
// under them.
// OFF-LABEL: func.func @small_load_hoisted(
// OFF: scf.for %{{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<128x256xf32>, tensor<128x256xf32>)
// OFF-NEXT: kiln.splat
// OFF-NEXT: kiln.addptr
// OFF-NEXT: kiln.load %{{.*}} : tensor<256x!kiln.ptr<f32>>
// OFF-NEXT: kiln_gpu.async_wait {pending = 0 : i32}
// OFF-NEXT: kiln_gpu.barrier
func.func @small_load_hoisted(%a: !kiln.ptr<f16>, %b: !kiln.ptr<f16>, %m: !kiln.ptr<f32>, %n: i32) -> tensor<128x256xf32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<128x256xf32>
  %pa = kiln.splat %a : tensor<128x64x!kiln.ptr<f16>>
  %pb = kiln.splat %b : tensor<64x256x!kiln.ptr<f16>>
  %lhs = kiln.load %pa : tensor<128x64x!kiln.ptr<f16>>
  %rhs = kiln.load %pb : tensor<64x256x!kiln.ptr<f16>>
  %pm = kiln.splat %m : tensor<256x!kiln.ptr<f32>>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero, %e = %zero) -> (tensor<128x256xf32>, tensor<128x256xf32>) : i32 {
    kiln_gpu.async_wait {pending = 0 : i32}
    kiln_gpu.barrier
    %d = kiln.dot %lhs, %rhs, %acc : tensor<128x64xf16> * tensor<64x256xf16> -> tensor<128x256xf32>
    %iv = kiln.splat %i : tensor<256xi32>
    %pmi = kiln.addptr %pm, %iv : tensor<256x!kiln.ptr<f32>>, tensor<256xi32>
    %row = kiln.load %pmi : tensor<256x!kiln.ptr<f32>>
    %row2 = kiln.expand_dims %row {axis = 0 : i32} : tensor<256xf32> -> tensor<1x256xf32>
    %rowb = kiln.broadcast %row2 : tensor<1x256xf32> -> tensor<128x256xf32>
    %e2 = arith.addf %d, %rowb : tensor<128x256xf32>
    scf.yield %d, %e2 : tensor<128x256xf32>, tensor<128x256xf32>
  }
  return %r#1 : tensor<128x256xf32>
}

// -----

// Two operand loads whose address slices share ops: one mask and one `other` constant, both
// computed in the loop (what CSE leaves of a descriptor matmul's two masked block loads at one
// stage). The clean-up erases each shared op once, after both loads' uses of it are gone (it
// walked each load's slice and read a shared op after the other walk had freed it: a
// use-after-free, sometimes glibc's double free). Nothing of the original slices is left.
// OFF-LABEL: func.func @shared_slice_ops(
// OFF: scf.for
// OFF-COUNT-2: kiln.load %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x16x!kiln.ptr<f16>>
// OFF-NOT: kiln.load
// OFF-NOT: kiln.addptr
// OFF-NOT: arith.cmpi
// OFF-NOT: arith.constant
// OFF: kiln.dot
// OFF-NEXT: scf.yield
func.func @shared_slice_ops(%a: !kiln.ptr<f16>, %b: !kiln.ptr<f16>, %n: i32, %k: i32) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %pa = kiln.splat %a : tensor<16x16x!kiln.ptr<f16>>
  %pb = kiln.splat %b : tensor<16x16x!kiln.ptr<f16>>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %zero) -> (tensor<16x16xf32>) : i32 {
    %fill = arith.constant dense<0.0> : tensor<16x16xf16>
    %off = kiln.splat %i : tensor<16x16xi32>
    %ks = kiln.splat %k : tensor<16x16xi32>
    %mask = arith.cmpi slt, %off, %ks : tensor<16x16xi32>
    %pai = kiln.addptr %pa, %off : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    %pbi = kiln.addptr %pb, %off : tensor<16x16x!kiln.ptr<f16>>, tensor<16x16xi32>
    %x = kiln.load %pai, %mask, %fill : tensor<16x16x!kiln.ptr<f16>>
    %y = kiln.load %pbi, %mask, %fill : tensor<16x16x!kiln.ptr<f16>>
    %d = kiln.dot %x, %y, %acc : tensor<16x16xf16> * tensor<16x16xf16> -> tensor<16x16xf32>
    scf.yield %d : tensor<16x16xf32>
  }
  return %r : tensor<16x16xf32>
}
