// RUN: kiln-opt %s -split-input-file -verify-diagnostics

// One case per kiln verifier message and per type constraint, continued from invalid.mlir
// (types, pointers, loads, stores and atomics there): dots, reductions, scans, shape and
// layout ops, descriptors. Where the custom syntax cannot spell the mistake (it infers the
// types it checks), the case uses the generic form.

//===----------------------------------------------------------------------===//
// dot
//===----------------------------------------------------------------------===//

// -----

func.func @dot_rank(%a: tensor<32xf16>, %b: tensor<32x16xf16>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{'kiln.dot' op expected 2-D operands, found ranks 1, 2 and 2}}
  %0 = kiln.dot %a, %b, %c : tensor<32xf16> * tensor<32x16xf16> -> tensor<16x16xf32>
  return
}

// -----

func.func @dot_k(%a: tensor<64x32xf16>, %b: tensor<16x16xf16>, %c: tensor<64x16xf32>) {
  // expected-error @+1 {{'kiln.dot' op expected a's K dimension 32 to match b's, found 16}}
  %0 = kiln.dot %a, %b, %c : tensor<64x32xf16> * tensor<16x16xf16> -> tensor<64x16xf32>
  return
}

// -----

func.func @dot_acc_shape(%a: tensor<64x32xf16>, %b: tensor<32x16xf16>, %c: tensor<64x32xf32>) {
  // expected-error @+1 {{'kiln.dot' op expected accumulator shape [64, 16], found [64, 32]}}
  %0 = kiln.dot %a, %b, %c : tensor<64x32xf16> * tensor<32x16xf16> -> tensor<64x32xf32>
  return
}

// -----

func.func @dot_small(%a: tensor<8x32xf16>, %b: tensor<32x16xf16>, %c: tensor<8x16xf32>) {
  // expected-error @+1 {{'kiln.dot' op expected every dot dimension to be a power of two >= 16, found [8, 32] * [32, 16]}}
  %0 = kiln.dot %a, %b, %c : tensor<8x32xf16> * tensor<32x16xf16> -> tensor<8x16xf32>
  return
}

// -----

func.func @dot_not_pow2(%a: tensor<48x32xf16>, %b: tensor<32x16xf16>, %c: tensor<48x16xf32>) {
  // A 48-row tile is not a tile: the type constraint rejects it before the dot verifier.
  // expected-error @+1 {{'kiln.dot' op operand #0 must be tile of floating-point or integer or kiln pointer values, but got 'tensor<48x32xf16>'}}
  %0 = kiln.dot %a, %b, %c : tensor<48x32xf16> * tensor<32x16xf16> -> tensor<48x16xf32>
  return
}

// -----

func.func @dot_mixed_inputs(%a: tensor<16x16xf16>, %b: tensor<16x16xf32>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{'kiln.dot' op expected a and b of one element type (or two fp8 types), found 'f16' and 'f32'}}
  %0 = kiln.dot %a, %b, %c : tensor<16x16xf16> * tensor<16x16xf32> -> tensor<16x16xf32>
  return
}

// -----

func.func @dot_bf16_acc(%a: tensor<16x16xbf16>, %b: tensor<16x16xbf16>, %c: tensor<16x16xbf16>) {
  // expected-error @+1 {{'kiln.dot' op expected f16->f16|f32, bf16->f32, f32->f32, fp8->f32 or i8->i32, found 'bf16' -> 'bf16'}}
  %0 = kiln.dot %a, %b, %c : tensor<16x16xbf16> * tensor<16x16xbf16> -> tensor<16x16xbf16>
  return
}

// -----

func.func @dot_i8_i8(%a: tensor<16x16xi8>, %b: tensor<16x16xi8>, %c: tensor<16x16xi8>) {
  // expected-error @+1 {{'kiln.dot' op expected f16->f16|f32, bf16->f32, f32->f32, fp8->f32 or i8->i32, found 'i8' -> 'i8'}}
  %0 = kiln.dot %a, %b, %c : tensor<16x16xi8> * tensor<16x16xi8> -> tensor<16x16xi8>
  return
}

// -----

func.func @dot_precision_f16(%a: tensor<16x16xf16>, %b: tensor<16x16xf16>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{'kiln.dot' op expected inputPrecision only with f32 inputs, found ieee with 'f16'}}
  %0 = kiln.dot %a, %b, %c inputPrecision = ieee : tensor<16x16xf16> * tensor<16x16xf16> -> tensor<16x16xf32>
  return
}

