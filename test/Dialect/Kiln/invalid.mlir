// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// One case per kiln verifier message and per type constraint: types, pointers, loads, stores
// and atomics here, dots and the rest in invalid-compute.mlir. Where the custom syntax cannot
// spell the mistake (it infers the types it checks), the case uses the generic form.

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

// expected-error @+1 {{expected a scalar pointee type (integer, float or !kiln.ptr), found 'tensor<4xf32>'}}
func.func @ptr_to_tensor(%p: !kiln.ptr<tensor<4xf32>>) {
  return
}

// -----

// expected-error @+1 {{expected a scalar pointee type (integer, float or !kiln.ptr), found 'index'}}
func.func @ptr_to_index(%p: !kiln.ptr<index>) {
  return
}

// -----

// expected-error @+1 {{expected a scalar pointee type (integer, float or !kiln.ptr), found 'vector<4xf32>'}}
func.func @ptr_to_vector(%p: !kiln.ptr<vector<4xf32>>) {
  return
}

//===----------------------------------------------------------------------===//
// Grid
//===----------------------------------------------------------------------===//

// -----

func.func @program_id_bad_axis() -> i32 {
  // expected-error @+1 {{custom op 'kiln.program_id' expected string or keyword containing one of the following enum values for attribute 'axis' [x, y, z]}}
  %0 = kiln.program_id w : i32
  return %0 : i32
}

// -----

func.func @program_id_i64() -> i64 {
  // expected-error @+1 {{'kiln.program_id' op result #0 must be 32-bit signless integer, but got 'i64'}}
  %0 = kiln.program_id x : i64
  return %0 : i64
}

//===----------------------------------------------------------------------===//
// make_range
//===----------------------------------------------------------------------===//

// -----

func.func @make_range_rank2() {
  // expected-error @+1 {{'kiln.make_range' op expected a 1-D result, found rank 2}}
  %0 = kiln.make_range {end = 16 : i32, start = 0 : i32} : tensor<4x4xi32>
  return
}

// -----

func.func @make_range_empty() {
  // expected-error @+1 {{'kiln.make_range' op expected end > start, found start = 8, end = 8}}
  %0 = kiln.make_range {end = 8 : i32, start = 8 : i32} : tensor<1xi32>
  return
}

// -----

func.func @make_range_reversed() {
  // expected-error @+1 {{'kiln.make_range' op expected end > start, found start = 64, end = 0}}
  %0 = kiln.make_range {end = 0 : i32, start = 64 : i32} : tensor<64xi32>
  return
}

// -----

func.func @make_range_not_pow2() {
  // expected-error @+1 {{'kiln.make_range' op expected end - start to be a power of two, found 100}}
  %0 = kiln.make_range {end = 100 : i32, start = 0 : i32} : tensor<100xi32>
  return
}

// -----

func.func @make_range_wrong_length() {
  // expected-error @+1 {{'kiln.make_range' op expected result length 128 (end - start), found 64}}
  %0 = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<64xi32>
  return
}

// -----

func.func @make_range_float() {
  // expected-error @+1 {{'kiln.make_range' op result #0 must be ranked tensor of 32-bit signless integer values, but got 'tensor<128xf32>'}}
  %0 = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xf32>
  return
}

// -----

func.func @make_range_missing_end() {
  // expected-error @+1 {{'kiln.make_range' op requires attribute 'end'}}
  %0 = "kiln.make_range"() <{start = 0 : i32}> : () -> tensor<128xi32>
  return
}

//===----------------------------------------------------------------------===//
// splat, broadcast, expand_dims, reshape, trans
//===----------------------------------------------------------------------===//

// -----

func.func @splat_element_mismatch(%x: f32) {
  // expected-error @+1 {{'kiln.splat' op failed to verify that source matches the tile's element type}}
  %0 = "kiln.splat"(%x) : (f32) -> tensor<16xi32>
  return
}

// -----

func.func @splat_of_tile(%x: tensor<4xf32>) {
  // expected-error @+1 {{'kiln.splat' op operand #0 must be scalar, but got 'tensor<4xf32>'}}
  %0 = "kiln.splat"(%x) : (tensor<4xf32>) -> tensor<16xf32>
  return
}

// -----

func.func @splat_index(%x: index) {
  // expected-error @+1 {{'kiln.splat' op operand #0 must be scalar, but got 'index'}}
  %0 = "kiln.splat"(%x) : (index) -> tensor<16xindex>
  return
}

