//===- Dialect.h - The kiln_gpu layout dialect ------------------*- C++ -*-===//
//
// This file declares the kiln_gpu dialect: blocked and slice layouts, convert_layout, and the
// layout queries the lowering uses (which elements a thread owns, and where they are).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_DIALECT_KILNGPU_IR_DIALECT_H
#define KILN_DIALECT_KILNGPU_IR_DIALECT_H

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <optional>

#include "kiln/Dialect/KilnGPU/IR/KilnGPUDialect.h.inc"

#define GET_ATTRDEF_CLASSES
#include "kiln/Dialect/KilnGPU/IR/KilnGPUAttrs.h.inc"

#define GET_TYPEDEF_CLASSES
#include "kiln/Dialect/KilnGPU/IR/KilnGPUTypes.h.inc"

#define GET_OP_CLASSES
#include "kiln/Dialect/KilnGPU/IR/KilnGPUOps.h.inc"

#include <algorithm>
#include <cstdint>

namespace kiln::gpu {
/// Module attribute: warps per program.
inline constexpr llvm::StringLiteral kNumWarpsAttr = "kiln_gpu.num_warps";
/// Module attribute (unit): the target has warpgroup MMA (wgmma, sm_90a), so dots on tensor
/// cores take the warpgroup accumulator layout and lower to wgmma.
inline constexpr llvm::StringLiteral kWgmmaAttr = "kiln_gpu.wgmma";
/// Module attribute (warp-specialized kernels, -kiln-warp-specialize): the warps a program is
/// launched with, the layouts' kNumWarpsAttr warps (the consumers) and a producer warpgroup.
inline constexpr llvm::StringLiteral kLaunchWarpsAttr = "kiln_gpu.launch_warps";
/// Module attribute beside kLaunchWarpsAttr: the consumer warps, warps 0 .. n - 1. Their
/// barriers are named barrier 1 over their threads, not bar.sync 0 over the program's.
inline constexpr llvm::StringLiteral kConsumerWarpsAttr = "kiln_gpu.consumer_warps";
/// Op attribute (warp-specialized kernels): the first warp of the warpgroup that executes
/// the op; its thread-0 or warp-0 work (a TMA copy, an expect_tx, a wait on an empty barrier)
/// goes to this warp's lane 0 or this warp.
inline constexpr llvm::StringLiteral kLeaderWarpAttr = "kiln_gpu.leader_warp";
/// Op attribute (unit, warp-specialized kernels): a barrier the op emits is over every thread
/// of the program (both roles reach it), not over the consumers only.
inline constexpr llvm::StringLiteral kAllThreadsAttr = "kiln_gpu.all_threads";
/// Threads per warp on NVIDIA GPUs (PTX ISA 5.2.2, "warp size").
inline constexpr unsigned kWarpSize = 32;
/// 32-bit registers of an SM (sm_90), which one program's warps share.
inline constexpr int64_t kRegistersPerSM = 65536;
/// Shared memory one block may use on the largest GPU Kiln targets (sm_90: 227 KiB), of the
/// 228 KiB an SM has, less 1 KiB the system reserves per block.
inline constexpr int64_t kMaxSharedBytes = 227 * 1024, kSharedBytesPerSM = 228 * 1024,
                         kSharedBytesReserved = 1024;

/// The registers per thread a program of `launchWarps` warps starts with when one program
/// takes the SM's register file: its share, at most 255, rounded down to 8 (the unit
/// setmaxnreg counts in). A warp-specialized kernel declares it (.maxnreg) so that ptxas
/// knows the count at entry that setmaxnreg changes; without it ptxas may ignore setmaxnreg
/// ("unable to determine register count at entry", C7508).
inline int64_t getEntryRegisters(unsigned launchWarps) {
  return std::min<int64_t>(255, kRegistersPerSM / int64_t(launchWarps * kWarpSize)) / 8 * 8;
}

/// The static position of one element a thread owns: per dimension of the tile, the
/// repetition index and the index inside the thread's sizePerThread block.
struct ElemPos {
  llvm::SmallVector<unsigned, 4> rep;
  llvm::SmallVector<unsigned, 4> elem;
};

/// The elements one thread owns of a tile of `shape` under `layout` (blocked or slice), in
/// register order: the fastest dimension of `order` varies fastest, sizePerThread blocks
/// innermost. Every thread owns the same number.
llvm::SmallVector<ElemPos> getThreadElements(mlir::Attribute layout, llvm::ArrayRef<int64_t> shape);
/// How a 2-D tile moves between two blocked layouts through shared memory in bands of
/// columns (planColumnBands): `count` bands of `width` columns, each row of a band
/// `rowStride` elements apart (the width and 16 bytes of padding, so that the 8 rows an mma
/// fragment store touches start in different banks and vector accesses stay aligned).
struct ColumnBands {
  int64_t width = 0;
  int64_t count = 0;
  int64_t rowStride = 0;
};
/// Bands for converting `src` to `dst` (both 2-D, blocked, integer or float elements, each
/// layout's tile within the shape) when the tile is wide enough for two or more bands of at
/// most 16 KiB each: every band is a whole number of both layouts' column periods, so which
/// band an element falls in is known from its register alone. None otherwise (the whole tile
/// then moves at once).
std::optional<ColumnBands> planColumnBands(mlir::RankedTensorType src, mlir::RankedTensorType dst);
/// Number of elements one thread holds.
unsigned getElemsPerThread(mlir::RankedTensorType type);
/// The blocked layout at the root of a (possibly nested) slice layout.
BlockedEncodingAttr getRootBlocked(mlir::Attribute layout);
/// The dimensions of the root blocked layout that a (nested) slice layout keeps, in order.
llvm::SmallVector<unsigned> getKeptDims(mlir::Attribute layout);
/// Order of the dimensions of `layout` fastest first (a slice drops its dimension).
llvm::SmallVector<unsigned> getOrder(mlir::Attribute layout);
/// Elements per thread along each dimension in one contiguous run.
llvm::SmallVector<unsigned> getSizePerThread(mlir::Attribute layout);
/// Warps that hold distinct elements along `axis` of a laid-out tile: a reduction with more
/// than one goes through shared memory (and a barrier).
unsigned getDistinctWarpsAlongAxis(mlir::RankedTensorType type, unsigned axis);
} // namespace kiln::gpu

#endif // KILN_DIALECT_KILNGPU_IR_DIALECT_H
