// RUN: kiln-opt %s -split-input-file -kiln-convert-to-host | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-convert-to-host=debug=true | FileCheck %s --check-prefix=DEBUG
// RUN: kiln-opt %s -split-input-file -kiln-host-pipeline | FileCheck %s --check-prefix=LLVM

// Tiles are flat vectors; a contiguous masked load is one llvm.intr.masked.load of the first
// lane's address; program ids are the trailing kernel arguments; the entry loops over ids.
// CHECK-LABEL: func.func private @copy(
// CHECK-SAME: %[[SRC:.*]]: !llvm.ptr, %[[DST:.*]]: !llvm.ptr, %[[N:.*]]: i32, %[[PX:.*]]: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %{{.*}}: i32, %[[CTX:[^:]*]]: !llvm.ptr, %{{.*}}: !llvm.ptr)
// CHECK: %[[R:.*]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : vector<8xi32>
// CHECK: arith.muli %[[PX]]
// CHECK: %[[M:.*]] = arith.cmpi slt, %{{.*}}, %{{.*}} : vector<8xi32>
// CHECK: %[[P:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (vector<8x!llvm.ptr>, vector<8xi32>) -> vector<8x!llvm.ptr>, f32
// The span of the access's bytes goes to the runtime's range check (slot 3) once: here a
// contiguous tile, so its first and last address; only a span outside every buffer takes the
// per-lane check, which clears the stray lanes.
// CHECK: %[[F:.*]] = llvm.extractelement %[[P]][%{{.*}} : i32]
// CHECK: llvm.ptrtoint %[[F]] : !llvm.ptr to i64
// CHECK: %[[L:.*]] = llvm.extractelement %[[P]][%{{.*}} : i32]
// CHECK: llvm.ptrtoint %[[L]] : !llvm.ptr to i64
// CHECK: %[[SLOT:.*]] = llvm.getelementptr %[[CTX]][3]
// CHECK: %[[FN:.*]] = llvm.load %[[SLOT]]
// CHECK: %[[IN:.*]] = llvm.call %[[FN]](%[[CTX]], %{{.*}}, %{{.*}}) : !llvm.ptr, (!llvm.ptr, i64, i64) -> i32
// CHECK: %[[OK:.*]] = llvm.icmp "ne" %[[IN]]
// CHECK: %[[CM:.*]] = scf.if %[[OK]] -> (vector<8xi1>) {
// CHECK-NEXT: scf.yield %[[M]] : vector<8xi1>
// CHECK: } else {
// CHECK: llvm.call %{{.*}}(%[[CTX]], {{.*}}) : !llvm.ptr, (!llvm.ptr, i32, i32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32) -> ()
// CHECK: %[[P0:.*]] = llvm.extractelement %[[P]]
// CHECK: %[[X:.*]] = llvm.intr.masked.load %[[P0]], %[[CM]], %{{.*}} {alignment = 4 : i32} : (!llvm.ptr, vector<8xi1>, vector<8xf32>) -> vector<8xf32>
// CHECK: llvm.intr.masked.store %[[X]], %{{.*}}, %{{.*}} {alignment = 4 : i32}
// CHECK-LABEL: func.func @copy.host_entry(
// CHECK: scf.for %[[ID:.*]] = %{{.*}} to %{{.*}} step
// CHECK:   func.call @copy(
// DEBUG-LABEL: func.func private @copy(
// DEBUG: llvm.call %{{.*}}(%{{.*}}) : !llvm.ptr, (!llvm.ptr, i32, i32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i32) -> ()
// DEBUG: llvm.intr.masked.load
// DEBUG: llvm.call
// DEBUG: llvm.intr.masked.store
// LLVM-LABEL: llvm.func @copy.host_entry(
// LLVM-NOT: = kiln.
// LLVM-NOT: {{^ +}}kiln.
// LLVM-NOT: func.func
func.func @copy(%src: !kiln.ptr<f32>, %dst: !kiln.ptr<f32>, %n: i32) {
  %pid = kiln.program_id x : i32
  %c8 = arith.constant 8 : i32
  %base = arith.muli %pid, %c8 : i32
  %r = kiln.make_range {end = 8 : i32, start = 0 : i32} : tensor<8xi32>
  %bs = kiln.splat %base : tensor<8xi32>
  %offs = arith.addi %bs, %r : tensor<8xi32>
  %ns = kiln.splat %n : tensor<8xi32>
  %m = arith.cmpi slt, %offs, %ns : tensor<8xi32>
  %ps = kiln.splat %src : tensor<8x!kiln.ptr<f32>>
  %p = kiln.addptr %ps, %offs : tensor<8x!kiln.ptr<f32>>, tensor<8xi32>
  %x = kiln.load %p, %m : tensor<8x!kiln.ptr<f32>>
  %qs = kiln.splat %dst : tensor<8x!kiln.ptr<f32>>
  %q = kiln.addptr %qs, %offs : tensor<8x!kiln.ptr<f32>>, tensor<8xi32>
  kiln.store %q, %x, %m : tensor<8x!kiln.ptr<f32>>
  return
}

// -----

