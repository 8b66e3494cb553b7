//===- KilnGPUDialect.td - Layouts for the GPU path ------------*- tablegen -*-===//
//
// The `kiln_gpu` dialect attaches distribution layouts to kiln tiles: which thread of which
// warp holds which elements. Layouts live in the tensor type's encoding.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_GPU_DIALECT
#define KILN_GPU_DIALECT

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def KilnGPU_Dialect : Dialect {
  let name = "kiln_gpu";
  let cppNamespace = "::kiln::gpu";
  let summary = "thread/warp distribution layouts for kiln tiles";
  let description = [{
    After layout assignment every tile type carries an encoding from this dialect. The module
    carries `kiln_gpu.num_warps` (warps per program) and `kiln_gpu.threads_per_warp`.
  }];
  let useDefaultAttributePrinterParser = 1;
  let useDefaultTypePrinterParser = 1;
}

class KilnGPU_Type<string name, string typeMnemonic> : TypeDef<KilnGPU_Dialect, name> {
  let mnemonic = typeMnemonic;
}

def KilnGPU_SharedBufferType : KilnGPU_Type<"SharedBuffer", "shared"> {
  let summary = "a ring of tiles in shared memory";
  let description = [{
    `shape[0]` slots, each a tile of `shape[1:]` elements, in shared memory. Where an element
    lives inside a slot is the lowering's choice (wgmma's swizzled operand layouts).

    ```mlir
    !kiln_gpu.shared<[3, 128, 64], f16>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"int64_t">:$shape, "mlir::Type":$elementType);
  let assemblyFormat = "`<` `[` $shape `]` `,` $elementType `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getNumSlots() const { return getShape()[0]; }
    llvm::ArrayRef<int64_t> getTileShape() const { return getShape().drop_front(); }
  }];
}

def KilnGPU_MBarriersType : KilnGPU_Type<"MBarriers", "mbarriers"> {
  let summary = "one transaction barrier per slot of a loop's TMA-filled rings";
  let description = [{
    `count` mbarriers (8 bytes each) in static shared memory: barrier s completes a phase when
    the tensor memory accelerator has written every byte expected for the copies into slot s.

    ```mlir
    !kiln_gpu.mbarriers<4>
    ```
  }];
  let parameters = (ins "int64_t":$count);
  let assemblyFormat = "`<` $count `>`";
}

class KilnGPU_Attr<string name, string attrMnemonic> : AttrDef<KilnGPU_Dialect, name> {
  let mnemonic = attrMnemonic;
}

def KilnGPU_BlockedEncodingAttr : KilnGPU_Attr<"BlockedEncoding", "blocked"> {
  let summary = "each thread owns a contiguous sizePerThread block, repeated over the tile";
  let description = [{
    Along dimension `d`, thread `lane` of warp `w` owns elements
      `(r * T_d + (w_d * threadsPerWarp[d] + lane_d) * sizePerThread[d] + e) mod shape[d]`
    for repetitions `r` and `0 <= e < sizePerThread[d]`, where
    `T_d = sizePerThread[d] * threadsPerWarp[d] * warpsPerCTA[d]` and lane/warp indices are
    split over dimensions fastest-first in `order`. A tile smaller than `T_d` is replicated.

    ```mlir
    #kiln_gpu.blocked<{sizePerThread = [1, 4], threadsPerWarp = [2, 16], warpsPerCTA = [4, 1], order = [1, 0]}>
    ```

    With `wgmma = true` the layout is the accumulator of Hopper's warpgroup MMA: the
    registers are those of the blocked layout above (sizePerThread [1, 2], threadsPerWarp
    [8, 4], warpsPerCTA [W, 1], W a multiple of 4), but the rows are where wgmma puts them.
    Blocked row `L = r * 8W + 8w + i` (repetition r, warp w = 4g + v of warpgroup g, lane row
    i) is row `64 * ((r / 2) * W / 4 + g) + 16v + 8 * (r % 2) + i`: each warp owns 16
    consecutive rows of each 64-row block its warpgroup multiplies, and the warpgroups take
    the 64-row blocks in turn. The bits of L move: bit log2(8W) (the repetition's lowest) goes
    to bit 3 and the warp's bits shift up by one. It applies along dimension 0 when its extent
    is a multiple of 16W (else the rows are the blocked layout's); dot operand A then sits in
    shared memory in its natural row order, so the TMA copies it as one box.

    ```mlir
    #kiln_gpu.blocked<{sizePerThread = [1, 2], threadsPerWarp = [8, 4], warpsPerCTA = [8, 1], order = [1, 0], wgmma = true}>
    ```
  }];
  let parameters = (ins ArrayRefParameter<"unsigned">:$sizePerThread,
                        ArrayRefParameter<"unsigned">:$threadsPerWarp,
                        ArrayRefParameter<"unsigned">:$warpsPerCTA,
                        ArrayRefParameter<"unsigned">:$order,
                        DefaultValuedParameter<"bool", "false">:$wgmma);
  let assemblyFormat = [{
    `<` `{` `sizePerThread` `=` `[` $sizePerThread `]` `,`
            `threadsPerWarp` `=` `[` $threadsPerWarp `]` `,`
            `warpsPerCTA` `=` `[` $warpsPerCTA `]` `,` `order` `=` `[` $order `]`
            (`,` `wgmma` `=` $wgmma^)? `}` `>`
  }];
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    unsigned getRank() const { return getOrder().size(); }
  }];
}

