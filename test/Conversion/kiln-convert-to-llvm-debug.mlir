// RUN: kiln-opt %s -split-input-file -kiln-assign-layouts -convert-scf-to-cf -kiln-convert-to-llvm | FileCheck %s

// device_print of a tile: one vprintf per owned element, by its owner, with the program id,
// the element's index and the value (f32 widened to double for %f).
// CHECK-DAG: llvm.mlir.global internal constant @__kiln_str_{{.*}}("pid (%d, %d, %d) idx (%d) x: %f\0A\00")
// CHECK-DAG: llvm.func @vprintf(!llvm.ptr, !llvm.ptr) -> i32
// CHECK-LABEL: llvm.func @print_tile(
// CHECK: llvm.alloca {{.*}} x !llvm.struct<(i32, i32, i32, i32, f64)>
// CHECK: llvm.fpext {{.*}} : f32 to f64
// CHECK: llvm.call @vprintf(
func.func @print_tile(%p: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %x = kiln.load %q : tensor<128x!kiln.ptr<f32>>
  kiln.print "x: " %x : tensor<128xf32>
  return
}

// -----

// device_assert: a thread with a false element calls __assertfail with the message, the file,
// the line and the kernel's name.
// CHECK-DAG: llvm.func @__assertfail(!llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i64)
// CHECK-DAG: @__kiln_str_{{.*}}("pid out of range\00")
// CHECK-LABEL: llvm.func @check(
// CHECK: llvm.cond_br
// CHECK: llvm.call @__assertfail({{.*}}) : (!llvm.ptr, !llvm.ptr, i32, !llvm.ptr, i64) -> ()
func.func @check(%n: i32) {
  %pid = kiln.program_id x : i32
  %ok = arith.cmpi slt, %pid, %n : i32
  kiln.assert %ok, "pid out of range" : i1
  return
}

// -----

// debug_barrier: kiln.barrier is the CTA barrier, where it stands between the store and the
// load.
// CHECK-LABEL: llvm.func @debug_barrier(
// CHECK: llvm.store
// CHECK: nvvm.barrier0
// CHECK: llvm.load
func.func @debug_barrier(%p: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  %ps = kiln.splat %p : tensor<128x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %r : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
  %c = arith.constant dense<1.0> : tensor<128xf32>
  kiln.store %q, %c : tensor<128x!kiln.ptr<f32>>
  kiln.barrier
  %x = kiln.load %q : tensor<128x!kiln.ptr<f32>>
  kiln.store %q, %x : tensor<128x!kiln.ptr<f32>>
  return
}
