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

/// The pointer tile and the in-bounds mask (both of `blockType`'s shape) of the block at
/// `offsets` (i32) of the row-major tensor of `shape` (i32) at `base` (a scalar pointer) with
/// `strides` (i64, every dimension but the last).
std::pair<mlir::Value, mlir::Value>
emitDescriptorBlockAddress(mlir::OpBuilder &b, mlir::Location loc, mlir::RankedTensorType blockType,
                           mlir::Value base, mlir::ValueRange offsets, mlir::ValueRange shape,
                           mlir::ValueRange strides);

/// Replaces `load` by the masked kiln.load of its block (zero outside the tensor) and returns
/// that load's result; `load` is erased.
mlir::Value lowerDescriptorLoad(DescriptorLoadOp load);

} // namespace kiln

#endif // KILN_TRANSFORMS_DESCRIPTORACCESS_H
