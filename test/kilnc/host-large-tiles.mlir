// A kernel with tiles of more than 4,096 elements compiles for the host to loops over 128-lane
// chunks that LLVM is told not to unroll (fully unrolled, 64 chunks per op would cost the
// compile time the loops save), with scratch memory malloc'ed by the entry.
// RUN: kilnc --arch=cpu --emit=llvm %s | FileCheck %s
// CHECK-LABEL: define void @add.host_entry(
// CHECK: %[[MEM:.*]] = {{.*}}call {{.*}}ptr @malloc(i64 {{[0-9]+}})
// CHECK: br {{.*}}, !llvm.loop ![[LOOP:[0-9]+]]
// CHECK: call void @free(ptr {{.*}}%[[MEM]])
// CHECK: ![[LOOP]] = distinct !{![[LOOP]], ![[OFF:[0-9]+]]}
// CHECK: ![[OFF]] = !{!"llvm.loop.unroll.disable"}
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
