// RUN: kiln-opt %s -kiln-assign-layouts -split-input-file -verify-diagnostics
// RUN: kiln-opt %s -kiln-assign-layouts=num-warps=32 -split-input-file | FileCheck %s --check-prefix=W32
// RUN: not kiln-opt %s -kiln-assign-layouts=num-warps=3 -split-input-file 2>&1 | FileCheck %s --check-prefix=W3

// A warp count not a power of two, printed as a number (it was printed as a character).
// W3: error: expected num-warps to be a power of two, found 3{{$}}

// A tile of 2^20 elements is 8192 per thread on 4 warps: past the 1024 a thread may hold,
// an error at the tile's op (compiling it would take minutes); 1024 per thread on 32 warps is
// laid out.
// W32-LABEL: func.func @huge_tile
// W32: kiln.make_range {{.*}} : tensor<1048576xi32, #blocked>
func.func @huge_tile(%p: !kiln.ptr<f32>) {
  // expected-error @below {{a tile of 1048576 elements is 8192 elements per thread on 4 warps; GPU code holds at most 1024 per thread}}
  %r = kiln.make_range {end = 1048576 : i32, start = 0 : i32} : tensor<1048576xi32>
  %ps = kiln.splat %p : tensor<1048576x!kiln.ptr<f32>>
  %pp = kiln.addptr %ps, %r : tensor<1048576x!kiln.ptr<f32>>, tensor<1048576xi32>
  %v = kiln.load %pp : tensor<1048576x!kiln.ptr<f32>>
  kiln.store %pp, %v : tensor<1048576x!kiln.ptr<f32>>
  return
}
