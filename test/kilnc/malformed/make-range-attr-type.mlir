// make_range bounds are i32 attributes, not strings.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>) {
  // CHECK: make-range-attr-type.mlir:[[@LINE+1]]:24: error: custom op 'kiln.make_range' 'kiln.make_range' op attribute 'start' failed to satisfy constraint: 32-bit signless integer attribute
  %r = kiln.make_range {end = 128 : i32, start = "0"} : tensor<128xi32>
  return
}
