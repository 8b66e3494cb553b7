// An enum keyword that does not exist: there is no `w` grid axis.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s

func.func @k(%p: !kiln.ptr<i32>) {
  // CHECK: unregistered-attr-value.mlir:[[@LINE+1]]:26: error: custom op 'kiln.program_id' expected string or keyword containing one of the following enum values for attribute 'axis' [x, y, z]
  %pid = kiln.program_id w : i32
  kiln.store %p, %pid : !kiln.ptr<i32>
  return
}
