// RUN: kiln-opt %s -split-input-file -kiln-convert-to-host | FileCheck %s

// A function MLIR's math dialect has stays a vector op (math.asin on the tile's vector).
// CHECK-LABEL: func.func private @asin(
// CHECK: math.asin %{{.*}} : vector<16xf32>
// CHECK-NOT: kiln.extern_elementwise
func.func @asin(%p: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 16 : i32, start = 0 : i32} : tensor<16xi32>
  %ps = kiln.splat %p : tensor<16x!kiln.ptr<f32>>
  %q = kiln.addptr %ps, %r : tensor<16x!kiln.ptr<f32>>, tensor<16xi32>
  %x = kiln.load %q : tensor<16x!kiln.ptr<f32>>
  %y = kiln.extern_elementwise @__nv_asinf(%x) pure : (tensor<16xf32>) -> tensor<16xf32>
  kiln.store %q, %y : tensor<16x!kiln.ptr<f32>>
  return
}

// -----

// Only libm has lgamma: one call per lane, on the f64 overload's symbol.
// CHECK-DAG: llvm.func @lgamma(f64) -> f64
// CHECK-LABEL: func.func private @lgamma_tile(
// CHECK-COUNT-4: llvm.call @lgamma(%{{.*}}) : (f64) -> f64
func.func @lgamma_tile(%p: !kiln.ptr<f64>) {
  %r = kiln.make_range {end = 4 : i32, start = 0 : i32} : tensor<4xi32>
  %ps = kiln.splat %p : tensor<4x!kiln.ptr<f64>>
  %q = kiln.addptr %ps, %r : tensor<4x!kiln.ptr<f64>>, tensor<4xi32>
  %x = kiln.load %q : tensor<4x!kiln.ptr<f64>>
  %y = kiln.extern_elementwise @__nv_lgamma(%x) pure : (tensor<4xf64>) -> tensor<4xf64>
  kiln.store %q, %y : tensor<4x!kiln.ptr<f64>>
  return
}

// -----

// Integer functions are arith/math ops; the registers are libc calls; gdc is nothing.
// CHECK-DAG: llvm.func @clock_gettime(i32, !llvm.ptr) -> i32
// CHECK-DAG: llvm.func @sched_getcpu() -> i32
// CHECK-LABEL: func.func private @ints_and_registers(
// CHECK: math.ctlz %{{.*}} : i32
// CHECK: llvm.call @clock_gettime
// CHECK: llvm.call @sched_getcpu()
// CHECK-NOT: griddepcontrol
// CHECK-NOT: kiln.grid_dependency
func.func @ints_and_registers(%p: !kiln.ptr<i32>, %t: !kiln.ptr<i64>) {
  %x = kiln.load %p : !kiln.ptr<i32>
  %y = kiln.extern_elementwise @__nv_clz(%x) pure : (i32) -> i32
  kiln.store %p, %y : !kiln.ptr<i32>
  %g = kiln.globaltimer : i64
  kiln.store %t, %g : !kiln.ptr<i64>
  %m = kiln.smid : i32
  kiln.store %p, %m : !kiln.ptr<i32>
  kiln.grid_dependency wait
  return
}

// -----

// tl.erf on fp64: no polynomial and no math-to-LLVM lowering, so libm's erf per lane.
// CHECK-DAG: llvm.func @erf(f64) -> f64
// CHECK-LABEL: func.func private @erf_f64(
// CHECK-COUNT-2: llvm.call @erf(%{{.*}}) : (f64) -> f64
// CHECK-NOT: math.erf
func.func @erf_f64(%p: !kiln.ptr<f64>) {
  %r = kiln.make_range {end = 2 : i32, start = 0 : i32} : tensor<2xi32>
  %ps = kiln.splat %p : tensor<2x!kiln.ptr<f64>>
  %q = kiln.addptr %ps, %r : tensor<2x!kiln.ptr<f64>>, tensor<2xi32>
  %x = kiln.load %q : tensor<2x!kiln.ptr<f64>>
  %y = math.erf %x : tensor<2xf64>
  kiln.store %q, %y : tensor<2x!kiln.ptr<f64>>
  return
}
