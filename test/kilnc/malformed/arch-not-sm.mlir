// --arch takes a real SM name; a virtual architecture is refused.
// RUN: not kilnc %s --arch=compute_90 -o /dev/null 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// RUN: not kilnc %s --arch= -o /dev/null 2>&1 | FileCheck %s --check-prefix=EMPTY

// VIRTUAL: error: expected an architecture like sm_90, found 'compute_90'
// EMPTY: error: expected an architecture like sm_90, found ''

func.func @k(%p: !kiln.ptr<f32>, %x: f32) {
  kiln.store %p, %x : !kiln.ptr<f32>
  return
}
