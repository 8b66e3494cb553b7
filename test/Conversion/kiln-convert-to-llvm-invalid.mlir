// RUN: kiln-opt %s -split-input-file -kiln-convert-to-llvm -verify-diagnostics

// A layout whose rank differs from the tile's is reported, not dereferenced.
#bad = #kiln_gpu.blocked<{sizePerThread = [1, 1], threadsPerWarp = [1, 32], warpsPerCTA = [1, 4], order = [1, 0]}>
module attributes {kiln_gpu.num_warps = 4 : i32} {
  func.func @rank_mismatch() {
    // expected-error @below {{expected a blocked or slice layout of rank 1}}
    %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32, #bad>
    return
  }
}
