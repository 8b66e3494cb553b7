// RUN: kiln-opt %s -split-input-file -kiln-convert-to-host | FileCheck %s
// RUN: kiln-opt %s -split-input-file -kiln-host-pipeline | FileCheck %s --check-prefix=LLVM

// Tiles of more than kMaxRegisterTile (4096) elements live in the kernel's scratch memory (the
// trailing argument, which the entry mallocs once per call) and each op on them is one scf.for
// over 128-lane chunks: here 8192 / 128 = 64 iterations, the same code for any size.
// CHECK: #[[OFF:.*]] = #llvm.loop_unroll<disable = true>
// CHECK: #{{.*}} = #llvm.loop_annotation<unroll = #[[OFF]]>
// CHECK-LABEL: func.func private @add(
// CHECK-SAME: %[[CTX:[^:]*]]: !llvm.ptr, %[[SCRATCH:[^:]*]]: !llvm.ptr)
// CHECK: %[[RANGE:.*]] = llvm.getelementptr %[[SCRATCH]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, i8
// make_range: lane indices of the chunk plus its start
// CHECK: scf.for %[[C:.*]] = %{{.*}} to %[[C64:.*]] step
// CHECK:   %[[FIRST:.*]] = arith.muli %[[C]], %{{.*}} : i32
// CHECK:   arith.addi %{{.*}}, %{{.*}} : vector<128xi32>
// CHECK:   llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<128xi32>, !llvm.ptr
// CHECK: } {llvm.loop_annotation = #[[NOUNROLL:.*]]}
// The mask: one byte a lane.
// CHECK: scf.for
// CHECK:   arith.cmpi slt, %{{.*}}, %{{.*}} : vector<128xi32>
// CHECK:   llvm.zext %{{.*}} : vector<128xi1> to vector<128xi8>
// The load's span check (a contiguous tile: its first and last address), then the masked
// loads chunk by chunk, from the mask the check returns.
// CHECK: llvm.getelementptr %{{.*}}[8191] : (!llvm.ptr) -> !llvm.ptr, !llvm.ptr
// CHECK: %[[CHECKED:.*]] = scf.if %{{.*}} -> (!llvm.ptr) {
// CHECK: scf.for
// CHECK:   llvm.getelementptr %[[CHECKED]][%{{.*}}] : (!llvm.ptr, i32) -> !llvm.ptr, i8
// CHECK:   llvm.intr.masked.load %{{.*}} : (!llvm.ptr, vector<128xi1>, vector<128xf32>) -> vector<128xf32>
// CHECK: scf.for
// CHECK:   arith.addf %{{.*}}, %{{.*}} : vector<128xf32>
// CHECK: scf.for
// CHECK:   llvm.intr.masked.store %{{.*}} : vector<128xf32>, vector<128xi1> into !llvm.ptr
// CHECK-LABEL: func.func @add.host_entry(
// CHECK: %[[MEM:.*]] = llvm.call @malloc(%{{.*}}) : (i64) -> !llvm.ptr
// CHECK: func.call @add(%{{.*}}, %[[MEM]]) :
// CHECK: llvm.call @free(%[[MEM]])
// LLVM: llvm.br {{.*}} {llvm.loop_annotation = #
// LLVM-LABEL: llvm.func @add.host_entry(
// LLVM: llvm.call @malloc
// LLVM: llvm.call @free
// LLVM-NOT: = kiln.
// LLVM-NOT: {{^ +}}kiln.
// LLVM-NOT: scf.for
func.func @add(%x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>, %n: i32) {
  %r = kiln.make_range {end = 8192 : i32, start = 0 : i32} : tensor<8192xi32>
  %ns = kiln.splat %n : tensor<8192xi32>
  %m = arith.cmpi slt, %r, %ns : tensor<8192xi32>
  %xs = kiln.splat %x : tensor<8192x!kiln.ptr<f32>>
  %px = kiln.addptr %xs, %r : tensor<8192x!kiln.ptr<f32>>, tensor<8192xi32>
  %a = kiln.load %px, %m : tensor<8192x!kiln.ptr<f32>>
  %b = arith.addf %a, %a : tensor<8192xf32>
  %ys = kiln.splat %y : tensor<8192x!kiln.ptr<f32>>
  %py = kiln.addptr %ys, %r : tensor<8192x!kiln.ptr<f32>>, tensor<8192xi32>
  kiln.store %py, %b, %m : tensor<8192x!kiln.ptr<f32>>
  return
}

// -----

// A reduction halves the reduced axis in memory (each step a loop, lower and upper halves
// gathered) until the tile fits in registers, then goes on as for a small tile.
// CHECK-LABEL: func.func private @reduce_rows(
// The load (of a splat pointer: gathers), then the one halving step 8192 -> 4096.
// CHECK: llvm.intr.masked.gather
// CHECK: scf.for
// CHECK:   %[[LO:.*]] = llvm.intr.masked.gather %{{.*}} -> vector<128xf32>
// CHECK:   %[[HI:.*]] = llvm.intr.masked.gather %{{.*}} -> vector<128xf32>
// CHECK:   %[[SUM:.*]] = arith.addf %[[LO]], %[[HI]] : vector<128xf32>
// CHECK:   llvm.store %[[SUM]]
// CHECK: llvm.load %{{.*}} {alignment = 4 : i64} : !llvm.ptr -> !llvm.array<32 x vector<128xf32>>
// CHECK: arith.addf %{{.*}} : vector<128xf32>
func.func @reduce_rows(%x: !kiln.ptr<f32>, %y: !kiln.ptr<f32>) {
  %v = kiln.splat %x : tensor<64x128x!kiln.ptr<f32>>
  %a = kiln.load %v : tensor<64x128x!kiln.ptr<f32>>
  %s = "kiln.reduce"(%a) <{axis = 1 : i32}> ({
  ^bb0(%l: f32, %r: f32):
    %t = arith.addf %l, %r : f32
    kiln.reduce.return %t : f32
  }) : (tensor<64x128xf32>) -> tensor<64xf32>
  %w = kiln.splat %y : tensor<64x!kiln.ptr<f32>>
  kiln.store %w, %s : tensor<64x!kiln.ptr<f32>>
  return
}

