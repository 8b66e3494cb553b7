//===- DescriptorAccess.h - The pointers and mask of a descriptor block --===//
//
// The one definition of where the block of a tensor descriptor access is: element
// (i0, .., i{r-1}) of the block at `offsets` is at base + sum_d (offset_d + i_d) * stride_d
// (the last stride 1) and takes part where 0 <= offset_d + i_d < shape_d for every d.
// -kiln-lower-descriptors uses it for the accesses the TMA does not take (and
// -kiln-pipeline-dot-operands for a dot's A loaded once before its loop), and the frontend
// for the accesses of a descriptor the kernel built itself (tl.make_tensor_descriptor).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TRANSFORMS_DESCRIPTORACCESS_H
#define KILN_TRANSFORMS_DESCRIPTORACCESS_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"

namespace kiln {

class DescriptorLoadOp;

/// The shape of the tile a descriptor block of shape `block` is accessed as: `block` without
/// its unit dimensions (their one position is a scalar), [1] when every dimension is 1.
llvm::SmallVector<int64_t> getDescriptorTileShape(llvm::ArrayRef<int64_t> block);

/// The pointer tile and the in-bounds mask (both of getDescriptorTileShape of `blockType`'s
/// shape) of the block at `offsets` (i32) of the row-major tensor of `shape` (i32) at `base`
/// (a scalar pointer) with `strides` (i64, every dimension but the last).
std::pair<mlir::Value, mlir::Value>
emitDescriptorBlockAddress(mlir::OpBuilder &b, mlir::Location loc, mlir::RankedTensorType blockType,
                           mlir::Value base, mlir::ValueRange offsets, mlir::ValueRange shape,
                           mlir::ValueRange strides);

/// The masked kiln.load of that block (zero outside the tensor), reshaped from its tile to
/// `blockType` where they differ.
mlir::Value emitDescriptorBlockLoad(mlir::OpBuilder &b, mlir::Location loc,
                                    mlir::RankedTensorType blockType, mlir::Value base,
                                    mlir::ValueRange offsets, mlir::ValueRange shape,
                                    mlir::ValueRange strides);

/// The masked kiln.store of `value` (a block) at that block.
void emitDescriptorBlockStore(mlir::OpBuilder &b, mlir::Location loc, mlir::Value value,
                              mlir::Value base, mlir::ValueRange offsets, mlir::ValueRange shape,
                              mlir::ValueRange strides);

/// Replaces `load` by the masked kiln.load of its block (zero outside the tensor) and returns
/// that load's result; `load` is erased.
mlir::Value lowerDescriptorLoad(DescriptorLoadOp load);

} // namespace kiln

#endif // KILN_TRANSFORMS_DESCRIPTORACCESS_H