// -----

func.func @broadcast_rank(%x: tensor<64xf32>) {
  // expected-error @+1 {{'kiln.broadcast' op expected source rank 2 to match result rank, found 1}}
  %0 = kiln.broadcast %x : tensor<64xf32> -> tensor<32x64xf32>
  return
}

// -----

func.func @broadcast_shape(%x: tensor<2x64xf32>) {
  // expected-error @+1 {{'kiln.broadcast' op expected each source dimension to be 1 or equal to the result's, found source shape [2, 64] and result shape [32, 64]}}
  %0 = kiln.broadcast %x : tensor<2x64xf32> -> tensor<32x64xf32>
  return
}

// -----

func.func @broadcast_shrink(%x: tensor<32x64xf32>) {
  // expected-error @+1 {{'kiln.broadcast' op expected each source dimension to be 1 or equal to the result's, found source shape [32, 64] and result shape [1, 64]}}
  %0 = kiln.broadcast %x : tensor<32x64xf32> -> tensor<1x64xf32>
  return
}

// -----

func.func @broadcast_element(%x: tensor<1x64xf32>) {
  // expected-error @+1 {{'kiln.broadcast' op requires the same element type for all operands and results}}
  %0 = kiln.broadcast %x : tensor<1x64xf32> -> tensor<32x64xf16>
  return
}

// -----

func.func @expand_dims_axis_too_large(%x: tensor<64xi32>) {
  // expected-error @+1 {{'kiln.expand_dims' op expected axis in [0, 1], found 2}}
  %0 = kiln.expand_dims %x {axis = 2 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  return
}

// -----

func.func @expand_dims_axis_negative(%x: tensor<64xi32>) {
  // The axis reads back unsigned, so the value in the message is not checked.
  // expected-error @+1 {{'kiln.expand_dims' op expected axis in [0, 1], found}}
  %0 = kiln.expand_dims %x {axis = -1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
  return
}

// -----

func.func @expand_dims_shape(%x: tensor<64xi32>) {
  // expected-error @+1 {{'kiln.expand_dims' op expected result shape [64, 1], found [1, 64]}}
  %0 = kiln.expand_dims %x {axis = 1 : i32} : tensor<64xi32> -> tensor<1x64xi32>
  return
}

// -----

func.func @reshape_count(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'kiln.reshape' op expected the same number of elements, found 128 in [8, 16] and 64 in [64]}}
  %0 = kiln.reshape %x : tensor<8x16xf32> -> tensor<64xf32>
  return
}

// -----

func.func @reshape_element(%x: tensor<8x16xf32>) {
  // expected-error @+1 {{'kiln.reshape' op requires the same element type for all operands and results}}
  %0 = kiln.reshape %x allow_reorder : tensor<8x16xf32> -> tensor<128xi32>
  return
}

// -----

func.func @trans_order_length(%x: tensor<16x32xf16>) {
  // expected-error @+1 {{'kiln.trans' op expected an order of 2 dimensions, found 3}}
  %0 = kiln.trans %x {order = array<i32: 1, 0, 2>} : tensor<16x32xf16> -> tensor<32x16xf16>
  return
}

// -----

func.func @trans_order_repeated(%x: tensor<16x32xf16>) {
  // expected-error @+1 {{'kiln.trans' op expected order to be a permutation of [0, 2), found 0 out of range or repeated}}
  %0 = kiln.trans %x {order = array<i32: 0, 0>} : tensor<16x32xf16> -> tensor<16x16xf16>
  return
}

// -----

func.func @trans_order_out_of_range(%x: tensor<16x32xf16>) {
  // expected-error @+1 {{'kiln.trans' op expected order to be a permutation of [0, 2), found 2 out of range or repeated}}
  %0 = kiln.trans %x {order = array<i32: 2, 0>} : tensor<16x32xf16> -> tensor<32x16xf16>
  return
}

// -----

func.func @trans_order_negative(%x: tensor<16x32xf16>) {
  // expected-error @+1 {{'kiln.trans' op expected order to be a permutation of [0, 2), found -1 out of range or repeated}}
  %0 = kiln.trans %x {order = array<i32: -1, 0>} : tensor<16x32xf16> -> tensor<32x16xf16>
  return
}

// -----

