// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// One case per kiln_gpu layout verifier message, and the convert_layout type constraints.

// expected-error @+1 {{expected threadsPerWarp to multiply to 32, found 16}}
#b = #kiln_gpu.blocked<{sizePerThread = [1, 1], threadsPerWarp = [2, 8], warpsPerCTA = [4, 1], order = [1, 0]}>
func.func @threads_per_warp_16(%x: tensor<16x16xf32, #b>) {
  return
}

// -----

// The wgmma accumulator layout is the D fragment's lane pattern with whole warpgroups on M.
// expected-error @+1 {{expected the wgmma accumulator layout to have rank 2, order [1, 0], sizePerThread [1, _], threadsPerWarp [8, _] and warpsPerCTA [4k, 1]}}
#b = #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [2, 1], order = [1, 0], wgmma = true}>
func.func @wgmma_two_warps(%x: tensor<64x64xf32, #b>) {
  return
}

// -----

// expected-error @+1 {{expected threadsPerWarp to multiply to 32, found 64}}
#b = #kiln_gpu.blocked<{sizePerThread = [1], threadsPerWarp = [64], warpsPerCTA = [1], order = [0]}>
func.func @threads_per_warp_64(%x: tensor<64xf32, #b>) {
  return
}

// -----

// expected-error @+1 {{expected powers of two in dimension 0}}
#b = #kiln_gpu.blocked<{sizePerThread = [3], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
func.func @size_per_thread_not_pow2(%x: tensor<128xf32, #b>) {
  return
}

// -----

// expected-error @+1 {{expected powers of two in dimension 1}}
#b = #kiln_gpu.blocked<{sizePerThread = [1, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 3], order = [1, 0]}>
func.func @warps_not_pow2(%x: tensor<16x16xf32, #b>) {
  return
}

// -----

// Zero is not a power of two (and would make the product 0).
// expected-error @+1 {{expected powers of two in dimension 1}}
#b = #kiln_gpu.blocked<{sizePerThread = [1, 1], threadsPerWarp = [32, 0], warpsPerCTA = [1, 1], order = [1, 0]}>
func.func @threads_zero(%x: tensor<16x16xf32, #b>) {
  return
}

// -----

// expected-error @+1 {{expected powers of two in dimension 0}}
#b = #kiln_gpu.blocked<{sizePerThread = [0], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]}>
func.func @size_per_thread_zero(%x: tensor<32xf32, #b>) {
  return
}

// -----

// expected-error @+1 {{expected order to be a permutation of [0, 2)}}
#b = #kiln_gpu.blocked<{sizePerThread = [1, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 1], order = [0, 0]}>
func.func @order_repeated(%x: tensor<16x16xf32, #b>) {
  return
}

// -----

// expected-error @+1 {{expected order to be a permutation of [0, 2)}}
#b = #kiln_gpu.blocked<{sizePerThread = [1, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 1], order = [2, 0]}>
func.func @order_out_of_range(%x: tensor<16x16xf32, #b>) {
  return
}

// -----

// expected-error @+1 {{expected sizePerThread, threadsPerWarp, warpsPerCTA and order of one non-zero rank, found ranks 1, 2, 2, 2}}
#b = #kiln_gpu.blocked<{sizePerThread = [1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 1], order = [1, 0]}>
func.func @rank_mismatch_size(%x: tensor<16x16xf32, #b>) {
  return
}

// -----

// expected-error @+1 {{expected sizePerThread, threadsPerWarp, warpsPerCTA and order of one non-zero rank, found ranks 2, 2, 2, 1}}
#b = #kiln_gpu.blocked<{sizePerThread = [1, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 1], order = [0]}>
func.func @rank_mismatch_order(%x: tensor<16x16xf32, #b>) {
  return
}

// -----

// expected-error @+1 {{expected sizePerThread, threadsPerWarp, warpsPerCTA and order of one non-zero rank, found ranks 2, 2, 3, 2}}
#b = #kiln_gpu.blocked<{sizePerThread = [1, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 1, 1], order = [1, 0]}>
func.func @rank_mismatch_warps(%x: tensor<16x16xf32, #b>) {
  return
}

// -----

// An empty list does not parse: the rank-0 layout never reaches the verifier.
// expected-error @+2 {{expected integer value}}
// expected-error @+1 {{failed to parse KilnGPU_BlockedEncodingAttr parameter 'sizePerThread' which is to be a `::llvm::ArrayRef<unsigned>`}}
#b = #kiln_gpu.blocked<{sizePerThread = [], threadsPerWarp = [], warpsPerCTA = [], order = []}>