def KilnGPU_SliceEncodingAttr : KilnGPU_Attr<"SliceEncoding", "slice"> {
  let summary = "the layout of a parent tile with dimension `dim` removed";
  let description = [{
    What a reduction along `dim` leaves, and what `expand_dims` at `dim` needs as its source:
    each thread owns the parent's elements with coordinate `dim` dropped.

    ```mlir
    #kiln_gpu.slice<{dim = 1, parent = #kiln_gpu.blocked<{...}>}>
    ```
  }];
  let parameters = (ins "unsigned":$dim, "::mlir::Attribute":$parent);
  let assemblyFormat = "`<` `{` `dim` `=` $dim `,` `parent` `=` $parent `}` `>`";
  let genVerifyDecl = 1;
}

def KilnGPU_ConvertLayoutOp : Op<KilnGPU_Dialect, "convert_layout",
    [Pure, SameOperandsAndResultShape, SameOperandsAndResultElementType]> {
  let summary = "redistribute a tile to another layout";
  let description = [{
    Moves elements between threads (through shared memory when they cross warps).

    ```mlir
    %b = kiln_gpu.convert_layout %a : tensor<64xf32, #l0> -> tensor<64xf32, #l1>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$src);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasFolder = 1;
}

def KilnGPU_LocalAllocOp : Op<KilnGPU_Dialect, "local_alloc",
    [MemoryEffects<[MemAlloc<DefaultResource>]>]> {
  let summary = "a ring of dot operand tiles in shared memory";
  let description = [{
    Allocates the shared memory of one dot operand's pipeline: `operand` is 0 for A (slots of
    M x K) and 1 for B (K x N). `k_major` (set by -kiln-assign-layouts from the copies' layout)
    says whether a slot is stored contiguous along K or along M/N.

    ```mlir
    %a = kiln_gpu.local_alloc {operand = 0 : i32} : !kiln_gpu.shared<[3, 128, 64], f16>
    ```
  }];
  let arguments = (ins ConfinedAttr<I32Attr, [IntMinValue<0>, IntMaxValue<1>]>:$operand,
                       OptionalAttr<BoolAttr>:$k_major);
  let results = (outs KilnGPU_SharedBufferType:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def KilnGPU_AsyncCopyOp : Op<KilnGPU_Dialect, "async_copy",
    [MemoryEffects<[MemRead<DefaultResource>, MemWrite<DefaultResource>]>]> {
  let summary = "start copying a tile from global memory into a slot of a shared ring";
  let description = [{
    Every thread copies the elements it owns (cp.async, 16 bytes where contiguity allows);
    masked-off elements become zero. The copy completes at a later `async_wait`; the copies
    since the previous `async_commit` form one group. With `transposed` the pointers are
    those of the slot's transpose (a dot operand `b.T` of a block loaded N x K): pointer
    (i, j) fills element (j, i) of the slot.

    ```mlir
    kiln_gpu.async_copy %buf[%slot], %ptrs, %mask
        : !kiln_gpu.shared<[3, 128, 64], f16>, tensor<128x64x!kiln.ptr<f16>>, tensor<128x64xi1>
    kiln_gpu.async_copy %bt[%slot], %nk {transposed}
        : !kiln_gpu.shared<[3, 64, 256], f16>, tensor<256x64x!kiln.ptr<f16>>
    ```
  }];
  let arguments = (ins KilnGPU_SharedBufferType:$buffer, I32:$slot, AnyRankedTensor:$ptr,
                       Optional<AnyRankedTensor>:$mask, UnitAttr:$transposed);
  let assemblyFormat = [{
    $buffer `[` $slot `]` `,` $ptr (`,` $mask^)? attr-dict `:` type($buffer) `,` type($ptr)
    (`,` type($mask)^)?
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The dimension of the pointer tile along K of the dot operand the slot holds (A's
    /// slots are M x K, B's K x N), given which operand the ring holds.
    unsigned getPtrKDim(bool isA) { return (isA != getTransposed()) ? 1 : 0; }
  }];
}

def KilnGPU_AsyncCommitOp : Op<KilnGPU_Dialect, "async_commit",
    [MemoryEffects<[MemWrite<DefaultResource>]>]> {
  let summary = "close the current group of async copies";
  let assemblyFormat = "attr-dict";
}

def KilnGPU_AsyncWaitOp : Op<KilnGPU_Dialect, "async_wait",
    [MemoryEffects<[MemRead<DefaultResource>, MemWrite<DefaultResource>]>]> {
  let summary = "wait until at most `pending` copy groups are in flight, then synchronize";
  let description = [{
    After the wait the completed copies are visible to every thread of the program and to the
    tensor cores (a proxy fence and a barrier follow the wait).

    ```mlir
    kiln_gpu.async_wait {pending = 1 : i32}
    ```
  }];
  let arguments = (ins ConfinedAttr<I32Attr, [IntMinValue<0>]>:$pending);
  let assemblyFormat = "attr-dict";
}

def KilnGPU_TensorMap : Type<CPred<"::llvm::isa<::kiln::TensorMapType>($_self)">,
                             "kiln tensor map", "::kiln::TensorMapType">;

def KilnGPU_MBarrierAllocOp : Op<KilnGPU_Dialect, "mbarrier_alloc",
    [MemoryEffects<[MemAlloc<DefaultResource>, MemWrite<DefaultResource>]>]> {
  let summary = "initialized barriers for a loop's TMA or cp.async copies";
  let description = [{
    Static shared memory for the barriers; one thread initializes each with an arrival count
    of `arrivals`, then the program synchronizes, so every thread may wait on them
    afterwards. One arrival (the expect_tx of a copy group) makes a slot's transaction
    barrier; one per thread (`arrivals` = threads, each an async_arrive) a barrier that says
    a group of cp.async copies has landed; one per warp (`arrivals` = warps) a barrier that
    says every warp is done reading a slot.

    ```mlir
    %full = kiln_gpu.mbarrier_alloc : !kiln_gpu.mbarriers<4>
    %empty = kiln_gpu.mbarrier_alloc {arrivals = 8 : i32} : !kiln_gpu.mbarriers<4>
    ```
  }];
  let arguments = (ins DefaultValuedAttr<ConfinedAttr<I32Attr, [IntMinValue<1>]>, "1">:$arrivals);
  let results = (outs KilnGPU_MBarriersType:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def KilnGPU_MBarrierArriveOp : Op<KilnGPU_Dialect, "mbarrier_arrive",
    [MemoryEffects<[MemWrite<DefaultResource>]>]> {
  let summary = "each warp arrives on barrier `slot`: it is done reading the slot";
  let description = [{
    Where `pred` holds, the first lane of every warp arrives on barrier `slot` (release
    semantics): whatever the warp did before, the wgmma reads it waited for included, happens
    before what a thread that waits for the phase does next. With a barrier of one arrival
    per warp, its phase completes when every warp has arrived.

    ```mlir
    kiln_gpu.mbarrier_arrive %empty[%slot], %pred : !kiln_gpu.mbarriers<4>
    ```
  }];
  let arguments = (ins KilnGPU_MBarriersType:$barriers, I32:$slot, I1:$pred);
  let assemblyFormat = "$barriers `[` $slot `]` `,` $pred attr-dict `:` type($barriers)";
}

def KilnGPU_AsyncArriveOp : Op<KilnGPU_Dialect, "async_arrive",
    [MemoryEffects<[MemWrite<DefaultResource>]>]> {
  let summary = "each thread arrives on barrier `slot` once its async copies so far are done";
  let description = [{
    cp.async.mbarrier.arrive.noinc: every thread's arrival is triggered when all the async
    copies it issued before have written shared memory. With a barrier of one arrival per
    thread, its phase completes when the whole group of copies has landed; a thread that
    waits for that phase, then fences the proxies (`proxy_fence`), may let the tensor cores
    read the slot, without a CTA barrier.

    ```mlir
    kiln_gpu.async_arrive %full[%slot] : !kiln_gpu.mbarriers<3>
    ```
  }];
  let arguments = (ins KilnGPU_MBarriersType:$barriers, I32:$slot);
  let assemblyFormat = "$barriers `[` $slot `]` attr-dict `:` type($barriers)";
}

def KilnGPU_ProxyFenceOp : Op<KilnGPU_Dialect, "proxy_fence",
    [MemoryEffects<[MemRead<DefaultResource>, MemWrite<DefaultResource>]>]> {
  let summary = "order this thread's view of shared memory before its tensor core reads";
  let description = [{
    fence.proxy.async.shared::cta: what this thread sees of shared memory (the async copies a
    barrier wait made visible to it) is seen by the wgmmas it issues next.

    ```mlir
    kiln_gpu.proxy_fence
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def KilnGPU_MBarrierExpectOp : Op<KilnGPU_Dialect, "mbarrier_expect",
    [MemoryEffects<[MemWrite<DefaultResource>]>]> {
  let summary = "the arrival that expects `bytes` of TMA copies on barrier `slot`";
  let description = [{
    Where `pred` holds, one thread arrives on barrier `slot` expecting `bytes` bytes
    (mbarrier.arrive.expect_tx): its phase completes once the copies issued for this slot have
    written them. Issued before the copies of its group. With `no_arrive` it only expects the
    bytes (mbarrier.expect_tx): where every thread's cp.async copies of the group arrive on
    the barrier too, those arrivals are its count, and the expectation comes before thread
    0's own.

    ```mlir
    kiln_gpu.mbarrier_expect %bars[%slot], %pred {bytes = 32768 : i32} : !kiln_gpu.mbarriers<4>
    kiln_gpu.mbarrier_expect %bars[%slot], %pred {bytes = 32768 : i32, no_arrive}
        : !kiln_gpu.mbarriers<3>
    ```
  }];
  let arguments = (ins KilnGPU_MBarriersType:$barriers, I32:$slot, I1:$pred,
                       ConfinedAttr<I32Attr, [IntMinValue<1>]>:$bytes, UnitAttr:$no_arrive);
  let assemblyFormat = "$barriers `[` $slot `]` `,` $pred attr-dict `:` type($barriers)";
}

def KilnGPU_MBarrierWaitOp : Op<KilnGPU_Dialect, "mbarrier_wait",
    [MemoryEffects<[MemRead<DefaultResource>, MemWrite<DefaultResource>]>]> {
  let summary = "wait until barrier `slot` has completed the phase of parity `phase`";
  let description = [{
    Every thread spins on mbarrier.try_wait.parity: afterwards the copies of that phase are
    visible to it and to the tensor cores. With `pred`, only thread 0 waits, and only where
    `pred` holds (the thread that issues the TMA copies waits until every warp is done with
    the slot they overwrite). With `whole_warp` (and `pred`), warp 0 waits, all its lanes,
    behind a branch on the warp id read from lane 0, which ptxas knows to be warp-uniform: a
    spin loop behind thread 0's branch in a loop whose last dot runs on across the back edge
    made ptxas build that loop's wgmma descriptors in vector registers, moved to uniform ones
    before every wgmma (45 R2UR an iteration of FlashAttention-3's order at D 128, against 2).

    ```mlir
    kiln_gpu.mbarrier_wait %full[%slot], %phase : !kiln_gpu.mbarriers<4>
    kiln_gpu.mbarrier_wait %empty[%slot], %phase if %pred : !kiln_gpu.mbarriers<4>
    kiln_gpu.mbarrier_wait %empty[%slot], %phase if %pred {whole_warp} : !kiln_gpu.mbarriers<4>
    ```
  }];
  let arguments = (ins KilnGPU_MBarriersType:$barriers, I32:$slot, I32:$phase,
                       Optional<I1>:$pred, UnitAttr:$whole_warp);
  let assemblyFormat = [{
    $barriers `[` $slot `]` `,` $phase (`if` $pred^)? attr-dict `:` type($barriers)
  }];
  let hasVerifier = 1;
}

def KilnGPU_TmaCopyOp : Op<KilnGPU_Dialect, "tma_copy",
    [MemoryEffects<[MemRead<DefaultResource>, MemWrite<DefaultResource>]>]> {
  let summary = "copy a block of a tensor descriptor into a ring slot with the TMA";
  let description = [{
    Where `pred` holds, thread 0 copies the block at `coords` (outermost first) of the tensor
    `desc` maps into slot `slot` of `buffer`, in the slot's wgmma layout (the boxes of
    `kiln::rt::getTensorMapBox`: column strips of the swizzle width, whole blocks of up to
    256 rows), completing on barrier `slot` of `barriers`. Elements outside the tensor are
    written as zero. A tensor of more dimensions than the slot (up to 5) is copied in blocks
    that are 1 along the outer ones (an expert's [1, N, K] of [E, N, K] weights): `coords`
    has one more coordinate for each.

    ```mlir
    kiln_gpu.tma_copy %desc[%i, %k], %a[%slot], %bars, %pred
        : !kiln.tensormap, !kiln_gpu.shared<[4, 128, 64], f16>, !kiln_gpu.mbarriers<4>
    kiln_gpu.tma_copy %w[%e, %n, %k], %b[%slot], %bars, %pred
        : !kiln.tensormap, !kiln_gpu.shared<[3, 256, 64], f16>, !kiln_gpu.mbarriers<3>
    ```
  }];
  let arguments = (ins KilnGPU_TensorMap:$desc, Variadic<I32>:$coords,
                       KilnGPU_SharedBufferType:$buffer, I32:$slot,
                       KilnGPU_MBarriersType:$barriers, I1:$pred);
  let assemblyFormat = [{
    $desc `[` $coords `]` `,` $buffer `[` $slot `]` `,` $barriers `,` $pred attr-dict `:`
    type($desc) `,` type($buffer) `,` type($barriers)
  }];
  let hasVerifier = 1;
}

def KilnGPU_TmaStoreOp : Op<KilnGPU_Dialect, "tma_store",
    [MemoryEffects<[MemRead<DefaultResource>, MemWrite<DefaultResource>]>]> {
  let summary = "store a tile through a tensor descriptor via shared memory and the TMA";
  let description = [{
    Every thread writes the elements of `value` it owns into `buffer` (one slot, contiguous
    along the block's last dimension in swizzled strips, as a ring of B), the program
    synchronizes, and thread 0 copies the block to `coords` of the tensor `desc` maps with
    cp.async.bulk.tensor (elements outside the tensor are not written), then waits until the
    copies have read the buffer.

    ```mlir
    kiln_gpu.tma_store %desc[%i, %j], %c, %buf
        : !kiln.tensormap, tensor<128x256xf16>, !kiln_gpu.shared<[1, 128, 256], f16>
    ```
  }];
  let arguments = (ins KilnGPU_TensorMap:$desc, Variadic<I32>:$coords, AnyRankedTensor:$value,
                       KilnGPU_SharedBufferType:$buffer);
  let assemblyFormat = [{
    $desc `[` $coords `]` `,` $value `,` $buffer attr-dict `:` type($desc) `,` type($value) `,`
    type($buffer)
  }];
}

def KilnGPU_BarrierOp : Op<KilnGPU_Dialect, "barrier",
    [MemoryEffects<[MemRead<DefaultResource>, MemWrite<DefaultResource>]>]> {
  let summary = "synchronize the program's threads (bar.sync)";
  let description = [{
    Orders every thread's earlier shared-memory accesses (and the reads of wgmma groups it has
    waited for) before any thread's later ones: a loop with TMA-filled rings issues its next
    copies after it, into slots every warp has finished reading.

    ```mlir
    kiln_gpu.barrier
    ```
  }];
  let assemblyFormat = "attr-dict";
}

def KilnGPU_NamedBarrierOp : Op<KilnGPU_Dialect, "named_barrier",
    [MemoryEffects<[MemRead<DefaultResource>, MemWrite<DefaultResource>]>]> {
  let summary = "wait at, or arrive on, named barrier `id` of `threads` threads";
  let description = [{
    Hardware barrier `id` (0-15) completes once `threads` threads have reached it: without
    `arrive` the executing warp waits there (bar.sync), with `arrive` it counts itself and
    goes on (bar.arrive). `threads` is a multiple of the warp size, at most 1024. Two
    consumer warpgroups take turns at the tensor cores through a pair of them
    (-kiln-warp-specialize's ping-pong): each waits at its own before it issues its dots and
    arrives on the other's after; `id` is then computed from the warp id.

    ```mlir
    kiln_gpu.named_barrier %id, 256
    kiln_gpu.named_barrier %other, 256 arrive
    ```
  }];
  let arguments = (ins I32:$id, I32Attr:$threads, UnitAttr:$arrive);
  let assemblyFormat = "$id `,` $threads (`arrive` $arrive^)? attr-dict";
  let hasVerifier = 1;
}

def KilnGPU_WarpIdOp : Op<KilnGPU_Dialect, "warp_id", [Pure]> {
  let summary = "the warp's index in the program (thread id / 32, read once from lane 0)";
  let description = [{
    The index of the executing warp among the program's warps, read at the kernel's entry
    from lane 0 so that ptxas knows it to be warp-uniform: a branch on it (a warp-specialized
    kernel's roles) keeps the code around it on the uniform datapath.

    ```mlir
    %w = kiln_gpu.warp_id : i32
    ```
  }];
  let results = (outs I32:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def KilnGPU_SetMaxRegistersOp : Op<KilnGPU_Dialect, "set_max_registers",
    [MemoryEffects<[MemRead<DefaultResource>, MemWrite<DefaultResource>]>]> {
  let summary = "change the executing warpgroup's registers per thread (setmaxnreg)";
  let description = [{
    Every warp of a warpgroup executes it (setmaxnreg.sync.aligned): with `increase`, the
    warpgroup waits until the program's pool has `count` registers per thread for it; without,
    it gives those above `count` back. A warp-specialized kernel's producer warpgroup, which
    only issues copies, gives registers to the consumers that run the dots. `count` is 24 to
    256, a multiple of 8 (PTX ISA, setmaxnreg).

    ```mlir
    kiln_gpu.set_max_registers 40
    kiln_gpu.set_max_registers 232 increase
    ```
  }];
  let arguments = (ins I32Attr:$count, UnitAttr:$increase);
  let assemblyFormat = "$count (`increase` $increase^)? attr-dict";
  let hasVerifier = 1;
}

def KilnGPU_SharedDotOp : Op<KilnGPU_Dialect, "shared_dot",
    [MemoryEffects<[MemRead<DefaultResource>]>, AllTypesMatch<["c", "result"]>,
     AttrSizedOperandSegments]> {
  let summary = "c + a @ b with B (and A, or A in registers) read from slots of shared rings";
  let description = [{
    The dot of `kiln.dot` whose operands were copied to shared memory by `async_copy`: B from
    slot `b_slot` of `b` (K x N), A from slot `a_slot` of `a` (M x K) or, when `a` is a tile,
    from the registers of that tile (as flash attention's probabilities; it takes the
    accumulator layout of an M x K dot, which is wgmma's A fragment): f16, bf16 or fp8
    (f8E4M3FN, f8E5M2) operands with f32 accumulators, or int8 operands with i32 accumulators
    (8-bit: A from a ring and both rings K-major, the only layout wgmma reads them in).
    After issuing its tensor-core work the dot waits until at most `pending` of the program's
    earlier shared_dots are still running: with `pending = 0` its result is ready; with 1 the
    result may only feed the next shared_dot (as its `c`) or a `dot_wait`, and the previous
    dot's operand slots may be overwritten once every thread has passed it; with n > 1 (a
    warpgroup that hands the tensor cores to the other as soon as its dots are issued) it
    waits for none of the n - 1 dots issued before it either. A dot left running
    with A in registers needs those registers unchanged until a later wait retires it (the
    pipelining pass only defers such a dot when its A is computed from an earlier dot's
    result, whose wait comes first).
    With `accumulate` false the product is not added to C (the result is a @ b; wgmma's
    scale-d): a loop that restarts its accumulator at zero now and then (a flattened
    persistent matmul, at each new tile) keeps C's registers chained from dot to dot.
    With `b_transposed` B is the transpose of the ring's slot (N x K): two dots of a loop read
    one loaded block, one as it is and one transposed (tutorial 06's backward: k @ qT and
    ds @ qT^T), from one ring; wgmma reads the slot with the other major-ness (its bytes serve
    both views). wgmma only (the mma.sync path reads each ring one way).

    ```mlir
    %d = kiln_gpu.shared_dot %a[%i], %b[%i], %c
        : !kiln_gpu.shared<[3, 128, 64], f16>, !kiln_gpu.shared<[3, 64, 128], f16>,
          tensor<128x128xf32>
    %o = kiln_gpu.shared_dot %p, %v[%i], %acc
        : tensor<128x64xf16>, !kiln_gpu.shared<[3, 64, 128], f16>, tensor<128x128xf32>
    %e = kiln_gpu.shared_dot %a[%i], %b[%i], %acc accumulate %notFirst
        : !kiln_gpu.shared<[3, 128, 64], f16>, !kiln_gpu.shared<[3, 64, 128], f16>,
          tensor<128x128xf32>
    %t = kiln_gpu.shared_dot %ds, %b[%i], %acc2 {b_transposed}
        : tensor<128x128xf16>, !kiln_gpu.shared<[3, 64, 128], f16>, tensor<128x64xf32>
    ```
  }];
  let arguments = (ins AnyTypeOf<[KilnGPU_SharedBufferType, AnyRankedTensor]>:$a,
                       Optional<I32>:$a_slot, KilnGPU_SharedBufferType:$b, I32:$b_slot,
                       AnyRankedTensor:$c, Optional<I1>:$accumulate,
                       DefaultValuedAttr<ConfinedAttr<I32Attr, [IntMinValue<0>, IntMaxValue<7>]>,
                                         "0">:$pending,
                       UnitAttr:$b_transposed);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $a (`[` $a_slot^ `]`)? `,` $b `[` $b_slot `]` `,` $c (`accumulate` $accumulate^)? attr-dict
    `:` type($a) `,` type($b) `,` type($c)
  }];
  let hasVerifier = 1;
}

def KilnGPU_DotWaitOp : Op<KilnGPU_Dialect, "dot_wait",
    [MemoryEffects<[MemRead<DefaultResource>, MemWrite<DefaultResource>]>,
     AllTypesMatch<["src", "result"]>]> {
  let summary = "the accumulators of shared_dots still running, once they are done";
  let description = [{
    Waits until at most `pending` of the warpgroup's shared_dots are still running
    (wgmma.wait_group `pending`); they complete in the order they were issued, so with
    `pending` = n the dot that produced `src` must have been issued before the last n. The
    result is `src` with its registers final.

    ```mlir
    %done = kiln_gpu.dot_wait %acc : tensor<128x128xf32>
    // %qk's dot was issued before one more that may keep running
    %s = kiln_gpu.dot_wait %qk {pending = 1 : i32} : tensor<128x128xf32>
    ```
  }];
  let arguments = (ins AnyRankedTensor:$src,
                       DefaultValuedAttr<ConfinedAttr<I32Attr, [IntMinValue<0>, IntMaxValue<7>]>,
                                         "0">:$pending);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = "$src attr-dict `:` type($src)";
}

#endif // KILN_GPU_DIALECT
