// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// Verifier and type-constraint errors of the warpgroup and async ops of kiln_gpu (tma_copy,
// dot_wait, mbarrier_expect / mbarrier_wait, shared_dot, the ring type), beside
// invalid.mlir's layout and ring cases.

// tma_copy takes one coordinate per dimension of the slot (outermost first), and one per
// outer dimension of a tensor of more (its blocks 1 along them).
func.func @tma_coords(%d: !kiln.tensormap, %i: i32, %s: i32, %p: i1) {
  %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[3, 128, 64], f16>
  %bars = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<3>
  // expected-error @+1 {{'kiln_gpu.tma_copy' op expected 2 to 5 coordinates for a slot of rank 2 (the block's outer dimensions, beyond the slot's, being 1), found 1}}
  kiln_gpu.tma_copy %d[%i], %a[%s], %bars, %p : !kiln.tensormap, !kiln_gpu.shared<[3, 128, 64], f16>, !kiln_gpu.mbarriers<3>
  return
}

// -----

// tma_copy completes on barrier `slot`: one barrier per slot of its ring.
func.func @tma_barriers(%d: !kiln.tensormap, %i: i32, %s: i32, %p: i1) {
  %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[3, 128, 64], f16>
  %bars = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<2>
  // expected-error @+1 {{'kiln_gpu.tma_copy' op expected one barrier per slot (3), found 2}}
  kiln_gpu.tma_copy %d[%i, %i], %a[%s], %bars, %p : !kiln.tensormap, !kiln_gpu.shared<[3, 128, 64], f16>, !kiln_gpu.mbarriers<2>
  return
}

// -----

// The source of tma_copy is a tensor map (a kernel parameter).
func.func @tma_desc(%d: i64, %i: i32, %s: i32, %p: i1) {
  %a = kiln_gpu.local_alloc {k_major = true, operand = 0 : i32} : !kiln_gpu.shared<[3, 128, 64], f16>
  %bars = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<3>
  // expected-error @+1 {{'kiln_gpu.tma_copy' op operand #0 must be kiln tensor map, but got 'i64'}}
  "kiln_gpu.tma_copy"(%d, %i, %i, %a, %s, %bars, %p) : (i64, i32, i32, !kiln_gpu.shared<[3, 128, 64], f16>, i32, !kiln_gpu.mbarriers<3>, i1) -> ()
  return
}

// -----

// wgmma.wait_group takes 0 to 7.
func.func @dot_wait_pending(%x: tensor<64x64xf32>) {
  // expected-error @+1 {{'kiln_gpu.dot_wait' op attribute 'pending' failed to satisfy constraint: 32-bit signless integer attribute whose minimum value is 0 whose maximum value is 7}}
  %w = kiln_gpu.dot_wait %x {pending = 8 : i32} : tensor<64x64xf32>
  return
}

// -----

// dot_wait returns its operand's registers as they are: the same type.
func.func @dot_wait_type(%x: tensor<64x64xf32>) {
  // expected-error @+1 {{'kiln_gpu.dot_wait' op failed to verify that all of {src, result} have same type}}
  %w = "kiln_gpu.dot_wait"(%x) {pending = 0 : i32} : (tensor<64x64xf32>) -> tensor<64x64xf16>
  return
}

// -----

// An expect_tx of no bytes would complete nothing.
func.func @expect_zero(%s: i32, %p: i1) {
  %bars = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<3>
  // expected-error @+1 {{'kiln_gpu.mbarrier_expect' op attribute 'bytes' failed to satisfy constraint: 32-bit signless integer attribute whose minimum value is 1}}
  kiln_gpu.mbarrier_expect %bars[%s], %p {bytes = 0 : i32} : !kiln_gpu.mbarriers<3>
  return
}

// -----

// A shared_dot leaves at most seven earlier dots running (wgmma.wait_group's range).
func.func @shared_dot_pending(%c: tensor<64x64xf32>, %s: i32) {
  %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], f16>
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], f16>
  // expected-error @+1 {{'kiln_gpu.shared_dot' op attribute 'pending' failed to satisfy constraint: 32-bit signless integer attribute whose minimum value is 0 whose maximum value is 7}}
  %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c {pending = 8 : i32} : !kiln_gpu.shared<[2, 64, 32], f16>, !kiln_gpu.shared<[2, 32, 64], f16>, tensor<64x64xf32>
  return
}

// -----

// B must come from a ring allocated for operand 1 (K x N slots).
func.func @shared_dot_b_role(%c: tensor<64x64xf32>, %s: i32) {
  %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], f16>
  %b = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 32, 64], f16>
  // expected-error @+1 {{'kiln_gpu.shared_dot' op expected B from a ring allocated for operand 1}}
  %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c : !kiln_gpu.shared<[2, 64, 32], f16>, !kiln_gpu.shared<[2, 32, 64], f16>, tensor<64x64xf32>
  return
}