// -----

#b = #kiln_gpu.blocked<{sizePerThread = [1, 1], threadsPerWarp = [4, 8], warpsPerCTA = [1, 1], order = [1, 0]}>
// expected-error @+1 {{expected dim < parent rank 2, found 2}}
#s = #kiln_gpu.slice<{dim = 2, parent = #b}>
func.func @slice_dim_out_of_range(%x: tensor<16xf32, #s>) {
  return
}

// -----

#b = #kiln_gpu.blocked<{sizePerThread = [1, 1, 1], threadsPerWarp = [4, 8, 1], warpsPerCTA = [1, 1, 1], order = [2, 1, 0]}>
#s = #kiln_gpu.slice<{dim = 0, parent = #b}>
// The sliced parent has rank 2: dim 2 is out of range.
// expected-error @+1 {{expected dim < parent rank 2, found 2}}
#ss = #kiln_gpu.slice<{dim = 2, parent = #s}>
func.func @slice_of_slice_dim_out_of_range(%x: tensor<4xf32, #ss>) {
  return
}

// -----

#b = #kiln_gpu.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
// expected-error @+1 {{expected a parent of rank >= 2}}
#s = #kiln_gpu.slice<{dim = 0, parent = #b}>
func.func @slice_of_1d(%x: tensor<1xf32, #s>) {
  return
}

// -----

// expected-error @+1 {{expected a blocked or slice parent layout, found 1 : i32}}
#s = #kiln_gpu.slice<{dim = 0, parent = 1 : i32}>
func.func @slice_parent_not_a_layout(%x: tensor<16xf32, #s>) {
  return
}

// -----

// expected-error @+1 {{unknown attribute `shared` in dialect `kiln_gpu`}}
#l = #kiln_gpu.shared<{vec = 1}>

// -----

// expected-error @+1 {{expected 'threadsPerWarp'}}
#b = #kiln_gpu.blocked<{sizePerThread = [1], warpsPerCTA = [4], order = [0]}>

// -----

#b1 = #kiln_gpu.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#b4 = #kiln_gpu.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]}>
func.func @convert_layout_shape(%x: tensor<128xf32, #b1>) {
  // expected-error @+1 {{'kiln_gpu.convert_layout' op requires the same shape for all operands and results}}
  %0 = kiln_gpu.convert_layout %x : tensor<128xf32, #b1> -> tensor<64xf32, #b4>
  return
}

// -----

#b1 = #kiln_gpu.blocked<{sizePerThread = [1], threadsPerWarp = [32], warpsPerCTA = [4], order = [0]}>
#b4 = #kiln_gpu.blocked<{sizePerThread = [4], threadsPerWarp = [32], warpsPerCTA = [1], order = [0]}>
func.func @convert_layout_element(%x: tensor<128xf32, #b1>) {
  // expected-error @+1 {{'kiln_gpu.convert_layout' op requires the same element type for all operands and results}}
  %0 = kiln_gpu.convert_layout %x : tensor<128xf32, #b1> -> tensor<128xf16, #b4>
  return
}

// -----

func.func @convert_layout_scalar(%x: f32) {
  // expected-error @+1 {{'kiln_gpu.convert_layout' op operand #0 must be ranked tensor of any type values, but got 'f32'}}
  %0 = "kiln_gpu.convert_layout"(%x) : (f32) -> f32
  return
}

// -----

func.func @copy_shape(%p: tensor<64x16x!kiln.ptr<f16>>) {
  %r = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], f16>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{expected a pointer tile of the slot's shape [64, 32]}}
  kiln_gpu.async_copy %r[%s], %p : !kiln_gpu.shared<[2, 64, 32], f16>, tensor<64x16x!kiln.ptr<f16>>
  return
}

// -----

func.func @copy_pointee(%p: tensor<64x32x!kiln.ptr<f32>>) {
  %r = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], f16>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{expected pointers to 'f16'}}
  kiln_gpu.async_copy %r[%s], %p : !kiln_gpu.shared<[2, 64, 32], f16>, tensor<64x32x!kiln.ptr<f32>>
  return
}

// -----

func.func @dot_shapes(%c: tensor<64x64xf32>) {
  %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], f16>
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 16, 64], f16>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{expected A (M x K), B (K x N) and C (M x N)}}
  %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c : !kiln_gpu.shared<[2, 64, 32], f16>, !kiln_gpu.shared<[2, 16, 64], f16>, tensor<64x64xf32>
  return
}

