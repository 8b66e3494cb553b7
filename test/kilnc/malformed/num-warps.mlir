// --num-warps must be a power of two in [1, 32]; the check runs before the input is read.
// RUN: not kilnc %s --num-warps=3 -o /dev/null 2>&1 | FileCheck %s --check-prefix=THREE
// RUN: not kilnc %s --num-warps=0 -o /dev/null 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not kilnc %s --num-warps=64 -o /dev/null 2>&1 | FileCheck %s --check-prefix=SIXTYFOUR
// RUN: not kilnc %s --num-warps=-1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not kilnc /nonexistent/kernel.mlir --num-warps=3 -o /dev/null 2>&1 | FileCheck %s --check-prefix=THREE

// THREE: kilnc: error: expected --num-warps to be a power of two in [1, 32], found 3
// ZERO: kilnc: error: expected --num-warps to be a power of two in [1, 32], found 0
// SIXTYFOUR: kilnc: error: expected --num-warps to be a power of two in [1, 32], found 64
// NEGATIVE: kilnc: for the --num-warps option: '-1' value invalid for uint argument!

func.func @k(%p: !kiln.ptr<f32>, %x: f32) {
  kiln.store %p, %x : !kiln.ptr<f32>
  return
}
