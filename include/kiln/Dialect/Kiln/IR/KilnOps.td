//===- KilnOps.td - Operations of the kiln tile dialect --------*- tablegen -*-===//
//
// This file defines the operations of Kiln's layout-free tile IR. Each op says what it takes,
// what it gives and, through traits and verifiers, which combinations are illegal.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_OPS
#define KILN_OPS

include "kiln/Dialect/Kiln/IR/KilnDialect.td"
include "kiln/Dialect/Kiln/IR/KilnTypes.td"
include "kiln/Dialect/Kiln/IR/KilnAttrs.td"
include "mlir/IR/OpBase.td"
include "mlir/IR/CommonAttrConstraints.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/ControlFlowInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

/// Global memory, the resource loads, stores and atomics read and write.
def Kiln_GlobalMemory : Resource<"::kiln::GlobalMemory">;

//===----------------------------------------------------------------------===//
// Grid
//===----------------------------------------------------------------------===//

class Kiln_GridOp<string mnemonic> : Kiln_Op<mnemonic, [Pure]> {
  let arguments = (ins Kiln_ProgramDim:$axis);
  let results = (outs I32:$result);
  let assemblyFormat = "$axis attr-dict `:` type($result)";
}

def Kiln_ProgramIdOp : Kiln_GridOp<"program_id"> {
  let summary = "index of this program along a grid axis";
  let description = [{
    The coordinate of the running block program in the launch grid.

    ```mlir
    %pid = kiln.program_id x : i32
    ```
  }];
}

