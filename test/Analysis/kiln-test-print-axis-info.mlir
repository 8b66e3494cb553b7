// RUN: kiln-opt %s -kiln-test-print-axis-info -split-input-file -verify-diagnostics

func.func @ranges(%n: i32 {kiln.divisibility = 16 : i32}, %m: i32) {
  // expected-remark @below {{contiguity = [128], divisibility = [1073741824], constancy = [1]}}
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [1024], constancy = [1]}}
  %c = arith.constant 1024 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [128]}}
  %nv = kiln.splat %n : tensor<128xi32>
  // n is a multiple of 16 and r runs from a multiple of 128: r < n is constant in runs of 16.
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [16]}}
  %mask = arith.cmpi slt, %r, %nv : tensor<128xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [128]}}
  %mv = kiln.splat %m : tensor<128xi32>
  // Nothing is known of m: the comparison may change at every element.
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %mask2 = arith.cmpi slt, %r, %mv : tensor<128xi32>
  // Adding a splat keeps the run of +1; the start is a multiple of gcd(2^30, 16).
  // expected-remark @below {{contiguity = [128], divisibility = [16], constancy = [1]}}
  %s = arith.addi %r, %nv : tensor<128xi32>
  // <= is not constant over a run (n itself may be in it).
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %le = arith.cmpi sle, %r, %nv : tensor<128xi32>
  return
}

// -----

func.func @pointers(%p: !kiln.ptr<f32> {kiln.divisibility = 16 : i32}, %q: !kiln.ptr<f16>) {
  // expected-remark @below {{contiguity = [64], divisibility = [1073741824], constancy = [1]}}
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [64]}}
  %ps = kiln.splat %p : tensor<64x!kiln.ptr<f32>>
  // Pointer divisibility is in bytes: 16-byte aligned base plus 4-byte elements.
  // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
  %pp = kiln.addptr %ps, %r : tensor<64x!kiln.ptr<f32>>, tensor<64xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [64]}}
  %qs = kiln.splat %q : tensor<64x!kiln.ptr<f16>>
  // expected-remark @below {{contiguity = [64], divisibility = [1], constancy = [1]}}
  %qp = kiln.addptr %qs, %r : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
  return
}

// -----

func.func @two_d(%s: i32 {kiln.divisibility = 16 : i32}) {
  // expected-remark @below {{contiguity = [32], divisibility = [1073741824], constancy = [1]}}
  %r = kiln.make_range {end = 32 : i32, start = 0 : i32} : tensor<32xi32>
  // The new unit dimension holds single elements of a run: only divisible by 1.
  // expected-remark @below {{contiguity = [1, 32], divisibility = [1, 1073741824], constancy = [1, 1]}}
  %c = kiln.expand_dims %r {axis = 0 : i32} : tensor<32xi32> -> tensor<1x32xi32>
  // expected-remark @below {{contiguity = [1, 32], divisibility = [1, 1073741824], constancy = [8, 1]}}
  %cb = kiln.broadcast %c : tensor<1x32xi32> -> tensor<8x32xi32>
  // expected-remark @below {{contiguity = [1, 1], divisibility = [16, 16], constancy = [8, 32]}}
  %sv = kiln.splat %s : tensor<8x32xi32>
  // A run times anything is no longer a run; its elements keep the other factor's divisor.
  // Constant along dim 0 like both factors.
  // expected-remark @below {{contiguity = [1, 1], divisibility = [16, 16], constancy = [8, 1]}}
  %m = arith.muli %cb, %sv : tensor<8x32xi32>
  return
}

// -----

// The induction variable of a structured loop is divisible by what divides lb and step.
func.func @scf_loop(%n: i32) {
  // expected-remark @below {{contiguity = [1], divisibility = [64], constancy = [1]}}
  %lb = arith.constant 64 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [32], constancy = [1]}}
  %step = arith.constant 32 : i32
  scf.for %i = %lb to %n step %step : i32 {
    // expected-remark @below {{contiguity = [1], divisibility = [32], constancy = [32]}}
    %v = kiln.splat %i : tensor<32xi32>
  }
  return
}

// -----

// The same loop after scf-to-cf: the header's block argument is phi(lb, i + step).
func.func @cfg_loop(%n: i32) {
  // expected-remark @below {{contiguity = [1], divisibility = [64], constancy = [1]}}
  %lb = arith.constant 64 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [1]}}
  %step = arith.constant 16 : i32
  cf.br ^header(%lb : i32)
