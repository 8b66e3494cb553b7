// The block size constant is i64, the program id i32: muli needs one type.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<f32>) {
  %pid = kiln.program_id x : i32
  %block = arith.constant 128 : i64
  // CHECK: type-mismatch-scalar.mlir:[[@LINE+2]]:29: error: use of value '%block' expects different type than prior uses: 'i32' vs 'i64'
  // CHECK: type-mismatch-scalar.mlir:[[@LINE-2]]:3: note: prior use here
  %start = arith.muli %pid, %block : i32
  return
}
