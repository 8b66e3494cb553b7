// Triton's spelling of a load: the tt dialect is not part of Kiln.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>) {
  // CHECK: unknown-dialect.mlir:[[@LINE+2]]:8: error: Dialect `tt' not found for custom op 'tt.load'
  // CHECK: note: Available dialects: arith, builtin, cf, func, kiln, kiln_gpu, llvm, math, nvvm, scf
  %v = tt.load %p : !kiln.ptr<f32>
  return
}