// -----

// A in registers is a 2-D tile.
func.func @shared_dot_a_rank(%x: tensor<2x64x32xf16>, %c: tensor<64x64xf32>, %s: i32) {
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], f16>
  // expected-error @+1 {{'kiln_gpu.shared_dot' op expected A in registers to be a 2-D tile, found 'tensor<2x64x32xf16>'}}
  %d = kiln_gpu.shared_dot %x, %b[%s], %c : tensor<2x64x32xf16>, !kiln_gpu.shared<[2, 32, 64], f16>, tensor<64x64xf32>
  return
}

// -----

// wgmma reads fp8 operands K-major only, as int8 ones.
func.func @shared_dot_fp8_n_major(%c: tensor<64x64xf32>, %s: i32) {
  %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], f8E4M3FN>
  %b = kiln_gpu.local_alloc {k_major = false, operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], f8E4M3FN>
  // expected-error @+1 {{'kiln_gpu.shared_dot' op expected 8-bit rings contiguous along K (k_major), found '!kiln_gpu.shared<[2, 32, 64], f8E4M3FN>' with k_major = false}}
  %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c : !kiln_gpu.shared<[2, 64, 32], f8E4M3FN>, !kiln_gpu.shared<[2, 32, 64], f8E4M3FN>, tensor<64x64xf32>
  return
}

// -----

// A and B of one element type.
func.func @shared_dot_mixed(%c: tensor<64x64xf32>, %s: i32) {
  %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[2, 64, 32], f16>
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], bf16>
  // expected-error @+1 {{'kiln_gpu.shared_dot' op expected f16, bf16 or fp8 operands of one type and f32 accumulators, or i8 operands and i32 accumulators, found 'f16', 'bf16' and 'f32'}}
  %d = kiln_gpu.shared_dot %a[%s], %b[%s], %c : !kiln_gpu.shared<[2, 64, 32], f16>, !kiln_gpu.shared<[2, 32, 64], bf16>, tensor<64x64xf32>
  return
}

// -----

// fp8 A comes from a ring, as int8 A (wgmma has no 8-bit register fragments).
func.func @shared_dot_fp8_register_a(%x: tensor<64x32xf8E5M2>, %c: tensor<64x64xf32>, %s: i32) {
  %b = kiln_gpu.local_alloc {operand = 1 : i32} : !kiln_gpu.shared<[2, 32, 64], f8E5M2>
  // expected-error @+1 {{'kiln_gpu.shared_dot' op expected an 8-bit A from a ring, found A in registers}}
  %d = kiln_gpu.shared_dot %x, %b[%s], %c : tensor<64x32xf8E5M2>, !kiln_gpu.shared<[2, 32, 64], f8E5M2>, tensor<64x64xf32>
  return
}

// -----

// A ring has at least one slot.
func.func @shared_zero_dim() {
  // expected-error @+1 {{expected positive dimensions, found 0}}
  %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[0, 64, 32], f16>
  return
}

// -----

// The phase of mbarrier_wait is an i32 parity.
func.func @mbarrier_wait_phase(%s: i32, %ph: i64) {
  %bars = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<3>
  // expected-error @+1 {{'kiln_gpu.mbarrier_wait' op operand #2 must be 32-bit signless integer, but got 'i64'}}
  "kiln_gpu.mbarrier_wait"(%bars, %s, %ph) {operandSegmentSizes = array<i32: 1, 1, 1, 0>} : (!kiln_gpu.mbarriers<3>, i32, i64) -> ()
  return
}

// -----

// whole_warp says which threads wait where the predicate holds (warp 0): it needs one.
func.func @mbarrier_wait_whole_warp(%s: i32, %ph: i32) {
  %bars = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<3>
  // expected-error @+1 {{'kiln_gpu.mbarrier_wait' op expected a predicate with whole_warp (warp 0 waits where it holds)}}
  kiln_gpu.mbarrier_wait %bars[%s], %ph {whole_warp} : !kiln_gpu.mbarriers<3>
  return
}

// -----

// setmaxnreg takes 24 to 256 registers, a multiple of 8.
func.func @set_max_registers_count() {
  // expected-error @+1 {{'kiln_gpu.set_max_registers' op expected a register count from 24 to 256, a multiple of 8, found 100}}
  kiln_gpu.set_max_registers 100 increase
  return
}

// -----

// A named barrier counts whole warps.
func.func @named_barrier_threads(%id: i32) {
  // expected-error @+1 {{'kiln_gpu.named_barrier' op expected a thread count from 32 to 1024, a multiple of 32, found 100}}
  kiln_gpu.named_barrier %id, 100 arrive
  return
}