func.func @trans_shape(%x: tensor<16x32xf16>) {
  // expected-error @+1 {{'kiln.trans' op expected result shape [32, 16], found [16, 32]}}
  %0 = kiln.trans %x {order = array<i32: 1, 0>} : tensor<16x32xf16> -> tensor<16x32xf16>
  return
}

//===----------------------------------------------------------------------===//
// addptr
//===----------------------------------------------------------------------===//

// -----

func.func @ptr_cast_i32(%a: i32) {
  // expected-error @+1 {{'kiln.ptr_cast' op expected a cast between a pointer and i64 or between pointers, found 'i32' to '!kiln.ptr<f16>'}}
  %p = kiln.ptr_cast %a : i32 -> !kiln.ptr<f16>
  return
}

// -----

func.func @ptr_cast_shape(%p: tensor<64x!kiln.ptr<f16>>) {
  // expected-error @+1 {{'kiln.ptr_cast' op expected operand and result of one shape, found [64] and [32]}}
  %q = kiln.ptr_cast %p : tensor<64x!kiln.ptr<f16>> -> tensor<32xi64>
  return
}

// -----

func.func @addptr_shape(%p: tensor<128x!kiln.ptr<f32>>, %o: tensor<64xi32>) {
  // expected-error @+1 {{'kiln.addptr' op expected offset shape [128] to match pointer shape, found [64]}}
  %0 = kiln.addptr %p, %o : tensor<128x!kiln.ptr<f32>>, tensor<64xi32>
  return
}

// -----

func.func @addptr_scalar_ptr_tile_offset(%p: !kiln.ptr<f32>, %o: tensor<128xi32>) {
  // expected-error @+1 {{'kiln.addptr' op expected offset shape [] to match pointer shape, found [128]}}
  %0 = kiln.addptr %p, %o : !kiln.ptr<f32>, tensor<128xi32>
  return
}

// -----

func.func @addptr_tile_ptr_scalar_offset(%p: tensor<128x!kiln.ptr<f32>>, %o: i32) {
  // expected-error @+1 {{'kiln.addptr' op expected offset shape [128] to match pointer shape, found []}}
  %0 = kiln.addptr %p, %o : tensor<128x!kiln.ptr<f32>>, i32
  return
}

// -----

func.func @addptr_float_offset(%p: !kiln.ptr<f32>, %o: f32) {
  // expected-error @+1 {{'kiln.addptr' op operand #1 must be integer or integer tile, but got 'f32'}}
  %0 = kiln.addptr %p, %o : !kiln.ptr<f32>, f32
  return
}

// -----

func.func @addptr_not_a_pointer(%p: i64, %o: i32) {
  // expected-error @+1 {{'kiln.addptr' op operand #0 must be pointer or pointer tile, but got 'i64'}}
  %0 = "kiln.addptr"(%p, %o) : (i64, i32) -> i64
  return
}

// -----

func.func @addptr_result_type(%p: !kiln.ptr<f32>, %o: i32) {
  // expected-error @+1 {{'kiln.addptr' op failed to verify that all of {ptr, result} have same type}}
  %0 = "kiln.addptr"(%p, %o) : (!kiln.ptr<f32>, i32) -> !kiln.ptr<f16>
  return
}

//===----------------------------------------------------------------------===//
// load, store
//===----------------------------------------------------------------------===//

// -----

// `other` without `mask` cannot be spelled in the custom form; with i1 pointees the mask type
// constraint holds and the verifier's own check fires.
func.func @load_other_without_mask(%p: tensor<4x!kiln.ptr<i1>>, %o: tensor<4xi1>) {
  // expected-error @+1 {{'kiln.load' op expected a mask when `other` is given}}
  %0 = "kiln.load"(%p, %o) <{operandSegmentSizes = array<i32: 1, 0, 1>}> : (tensor<4x!kiln.ptr<i1>>, tensor<4xi1>) -> tensor<4xi1>
  return
}

// -----

func.func @load_cache_wb(%p: tensor<128x!kiln.ptr<f32>>) {
  // expected-error @+1 {{'kiln.load' op expected a load cache modifier (ca, cg, cs, cv), found wb}}
  %0 = kiln.load %p cache = wb : tensor<128x!kiln.ptr<f32>>
  return
}

// -----

func.func @load_cache_wt(%p: !kiln.ptr<f32>) {
  // expected-error @+1 {{'kiln.load' op expected a load cache modifier (ca, cg, cs, cv), found wt}}
  %0 = kiln.load %p cache = wt : !kiln.ptr<f32>
  return
}