// A strided (non-contiguous) load is a masked gather with `other` as pass-through.
// CHECK-LABEL: func.func private @strided(
// CHECK: llvm.intr.masked.gather %{{.*}}, %{{.*}}, %{{.*}} {alignment = 4 : i32} : (vector<4x!llvm.ptr>, vector<4xi1>, vector<4xf32>) -> vector<4xf32>
func.func @strided(%src: !kiln.ptr<f32>, %dst: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 4 : i32, start = 0 : i32} : tensor<4xi32>
  %c2 = arith.constant dense<2> : tensor<4xi32>
  %offs = arith.muli %r, %c2 : tensor<4xi32>
  %c3 = arith.constant dense<3> : tensor<4xi32>
  %m = arith.cmpi slt, %r, %c3 : tensor<4xi32>
  %neg = arith.constant dense<-1.0> : tensor<4xf32>
  %ps = kiln.splat %src : tensor<4x!kiln.ptr<f32>>
  %p = kiln.addptr %ps, %offs : tensor<4x!kiln.ptr<f32>>, tensor<4xi32>
  %x = kiln.load %p, %m, %neg : tensor<4x!kiln.ptr<f32>>
  %qs = kiln.splat %dst : tensor<4x!kiln.ptr<f32>>
  %q = kiln.addptr %qs, %r : tensor<4x!kiln.ptr<f32>>, tensor<4xi32>
  kiln.store %q, %x : tensor<4x!kiln.ptr<f32>>
  return
}

// -----

// Broadcast and trans are shuffles with masks computed from the shapes; a reduction along
// axis 1 of a 2x4 tile halves the axis twice, combining whole vectors.
// CHECK-LABEL: func.func private @shapes(
// CHECK: llvm.shufflevector %{{.*}}, %{{.*}} [0, 0, 0, 0, 1, 1, 1, 1] : vector<2xf32>
// CHECK: llvm.shufflevector %{{.*}}, %{{.*}} [0, 4, 1, 5, 2, 6, 3, 7] : vector<8xf32>
// CHECK: %[[LO:.*]] = llvm.shufflevector %[[T:.*]], %[[T]] [0, 1, 4, 5] : vector<8xf32>
// CHECK: %[[HI:.*]] = llvm.shufflevector %[[T]], %[[T]] [2, 3, 6, 7] : vector<8xf32>
// CHECK: arith.addf %[[LO]], %[[HI]] : vector<4xf32>
// CHECK: llvm.shufflevector %{{.*}}, %{{.*}} [0, 2] : vector<4xf32>
// CHECK: llvm.shufflevector %{{.*}}, %{{.*}} [1, 3] : vector<4xf32>
// CHECK: arith.addf %{{.*}}, %{{.*}} : vector<2xf32>
func.func @shapes(%p: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 2 : i32, start = 0 : i32} : tensor<2xi32>
  %ps = kiln.splat %p : tensor<2x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %r : tensor<2x!kiln.ptr<f32>>, tensor<2xi32>
  %x = kiln.load %q : tensor<2x!kiln.ptr<f32>>
  %e = kiln.expand_dims %x {axis = 1 : i32} : tensor<2xf32> -> tensor<2x1xf32>
  %b = kiln.broadcast %e : tensor<2x1xf32> -> tensor<2x4xf32>
  %t = kiln.trans %b {order = array<i32: 1, 0>} : tensor<2x4xf32> -> tensor<4x2xf32>
  %t2 = kiln.reshape %t : tensor<4x2xf32> -> tensor<2x4xf32>
  %s = kiln.reduce(%t2) axis = 1 {
  ^bb0(%a: f32, %c: f32):
    %v = arith.addf %a, %c : f32
    kiln.reduce.return %v : f32
  } : (tensor<2x4xf32>) -> tensor<2xf32>
  kiln.store %q, %s : tensor<2x!kiln.ptr<f32>>
  return
}

// -----

// A gather (every other element): the span of the unmasked lanes, by masked reductions.
// CHECK-LABEL: func.func private @strided(
// CHECK: %[[I:.*]] = llvm.ptrtoint %{{.*}} : vector<8x!llvm.ptr> to vector<8xi64>
// CHECK: %[[LO:.*]] = llvm.select %{{.*}}, %[[I]], %{{.*}} : vector<8xi1>, vector<8xi64>
// CHECK: "llvm.intr.vector.reduce.umin"(%[[LO]])
// CHECK: "llvm.intr.vector.reduce.umax"
// CHECK: llvm.call %{{.*}}(%{{.*}}, %{{.*}}, %{{.*}}) : !llvm.ptr, (!llvm.ptr, i64, i64) -> i32
// CHECK: llvm.intr.masked.gather
func.func @strided(%src: !kiln.ptr<f32>, %dst: !kiln.ptr<f32>, %n: i32) {
  %r = kiln.make_range {end = 8 : i32, start = 0 : i32} : tensor<8xi32>
  %c2 = arith.constant dense<2> : tensor<8xi32>
  %offs = arith.muli %r, %c2 : tensor<8xi32>
  %ns = kiln.splat %n : tensor<8xi32>
  %m = arith.cmpi slt, %offs, %ns : tensor<8xi32>
  %ps = kiln.splat %src : tensor<8x!kiln.ptr<f32>>
  %p = kiln.addptr %ps, %offs : tensor<8x!kiln.ptr<f32>>, tensor<8xi32>
  %x = kiln.load %p, %m : tensor<8x!kiln.ptr<f32>>
  %qs = kiln.splat %dst : tensor<8x!kiln.ptr<f32>>
  %q = kiln.addptr %qs, %r : tensor<8x!kiln.ptr<f32>>, tensor<8xi32>
  kiln.store %q, %x : tensor<8x!kiln.ptr<f32>>
  return
}