// -----

func.func @dot_precision_i8(%a: tensor<16x16xi8>, %b: tensor<16x16xi8>, %c: tensor<16x16xi32>) {
  // expected-error @+1 {{'kiln.dot' op expected inputPrecision only with f32 inputs, found tf32x3 with 'i8'}}
  %0 = kiln.dot %a, %b, %c inputPrecision = tf32x3 : tensor<16x16xi8> * tensor<16x16xi8> -> tensor<16x16xi32>
  return
}

// -----

func.func @dot_unknown_precision(%a: tensor<16x16xf32>, %b: tensor<16x16xf32>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{custom op 'kiln.dot' expected string or keyword containing one of the following enum values for attribute 'inputPrecision' [tf32, tf32x3, ieee]}}
  %0 = kiln.dot %a, %b, %c inputPrecision = bf16x3 : tensor<16x16xf32> * tensor<16x16xf32> -> tensor<16x16xf32>
  return
}

// -----

func.func @dot_result_not_acc(%a: tensor<16x16xf16>, %b: tensor<16x16xf16>, %c: tensor<16x16xf32>) {
  // expected-error @+1 {{'kiln.dot' op failed to verify that all of {c, result} have same type}}
  %0 = "kiln.dot"(%a, %b, %c) : (tensor<16x16xf16>, tensor<16x16xf16>, tensor<16x16xf32>) -> tensor<16x16xf16>
  return
}

//===----------------------------------------------------------------------===//
// reduce, scan
//===----------------------------------------------------------------------===//

// -----

func.func @reduce_no_operands() {
  // expected-error @+1 {{'kiln.reduce' op expected at least one operand}}
  "kiln.reduce"() <{axis = 0 : i32}> ({
  ^bb0:
    "kiln.reduce.return"() : () -> ()
  }) : () -> ()
  return
}

// -----

func.func @reduce_operand_shapes(%x: tensor<32x64xf32>, %y: tensor<64x32xi32>) {
  // expected-error @+1 {{'kiln.reduce' op expected all operands of shape [32, 64], found [64, 32]}}
  %0:2 = kiln.reduce(%x, %y) axis = 0 {
  ^bb0(%a: f32, %ai: i32, %b: f32, %bi: i32):
    kiln.reduce.return %a, %ai : f32, i32
  } : (tensor<32x64xf32>, tensor<64x32xi32>) -> (tensor<64xf32>, tensor<32xi32>)
  return
}

// -----

func.func @reduce_axis(%x: tensor<128xf32>) {
  // expected-error @+1 {{'kiln.reduce' op expected axis in [0, 1), found 1}}
  %0 = kiln.reduce(%x) axis = 1 {
  ^bb0(%a: f32, %b: f32):
    kiln.reduce.return %a : f32
  } : (tensor<128xf32>) -> f32
  return
}

// -----