// -----

// A broadcast whose chunks lie in one row of the source reads each with one vector load.
// CHECK-LABEL: func.func private @bcast(
// CHECK: scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step
// CHECK-NEXT: %[[I:.*]] = arith.muli %[[C]], %{{.*}} : i32
// CHECK-NEXT: %[[S:.*]] = arith.remui %[[I]], %{{.*}} : i32
// CHECK-NEXT: %[[P:.*]] = llvm.getelementptr %{{.*}}[%[[S]]] : (!llvm.ptr, i32) -> !llvm.ptr, f32
// CHECK-NEXT: llvm.load %[[P]] {alignment = 4 : i64} : !llvm.ptr -> vector<128xf32>
func.func @bcast(%x: !kiln.ptr<f32>) {
  %p = kiln.splat %x : tensor<1x128x!kiln.ptr<f32>>
  %row = kiln.load %p : tensor<1x128x!kiln.ptr<f32>>
  %b = kiln.broadcast %row : tensor<1x128xf32> -> tensor<64x128xf32>
  %v = kiln.splat %x : tensor<64x128x!kiln.ptr<f32>>
  kiln.store %v, %b : tensor<64x128x!kiln.ptr<f32>>
  return
}

// -----

// Loop-carried large tiles are copied at the yield into buffers of the loop: the op that
// defined the yielded value writes its buffer again in the next iteration. An argument passed
// on unchanged is not copied; operands that may share a buffer with the loop's arguments (a
// swap) go through temporaries first.
// CHECK-LABEL: func.func private @carry(
// CHECK: scf.for %{{.*}} iter_args(%[[A:.*]] = %{{.*}}, %[[B:.*]] = %{{.*}}) -> (!llvm.ptr, !llvm.ptr)
// CHECK:   scf.for
// CHECK:     arith.addf
// CHECK:   "llvm.intr.memcpy"(%[[Y:.*]], %[[SUM:.*]], %{{.*}}) <{isVolatile = false}>
// CHECK-NEXT: scf.yield %[[Y]], %[[B]] : !llvm.ptr, !llvm.ptr
// CHECK: scf.for %{{.*}} iter_args(%[[A2:.*]] = %{{.*}}, %[[B2:.*]] = %{{.*}}) -> (!llvm.ptr, !llvm.ptr)
// CHECK-NEXT: "llvm.intr.memcpy"(%[[T0:.*]], %[[B2]], %{{.*}})
// CHECK-NEXT: "llvm.intr.memcpy"(%[[T1:.*]], %[[A2]], %{{.*}})
// CHECK-NEXT: "llvm.intr.memcpy"(%[[Y0:.*]], %[[T0]], %{{.*}})
// CHECK-NEXT: "llvm.intr.memcpy"(%[[Y1:.*]], %[[T1]], %{{.*}})
// CHECK-NEXT: scf.yield %[[Y0]], %[[Y1]] : !llvm.ptr, !llvm.ptr
func.func @carry(%x: !kiln.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %z = arith.constant dense<0.0> : tensor<8192xf32>
  %o = arith.constant dense<1.0> : tensor<8192xf32>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %z, %b = %o) -> (tensor<8192xf32>, tensor<8192xf32>) : i32 {
    %s = arith.addf %a, %b : tensor<8192xf32>
    scf.yield %s, %b : tensor<8192xf32>, tensor<8192xf32>
  }
  %q:2 = scf.for %i = %c0 to %n step %c1 iter_args(%a = %r#0, %b = %r#1) -> (tensor<8192xf32>, tensor<8192xf32>) : i32 {
    scf.yield %b, %a : tensor<8192xf32>, tensor<8192xf32>
  }
  %v = kiln.splat %x : tensor<8192x!kiln.ptr<f32>>
  kiln.store %v, %q#0 : tensor<8192x!kiln.ptr<f32>>
  return
}

// -----

// A tile of kMaxRegisterTile elements stays in registers (32 chunks), without loops or
// scratch memory.
// CHECK-LABEL: func.func private @small(
// CHECK-NOT: scf.for
// CHECK: arith.addf %{{.*}}, %{{.*}} : vector<128xf32>
// CHECK-LABEL: func.func @small.host_entry(
// CHECK-NOT: malloc
// CHECK: return
func.func @small(%x: !kiln.ptr<f32>) {
  %v = kiln.splat %x : tensor<4096x!kiln.ptr<f32>>
  %a = kiln.load %v : tensor<4096x!kiln.ptr<f32>>
  %b = arith.addf %a, %a : tensor<4096xf32>
  kiln.store %v, %b : tensor<4096x!kiln.ptr<f32>>
  return
}