// -----

// debug_barrier: one thread runs a program on the host, so kiln.barrier goes away.
// CHECK-LABEL: func.func private @debug_barrier(
// CHECK-NOT: kiln.barrier
// CHECK: return
func.func @debug_barrier(%p: !kiln.ptr<f32>) {
  %c = arith.constant 1.0 : f32
  kiln.store %p, %c : !kiln.ptr<f32>
  kiln.barrier
  kiln.store %p, %c : !kiln.ptr<f32>
  return
}

// -----

// A device_assert in a combine region (Triton's side-effectful reductions): each combine's
// lanes reduced with `and`, the runtime's assertion failure called where one is false.
// CHECK-LABEL: func.func private @checked_reduce(
// CHECK: %[[SUM:.*]] = arith.addi %{{.*}}, %{{.*}} : vector<4xi32>
// CHECK: %[[OK:.*]] = arith.cmpi sge, %[[SUM]], %{{.*}} : vector<4xi32>
// CHECK: %[[ALL:.*]] = "llvm.intr.vector.reduce.and"(%[[OK]]) : (vector<4xi1>) -> i1
// CHECK: %[[BAD:.*]] = llvm.xor %[[ALL]], %{{.*}} : i1
// CHECK: scf.if %[[BAD]] {
// CHECK: llvm.call
func.func @checked_reduce(%p: !kiln.ptr<i32>) {
  %r = kiln.make_range {end = 8 : i32, start = 0 : i32} : tensor<8xi32>
  %ps = kiln.splat %p : tensor<8x!kiln.ptr<i32>>
  %q = kiln.addptr %ps, %r : tensor<8x!kiln.ptr<i32>>, tensor<8xi32>
  %x = kiln.load %q : tensor<8x!kiln.ptr<i32>>
  %s = kiln.reduce(%x) axis = 0 {
  ^bb0(%a: i32, %c: i32):
    %v = arith.addi %a, %c : i32
    %zero = arith.constant 0 : i32
    %ok = arith.cmpi sge, %v, %zero : i32
    kiln.assert %ok, "negative partial sum" : i1
    kiln.reduce.return %v : i32
  } : (tensor<8xi32>) -> i32
  kiln.store %p, %s : !kiln.ptr<i32>
  return
}

// -----

// bf16 compares and maxima in f32, widened and narrowed by integer ops (exact; LLVM legalized
// <N x bfloat> compares element by element on x86).
// CHECK-LABEL: func.func private @bf16_compare(
// CHECK: %[[B:.*]] = arith.bitcast %{{.*}} : vector<8xbf16> to vector<8xi16>
// CHECK: %[[W:.*]] = arith.extui %[[B]] : vector<8xi16> to vector<8xi32>
// CHECK: %[[H:.*]] = arith.shli %[[W]], %{{.*}} : vector<8xi32>
// CHECK: %[[F:.*]] = arith.bitcast %[[H]] : vector<8xi32> to vector<8xf32>
// CHECK: arith.maximumf %{{.*}}, %{{.*}} : vector<8xf32>
// CHECK: arith.shrui
// CHECK: arith.trunci %{{.*}} : vector<8xi32> to vector<8xi16>
// CHECK: arith.cmpf ogt, %{{.*}}, %{{.*}} : vector<8xf32>
func.func @bf16_compare(%p: !kiln.ptr<bf16>, %q: !kiln.ptr<i8>) {
  %r = kiln.make_range {end = 8 : i32, start = 0 : i32} : tensor<8xi32>
  %ps = kiln.splat %p : tensor<8x!kiln.ptr<bf16>>
  %pp = kiln.addptr %ps, %r : tensor<8x!kiln.ptr<bf16>>, tensor<8xi32>
  %x = kiln.load %pp : tensor<8x!kiln.ptr<bf16>>
  %y = kiln.load %pp : tensor<8x!kiln.ptr<bf16>>
  %m = arith.maximumf %x, %y : tensor<8xbf16>
  %c = arith.cmpf ogt, %m, %y : tensor<8xbf16>
  kiln.store %pp, %m : tensor<8x!kiln.ptr<bf16>>
  %qs = kiln.splat %q : tensor<8x!kiln.ptr<i8>>
  %qp = kiln.addptr %qs, %r : tensor<8x!kiln.ptr<i8>>, tensor<8xi32>
  %ci = arith.extui %c : tensor<8xi1> to tensor<8xi8>
  kiln.store %qp, %ci : tensor<8x!kiln.ptr<i8>>
  return
}