// -----

func.func @load_unknown_cache(%p: !kiln.ptr<f32>) {
  // expected-error @+1 {{custom op 'kiln.load' expected string or keyword containing one of the following enum values for attribute 'cache' [none, ca, cg, cs, cv, wb, wt]}}
  %0 = kiln.load %p cache = lu : !kiln.ptr<f32>
  return
}

// -----

func.func @load_mask_shape(%p: tensor<128x!kiln.ptr<f32>>, %m: tensor<64xi1>) {
  // expected-error @+1 {{'kiln.load' op failed to verify that mask is an i1 of ptr's shape}}
  %0 = "kiln.load"(%p, %m) <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<128x!kiln.ptr<f32>>, tensor<64xi1>) -> tensor<128xf32>
  return
}

// -----

func.func @load_mask_not_bool(%p: tensor<128x!kiln.ptr<f32>>, %m: tensor<128xi32>) {
  // expected-error @+1 {{'kiln.load' op operand #1 must be i1 or i1 tile, but got 'tensor<128xi32>'}}
  %0 = "kiln.load"(%p, %m) <{operandSegmentSizes = array<i32: 1, 1, 0>}> : (tensor<128x!kiln.ptr<f32>>, tensor<128xi32>) -> tensor<128xf32>
  return
}

// -----

func.func @load_other_type(%p: tensor<128x!kiln.ptr<f32>>, %m: tensor<128xi1>, %o: tensor<128xf16>) {
  // expected-error @+1 {{'kiln.load' op failed to verify that other is the pointee type of ptr}}
  %0 = "kiln.load"(%p, %m, %o) <{operandSegmentSizes = array<i32: 1, 1, 1>}> : (tensor<128x!kiln.ptr<f32>>, tensor<128xi1>, tensor<128xf16>) -> tensor<128xf32>
  return
}

// -----

func.func @load_result_type(%p: tensor<128x!kiln.ptr<f32>>) {
  // expected-error @+1 {{'kiln.load' op failed to verify that result is the pointee type of ptr}}
  %0 = "kiln.load"(%p) <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<128x!kiln.ptr<f32>>) -> tensor<64xf32>
  return
}

// -----

func.func @load_not_a_pointer(%p: tensor<128xi64>) {
  // expected-error @+1 {{'kiln.load' op operand #0 must be pointer or pointer tile, but got 'tensor<128xi64>'}}
  %0 = "kiln.load"(%p) <{operandSegmentSizes = array<i32: 1, 0, 0>}> : (tensor<128xi64>) -> tensor<128xi64>
  return
}

// -----

func.func @store_cache_ca(%p: tensor<128x!kiln.ptr<f32>>, %v: tensor<128xf32>) {
  // expected-error @+1 {{'kiln.store' op expected a store cache modifier (wb, cg, cs, wt), found ca}}
  kiln.store %p, %v cache = ca : tensor<128x!kiln.ptr<f32>>
  return
}


// -----

func.func @store_cache_cv(%p: !kiln.ptr<f32>, %v: f32) {
  // expected-error @+1 {{'kiln.store' op expected a store cache modifier (wb, cg, cs, wt), found cv}}
  kiln.store %p, %v cache = cv : !kiln.ptr<f32>
  return
}

// -----

func.func @store_value_type(%p: tensor<128x!kiln.ptr<f32>>, %v: tensor<128xf16>) {
  // expected-error @+1 {{'kiln.store' op failed to verify that value is the pointee type of ptr}}
  "kiln.store"(%p, %v) : (tensor<128x!kiln.ptr<f32>>, tensor<128xf16>) -> ()
  return
}

// -----

func.func @store_mask_shape(%p: tensor<128x!kiln.ptr<f32>>, %v: tensor<128xf32>, %m: tensor<1xi1>) {
  // expected-error @+1 {{'kiln.store' op failed to verify that mask is an i1 of ptr's shape}}
  "kiln.store"(%p, %v, %m) : (tensor<128x!kiln.ptr<f32>>, tensor<128xf32>, tensor<1xi1>) -> ()
  return
}

// -----

// expected-note @+1 {{prior use here}}
func.func @store_scalar_value_to_tile(%p: tensor<128x!kiln.ptr<f32>>, %v: f32) {
  // expected-error @+1 {{use of value '%v' expects different type than prior uses: 'tensor<128xf32>' vs 'f32'}}
  kiln.store %p, %v : tensor<128x!kiln.ptr<f32>>
  return
}

