//===- Passes.td - Kiln passes ---------------------------------*- tablegen -*-===//
//
// Every Kiln pass, in alphabetical order of its flag.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_PASSES
#define KILN_PASSES

include "mlir/Pass/PassBase.td"

def KilnAssignLayouts : Pass<"kiln-assign-layouts", "mlir::ModuleOp"> {
  let summary = "give every tile a blocked or slice layout, chosen for coalesced access";
  let description = [{
    Groups tiles that must share a layout (operands and results of elementwise ops, memory
    ops and loop-carried values), links groups through `expand_dims` (whose source is a slice
    of its result's layout), and picks one blocked layout per group from the axis analysis of
    its largest memory access: the most contiguous dimension first, as many elements per
    thread as contiguity, alignment and 128-bit accesses allow, then lanes and warps spread
    over the tile. A tile that must be the slice of two layouts gets a
    `kiln_gpu.convert_layout`. Dot accumulators on tensor cores take the mma or wgmma fragment
    layout; a 2-D store of one that the fragment would write one element at a time (C of
    unknown alignment or row stride, a mask not constant over column pairs, C contiguous down
    its columns) goes through a `convert_layout` to a coalesced blocked layout of its own,
    warps along the rows, as Triton stores accumulators.
  }];
  let options = [
    Option<"numWarps", "num-warps", "unsigned", "4", "warps per program">,
    Option<"wgmma", "wgmma", "bool", "false",
           "the target has warpgroup MMA (sm_90a): tensor-core dots take the warpgroup "
           "accumulator layout when their shape allows">,
  ];
  let dependentDialects = ["::kiln::gpu::KilnGPUDialect"];
}

def KilnCheckOffsetOverflow : Pass<"kiln-check-offset-overflow", "mlir::ModuleOp"> {
  let summary = "debug mode: fail where int32 address arithmetic wraps";
  let description = [{
    Triton's offsets are int32, and `pid * BLOCK` or `x << k` that leaves the int32 range
    wraps to a negative or small offset that masks let through: the kernel then reads or
    writes far from its buffers. In debug mode this pass finds every `arith.addi`, `subi`,
    `muli` and `shli` on i32 that feeds the offset of a `kiln.addptr` (through splats,
    broadcasts, reshapes, sign or zero extensions and selects) and checks after it, in 64-bit
    arithmetic, that the result did not wrap: `kiln.assert` at the op's location, which fails
    the launch naming the source line on both backends. Arithmetic that does not reach an
    address is left alone (hashes may wrap on purpose).

    ```mlir
    // before
    %o = arith.muli %pid, %c : i32
    // after
    %o = arith.muli %pid, %c : i32
    %a = arith.extsi %pid : i32 to i64
    %b = arith.extsi %c : i32 to i64
    %w = arith.muli %a, %b : i64
    %r = arith.extsi %o : i32 to i64
    %ok = arith.cmpi eq, %w, %r : i64
    kiln.assert %ok, "int32 overflow in address arithmetic: ..." : i1
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::kiln::KilnDialect"];
}

def KilnConvertToLLVM : Pass<"kiln-convert-to-llvm", "mlir::ModuleOp"> {
  let summary = "lower laid-out kiln tiles, arith, math and func to LLVM and NVVM";
  let description = [{
    Every tile becomes a struct of the elements the running thread owns under its layout.
    Elementwise ops apply per element; loads and stores are grouped into vector accesses as
    wide as the axis analysis proves safe (up to 128 bits), predicated by the mask; math
    functions call libdevice, `exp`/`exp2` use `ex2.approx` as Triton does. Kernels become
    `llvm.func`s marked `nvvm.kernel` with `maxntid = 32 * num_warps` (and `nvvm.maxnreg = N`
    with the option `maxnreg=N`, 16..255). scf ops keep their structure with converted types
    (`convert-scf-to-cf` runs after).
  }];
  let options = [
    Option<"maxnreg", "maxnreg", "unsigned", "0",
           "cap on registers per thread, 16..255 (Triton's maxnreg); 0: none">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::NVVM::NVVMDialect"];
}

def KilnConvertToHost : Pass<"kiln-convert-to-host", "mlir::ModuleOp"> {
  let summary = "lower kiln tiles to vectors and LLVM ops for the host (CPU) backend";
  let description = [{
    The CPU path's first step. Every tile becomes a 1-D `vector` of its elements in row-major
    order (pointers: `vector<N x !llvm.ptr>`); arith and math ops keep their dialect on the
    vectors. Shape ops (broadcast, trans) are `llvm.shufflevector`s with constant masks, and
    expand_dims/reshape cost nothing. Loads and stores are masked: whole runs that the axis
    analysis proves contiguous use `llvm.intr.masked.load/store`, the rest masked gathers and
    scatters; masked-out lanes never touch memory and loads give `other` (zero without it).
    Atomics run lane by lane in a loop, skipping masked-out lanes. Reductions and scans are
    trees of shuffles over the whole tile applying the combine region to vectors.

    Each kernel gains the program id, the grid and a runtime context as trailing arguments,
    and a `<kernel>.host_entry(params, grid, begin, end, ctx)` function runs the programs
    with linear ids in [begin, end) with CUDA-style packed parameters. With `debug`, every
    load and store first asks the runtime (through the context) to check its unmasked
    addresses, which reports the kernel, the op's location and the program id of a bad one
    and masks it off; `kiln.assert` and `kiln.print` call the runtime too.
  }];
  let options = [
    Option<"debug", "debug", "bool", "false", "check every access through the runtime">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect", "::mlir::vector::VectorDialect",
                           "::mlir::scf::SCFDialect"];
}

def KilnExpandFp8 : Pass<"kiln-expand-fp8", "mlir::ModuleOp"> {
  let summary = "fp8 conversions as integer arithmetic; fp8 dots wgmma cannot take as f16";
  let description = [{
    Rewrites every `arith.extf` from and `arith.truncf` to `f8E4M3FN` (Triton's fp8e4nv) and
    `f8E5M2` (fp8e5), on tiles or scalars, into integer arithmetic on the bits: fp8 -> f32 is
    exact; f32 -> fp8 rounds to nearest even and saturates to the largest finite value (448,
    57344) as PTX's `cvt.rn.satfinite` does, NaN staying NaN. Runs on every target first;
    with `hardware-cvt` (sm_89 and later) the conversions stay for the LLVM conversion, which
    lowers them to PTX's `cvt` of pairs with the same semantics (Fp8ConvertToLLVM.cpp), and
    the f16 operands of a dot below are made by one `arith.extf` each. A `kiln.dot` of fp8 tiles stays fp8 only where
    wgmma multiplies it (`wgmma`, the warpgroup accumulator layout of `num-warps` warps, K a
    multiple of 32, both operands of one fp8 type); otherwise its operands are converted to
    f16, which holds every fp8 value (a mixed e4m3 x e5m2 dot always).

    ```mlir
    // before
    %w = arith.extf %x : tensor<64xf8E4M3FN> to tensor<64xf32>
    // after: %u = zero-extended bits; normal numbers rebias the exponent field,
    //        subnormals are m * 2^-9, S.1111.111 is NaN
    %b = arith.bitcast %x : tensor<64xf8E4M3FN> to tensor<64xi8>
    %u = arith.extui %b : tensor<64xi8> to tensor<64xi32>
    ...
    %w = arith.bitcast %bits : tensor<64xi32> to tensor<64xf32>
    ```
  }];
  let options = [
    Option<"wgmma", "wgmma", "bool", "false", "sm_90a: fp8 dots on the warpgroup layout stay fp8">,
    Option<"numWarps", "num-warps", "unsigned", "4", "warps per program">,
    Option<"hardwareCvt", "hardware-cvt", "bool", "false",
           "sm_89+: leave the conversions to the target's cvt instructions">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::kiln::gpu::KilnGPUDialect"];
}

def KilnPipelineDotOperands : Pass<"kiln-pipeline-dot-operands", "mlir::ModuleOp"> {
  let summary = "stage a loop's dot operands through shared rings filled by cp.async (sm_80+)";
  let description = [{
    For an `scf.for` whose body computes `kiln.dot(a, load(pb), acc)` with f16/bf16 operands,
    f32 accumulators and a tile shape wgmma takes (M a multiple of 16 rows per warp, whole
    warpgroups), where the load of B has only that use, reads zero where masked off, and has
    its address computed from the induction variable and loop invariants: the load becomes
    `kiln_gpu.async_copy` into a ring of `num-stages` slots (`kiln_gpu.local_alloc`), issued
    ahead (the first ones before the loop, masked so no iteration past the end reads memory),
    and the dot becomes `kiln_gpu.shared_dot` on the current slot after an `async_wait` that
    leaves the later copies in flight. A is a ring too when it is such a load; a load before
    the loop is copied once into a one-slot buffer (which later loops reuse); a tile the body
    computes is read from registers. Every dot of the body is planned this way and all share
    the loop's slot and copy groups. When a loop's only dot has an accumulator that only goes
    from one iteration's dot to the next, the dot runs on into the next iteration (pending =
    1): with 4 or more slots the copies run `num-stages - 2` iterations ahead, at the top of
    the body; with 3 they run 2 ahead, issued after the dot behind a second wait. In a loop
    with several dots and 4 or more slots, the last one runs on when its result only reaches
    the next iteration and a register A comes from an earlier dot (flash attention's p @ v),
    with a `dot_wait` before the accumulator's first use. Otherwise copies run `num-stages -
    1` ahead, and the last dot of a body whose result only the yield reads is issued without
    waiting for itself (wgmma): the body's ops before it that it does not read, free of memory
    effects (tutorial 06's row sum of p), move after it, and a `dot_wait` before the yield
    retires it. Stages are reduced until the rings fit in shared memory.

    Operands from `kiln.descriptor_load` (2-D, f16/bf16, rows of at least 32 bytes) are
    copied by the tensor memory accelerator instead (`kiln_gpu.tma_copy`) on the same
    schedule: a `kiln_gpu.mbarrier_alloc` gives one transaction barrier per slot; each group
    starts with an `mbarrier_expect` of all its bytes; an iteration waits on its slot's
    barrier at the phase the slot is at (carried next to the slot, flipped at each wrap), then
    a `kiln_gpu.barrier` orders every warp's reads before the next copies. Copies past the last
    iteration are not issued. The rows of each map's boxes go to the module's
    `kiln_gpu.tma_box_rows`. A loop with both kinds of copies is left alone.

    With `wgmma=false` (sm_80 and later targets without warpgroup MMA) the dots run on
    mma.sync and read both operands from rings with ldmatrix: A must be a load (in the loop
    or before it), the accumulator tile at least 16 rows and 8 columns per warp
    (getMmaAccumulatorLayout), f16/bf16 with f32 accumulators (K a multiple of 16) or int8
    with i32 (K a multiple of 32); every dot is done within its iteration (pending = 0), the
    copies run `num-stages - 1` ahead and go at the top of the body, and tensor descriptor
    loads are not taken (-kiln-lower-descriptors runs first on such targets).

    ```mlir
    // before                                  // after (4 stages)
    scf.for %k = %c0 to %K step %c64            %ra = kiln_gpu.local_alloc {operand = 0 : i32}
        iter_args(%acc = %zero) {               ... copies of iterations 0 and 1, committed
      %a = kiln.load %pa(%k), %ma(%k), %z       scf.for %k ... iter_args(%acc, %slot) {
      %b = kiln.load %pb(%k), %mb(%k), %z         kiln_gpu.async_wait {pending = 1 : i32}
      %d = kiln.dot %a, %b, %acc                  async_copy of iteration k + 2, committed
      scf.yield %d                                %d = kiln_gpu.shared_dot %ra[%slot], ...
    }                                                    {pending = 1 : i32}
                                                }
    ```
  }];
  let options = [
    Option<"numStages", "num-stages", "unsigned", "4",
           "slots per ring (>= 2; 0 or 1 take the default of 4)">,
    Option<"numWarps", "num-warps", "unsigned", "4", "warps per program">,
    Option<"wgmma", "wgmma", "bool", "true",
           "the dots run on wgmma (sm_90a); false: on mma.sync, reading the rings with "
           "ldmatrix (sm_80 and later)">,
    Option<"ringBudget", "ring-budget", "int64_t", "224 * 1024",
           "bytes of shared memory the rings of one loop may take (stages are reduced to fit)">,
  ];
  let dependentDialects = ["::kiln::gpu::KilnGPUDialect"];
}

def KilnGuardIntegerOps : Pass<"kiln-guard-integer-ops", "mlir::ModuleOp"> {
  let summary = "integer division by zero and oversized shifts: defined on the host, division "
                "by zero an error in debug mode";
  let description = [{
    LLVM IR leaves two integer edge cases undefined. A division or remainder by zero (or of
    the smallest signed value by -1): on the host it raises SIGFPE, or the optimizer turns the
    loop around it into anything (an endless loop was seen); Triton leaves the result
    undefined. A shift by the bit width or more is poison. With `guard`, every `arith.divsi`,
    `divui`, `remsi`, `remui`, `floordivsi`, `ceildivsi` and `ceildivui` divides by 1 where the
    divisor is 0 (or where the signed division would overflow), and shifts follow PTX (amounts
    clamped to the width: `shli`/`shrui` give 0, `shrsi` the sign), so every result is some
    value and the kernel goes on, as on a GPU. With `check` (debug mode) a `kiln.assert` at the
    op's location fails the launch where a divisor is zero.

    ```mlir
    // before
    %q = arith.divsi %a, %b : tensor<64xi32>
    // after (guard)
    %z = arith.cmpi eq, %b, %c0 : tensor<64xi32>
    ...
    %d = arith.select %bad, %c1, %b : tensor<64xi1>, tensor<64xi32>
    %q = arith.divsi %a, %d : tensor<64xi32>
    ```
  }];
  let options = [
    Option<"guard", "guard", "bool", "true",
           "divide by 1 where the divisor is 0; shifts past the width as PTX does">,
    Option<"check", "check", "bool", "false", "assert that no divisor is 0 (debug mode)">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::kiln::KilnDialect"];
}

def KilnPointerTilesToDescriptors
    : Pass<"kiln-pointer-tiles-to-descriptors", "mlir::ModuleOp"> {
  let summary = "loads of dot operands through advancing pointer tiles as descriptor loads";
  let description = [{
    A loop's `kiln.load` of a 2-D f16/bf16 tile that feeds a `kiln.dot`, through a pointer
    tile the loop advances (`ptrs = base + idx0[:, None] * s0 + idx1[None, :]`, `ptrs += c *
    s_d`, `idx_d = start + arange` or `(start + arange) % M`, masked by `idx_d < bound` or by
    `idx_d < E - k * a` on the advancing dimension, `other` +0.0), becomes a
    `kiln.descriptor_load` of a tensor map argument appended to the function, which the
    launcher encodes from the arguments named by its `kiln.tensor_map_recipe`; on sm_90a
    -kiln-pipeline-dot-operands then copies it with the tensor memory accelerator. The base
    must be an argument specialized 16-byte aligned, the row stride an argument or constant
    of a multiple of 16 bytes, the extents arguments or constants. Where that assumes run-time
    facts (starts not negative, wrapped indices within M, extents and stride positive), the
    loop is versioned under `scf.if`: the rewritten loop where they hold, the original
    elsewhere. Unmasked dimensions get extent 2^31 - 1 (every coordinate read). A loop is
    taken only when all the loads feeding its dots are. A store of a 2-D f16/bf16 block
    computed from a dot (a matmul's C) through such a pointer tile (no wrap), masked by
    bounds on its own indices or not, becomes a `kiln.descriptor_store` the same way, under
    `scf.if` where it assumes run-time facts. Other loads and stores are left alone.

    ```mlir
    // before: %a = kiln.load %ptrs, %mask, %zero : tensor<128x64x!kiln.ptr<f16>>  (in a loop)
    // after:  %a = kiln.descriptor_load %map, %base[%row0, %k64] shape [%m, %k] strides [%s]
    //             : !kiln.ptr<f16> -> tensor<128x64xf16>
    //         with %map: !kiln.tensormap {kiln.tensor_map_recipe = array<i64: 0, 104, 2, 128,
    //             64, 3, 5, 6>} appended to the function
    ```

    With `attention-tiles` it also takes loads whose tile is contiguous along its rows (K
    loaded transposed by pointers, `K + offs_d[:, None] + offs_n[None, :] * s_n`: the
    transpose of the descriptor block [BLOCK_N, D]) and whose base a program moves
    (`K += off_z * s_z + off_h * s_h`: the row coordinate gains `off / s_row`, versioned on
    `off >= 0`, `off` a whole number of rows and the last row coordinate within int32). The
    Python front end runs it with this option by default on sm_90a
    (`knobs.compilation.tma_attention_tiles`; tutorial 06's pointer forward at D128 on an
    H100: +5-13%).
  }];
  let options = [
    Option<"attentionTiles", "attention-tiles", "bool", "false",
           "also take row-contiguous tiles and bases moved by a scalar offset">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
}

def KilnLowerDescriptors : Pass<"kiln-lower-descriptors", "mlir::ModuleOp"> {
  let summary = "tensor descriptor loads and stores as masked loads and stores";
  let description = [{
    Rewrites each `kiln.descriptor_load` into the `kiln.load` of the block's pointer tile,
    masked to the elements inside the tensor (`0 <= offset_d + i_d < shape_d` for every
    dimension d) with zero elsewhere, and each `kiln.descriptor_store` into the masked
    `kiln.store`. Runs on every target; on sm_90a after -kiln-pipeline-dot-operands, which
    copies the loads that feed dots with the tensor memory accelerator instead.

    ```mlir
    // before
    %t = kiln.descriptor_load %desc, %base[%i, %j] shape [%m, %n] strides [%s]
        : !kiln.ptr<f16> -> tensor<64x64xf16>
    // after: %ptrs = base + (i + arange(64))[:, None] * s + (j + arange(64))[None, :]
    //        %mask = 0 <= rows < m & 0 <= cols < n
    %t = kiln.load %ptrs, %mask, %zero : tensor<64x64x!kiln.ptr<f16>>
    ```
  }];
  let options = [
    Option<"tmaStores", "tma-stores", "bool", "false",
           "sm_90a: 2-D f16/bf16 stores through shared memory and TMA stores "
           "(kiln_gpu.tma_store): at the kernel's top level, and inside loops where the buffer "
           "fits beside the rings">,
    Option<"sharedBudget", "shared-budget", "int64_t", "224 * 1024",
           "bytes of shared memory the rings and a store buffer inside a loop may take">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::kiln::gpu::KilnGPUDialect"];
}

def KilnFlattenLoops : Pass<"kiln-flatten-loops", "mlir::ModuleOp"> {
  let summary = "fuse an scf.for marked kiln.flatten with its inner loop into one loop";
  let description = [{
    `tl.range(..., flatten=True)` marks its loop `kiln.flatten`. When that loop has no
    iteration arguments and its body is a prologue free of memory effects, one inner
    `scf.for` whose bounds do not change with the outer loop, and an epilogue, it becomes
    one loop over every (outer, inner) pair: each iteration recomputes the prologue for its
    outer index, starts the inner loop's carried values afresh where the inner index is 0
    (`arith.select`), runs the inner body, and runs the epilogue under `scf.if` where the
    inner index is the last. The loop pipelining passes then overlap one outer iteration's
    last inner iterations and epilogue with the next one's first copies (Triton's persistent
    matmul). Where the inner loop runs no iteration, the outer loop runs as before, with the
    inner loop's results replaced by its initial values. Other marked loops are left alone.

    ```mlir
    // before
    scf.for %t = %lb to %ub step %s {
      %x0 = ...(%t)
      %r = scf.for %k = %c0 to %n step %c1 iter_args(%x = %x0) -> (...) { ... }
      kiln.store ..., %r
    } {kiln.flatten}
    // after (inner trips n > 0): scf.for %i = 0 to trips(outer) * n iter_args(%x = ...):
    //   %t = lb + (i / n) * s, %k = i % n; %x' = select(k == 0, x0(t), x); body;
    //   scf.if (k == n - 1) { kiln.store ..., result }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect"];
}

def KilnWarpSpecialize : Pass<"kiln-warp-specialize", "mlir::ModuleOp"> {
  let summary = "a producer warpgroup issues a loop's TMA copies, the other warps run its dots";
  let description = [{
    On sm_90a, after layouts are assigned: a kernel whose one loop with TMA rings (marked
    `kiln.warp_specialize` by `tl.range(..., warp_specialize=True)`, or any such loop with
    all-loops) has several dots (attention: q @ k, p @ v) and empty barriers (the consumers
    say when a slot is free) is split by role. The loop may sit in the then-blocks of ifs of
    the kernel's top block (a loop that may run no iteration). The program gets a producer
    warpgroup beside its warps (the layouts' warps, the consumers): the producer gives
    registers back (`set_max_registers`) and runs a copy of the loop (inside copies of its
    ifs) that keeps only the ring side, i.e. the wait on the slot's empty barrier, the
    `mbarrier_expect` and the `tma_copy` ops and the scalar arithmetic they need, issued by
    its first thread (`kiln_gpu.leader_warp`). The consumers take the registers and run the
    loop without those ops, and everything after it. The code before the split (barrier
    set-up, the rings and barriers the ifs allocated, which move there, the first copies)
    runs on both roles; its barriers stay over every thread (`kiln_gpu.all_threads`), and
    every other barrier becomes named barrier 1 over the consumers' threads (module attribute
    `kiln_gpu.consumer_warps`). The launch takes the extra warps from `kiln_gpu.launch_warps`.
    With ping-pong, two consumer warpgroups whose loop issues its dots back to back
    (FlashAttention-3's order: q @ k_j, then p_(j-1) @ v_(j-1), no wait between) take turns
    issuing them at named barriers 2 and 3 (`kiln_gpu.named_barrier`), and the last dot of a
    turn hands it over without waiting for the others (its `pending` covers them), so that
    one warpgroup's dots run while the other computes its softmax. Other kernels are left
    as they are. The GPU pipeline runs the pass on marked loops (all loops with
    GPUPipelineOptions::warpSpecialize). On the H100 (kiln_kernels' forward at D 128,
    4x32x4096 / 1x32x16384, session 31) FlashAttention-3's loop ran 548 / 587 TFLOP/s
    without the split and 575 / 604 with it and ping-pong; the producer alone had not made
    the plain loop faster (session 30).

    ```mlir
    // before: scf.for ... { wait full; wait empty (thread 0); expect; tma_copy ...; dots ...;
    //                       arrive empty }
    // after:
    %w = kiln_gpu.warp_id : i32
    %producer = arith.cmpi uge, %w, %c8 : i32
    scf.if %producer {
      kiln_gpu.set_max_registers 24
      scf.for ... { wait empty; expect; tma_copy ... }  // {kiln_gpu.leader_warp = 8}
    } else {
      kiln_gpu.set_max_registers 240 increase
      // (ping-pong) warpgroup 1: kiln_gpu.named_barrier %c2, 256 arrive
      scf.for ... { wait full; arrive empty; kiln_gpu.named_barrier %mine, 256;
                    dots ...; kiln_gpu.named_barrier %other, 256 arrive; ... }
      // (ping-pong) warpgroup 0: kiln_gpu.named_barrier %c2, 256
      ... (the rest of the kernel)
    }
    ```
  }];
  let options = [
    Option<"producerRegisters", "producer-registers", "unsigned", "24",
           "registers per thread the producer warpgroup keeps (24..256, a multiple of 8)">,
    Option<"pingPong", "ping-pong", "bool", "true",
           "two consumer warpgroups take turns issuing the loop's dots when it issues them "
           "back to back (named barriers 2 and 3)">,
    Option<"allLoops", "all-loops", "bool", "true",
           "every loop that fits; false: only loops marked kiln.warp_specialize "
           "(tl.range(..., warp_specialize=True))">
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
                           "::kiln::gpu::KilnGPUDialect"];
}

def KilnPeelDotLoops : Pass<"kiln-peel-dot-loops", "mlir::ModuleOp"> {
  let summary = "peel a dot loop's first and last iterations where a dot goes";
  let description = [{
    On sm_90a, after the rings and -kiln-warp-specialize: a loop whose body issues several
    `shared_dot`s, one with A in registers (an attention loop's `p @ v`; with a producer
    warpgroup, the consumers' loop), gets its first and last
    iterations peeled off, each under an `scf.if` that says whether it runs, and the copies
    are canonicalized with what they start from. Where that leaves a dot no work -- its register A a constant zero (it becomes its
    C), or its result read by nothing but waits -- the dot goes, and the waits after it that
    let its group run count one group fewer, so each still retires what it retired before.
    Loops where no dot goes are left as they were. FlashAttention-3's order (q @ k_j and
    p_(j-1) @ v_(j-1) in one iteration, one iteration more than there are key blocks) loses
    its first p @ v (of the zeros p starts as) and, when the loop counts blocks with step 1,
    its last q @ k (which no block reads).

    ```mlir
    // before: scf.for %i = %c0 to %n1 step %c1 iter_args(%p = %zeros, ...) { B(%i, %p) }
    // after:
    %r0 = scf.if %any -> (...) { B(%c0, %zeros) without the p @ v } else { scf.yield ... }
    %r1 = scf.for %i = %c1 to %last step %c1 iter_args(... = %r0) { B(%i, ...) }
    %r2 = scf.if %two -> (...) { B(%last, %r1) without the q @ k } else { scf.yield %r1 }
    ```
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect", "::mlir::scf::SCFDialect",
                           "::kiln::gpu::KilnGPUDialect"];
}

def KilnPipelineLoads : Pass<"kiln-pipeline-loads", "mlir::ModuleOp"> {
  let summary = "prefetch the next iteration's loads of scf.for loops (software pipelining)";
  let description = [{
    For every `scf.for`, each load in its body whose pointer, mask and `other` depend only on
    the induction variable, inductions (iteration arguments yielded as `addptr(x, inc)` or
    `x + inc`, `inc` loop-invariant: the next iteration's value is computed at the top of the
    body) and loop invariants is issued one iteration early: the first
    iteration's load moves before the loop (masked by `lb < ub`), each iteration loads the
    next one's (masked by `iv + step < ub`) before its own work, and the value is carried in
    an iteration argument. The loads of iteration i+1 are then in flight while iteration i
    computes — what Triton's `num_stages` does. Volatile loads and loads whose address depends
    on other loop-carried values or other loads stay in place. As in Triton, a store in the loop is
    assumed not to write what a later iteration's prefetched load reads.

    num-stages = 0 decides per loop with a register cost model: a loop is pipelined when its
    prefetched tiles add at most 32 registers per thread (tile elements x element bits / 32,
    over the program's 32 x num-warps threads); >= 2 pipelines every loop it can; 1 (the GPU
    pipeline's default) prefetches loads whose value goes into dots (their operands; on sm_90a
    most of those became cp.async rings already) and, in a loop of dots, the other loads of at
    most 8 registers a thread while the dots' results and 4x those registers stay within 176
    (tutorial 06's backward: its row statistics, which Triton streams through cp.async, waited
    in the iteration that used them: 0.92x -> 0.98x Triton at D 128); a small load over that
    budget moves, with its address, to the top of the body ahead of the rings' waits and
    barriers instead (past ops that write no global memory; at D 64 on 4 warps, 0.90x ->
    0.96x; bench/results/2026-11-26-h200-cliffs-session21.md). Measured
    on the H100, for other loads: always-on speeds up loops over small row tiles (LayerNorm backward 0.77x -> 0.85x of Triton) but slows loops over large
    tiles, whose prefetched tile doubles the live registers (cross-entropy over a 32000
    vocabulary 1.19x -> 0.50x) (bench/results/2026-11-22-h100-pipelining.md); the cost model
    keeps cross-entropy as it was and lifts LayerNorm backward to 0.86x, but slows the RMSNorm
    backward of the same shape 1.00x -> 0.84x, so it is not the default yet
    (bench/results/2026-11-22-h100-llm-ops-run7.md).
  }];
  let options = [
    Option<"numStages", "num-stages", "unsigned", "2",
           "software pipeline stages; 1 prefetches dot operands only, 0 decides per loop">,
    Option<"numWarps", "num-warps", "unsigned", "4",
           "warps per program (for the register cost of num-stages = 0)">,
  ];
}

def KilnTestPrintAxisInfo : Pass<"kiln-test-print-axis-info", "mlir::ModuleOp"> {
  let summary = "print the axis analysis of every integer and pointer value (for tests)";
  let description = [{
    Emits a remark on every op with an integer or pointer result giving its per-dimension
    contiguity, divisibility and constancy.
  }];
}

#endif // KILN_PASSES