func.func @reduce_axis_negative(%x: tensor<4x128xf32>) {
  // The axis reads back unsigned, so the value in the message is not checked.
  // expected-error @+1 {{'kiln.reduce' op expected axis in [0, 2), found}}
  %0 = kiln.reduce(%x) axis = -1 {
  ^bb0(%a: f32, %b: f32):
    kiln.reduce.return %a : f32
  } : (tensor<4x128xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @reduce_region_arity(%x: tensor<128xf32>) {
  // expected-error @+1 {{'kiln.reduce' op expected the combine region to take 2 arguments, found 3}}
  %0 = kiln.reduce(%x) axis = 0 {
  ^bb0(%a: f32, %b: f32, %c: f32):
    kiln.reduce.return %a : f32
  } : (tensor<128xf32>) -> f32
  return
}

// -----

func.func @reduce_region_arg_type(%x: tensor<128xf32>) {
  // expected-error @+1 {{'kiln.reduce' op expected combine argument 1 of type 'f32', found 'f16'}}
  %0 = kiln.reduce(%x) axis = 0 {
  ^bb0(%a: f32, %b: f16):
    kiln.reduce.return %a : f32
  } : (tensor<128xf32>) -> f32
  return
}

// -----

func.func @reduce_region_yield_count(%x: tensor<128xf32>) {
  // expected-error @+1 {{'kiln.reduce' op expected the combine region to yield 1 values, found 2}}
  %0 = kiln.reduce(%x) axis = 0 {
  ^bb0(%a: f32, %b: f32):
    kiln.reduce.return %a, %b : f32, f32
  } : (tensor<128xf32>) -> f32
  return
}

// -----

func.func @reduce_region_yield_type(%x: tensor<128xi32>) {
  // expected-error @+1 {{'kiln.reduce' op expected combine result 0 of type 'i32', found 'i64'}}
  %0 = kiln.reduce(%x) axis = 0 {
  ^bb0(%a: i32, %b: i32):
    %e = arith.extsi %a : i32 to i64
    kiln.reduce.return %e : i64
  } : (tensor<128xi32>) -> i32
  return
}

// -----

func.func @reduce_result_count(%x: tensor<128xf32>) {
  // expected-error @+1 {{'kiln.reduce' op expected 1 results, found 2}}
  %0:2 = kiln.reduce(%x) axis = 0 {
  ^bb0(%a: f32, %b: f32):
    kiln.reduce.return %a : f32
  } : (tensor<128xf32>) -> (f32, f32)
  return
}

// -----

func.func @reduce_result_shape(%x: tensor<32x64xf32>) {
  // expected-error @+1 {{'kiln.reduce' op expected a result of shape [32] and element type 'f32', found 'tensor<64xf32>'}}
  %0 = kiln.reduce(%x) axis = 1 {
  ^bb0(%a: f32, %b: f32):
    kiln.reduce.return %a : f32
  } : (tensor<32x64xf32>) -> tensor<64xf32>
  return
}

// -----

func.func @reduce_1d_to_tile(%x: tensor<128xf32>) {
  // expected-error @+1 {{'kiln.reduce' op expected a result of shape [] and element type 'f32', found 'tensor<1xf32>'}}
  %0 = kiln.reduce(%x) axis = 0 {
  ^bb0(%a: f32, %b: f32):
    kiln.reduce.return %a : f32
  } : (tensor<128xf32>) -> tensor<1xf32>
  return
}

// -----

func.func @reduce_empty_region(%x: tensor<128xf32>) {
  // expected-error @+1 {{'kiln.reduce' op expects a non-empty block}}
  %0 = kiln.reduce(%x) axis = 0 {
  } : (tensor<128xf32>) -> f32
  return
}

// -----

func.func @reduce_return_outside(%x: f32) {
  // expected-error @+1 {{'kiln.reduce.return' op expects parent op 'kiln.reduce'}}
  kiln.reduce.return %x : f32
}

// -----

func.func @reduce_return_tile(%x: tensor<128xf32>) {
  %0 = kiln.reduce(%x) axis = 0 {
  ^bb0(%a: f32, %b: f32):
    %t = kiln.splat %a : tensor<2xf32>
    // expected-error @+1 {{'kiln.reduce.return' op operand #0 must be variadic of scalar, but got 'tensor<2xf32>'}}
    kiln.reduce.return %t : tensor<2xf32>
  } : (tensor<128xf32>) -> f32
  return
}

// -----

func.func @scan_with_reduce_return(%x: tensor<64xi32>) {
  %0 = kiln.scan(%x) axis = 0 {
  ^bb0(%a: i32, %b: i32):
    // expected-error @+1 {{'kiln.reduce.return' op expects parent op 'kiln.reduce'}}
    kiln.reduce.return %a : i32
  } : (tensor<64xi32>) -> tensor<64xi32>
  return
}

// -----

func.func @scan_axis(%x: tensor<4x16xf32>) {
  // expected-error @+1 {{'kiln.scan' op expected axis in [0, 2), found 2}}
  %0 = kiln.scan(%x) axis = 2 {
  ^bb0(%a: f32, %b: f32):
    kiln.scan.return %a : f32
  } : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @scan_region_arity(%x: tensor<64xi32>) {
  // expected-error @+1 {{'kiln.scan' op expected the combine region to take 2 arguments, found 1}}
  %0 = kiln.scan(%x) axis = 0 {
  ^bb0(%a: i32):
    kiln.scan.return %a : i32
  } : (tensor<64xi32>) -> tensor<64xi32>
  return
}

// -----

func.func @scan_region_arg_type(%x: tensor<64xi32>, %y: tensor<64xf32>) {
  // expected-error @+1 {{'kiln.scan' op expected combine argument 2 of type 'i32', found 'f32'}}
  %0:2 = kiln.scan(%x, %y) axis = 0 {
  ^bb0(%a: i32, %af: f32, %b: f32, %bf: f32):
    kiln.scan.return %a, %af : i32, f32
  } : (tensor<64xi32>, tensor<64xf32>) -> (tensor<64xi32>, tensor<64xf32>)
  return
}

// -----

func.func @scan_region_yield_count(%x: tensor<64xi32>) {
  // expected-error @+1 {{'kiln.scan' op expected the combine region to yield 1 values, found 0}}
  %0 = "kiln.scan"(%x) <{axis = 0 : i32}> ({
  ^bb0(%a: i32, %b: i32):
    "kiln.scan.return"() : () -> ()
  }) : (tensor<64xi32>) -> tensor<64xi32>
  return
}

// -----

func.func @scan_region_yield_type(%x: tensor<64xf32>) {
  // expected-error @+1 {{'kiln.scan' op expected combine result 0 of type 'f32', found 'i1'}}
  %0 = kiln.scan(%x) axis = 0 {
  ^bb0(%a: f32, %b: f32):
    %c = arith.cmpf olt, %a, %b : f32
    kiln.scan.return %c : i1
  } : (tensor<64xf32>) -> tensor<64xf32>
  return
}

// -----

func.func @scan_result_type(%x: tensor<64xi32>) {
  // expected-error @+1 {{'kiln.scan' op expected results of the operands' types}}
  %0 = kiln.scan(%x) axis = 0 {
  ^bb0(%a: i32, %b: i32):
    kiln.scan.return %a : i32
  } : (tensor<64xi32>) -> tensor<32xi32>
  return
}

// -----

func.func @scan_scalar_result(%x: tensor<64xi32>) {
  // expected-error @+1 {{'kiln.scan' op result #0 must be variadic of tile of floating-point or integer or kiln pointer values, but got 'i32'}}
  %0 = kiln.scan(%x) axis = 0 {
  ^bb0(%a: i32, %b: i32):
    kiln.scan.return %a : i32
  } : (tensor<64xi32>) -> i32
  return
}

//===----------------------------------------------------------------------===//
// print, assert
//===----------------------------------------------------------------------===//

// -----

func.func @assert_not_bool(%x: tensor<64xi32>) {
  // expected-error @+1 {{'kiln.assert' op operand #0 must be i1 or i1 tile, but got 'tensor<64xi32>'}}
  kiln.assert %x, "oops" : tensor<64xi32>
  return
}

// -----

func.func @print_no_prefix(%x: i32) {
  // expected-error @+1 {{expected attribute value}}
  kiln.print %x : i32
  return
}

// -----

func.func @print_index(%x: index) {
  // expected-error @+1 {{'kiln.print' op operand #0 must be variadic of scalar or tile, but got 'index'}}
  kiln.print "i" %x : index
  return
}

// -----

// A volatile access takes no cache operator or eviction policy.
func.func @load_volatile_with_cache(%p: tensor<16x!kiln.ptr<f32>>) {
  // expected-error @+1 {{'kiln.load' op expected no cache modifier or eviction policy on a volatile access}}
  %0 = kiln.load %p cache = cv volatile : tensor<16x!kiln.ptr<f32>>
  return
}

// -----

// Tiles have static power-of-two dimensions: no zero-size or dynamic tiles.
func.func @zero_size_tile(%x: f32) {
  // expected-error @+1 {{custom op 'kiln.splat' 'result' must be tile of floating-point or integer or kiln pointer values, but got 'tensor<0xf32>'}}
  %0 = kiln.splat %x : tensor<0xf32>
  return
}

// -----

func.func @dynamic_tile(%x: f32) {
  // expected-error @+1 {{custom op 'kiln.splat' 'result' must be tile of floating-point or integer or kiln pointer values, but got 'tensor<?xf32>'}}
  %0 = kiln.splat %x : tensor<?xf32>
  return
}

// -----

// Negative attributes are reported as written, not as unsigned 32-bit values.
func.func @negative_axis(%x: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.expand_dims' op expected axis in [0, 1], found -1}}
  %0 = kiln.expand_dims %x {axis = -1 : i32} : tensor<16xf32> -> tensor<16x1xf32>
  return
}

// -----

// descriptor_load, descriptor_store

func.func @descriptor_wrong_rank(%d: !kiln.tensormap, %b: !kiln.ptr<f16>, %i: i32, %m: i32) {
  // expected-error @+1 {{'kiln.descriptor_load' op expected 2 offsets, 2 shape extents and 1 strides for a block of rank 2, found 1, 1 and 0}}
  %t = kiln.descriptor_load %d, %b[%i] shape [%m] strides [] : !kiln.ptr<f16> -> tensor<16x16xf16>
  return
}

// -----

func.func @descriptor_wrong_element(%d: !kiln.tensormap, %b: !kiln.ptr<f16>, %i: i32, %m: i32,
                                    %v: tensor<16xf32>) {
  // expected-error @+1 {{'kiln.descriptor_store' op expected a block of the base's element type 'f16', found 'f32'}}
  kiln.descriptor_store %d, %b[%i], %v shape [%m] strides [] : !kiln.ptr<f16>, tensor<16xf32>
  return
}

//===----------------------------------------------------------------------===//
// extern_elementwise
//===----------------------------------------------------------------------===//

// -----

func.func @extern_no_operands() {
  // expected-error @+1 {{expected at least one operand}}
  %0 = kiln.extern_elementwise @f() : () -> f32
  return
}

// -----

func.func @extern_shape_mismatch(%t: tensor<64xf32>) {
  // expected-error @+1 {{expected operand 0 of shape [128] like the result, found 'tensor<64xf32>'}}
  %0 = kiln.extern_elementwise @__nv_asinf(%t) pure : (tensor<64xf32>) -> tensor<128xf32>
  return
}

// -----

func.func @extern_scalar_and_tile(%x: f32) {
  // expected-error @+1 {{expected operand 0 of shape [16] like the result, found 'f32'}}
  %0 = kiln.extern_elementwise @__nv_asinf(%x) pure : (f32) -> tensor<16xf32>
  return
}

// -----

func.func @extern_libdevice_operand_type(%x: f64) {
  // expected-error @+1 {{expected operand 0 of @__nv_asinf to have element type 'f32', found 'f64'}}
  %0 = kiln.extern_elementwise @__nv_asinf(%x) pure : (f64) -> f32
  return
}

// -----

func.func @extern_libdevice_result_type(%x: f32) {
  // expected-error @+1 {{expected @__nv_isnanf to return element type 'i32', found 'i1'}}
  %0 = kiln.extern_elementwise @__nv_isnanf(%x) pure : (f32) -> i1
  return
}

// -----

func.func @extern_libdevice_arity(%x: f32) {
  // expected-error @+1 {{expected 2 operands for @__nv_powf, found 1}}
  %0 = kiln.extern_elementwise @__nv_powf(%x) pure : (f32) -> f32
  return
}

// -----

func.func @grid_dependency_kind() {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [wait, launch_dependents]}}
  kiln.grid_dependency sleep
  return
}

//===----------------------------------------------------------------------===//
// inline_asm_elementwise
//===----------------------------------------------------------------------===//

// -----

func.func @inline_asm_no_result(%x: i32) {
  // expected-error @+1 {{expected at least one result}}
  kiln.inline_asm_elementwise(%x) "", "r" pack = 1 : (i32) -> ()
  return
}

// -----

func.func @inline_asm_shape_mismatch(%t: tensor<64xi32>, %x: i32) {
  // expected-error @+1 {{expected every operand and result of type tile [64], found 'i32'}}
  %0 = kiln.inline_asm_elementwise(%t, %x) "", "=r,r,r" pack = 1 : (tensor<64xi32>, i32) -> tensor<64xi32>
  return
}

// -----

func.func @inline_asm_constraints(%t: tensor<64xi8>) {
  // expected-error @+1 {{expected constraints for 2 outputs and 1 inputs (pack = 2), found 1 and 1 in "=r,r,~{memory}"}}
  %0 = kiln.inline_asm_elementwise(%t) "", "=r,r,~{memory}" pack = 2 : (tensor<64xi8>) -> tensor<64xf32>
  return
}

// -----

func.func @inline_asm_pack(%x: i32) {
  // expected-error @+1 {{attribute 'pack' failed to satisfy constraint: 32-bit signless integer attribute whose value is positive}}
  %0 = kiln.inline_asm_elementwise(%x) "", "=r,r" pack = 0 : (i32) -> i32
  return
}
