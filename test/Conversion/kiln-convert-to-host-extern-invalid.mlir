// RUN: kiln-opt %s -split-input-file -kiln-convert-to-host -verify-diagnostics

// A libdevice function without a host version, and a symbol that is not libdevice's: errors
// naming them.
func.func @rcp64h(%p: !kiln.ptr<f64>) {
  %x = kiln.load %p : !kiln.ptr<f64>
  // expected-error @+1 {{libdevice.rcp64h (@__nv_rcp64h) has no CPU backend version in Kiln; it runs on the GPU}}
  %y = kiln.extern_elementwise @__nv_rcp64h(%x) pure : (f64) -> f64
  kiln.store %p, %y : !kiln.ptr<f64>
  return
}

// -----

func.func @unknown(%p: !kiln.ptr<f32>) {
  %x = kiln.load %p : !kiln.ptr<f32>
  // expected-error @+1 {{the external function @my_function has no CPU backend version (the CPU backend knows libdevice's functions only)}}
  %y = kiln.extern_elementwise @my_function(%x) pure : (f32) -> f32
  kiln.store %p, %y : !kiln.ptr<f32>
  return
}

// -----

// inline_asm_elementwise is PTX: the CPU backend rejects it at its line.
func.func @inline_asm(%p: !kiln.ptr<i32>) {
  %x = kiln.load %p : !kiln.ptr<i32>
  // expected-error @+1 {{tl.inline_asm_elementwise is not supported by the CPU backend: its asm is PTX, which runs on the GPU only}}
  %y = kiln.inline_asm_elementwise(%x) "mov.b32 $0, $1;", "=r,r" pure pack = 1 : (i32) -> i32
  kiln.store %p, %y : !kiln.ptr<i32>
  return
}
