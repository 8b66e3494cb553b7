// `ca` is a load cache operator (PTX ISA 9.7.9.8), not a store one.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>, %x: f32) {
  // CHECK: store-load-cache-modifier.mlir:[[@LINE+1]]:3: error: 'kiln.store' op expected a store cache modifier (wb, cg, cs, wt), found ca
  kiln.store %p, %x cache = ca : !kiln.ptr<f32>
  return
}
