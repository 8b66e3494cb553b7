// kilnc's outputs: LLVM-dialect MLIR, LLVM IR, PTX, and a cubin through nvJitLink.
// RUN: kilnc %s --emit=mlir | FileCheck %s --check-prefix=MLIR
// RUN: kilnc %s --emit=llvm | FileCheck %s --check-prefix=LLVM
// RUN: kilnc %s --emit=ptx --num-warps=8 | FileCheck %s --check-prefix=PTX
// RUN: kilnc %s --emit=cubin -o %t.cubin && %python -c "import sys; d=open(sys.argv[1],'rb').read(); sys.exit(0 if d[:4]==b'\x7fELF' else 1)" %t.cubin
// RUN: kilnc %s --print-ir-after-all -o /dev/null 2>&1 | FileCheck %s --check-prefix=IR

// MLIR: llvm.func @scale
// LLVM: define ptx_kernel void @scale(ptr addrspace(1) align 16
// PTX: .maxntid 256, 1, 1
// IR: IR Dump After KilnAssignLayouts
// IR: IR Dump After KilnConvertToLLVM
func.func @scale(%x: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}) {
  %r = kiln.make_range {end = 1024 : i32, start = 0 : i32} : tensor<1024xi32>
  %p = kiln.splat %x : tensor<1024x!kiln.ptr<f32>>
  %ps = kiln.addptr %p, %r : tensor<1024x!kiln.ptr<f32>>, tensor<1024xi32>
  %v = kiln.load %ps : tensor<1024x!kiln.ptr<f32>>
  %two = arith.constant dense<2.0> : tensor<1024xf32>
  %w = arith.mulf %v, %two : tensor<1024xf32>
  kiln.store %ps, %w : tensor<1024x!kiln.ptr<f32>>
  return
}
