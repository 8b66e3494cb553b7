// --arch takes a real SM name; a virtual architecture is refused.
// RUN: not kilnc %s --arch=compute_90 -o /dev/null 2>&1 | FileCheck %s --check-prefix=VIRTUAL
// RUN: not kilnc %s --arch= -o /dev/null 2>&1 | FileCheck %s --check-prefix=EMPTY

// VIRTUAL: kilnc: error: unknown --arch 'compute_90' (expected sm_<major><minor>[a] known to NVPTX, e.g. sm_80, sm_90, sm_90a, or cpu)
// EMPTY: kilnc: error: unknown --arch ''
// RUN: not kilnc %s --arch=sm_1 -o /dev/null 2>&1 | FileCheck %s --check-prefix=SM1 --implicit-check-not='not a recognized processor'
// SM1: kilnc: error: unknown --arch 'sm_1'

func.func @k(%p: !kiln.ptr<f32>, %x: f32) {
  kiln.store %p, %x : !kiln.ptr<f32>
  return
}
