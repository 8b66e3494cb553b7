// A file of comments only, and a truly empty file, hold no kernel.
// RUN: not kilnc %s -o /dev/null 2>&1 | FileCheck %s
// RUN: printf '' > %t.mlir
// RUN: not kilnc %t.mlir -o /dev/null 2>&1 | FileCheck %s
// RUN: not kilnc - -o /dev/null < %t.mlir 2>&1 | FileCheck %s

// CHECK: error: expected exactly one kernel function, found 0