^header(%i: i32):
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %more = arith.cmpi slt, %i, %n : i32
  cf.cond_br %more, ^body, ^exit
^body:
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [16]}}
  %v = kiln.splat %i : tensor<16xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [1]}}
  %next = arith.addi %i, %step : i32
  cf.br ^header(%next : i32)
^exit:
  return
}

// -----

// A pointer induction (Triton's `ptrs += BLOCK`): the iteration argument keeps the init's runs
// and the alignment init and increment share (64 f16 = 128 bytes, init 16-byte aligned).
func.func @pointer_induction(%p: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %n: i32) {
  // expected-remark @below {{contiguity = [1], divisibility = [1073741824], constancy = [1]}}
  %c0 = arith.constant 0 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %c1 = arith.constant 1 : i32
  // expected-remark @below {{contiguity = [64], divisibility = [1073741824], constancy = [1]}}
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [64]}}
  %ps = kiln.splat %p : tensor<64x!kiln.ptr<f16>>
  // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
  %p0 = kiln.addptr %ps, %r : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
  // The loop's result: what the argument keeps (the initial value or one more step).
  // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
  %out = scf.for %i = %c0 to %n step %c1 iter_args(%q = %p0) -> (tensor<64x!kiln.ptr<f16>>) : i32 {
    // expected-remark @below {{contiguity = [1], divisibility = [64], constancy = [64]}}
    %inc = arith.constant dense<64> : tensor<64xi32>
    // The argument itself: runs of 64 from a 16-byte boundary; + 0 shows it.
    // expected-remark @below {{contiguity = [1], divisibility = [1073741824], constancy = [64]}}
    %z = arith.constant dense<0> : tensor<64xi32>
    // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
    %same = kiln.addptr %q, %z : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
    // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
    %next = kiln.addptr %q, %inc : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
    scf.yield %next : tensor<64x!kiln.ptr<f16>>
  }
  return
}

// -----

// The user's hints (tl.multiple_of, tl.max_contiguous: attributes on the op computing the
// value) replace what the analysis derives: Triton's persistent matmul clamps its row indices
// with `where(offs < M, offs, 0)`, which the analysis cannot see through.
func.func @hints(%m: i32, %start: i32 {kiln.divisibility = 128 : i32}) {
  // expected-remark @below {{contiguity = [128], divisibility = [1073741824], constancy = [1]}}
  %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [128], constancy = [128]}}
  %sv = kiln.splat %start : tensor<128xi32>
  // expected-remark @below {{contiguity = [128], divisibility = [128], constancy = [1]}}
  %offs = arith.addi %sv, %r : tensor<128xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [128]}}
  %mv = kiln.splat %m : tensor<128xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %in = arith.cmpi slt, %offs, %mv : tensor<128xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [1073741824], constancy = [128]}}
  %zero = arith.constant dense<0> : tensor<128xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [128], constancy = [1]}}
  %clamped = arith.select %in, %offs, %zero : tensor<128xi1>, tensor<128xi32>
  // expected-remark @below {{contiguity = [128], divisibility = [128], constancy = [1]}}
  %hinted = arith.select %in, %offs, %zero {kiln.max_contiguous = array<i64: 128>, kiln.multiple_of = array<i64: 128>} : tensor<128xi1>, tensor<128xi32>
  return
}

// -----

// A scalar row pointer carried by a loop and advanced by a stride (Liger's
// `X_ptr += stride_x`): as aligned as its start and its step both are (16 elements of f16 =
// 32 bytes here), so the row's loads are vectorized; a step of unknown divisibility leaves
// 2 bytes (one element).
func.func @row_pointer(%x: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                       %s: i32 {kiln.divisibility = 16 : i32}, %t: i32, %n: i32) {
  // expected-remark @below {{contiguity = [1], divisibility = [1073741824], constancy = [1]}}
  %c0 = arith.constant 0 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %c1 = arith.constant 1 : i32
  // The loops' results keep what their arguments keep (group norm's backward walks its row
  // pointer across the channels, steps back, and walks again: the second walk's loads are as
  // wide as the first's).
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [1]}}
  %a = scf.for %i = %c0 to %n step %c1 iter_args(%p = %x) -> (!kiln.ptr<f16>) : i32 {
    // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [1]}}
    %same = kiln.addptr %p, %c0 : !kiln.ptr<f16>, i32
    // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [1]}}
    %next = kiln.addptr %p, %s : !kiln.ptr<f16>, i32
    scf.yield %next : !kiln.ptr<f16>
  }
  // expected-remark @below {{contiguity = [1], divisibility = [2], constancy = [1]}}
  %b = scf.for %i = %c0 to %n step %c1 iter_args(%p = %x) -> (!kiln.ptr<f16>) : i32 {
    // expected-remark @below {{contiguity = [1], divisibility = [2], constancy = [1]}}
    %same = kiln.addptr %p, %c0 : !kiln.ptr<f16>, i32
    // expected-remark @below {{contiguity = [1], divisibility = [2], constancy = [1]}}
    %next = kiln.addptr %p, %t : !kiln.ptr<f16>, i32
    scf.yield %next : !kiln.ptr<f16>
  }
  return
}

