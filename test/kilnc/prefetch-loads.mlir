// --prefetch-loads=all prefetches the next iteration's load: two loads, before the loop and in
// it, predicated by the iteration being in range; the default (dots: dot operands only) leaves
// the loop's one plain load; auto prefetches here (the 128-element f32 tile costs 1 register
// per thread). --num-stages (the dot rings) does not touch a loop without dots.
// RUN: kilnc %s --emit=mlir | FileCheck %s --check-prefix=OFF
// RUN: kilnc %s --emit=mlir --num-stages=2 | FileCheck %s --check-prefix=OFF
// RUN: kilnc %s --emit=mlir --prefetch-loads=all | FileCheck %s --check-prefix=ON
// RUN: kilnc %s --emit=mlir --prefetch-loads=auto | FileCheck %s --check-prefix=ON
// RUN: not kilnc %s --emit=mlir --prefetch-loads=some 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: Cannot find option named 'some'!
// OFF: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// OFF-NOT: ld.global
// ON-COUNT-2: llvm.inline_asm has_side_effects "@$1 ld.global.b32 $0, [ $2 + 0 ];"
// ON-NOT: llvm.load
func.func @rows(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %out: !kiln.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c128 = arith.constant 128 : i32
  %zero = arith.constant dense<0.0> : tensor<128xf32>
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %acc = scf.for %i = %c0 to %n step %c1 iter_args(%a = %zero) -> (tensor<128xf32>) : i32 {
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
