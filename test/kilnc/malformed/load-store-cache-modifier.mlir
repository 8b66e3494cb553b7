// `wb` is a store cache operator (PTX ISA 9.7.9.10), not a load one.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>) {
  // CHECK: load-store-cache-modifier.mlir:[[@LINE+1]]:8: error: 'kiln.load' op expected a load cache modifier (ca, cg, cs, cv), found wb
  %v = kiln.load %p cache = wb : !kiln.ptr<f32>
  kiln.store %p, %v : !kiln.ptr<f32>
  return
}