// -----

func.func @dot_b_transposed_shape(%c: tensor<64x64xf32>) {
  %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], f16>
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], f16>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{found 64x32, 64x32 (the slot transposed)}}
  %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c {b_transposed} : !kiln_gpu.shared<[2, 64, 32], f16>, !kiln_gpu.shared<[2, 32, 64], f16>, tensor<64x64xf32>
  return
}

// -----

func.func @dot_b_transposed_8_bit(%c: tensor<64x32xi32>) {
  %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 64], i8>
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], i8>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{expected 8-bit B read as its ring holds it (K-major), found b_transposed}}
  %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c {b_transposed} : !kiln_gpu.shared<[2, 64, 64], i8>, !kiln_gpu.shared<[2, 32, 64], i8>, tensor<64x32xi32>
  return
}

// -----

func.func @dot_operand_role(%c: tensor<64x64xf32>) {
  %a = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 64, 32], f16>
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], f16>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{expected A from a ring allocated for operand 0}}
  %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c : !kiln_gpu.shared<[2, 64, 32], f16>, !kiln_gpu.shared<[2, 32, 64], f16>, tensor<64x64xf32>
  return
}

// -----

// expected-error @+1 {{expected [slots, rows, columns], found 2 dimensions}}
func.func @ring_rank(%r: !kiln_gpu.shared<[64, 32], f16>) {
  return
}

// -----

func.func @alloc_pow2() {
  // expected-error @+1 {{expected power-of-two tile dimensions, found 48x32}}
  %r = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 48, 32], f16>
  return
}

// -----

func.func @dot_register_a_slot(%p: tensor<64x32xf16>, %c: tensor<64x64xf32>) {
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], f16>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{expected no slot for A in registers}}
  %d = kiln_gpu.shared_dot %p[%s], %b[%s], %c : tensor<64x32xf16>, !kiln_gpu.shared<[2, 32, 64], f16>, tensor<64x64xf32>
  return
}

// -----

func.func @dot_ring_a_without_slot(%c: tensor<64x64xf32>) {
  %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], f16>
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], f16>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{expected a slot for A read from a ring}}
  %d = kiln_gpu.shared_dot %a, %b[%s], %c : !kiln_gpu.shared<[2, 64, 32], f16>, !kiln_gpu.shared<[2, 32, 64], f16>, tensor<64x64xf32>
  return
}

// -----

func.func @dot_register_a_shape(%p: tensor<64x16xf16>, %c: tensor<64x64xf32>) {
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], f16>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{expected A (M x K), B (K x N) and C (M x N), found 64x16, 32x64}}
  %d = kiln_gpu.shared_dot %p, %b[%s], %c : tensor<64x16xf16>, !kiln_gpu.shared<[2, 32, 64], f16>, tensor<64x64xf32>
  return
}

// -----

func.func @mbarrier_no_arrivals() {
  // expected-error @+1 {{attribute 'arrivals' failed to satisfy constraint}}
  %b = kiln_gpu.mbarrier_alloc {arrivals = 0 : i32} : !kiln_gpu.mbarriers<4>
  return
}

// -----

func.func @dot_int8_mixed_accumulator(%c: tensor<64x64xf32>) {
  %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], i8>
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], i8>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{expected f16, bf16 or fp8 operands of one type and f32 accumulators, or i8 operands and i32 accumulators, found 'i8', 'i8' and 'f32'}}
  %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c : !kiln_gpu.shared<[2, 64, 32], i8>, !kiln_gpu.shared<[2, 32, 64], i8>, tensor<64x64xf32>
  return
}

// -----

func.func @dot_int8_n_major(%c: tensor<64x64xi32>) {
  %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], i8>
  %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], i8>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{expected 8-bit rings contiguous along K (k_major)}}
  %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c : !kiln_gpu.shared<[2, 64, 32], i8>, !kiln_gpu.shared<[2, 32, 64], i8>, tensor<64x64xi32>
  return
}

// -----

func.func @dot_int8_register_a(%p: tensor<64x32xi8>, %c: tensor<64x64xi32>) {
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], i8>
  %s = arith.constant 0 : i32
  // expected-error @+1 {{expected an 8-bit A from a ring, found A in registers}}
  %d = kiln_gpu.shared_dot %p, %b[%s], %c : tensor<64x32xi8>, !kiln_gpu.shared<[2, 32, 64], i8>, tensor<64x64xi32>
  return
}
