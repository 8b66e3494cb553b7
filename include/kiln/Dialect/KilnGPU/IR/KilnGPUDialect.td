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
  }];
  let parameters = (ins ArrayRefParameter<"unsigned">:$sizePerThread,
                        ArrayRefParameter<"unsigned">:$threadsPerWarp,
                        ArrayRefParameter<"unsigned">:$warpsPerCTA,
                        ArrayRefParameter<"unsigned">:$order);
  let assemblyFormat = [{
    `<` `{` `sizePerThread` `=` `[` $sizePerThread `]` `,`
            `threadsPerWarp` `=` `[` $threadsPerWarp `]` `,`
            `warpsPerCTA` `=` `[` $warpsPerCTA `]` `,` `order` `=` `[` $order `]` `}` `>`
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

#endif // KILN_GPU_DIALECT
