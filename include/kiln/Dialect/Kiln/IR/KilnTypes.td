//===- KilnTypes.td - Types and type constraints of kiln -------*- tablegen -*-===//
//
// The pointer type and the constraints that say which scalars, pointers and tiles an op takes.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TYPES
#define KILN_TYPES

include "kiln/Dialect/Kiln/IR/KilnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinTypes.td"

/// Scalars a tile may hold. fp8 (e4m3fn, e5m2) tiles are loaded, stored, converted and fed to
/// dots; -kiln-expand-fp8 lowers their conversions to integer arithmetic.
def Kiln_Float : AnyTypeOf<[F16, BF16, F32, F64, F8E4M3FN, F8E5M2], "floating-point">;
def Kiln_Int : AnyTypeOf<[I1, I8, I16, I32, I64], "integer">;

def Kiln_PtrType : TypeDef<Kiln_Dialect, "Pointer"> {
  let mnemonic = "ptr";
  let summary = "pointer to global memory";
  let description = [{
    A pointer to an element of type `pointeeType` in global memory (address space 1).

    ```mlir
    !kiln.ptr<f32>
    ```
  }];
  let parameters = (ins "::mlir::Type":$pointeeType);
  let assemblyFormat = "`<` $pointeeType `>`";
  let genVerifyDecl = 1;
}

def Kiln_Ptr : Type<CPred<"::llvm::isa<::kiln::PointerType>($_self)">, "kiln pointer",
                    "::kiln::PointerType">;

def Kiln_TensorMapType : TypeDef<Kiln_Dialect, "TensorMap"> {
  let mnemonic = "tensormap";
  let summary = "the tensor map of a tensor descriptor kernel parameter";
  let description = [{
    The 128-byte CUtensorMap the host encodes for a tensor descriptor argument (Triton's
    `TensorDescriptor`): the tile the tensor memory accelerator copies (its box and swizzle
    follow `kiln::getTensorMapBox`). Only a kernel parameter has this type; on the GPU it is a
    `.param .align 64 .b8 [128]` parameter that TMA copies read, elsewhere it is unused.

    ```mlir
    func.func @k(%desc: !kiln.tensormap, %base: !kiln.ptr<f16>)
    ```
  }];
}

def Kiln_TensorMap : Type<CPred<"::llvm::isa<::kiln::TensorMapType>($_self)">,
                          "kiln tensor map", "::kiln::TensorMapType">,
                     BuildableType<"::kiln::TensorMapType::get($_builder.getContext())">;

def Kiln_Scalar : AnyTypeOf<[Kiln_Float, Kiln_Int, Kiln_Ptr], "scalar">;
/// A tile: a ranked tensor with static dimensions, each a power of two.
class Kiln_TileOf<list<Type> allowed>
    : RankedTensorOf<allowed, [CPred<"::kiln::hasTileShape($_self)">], "tile">;
def Kiln_FloatTensor : Kiln_TileOf<[Kiln_Float]>;
def Kiln_IntTensor : Kiln_TileOf<[Kiln_Int]>;
def Kiln_BoolTensor : Kiln_TileOf<[I1]>;
def Kiln_PtrTensor : Kiln_TileOf<[Kiln_Ptr]>;
def Kiln_Tensor : Kiln_TileOf<[Kiln_Float, Kiln_Int, Kiln_Ptr]>;

def Kiln_IntLike : AnyTypeOf<[Kiln_Int, Kiln_IntTensor], "integer or integer tile">;
def Kiln_BoolLike : AnyTypeOf<[I1, Kiln_BoolTensor], "i1 or i1 tile">;
def Kiln_PtrLike : AnyTypeOf<[Kiln_Ptr, Kiln_PtrTensor], "pointer or pointer tile">;
def Kiln_Value : AnyTypeOf<[Kiln_Scalar, Kiln_Tensor], "scalar or tile">;
def Kiln_NumberLike : AnyTypeOf<[Kiln_Float, Kiln_Int, Kiln_FloatTensor, Kiln_IntTensor],
                                "number or number tile">;

#endif // KILN_TYPES
