// Every target gets a PTX ISA version that knows it (LLVM aborts the process otherwise):
// 7.8 by default, 8.0 for sm_90a, 8.6 for sm_100, 8.7 for sm_120; ptxas takes each.
// RUN: kilnc %s --arch=sm_80 -o %t80.ptx && FileCheck %s --check-prefix=SM80 < %t80.ptx
// RUN: kilnc %s --arch=sm_90a -o %t90.ptx && FileCheck %s --check-prefix=SM90A < %t90.ptx
// RUN: kilnc %s --arch=sm_100a -o %t100.ptx && FileCheck %s --check-prefix=SM100 < %t100.ptx
// RUN: kilnc %s --arch=sm_120 -o %t120.ptx && FileCheck %s --check-prefix=SM120 < %t120.ptx
// RUN: %if ptxas %{ %ptxas -arch=sm_100a %t100.ptx -o /dev/null %}
// RUN: %if ptxas %{ %ptxas -arch=sm_120 %t120.ptx -o /dev/null %}
// SM80: .version 7.8
// SM80: .target sm_80
// SM90A: .version 8.0
// SM90A: .target sm_90a
// SM100: .version 8.6
// SM100: .target sm_100a
// SM120: .version 8.7
// SM120: .target sm_120
module {
  func.func @store_one(%p: !kiln.ptr<f32>) {
    %c = arith.constant 1.0 : f32
    kiln.store %p, %c : !kiln.ptr<f32>
    return
  }
}
