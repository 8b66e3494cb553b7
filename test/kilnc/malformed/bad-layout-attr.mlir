// A layout whose warp holds 16 threads.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

// CHECK: bad-layout-attr.mlir:[[@LINE+1]]:23: error: expected threadsPerWarp to multiply to 32, found 16
#l = #kiln_gpu.blocked<{sizePerThread = [1], threadsPerWarp = [16], warpsPerCTA = [4], order = [0]}>
func.func @k(%p: !kiln.ptr<f32>) {
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32, #l>
  return
}