// -----

// The same row pointer after scf-to-cf: the header's block argument is phi(x, p + s).
func.func @cfg_row_pointer(%x: !kiln.ptr<f16> {kiln.divisibility = 16 : i32},
                           %s: i32 {kiln.divisibility = 16 : i32}, %n: i32) {
  // expected-remark @below {{contiguity = [1], divisibility = [1073741824], constancy = [1]}}
  %c0 = arith.constant 0 : i32
  cf.br ^header(%x, %c0 : !kiln.ptr<f16>, i32)
^header(%p: !kiln.ptr<f16>, %i: i32):
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %more = arith.cmpi slt, %i, %n : i32
  cf.cond_br %more, ^body, ^exit
^body:
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [1]}}
  %same = kiln.addptr %p, %c0 : !kiln.ptr<f16>, i32
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [1]}}
  %next = kiln.addptr %p, %s : !kiln.ptr<f16>, i32
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %c1 = arith.constant 1 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %j = arith.addi %i, %c1 : i32
  cf.br ^header(%next, %j : !kiln.ptr<f16>, i32)
^exit:
  return
}

// -----

// Divisions and shifts by powers of two, min/max: the forms of a split-K mask
// (rk < min(K - k0, KS) - k * BK) and of halved offsets into packed int4 rows (k0 // 2).
func.func @div_min_shift(%k: i32 {kiln.divisibility = 64 : i32},
                         %ks: i32 {kiln.divisibility = 128 : i32}) {
  // expected-remark @below {{contiguity = [1], divisibility = [2], constancy = [1]}}
  %c2 = arith.constant 2 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [32], constancy = [1]}}
  %h = arith.divsi %k, %c2 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %c1 = arith.constant 1 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [32], constancy = [1]}}
  %sh = arith.shrui %k, %c1 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [256], constancy = [1]}}
  %sl = arith.shli %k, %c2 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [64], constancy = [1]}}
  %mn = arith.minsi %k, %ks : i32
  // expected-remark @below {{contiguity = [64], divisibility = [1073741824], constancy = [1]}}
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [64], constancy = [64]}}
  %ms = kiln.splat %mn : tensor<64xi32>
  // r < min(...) is constant over the whole aligned run.
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [64]}}
  %mask = arith.cmpi slt, %r, %ms : tensor<64xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [2], constancy = [64]}}
  %c2v = arith.constant dense<2> : tensor<64xi32>
  // A run of +1 halved: pairs of equal values when the division floors (not for divsi).
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [2]}}
  %rh = arith.divui %r, %c2v : tensor<64xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %rs = arith.divsi %r, %c2v : tensor<64xi32>
  return
}

// -----

// Pointer casts keep the addresses: byte alignment and constancy stay, runs of consecutive
// elements only where the element size does.
func.func @ptr_casts(%p: !kiln.ptr<i8> {kiln.divisibility = 16 : i32}, %a: i64 {kiln.divisibility = 8 : i32}) {
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [1]}}
  %q = kiln.ptr_cast %p : !kiln.ptr<i8> -> !kiln.ptr<i32>
  // expected-remark @below {{contiguity = [64], divisibility = [1073741824], constancy = [1]}}
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [64]}}
  %ps = kiln.splat %p : tensor<64x!kiln.ptr<i8>>
  // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
  %pp = kiln.addptr %ps, %r : tensor<64x!kiln.ptr<i8>>, tensor<64xi32>
  // Consecutive bytes are not consecutive i32 elements.
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [1]}}
  %qp = kiln.ptr_cast %pp : tensor<64x!kiln.ptr<i8>> -> tensor<64x!kiln.ptr<i32>>
  // The same element size keeps the run.
  // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
  %up = kiln.ptr_cast %pp : tensor<64x!kiln.ptr<i8>> -> tensor<64x!kiln.ptr<ui8>>
  // An i64 address (bytes) to a pointer keeps its alignment.
  // expected-remark @below {{contiguity = [1], divisibility = [8], constancy = [1]}}
  %f = kiln.ptr_cast %a : i64 -> !kiln.ptr<f16>
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [1]}}
  %i = kiln.ptr_cast %q : !kiln.ptr<i32> -> i64
  return
}