def Kiln_NumProgramsOp : Kiln_GridOp<"num_programs"> {
  let summary = "number of programs along a grid axis";
  let description = [{
    The extent of the launch grid along `axis`.

    ```mlir
    %n = kiln.num_programs y : i32
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Tile creation and shape manipulation
//===----------------------------------------------------------------------===//

def Kiln_MakeRangeOp : Kiln_Op<"make_range", [Pure]> {
  let summary = "the integers start, start+1, ..., end-1 as a 1-D tile";
  let description = [{
    `end - start` must be a power of two and equal the tile's length.

    ```mlir
    %r = kiln.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32>
    ```
  }];
  let arguments = (ins I32Attr:$start, I32Attr:$end);
  let results = (outs RankedTensorOf<[I32]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Kiln_SplatOp : Kiln_Op<"splat", [Pure,
    TypesMatchWith<"source matches the tile's element type", "result", "src",
                   "::llvm::cast<::mlir::RankedTensorType>($_self).getElementType()">]> {
  let summary = "a tile filled with one scalar";
  let description = [{
    ```mlir
    %t = kiln.splat %x : tensor<128xf32>
    ```
  }];
  let arguments = (ins Kiln_Scalar:$src);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$src attr-dict `:` type($result)";
  let hasFolder = 1;
}

def Kiln_BroadcastOp : Kiln_Op<"broadcast", [Pure, SameOperandsAndResultElementType]> {
  let summary = "stretch size-1 dimensions of a tile";
  let description = [{
    Every dimension of the source is either equal to the result's or 1.

    ```mlir
    %b = kiln.broadcast %a : tensor<1x64xf32> -> tensor<32x64xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$src);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Kiln_ExpandDimsOp : Kiln_Op<"expand_dims", [Pure, SameOperandsAndResultElementType]> {
  let summary = "insert a size-1 dimension at `axis`";
  let description = [{
    The Python spelling is `x[:, None]` (axis 1) or `x[None, :]` (axis 0).

    ```mlir
    %e = kiln.expand_dims %r {axis = 1 : i32} : tensor<64xi32> -> tensor<64x1xi32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$src, I32Attr:$axis);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
  let hasCanonicalizer = 1;
}

def Kiln_ReshapeOp : Kiln_Op<"reshape", [Pure, SameOperandsAndResultElementType]> {
  let summary = "view a tile with another shape of the same size";
  let description = [{
    With `allow_reorder`, the compiler may also permute the elements (Triton's
    `can_reorder=True`), which is cheaper when only a reduction follows.

    ```mlir
    %r = kiln.reshape %a : tensor<8x16xf32> -> tensor<128xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$src, UnitAttr:$allow_reorder);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$src (`allow_reorder` $allow_reorder^)? attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_TransOp : Kiln_Op<"trans", [Pure, SameOperandsAndResultElementType]> {
  let summary = "permute the dimensions of a tile";
  let description = [{
    Result dimension `i` is source dimension `order[i]`.

    ```mlir
    %t = kiln.trans %a {order = array<i32: 1, 0>} : tensor<16x32xf16> -> tensor<32x16xf16>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$src, DenseI32ArrayAttr:$order);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Pointers and memory
//===----------------------------------------------------------------------===//

def Kiln_AddPtrOp : Kiln_Op<"addptr", [Pure, AllTypesMatch<["ptr", "result"]>]> {
  let summary = "advance pointers by a number of elements";
  let description = [{
    `result = ptr + offset * sizeof(pointee)`, elementwise. Offsets are signed integers of the
    same shape as the pointers (scalars with scalars).

    ```mlir
    %q = kiln.addptr %p, %offs : tensor<128x!kiln.ptr<f32>>, tensor<128xi32>
    ```
  }];
  let arguments = (ins Kiln_PtrLike:$ptr, Kiln_IntLike:$offset);
  let results = (outs Kiln_PtrLike:$result);
  let assemblyFormat = "$ptr `,` $offset attr-dict `:` type($result) `,` type($offset)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Kiln_PtrCastOp : Kiln_Op<"ptr_cast", [Pure]> {
  let summary = "cast between pointers and 64-bit integers, or between pointer types";
  let description = [{
    Triton's pointer casts, elementwise with the address unchanged: a 64-bit integer to a
    pointer (`x.to(tl.pointer_type(T))`, tutorial 08 loads its operands' addresses), a pointer
    to a 64-bit integer, or a pointer to a pointer of another element type. Operand and
    result have one shape (scalars with scalars).

    ```mlir
    %p = kiln.ptr_cast %addr : i64 -> !kiln.ptr<f16>
    %q = kiln.ptr_cast %ps : tensor<64x!kiln.ptr<f16>> -> tensor<64x!kiln.ptr<f32>>
    %a = kiln.ptr_cast %ps : tensor<64x!kiln.ptr<f16>> -> tensor<64xi64>
    ```
  }];
  let arguments = (ins Kiln_Value:$src);
  let results = (outs Kiln_Value:$result);
  let assemblyFormat = "$src attr-dict `:` type($src) `->` type($result)";
  let hasVerifier = 1;
}

def Kiln_LoadOp : Kiln_Op<"load", [AttrSizedOperandSegments,
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>,
    TypesMatchWith<"result is the pointee type of ptr", "ptr", "result",
                   "::kiln::getPointeeType($_self)">,
    TypesMatchWith<"mask is an i1 of ptr's shape", "ptr", "mask",
                   "::kiln::getI1SameShape($_self)",
                   "($_op.getOperands().size() <= 1) || std::equal_to<>()">,
    TypesMatchWith<"other is the pointee type of ptr", "ptr", "other",
                   "::kiln::getPointeeType($_self)",
                   "($_op.getOperands().size() <= 2) || std::equal_to<>()">]> {
  let summary = "masked load from global memory";
  let description = [{
    Loads `*ptr` where `mask` is true; masked-out lanes never touch memory and yield `other`
    (undefined when `other` is absent). `other` requires `mask`.

    ```mlir
    %x = kiln.load %p, %m, %zero cache = cg evict = evict_first : tensor<128x!kiln.ptr<f32>>
    ```
  }];
  let arguments = (ins Kiln_PtrLike:$ptr, Optional<Kiln_BoolLike>:$mask,
                       Optional<Kiln_Value>:$other,
                       OptionalAttr<Kiln_CacheModifier>:$cache,
                       OptionalAttr<Kiln_EvictionPolicy>:$evict, UnitAttr:$isVolatile);
  let results = (outs Kiln_Value:$result);
  let assemblyFormat = [{
    $ptr (`,` $mask^)? (`,` $other^)? (`cache` `=` $cache^)? (`evict` `=` $evict^)?
    (`volatile` $isVolatile^)? attr-dict `:` type($ptr)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$ptr, "::mlir::Value":$mask, "::mlir::Value":$other)>];
  let hasVerifier = 1;
}

def Kiln_StoreOp : Kiln_Op<"store", [
    MemoryEffects<[MemWrite<Kiln_GlobalMemory>]>,
    TypesMatchWith<"value is the pointee type of ptr", "ptr", "value",
                   "::kiln::getPointeeType($_self)">,
    TypesMatchWith<"mask is an i1 of ptr's shape", "ptr", "mask",
                   "::kiln::getI1SameShape($_self)",
                   "($_op.getOperands().size() <= 2) || std::equal_to<>()">]> {
  let summary = "masked store to global memory";
  let description = [{
    Stores `value` to `*ptr` where `mask` is true; masked-out lanes never touch memory.

    ```mlir
    kiln.store %p, %x, %m : tensor<128x!kiln.ptr<f32>>
    ```
  }];
  let arguments = (ins Kiln_PtrLike:$ptr, Kiln_Value:$value, Optional<Kiln_BoolLike>:$mask,
                       OptionalAttr<Kiln_CacheModifier>:$cache,
                       OptionalAttr<Kiln_EvictionPolicy>:$evict);
  let assemblyFormat = [{
    $ptr `,` $value (`,` $mask^)? (`cache` `=` $cache^)? (`evict` `=` $evict^)? attr-dict
    `:` type($ptr)
  }];
  let hasVerifier = 1;
}

def Kiln_DescriptorLoadOp : Kiln_Op<"descriptor_load", [AttrSizedOperandSegments,
    MemoryEffects<[MemRead<Kiln_GlobalMemory>]>]> {
  let summary = "load a block of a tensor through its tensor descriptor";
  let description = [{
    Triton's `desc.load(offsets)`: the block of the result's shape whose first element is at
    `offsets` in a row-major tensor of `shape` at `base` (`strides` in elements for every
    dimension but the last, which is contiguous). Elements outside the tensor read as zero.
    `desc` is the tensor map the host encoded for the same tensor: sm_90 copies a block with
    the tensor memory accelerator (see -kiln-pipeline-dot-operands); every other use becomes a
    masked load (-kiln-lower-descriptors).

    ```mlir
    %t = kiln.descriptor_load %desc, %base[%i, %j] shape [%m, %k] strides [%s]
        : !kiln.ptr<f16> -> tensor<128x64xf16>
    ```
  }];
  let arguments = (ins Kiln_TensorMap:$desc, Kiln_Ptr:$base, Variadic<I32>:$offsets,
                       Variadic<I32>:$shape, Variadic<I64>:$strides);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $desc `,` $base `[` $offsets `]` `shape` `[` $shape `]` `strides` `[` $strides `]` attr-dict
    `:` type($base) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Kiln_DescriptorStoreOp : Kiln_Op<"descriptor_store", [AttrSizedOperandSegments,
    MemoryEffects<[MemWrite<Kiln_GlobalMemory>]>]> {
  let summary = "store a block of a tensor through its tensor descriptor";
  let description = [{
    Triton's `desc.store(offsets, value)`: writes `value` to the block whose first element is
    at `offsets` (see `kiln.descriptor_load`); elements outside the tensor are not written.

    ```mlir
    kiln.descriptor_store %desc, %base[%i, %j], %v shape [%m, %n] strides [%s]
        : !kiln.ptr<f16>, tensor<128x128xf16>
    ```
  }];
  let arguments = (ins Kiln_TensorMap:$desc, Kiln_Ptr:$base, Variadic<I32>:$offsets,
                       Kiln_Tensor:$value, Variadic<I32>:$shape, Variadic<I64>:$strides);
  let assemblyFormat = [{
    $desc `,` $base `[` $offsets `]` `,` $value `shape` `[` $shape `]` `strides` `[` $strides `]`
    attr-dict `:` type($base) `,` type($value)
  }];
  let hasVerifier = 1;
}

def Kiln_AtomicRMWOp : Kiln_Op<"atomic_rmw", [
    MemoryEffects<[MemRead<Kiln_GlobalMemory>, MemWrite<Kiln_GlobalMemory>]>,
    TypesMatchWith<"value is the pointee type of ptr", "ptr", "val",
                   "::kiln::getPointeeType($_self)">,
    TypesMatchWith<"result is the pointee type of ptr", "ptr", "result",
                   "::kiln::getPointeeType($_self)">,
    TypesMatchWith<"mask is an i1 of ptr's shape", "ptr", "mask",
                   "::kiln::getI1SameShape($_self)",
                   "($_op.getOperands().size() <= 2) || std::equal_to<>()">]> {
  let summary = "atomic read-modify-write; returns the old values";
  let description = [{
    ```mlir
    %old = kiln.atomic_rmw fadd, acq_rel, gpu, %p, %v, %m : tensor<64x!kiln.ptr<f32>>
    ```
  }];
  let arguments = (ins Kiln_RMWKind:$kind, Kiln_MemSemantic:$sem, Kiln_MemScope:$scope,
                       Kiln_PtrLike:$ptr, Kiln_Value:$val, Optional<Kiln_BoolLike>:$mask);
  let results = (outs Kiln_Value:$result);
  let assemblyFormat = [{
    $kind `,` $sem `,` $scope `,` $ptr `,` $val (`,` $mask^)? attr-dict `:` type($ptr)
  }];
  let hasVerifier = 1;
}

def Kiln_AtomicCASOp : Kiln_Op<"atomic_cas", [
    MemoryEffects<[MemRead<Kiln_GlobalMemory>, MemWrite<Kiln_GlobalMemory>]>,
    TypesMatchWith<"cmp is the pointee type of ptr", "ptr", "cmp",
                   "::kiln::getPointeeType($_self)">,
    TypesMatchWith<"val is the pointee type of ptr", "ptr", "val",
                   "::kiln::getPointeeType($_self)">,
    TypesMatchWith<"result is the pointee type of ptr", "ptr", "result",
                   "::kiln::getPointeeType($_self)">]> {
  let summary = "atomic compare-and-swap; returns the old values";
  let description = [{
    ```mlir
    %old = kiln.atomic_cas acq_rel, gpu, %p, %cmp, %v : !kiln.ptr<i32>
    ```
  }];
  let arguments = (ins Kiln_MemSemantic:$sem, Kiln_MemScope:$scope, Kiln_PtrLike:$ptr,
                       Kiln_Value:$cmp, Kiln_Value:$val);
  let results = (outs Kiln_Value:$result);
  let assemblyFormat = "$sem `,` $scope `,` $ptr `,` $cmp `,` $val attr-dict `:` type($ptr)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Dot, reductions, scans
//===----------------------------------------------------------------------===//

def Kiln_DotOp : Kiln_Op<"dot", [Pure, AllTypesMatch<["c", "result"]>]> {
  let summary = "tile matrix product with accumulator: result = a * b + c";
  let description = [{
    `a` is MxK, `b` is KxN, `c` and the result MxN. Supported input/accumulator pairs:
    f16 x f16 -> f16 | f32, bf16 x bf16 -> f32, f32 x f32 -> f32 (through `inputPrecision`:
    tf32 by default as in Triton, `ieee` for exact fp32), fp8 x fp8 -> f32 (f8E4M3FN and
    f8E5M2 in any pairing, as Triton; -kiln-expand-fp8 widens a mixed pair to f16, exactly),
    i8 x i8 -> i32.

    ```mlir
    %d = kiln.dot %a, %b, %c inputPrecision = ieee
        : tensor<64x32xf32> * tensor<32x64xf32> -> tensor<64x64xf32>
    ```
  }];
  let arguments = (ins Kiln_Tensor:$a, Kiln_Tensor:$b, Kiln_Tensor:$c,
                       DefaultValuedAttr<Kiln_InputPrecision, "::kiln::InputPrecision::tf32">:$inputPrecision,
                       DefaultValuedAttr<I32Attr, "0">:$maxNumImpreciseAcc);
  let results = (outs Kiln_Tensor:$result);
  let assemblyFormat = [{
    $a `,` $b `,` $c (`inputPrecision` `=` $inputPrecision^)? attr-dict
    `:` type($a) `*` type($b) `->` type($result)
  }];
  let hasVerifier = 1;
  let hasCanonicalizer = 1;
}

def Kiln_ReduceOp : Kiln_Op<"reduce", [Pure, SingleBlock]> {
  let summary = "reduce tiles along one axis with a combine region";
  let description = [{
    The region combines two partial results of every operand (`2 * N` scalar arguments: the
    N accumulators, then the N new values) and yields N scalars with `kiln.reduce.return`.
    Each result has its operand's shape without `axis`; a 1-D operand reduces to a scalar.

    ```mlir
    %s = kiln.reduce(%x) axis = 0 {
    ^bb0(%a: f32, %b: f32):
      %t = arith.addf %a, %b : f32
      kiln.reduce.return %t : f32
    } : (tensor<128xf32>) -> f32
    ```
  }];
  let arguments = (ins Variadic<Kiln_Tensor>:$srcs, I32Attr:$axis);
  let results = (outs Variadic<Kiln_Value>:$result);
  let regions = (region SizedRegion<1>:$combineOp);
  let assemblyFormat = [{
    `(` $srcs `)` `axis` `=` $axis $combineOp attr-dict `:` functional-type($srcs, $result)
  }];
  let hasRegionVerifier = 1;
}

def Kiln_ReduceReturnOp : Kiln_Op<"reduce.return",
    [Pure, Terminator, HasParent<"ReduceOp">, ReturnLike]> {
  let summary = "yield the combined values of a reduction step";
  let description = [{
    ```mlir
    kiln.reduce.return %t : f32
    ```
  }];
  let arguments = (ins Variadic<Kiln_Scalar>:$result);
  let assemblyFormat = "$result attr-dict `:` type($result)";
}

def Kiln_ScanOp : Kiln_Op<"scan", [Pure, SingleBlock]> {
  let summary = "inclusive prefix scan of tiles along one axis";
  let description = [{
    Combines like `kiln.reduce` but keeps every prefix; results have the operands' types.
    `reverse` scans from the end of the axis.

    ```mlir
    %c = kiln.scan(%x) axis = 0 {
    ^bb0(%a: i32, %b: i32):
      %t = arith.addi %a, %b : i32
      kiln.scan.return %t : i32
    } : (tensor<64xi32>) -> tensor<64xi32>
    ```
  }];
  let arguments = (ins Variadic<Kiln_Tensor>:$srcs, I32Attr:$axis, UnitAttr:$reverse);
  let results = (outs Variadic<Kiln_Tensor>:$result);
  let regions = (region SizedRegion<1>:$combineOp);
  let assemblyFormat = [{
    `(` $srcs `)` `axis` `=` $axis (`reverse` $reverse^)? $combineOp attr-dict
    `:` functional-type($srcs, $result)
  }];
  let hasRegionVerifier = 1;
}

def Kiln_ScanReturnOp : Kiln_Op<"scan.return",
    [Pure, Terminator, HasParent<"ScanOp">, ReturnLike]> {
  let summary = "yield the combined values of a scan step";
  let description = [{
    ```mlir
    kiln.scan.return %t : i32
    ```
  }];
  let arguments = (ins Variadic<Kiln_Scalar>:$result);
  let assemblyFormat = "$result attr-dict `:` type($result)";
}

//===----------------------------------------------------------------------===//
// Debugging
//===----------------------------------------------------------------------===//

def Kiln_PrintOp : Kiln_Op<"print", [MemoryEffects<[MemWrite<DefaultResource>]>]> {
  let summary = "device-side print (tl.device_print)";
  let description = [{
    ```mlir
    kiln.print " x: " hex %x : tensor<16xi32>
    ```
  }];
  let arguments = (ins StrAttr:$prefix, UnitAttr:$hex, Variadic<Kiln_Value>:$args);
  let assemblyFormat = "$prefix (`hex` $hex^)? ($args^ `:` type($args))? attr-dict";
}

def Kiln_AssertOp : Kiln_Op<"assert", [MemoryEffects<[MemWrite<DefaultResource>]>]> {
  let summary = "device-side assertion (tl.device_assert)";
  let description = [{
    Fails the kernel with `message` where `condition` is false.

    ```mlir
    kiln.assert %ok, "index out of range" : tensor<64xi1>
    ```
  }];
  let arguments = (ins Kiln_BoolLike:$condition, StrAttr:$message);
  let assemblyFormat = "$condition `,` $message attr-dict `:` type($condition)";
}

def Kiln_BarrierOp : Kiln_Op<"barrier", [MemoryEffects<[MemRead<DefaultResource>,
                                                   MemWrite<DefaultResource>]>]> {
  let summary = "a barrier of all threads of a program (tl.debug_barrier)";
  let description = [{
    Every thread of the program waits here until all have arrived, and memory written before
    it is visible after it (bar.sync 0 on the GPU). The CPU backend runs a program in one
    thread: there it is nothing.

    ```mlir
    kiln.barrier
    ```
  }];
  let assemblyFormat = "attr-dict";
}

//===----------------------------------------------------------------------===//
// External elementwise functions and hardware registers
//===----------------------------------------------------------------------===//

def Kiln_ExternElementwiseOp : Kiln_Op<"extern_elementwise", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "an external function (libdevice) applied element by element";
  let description = [{
    Calls `symbol` once per element: the operands and the result are scalars, or tiles of one
    shape. The Builder picks the symbol of the operands' dtypes (`__nv_asinf` for f32,
    `__nv_asin` for f64). On the GPU it is a call of the libdevice function, which the PTX
    emitter links and inlines; the CPU backend computes known libdevice symbols with vector
    code or the C math library, and rejects the others. Without `pure` the call may have side
    effects and is neither hoisted nor removed.

    ```mlir
    %y = kiln.extern_elementwise @__nv_asinf(%x) pure : (tensor<128xf32>) -> tensor<128xf32>
    %p = kiln.extern_elementwise @__nv_powif(%x, %n) pure : (f32, i32) -> f32
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$symbol, Variadic<Kiln_NumberLike>:$srcs,
                       UnitAttr:$pure);
  let results = (outs Kiln_NumberLike:$result);
  let assemblyFormat = [{
    $symbol `(` $srcs `)` (`pure` $pure^)? attr-dict `:` functional-type($srcs, $result)
  }];
  let hasVerifier = 1;
}

def Kiln_InlineAsmElementwiseOp : Kiln_Op<"inline_asm_elementwise", [
    DeclareOpInterfaceMethods<MemoryEffectsOpInterface>]> {
  let summary = "inline assembly applied to the elements of tiles (tl.inline_asm_elementwise)";
  let description = [{
    Runs `asm` (PTX on the GPU) once per `pack` elements of every operand; operands and
    results are scalars, or tiles of one shape (the Builder broadcasts them). `constraints`
    are LLVM's inline-asm constraints: first the outputs (`=r`, ...), result by result, then
    the inputs, operand by operand. A value of fewer than 32 bits with `pack` > 1 takes
    min(32 / bits, pack) elements per register (a vector), every other value one element per
    register; so a value takes ceil(pack / elements per register) registers of each
    invocation. Which elements an invocation gets is unspecified. Without `pure` the asm may
    have side effects and is neither hoisted nor removed. The CPU backend has no way to run
    it and rejects it.

    ```mlir
    %y = kiln.inline_asm_elementwise(%x, %x, %s) "shf.l.wrap.b32 $0, $1, $2, $3;", "=r,r,r,r"
        pure pack = 1 : (tensor<128xi32>, tensor<128xi32>, tensor<128xi32>) -> tensor<128xi32>
    ```
  }];
  let arguments = (ins StrAttr:$asm_string, StrAttr:$constraints, UnitAttr:$pure,
                       ConfinedAttr<I32Attr, [IntPositive]>:$pack, Variadic<Kiln_Value>:$srcs);
  let results = (outs Variadic<Kiln_Value>:$results);
  let assemblyFormat = [{
    `(` $srcs `)` $asm_string `,` $constraints (`pure` $pure^)? `pack` `=` $pack attr-dict
    `:` functional-type($srcs, $results)
  }];
  let hasVerifier = 1;
}

// Read and write effects: two reads are two reads (neither combined nor moved across each other).
def Kiln_GlobalTimerOp : Kiln_Op<"globaltimer", [MemoryEffects<[MemRead<DefaultResource>,
                                                                MemWrite<DefaultResource>]>]> {
  let summary = "a nanosecond clock (extra.cuda.globaltimer)";
  let description = [{
    The GPU's %globaltimer register (PTX ISA 10.18, a 64-bit nanosecond timer); on the CPU
    backend the host's real-time clock in nanoseconds. Each read may differ.

    ```mlir
    %t = kiln.globaltimer : i64
    ```
  }];
  let results = (outs I64:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Kiln_SmIdOp : Kiln_Op<"smid", [Pure]> {
  let summary = "the multiprocessor running this program (extra.cuda.smid)";
  let description = [{
    The GPU's %smid register (PTX ISA 10.7); on the CPU backend the host core the program
    runs on (sched_getcpu).

    ```mlir
    %sm = kiln.smid : i32
    ```
  }];
  let results = (outs I32:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
}

def Kiln_GridDependencyOp : Kiln_Op<"grid_dependency", [MemoryEffects<[MemRead<DefaultResource>,
                                                                 MemWrite<DefaultResource>]>]> {
  let summary = "programmatic dependent launch control (extra.cuda.gdc_wait, gdc_launch_dependents)";
  let description = [{
    `wait`: block until the grids this one depends on have completed and their memory is
    visible; `launch_dependents`: allow the dependent grid to launch. PTX griddepcontrol
    (PTX ISA 9.7.13.x) on sm_90 and later; nothing on older GPUs and on the CPU backend (which
    runs launches one after another).

    ```mlir
    kiln.grid_dependency wait
    kiln.grid_dependency launch_dependents
    ```
  }];
  let arguments = (ins Kiln_GridDependencyKind:$kind);
  let assemblyFormat = "$kind attr-dict";
}

#endif // KILN_OPS
