//===- DotLayouts.h - Which engine runs a dot, and its layouts --*- C++ -*-===//
//
// This file declares the decisions about a kiln.dot that both the layout passes and the
// lowering read, so that no pass needs an LLVM-lowering header: which tensor-core engine can
// run it (mma.sync, Hopper's wgmma), the accumulator layouts each engine takes, and the
// kiln_gpu attributes the passes leave for the lowering (TMA box rows, dynamic shared memory,
// A operands invariant in a loop, shared ring slot sizes). One name each, saying what it
// decides.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILNGPU_IR_DOTLAYOUTS_H
#define KILN_DIALECT_KILNGPU_IR_DOTLAYOUTS_H

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Dialect/KilnGPU/IR/Dialect.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/ArrayRef.h"

#include <algorithm>
#include <optional>

namespace kiln {

/// Shared memory the operands of a wgmma dot staged outside the rings may take together
/// (128 KiB: a 128x256x128 fp16 dot's 96 KiB fits, and rings or scratch keep at least 99 KiB
/// of a Hopper block's 227). Larger ones run on mma.sync, their operands in the scratch pool.
inline constexpr int64_t kWgmmaOperandBytes = 128 * 1024;

/// f8E4M3FN or f8E5M2 (Triton's fp8e4nv and fp8e5), as a scalar or a tile's element type.
inline bool isFp8Type(mlir::Type t) {
  return mlir::isa<mlir::Float8E4M3FNType, mlir::Float8E5M2Type>(mlir::getElementTypeOrSelf(t));
}

/// Whether mma.sync multiplies `op`'s types: f16/bf16 -> f32, f32 -> f32 as tf32
/// (input_precision tf32), int8 -> int32 with K a multiple of 32.
bool hasMmaSyncTypes(DotOp op);
/// Whether `op`'s accumulator takes a tensor-core layout (the mma.sync or the wgmma one):
/// mma.sync types, or fp8 (left by -kiln-expand-fp8 only for wgmma).
bool takesMmaAccumulatorLayout(DotOp op);
/// The accumulator layout of a dot on tensor cores for a tile of `shape` and `numWarps`: the
/// mma.sync C fragment pattern (sizePerThread [1, 2], threadsPerWarp [8, 4]), warps along M
/// first; null when the tile is too small for the warps (the dot then runs on CUDA cores).
gpu::BlockedEncodingAttr getMmaAccumulatorLayout(mlir::MLIRContext *ctx,
                                                 llvm::ArrayRef<int64_t> shape, unsigned numWarps);
/// The accumulator layout of a dot on Hopper's warpgroup tensor cores (wgmma): the mma
/// C-fragment lane pattern with all `numWarps` warps along M; null unless the warps form whole
/// warpgroups and M is a multiple of 16 rows per warp.
gpu::BlockedEncodingAttr
getWgmmaAccumulatorLayout(mlir::MLIRContext *ctx, llvm::ArrayRef<int64_t> shape, unsigned numWarps);
/// Whether wgmma multiplies A x B of element type `in` (both) into `acc`, K elements deep:
/// f16/bf16 -> f32 in k16 steps, fp8 (e4m3, e5m2) -> f32 and int8 -> int32 in k32 steps.
bool wgmmaSupports(mlir::Type in, mlir::Type acc, int64_t K);
/// Whether `op`'s types and sizes fit wgmma (wgmmaSupports, one input type, operands within
/// kWgmmaOperandBytes); the layout and the target decide the rest (lowersToWgmma).
bool fitsWgmma(DotOp op);
/// Whether `op` lowers to wgmma: it fits, its accumulator has the warpgroup layout, and the
/// module is compiled for sm_90a.
bool lowersToWgmma(DotOp op);

/// The dimension of a 2-D `tile` along which every dot reading it reduces (its K): 1 where a
/// dot reads it as A, 0 as B, the other one where the dot reads it through a 2-D transpose
/// (kiln.trans, order [1, 0]); none when no dot reads it, one reads it as C or as both A and B,
/// dots disagree, or another op reads it. wgmma reads 8-bit operands only K-major and the TMA
/// copies a block as it is, so an 8-bit block goes to the TMA only where this is the block's
/// contiguous dimension.
std::optional<int64_t> getDotReductionDim(mlir::Value tile);

/// Elements per row of a dot operand of K elements of `elemBytes` each in shared memory
/// (mma.sync path): K and a pad of 16 bytes (at least 8 elements) after it, so that the 8
/// rows of a fragment load start in different banks.
inline int64_t getDotSharedStride(int64_t K, int64_t elemBytes) {
  return K + std::max<int64_t>(8, 16 / elemBytes);
}

/// Attribute of a kiln.dot (set by -kiln-assign-layouts): its A operand is defined outside the
/// loop the dot is in, so the wgmma lowering stores A to shared memory once, not per iteration.
inline constexpr llvm::StringLiteral kInvariantAAttr = "kiln_gpu.invariant_a";
/// Byte offset of a kInvariantAAttr wgmma dot's operand buffer in the shared pool of such
/// buffers (set by the LLVM conversion's planning: dots of one A share it, A values live at
/// the same time get disjoint bytes).
inline constexpr llvm::StringLiteral kWgmmaBufferOffsetAttr = "kiln_gpu.wgmma_buffer_offset";
/// Module attribute: bytes of dynamic shared memory the kernel needs at launch (set by
/// -kiln-convert-to-llvm when shared rings exist).
inline constexpr llvm::StringLiteral kDynamicSharedAttr = "kiln_gpu.dynamic_shared";
/// Module attribute (unit): the kernel copies tiles into shared memory with cp.async (rings
/// of dot operands loaded through pointers), set by -kiln-convert-to-llvm. Its PTX is then
/// generated without LLVM's loop strength reduction (emitPTX).
inline constexpr llvm::StringLiteral kCpAsyncCopiesAttr = "kiln_gpu.cp_async_copies";
/// Module attribute (i32 array, one per kernel argument): the rows of the TMA boxes copied
/// through a tensor map argument, 0 for the others (-kiln-pipeline-dot-operands).
inline constexpr llvm::StringLiteral kTmaBoxRowsAttr = "kiln_gpu.tma_box_rows";
/// Attribute of a kiln_gpu.local_alloc: its byte offset in the dynamic shared memory.
inline constexpr llvm::StringLiteral kSharedOffsetAttr = "kiln_gpu.offset";
/// Byte size of one slot of a shared ring (slots are 1024-byte aligned for the swizzle).
int64_t getSharedSlotBytes(gpu::SharedBufferType type);

} // namespace kiln

#endif // KILN_DIALECT_KILNGPU_IR_DOTLAYOUTS_H