// -----

// A pointer tile carried by a while loop (`while i < n: ...; ptrs += 64`): the condition
// block's argument is an induction like a for loop's (init 16-byte aligned, step 128 bytes),
// and the body's argument is what the condition forwards.
func.func @while_pointer(%p: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %n: i32) {
  // expected-remark @below {{contiguity = [1], divisibility = [1073741824], constancy = [1]}}
  %c0 = arith.constant 0 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %c1 = arith.constant 1 : i32
  // expected-remark @below {{contiguity = [64], divisibility = [1073741824], constancy = [1]}}
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [64]}}
  %ps = kiln.splat %p : tensor<64x!kiln.ptr<f16>>
  // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
  %p0 = kiln.addptr %ps, %r : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
  %out:2 = scf.while (%q = %p0, %i = %c0) : (tensor<64x!kiln.ptr<f16>>, i32) -> (tensor<64x!kiln.ptr<f16>>, i32) {
    // expected-remark @below {{contiguity = [1], divisibility = [1073741824], constancy = [64]}}
    %z = arith.constant dense<0> : tensor<64xi32>
    // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
    %seen = kiln.addptr %q, %z : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
    // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
    %more = arith.cmpi slt, %i, %n : i32
    scf.condition(%more) %q, %i : tensor<64x!kiln.ptr<f16>>, i32
  } do {
  ^bb0(%qa: tensor<64x!kiln.ptr<f16>>, %ia: i32):
    // expected-remark @below {{contiguity = [1], divisibility = [1073741824], constancy = [64]}}
    %z = arith.constant dense<0> : tensor<64xi32>
    // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
    %same = kiln.addptr %qa, %z : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
    // expected-remark @below {{contiguity = [1], divisibility = [64], constancy = [64]}}
    %inc = arith.constant dense<64> : tensor<64xi32>
    // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
    %next = kiln.addptr %qa, %inc : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
    // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
    %i1 = arith.addi %ia, %c1 : i32
    scf.yield %next, %i1 : tensor<64x!kiln.ptr<f16>>, i32
  }
  return
}

// -----

// The same after scf-to-cf: the body block's argument receives only the condition block's,
// so the back edge's `qa + 64` is that argument's step.
func.func @cfg_while_pointer(%p: !kiln.ptr<f16> {kiln.divisibility = 16 : i32}, %n: i32) {
  // expected-remark @below {{contiguity = [1], divisibility = [1073741824], constancy = [1]}}
  %c0 = arith.constant 0 : i32
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %c1 = arith.constant 1 : i32
  // expected-remark @below {{contiguity = [64], divisibility = [1073741824], constancy = [1]}}
  %r = kiln.make_range {end = 64 : i32, start = 0 : i32} : tensor<64xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [16], constancy = [64]}}
  %ps = kiln.splat %p : tensor<64x!kiln.ptr<f16>>
  // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
  %p0 = kiln.addptr %ps, %r : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
  cf.br ^before(%p0, %c0 : tensor<64x!kiln.ptr<f16>>, i32)
^before(%q: tensor<64x!kiln.ptr<f16>>, %i: i32):
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %more = arith.cmpi slt, %i, %n : i32
  cf.cond_br %more, ^after(%q, %i : tensor<64x!kiln.ptr<f16>>, i32), ^done
^after(%qa: tensor<64x!kiln.ptr<f16>>, %ia: i32):
  // expected-remark @below {{contiguity = [1], divisibility = [1073741824], constancy = [64]}}
  %z = arith.constant dense<0> : tensor<64xi32>
  // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
  %same = kiln.addptr %qa, %z : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [64], constancy = [64]}}
  %inc = arith.constant dense<64> : tensor<64xi32>
  // expected-remark @below {{contiguity = [64], divisibility = [16], constancy = [1]}}
  %next = kiln.addptr %qa, %inc : tensor<64x!kiln.ptr<f16>>, tensor<64xi32>
  // expected-remark @below {{contiguity = [1], divisibility = [1], constancy = [1]}}
  %i1 = arith.addi %ia, %c1 : i32
  cf.br ^before(%next, %i1 : tensor<64x!kiln.ptr<f16>>, i32)
^done:
  return
}