//===----------------------------------------------------------------------===//
// Atomics
//===----------------------------------------------------------------------===//

// -----

func.func @atomic_fadd_int(%p: !kiln.ptr<i32>, %v: i32) {
  // expected-error @+1 {{'kiln.atomic_rmw' op expected a float element type for fadd, found 'i32'}}
  %0 = kiln.atomic_rmw fadd, acq_rel, gpu, %p, %v : !kiln.ptr<i32>
  return
}

// -----

func.func @atomic_and_float(%p: tensor<64x!kiln.ptr<f32>>, %v: tensor<64xf32>) {
  // expected-error @+1 {{'kiln.atomic_rmw' op expected an integer element type for and, found 'f32'}}
  %0 = kiln.atomic_rmw and, acq_rel, gpu, %p, %v : tensor<64x!kiln.ptr<f32>>
  return
}

// -----

func.func @atomic_add_float(%p: !kiln.ptr<f16>, %v: f16) {
  // expected-error @+1 {{'kiln.atomic_rmw' op expected an integer element type for add, found 'f16'}}
  %0 = kiln.atomic_rmw add, relaxed, cta, %p, %v : !kiln.ptr<f16>
  return
}

// -----

func.func @atomic_umax_float(%p: !kiln.ptr<f32>, %v: f32) {
  // expected-error @+1 {{'kiln.atomic_rmw' op expected an integer element type for umax, found 'f32'}}
  %0 = kiln.atomic_rmw umax, relaxed, cta, %p, %v : !kiln.ptr<f32>
  return
}

// -----

func.func @atomic_bad_kind(%p: !kiln.ptr<i32>, %v: i32) {
  // expected-error @+1 {{custom op 'kiln.atomic_rmw' expected string or keyword containing one of the following enum values for attribute 'kind' [and, or, xor, add, fadd, max, min, umax, umin, xchg]}}
  %0 = kiln.atomic_rmw nand, acq_rel, gpu, %p, %v : !kiln.ptr<i32>
  return
}

// -----

func.func @atomic_bad_scope(%p: !kiln.ptr<i32>, %v: i32) {
  // expected-error @+1 {{custom op 'kiln.atomic_rmw' expected string or keyword containing one of the following enum values for attribute 'scope' [gpu, cta, sys]}}
  %0 = kiln.atomic_rmw add, acq_rel, cluster, %p, %v : !kiln.ptr<i32>
  return
}

// -----

func.func @atomic_mask_shape(%p: tensor<64x!kiln.ptr<i32>>, %v: tensor<64xi32>, %m: tensor<32xi1>) {
  // expected-error @+1 {{'kiln.atomic_rmw' op failed to verify that mask is an i1 of ptr's shape}}
  %0 = "kiln.atomic_rmw"(%p, %v, %m) <{kind = 3 : i32, scope = 0 : i32, sem = 3 : i32}> : (tensor<64x!kiln.ptr<i32>>, tensor<64xi32>, tensor<32xi1>) -> tensor<64xi32>
  return
}

// -----

func.func @atomic_cas_i8(%p: !kiln.ptr<i8>, %v: i8) {
  // expected-error @+1 {{'kiln.atomic_cas' op expected a 16, 32 or 64-bit element type, found 'i8'}}
  %0 = kiln.atomic_cas acq_rel, gpu, %p, %v, %v : !kiln.ptr<i8>
  return
}

// -----

func.func @atomic_cas_i1(%p: tensor<8x!kiln.ptr<i1>>, %v: tensor<8xi1>) {
  // expected-error @+1 {{'kiln.atomic_cas' op expected a 16, 32 or 64-bit element type, found 'i1'}}
  %0 = kiln.atomic_cas relaxed, gpu, %p, %v, %v : tensor<8x!kiln.ptr<i1>>
  return
}

// -----

func.func @atomic_cas_cmp_type(%p: !kiln.ptr<i32>, %c: i64, %v: i32) {
  // expected-error @+1 {{'kiln.atomic_cas' op failed to verify that cmp is the pointee type of ptr}}
  %0 = "kiln.atomic_cas"(%p, %c, %v) <{scope = 0 : i32, sem = 3 : i32}> : (!kiln.ptr<i32>, i64, i32) -> i32
  return
}
