//===- KilnToLLVM.h - Lowering laid-out tiles to LLVM -----------*- C++ -*-===//
//
// This file declares the type converter and pattern sets of -kiln-convert-to-llvm, and the
// helpers the patterns share to move between a tile and the per-thread registers holding it.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CONVERSION_KILNTOLLVM_H
#define KILN_CONVERSION_KILNTOLLVM_H

#include "kiln/Analysis/AxisInfo.h"
#include "kiln/Analysis/SharedScratch.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Dialect/KilnGPU/IR/Dialect.h"
#include "kiln/Dialect/KilnGPU/IR/DotLayouts.h"
#include "kiln/Target/TargetInfo.h"
#include "mlir/Conversion/LLVMCommon/TypeConverter.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln {

/// LLVM type converter for Kiln: `!kiln.ptr<T>` becomes `!llvm.ptr<1>` and a laid-out tile a
/// literal struct of the elements one thread owns, in the order of getThreadElements.
class KilnLLVMTypeConverter : public mlir::LLVMTypeConverter {
public:
  explicit KilnLLVMTypeConverter(mlir::MLIRContext *ctx);
};

/// Extracts every field of a struct value (a scalar is its own single field).
llvm::SmallVector<mlir::Value> unpackStruct(mlir::OpBuilder &b, mlir::Location loc,
                                            mlir::Value value);
/// Builds a struct of `structType` from `fields` (returns the field for non-structs).
mlir::Value packStruct(mlir::OpBuilder &b, mlir::Location loc, mlir::Type structType,
                       mlir::ValueRange fields);
/// i32 constant.
mlir::Value i32Const(mlir::OpBuilder &b, mlir::Location loc, int64_t v);

/// The running thread's lane and warp index along each dimension of a blocked layout.
struct ThreadIds {
  llvm::SmallVector<mlir::Value, 4> lane, warp;
};
ThreadIds emitThreadIds(mlir::OpBuilder &b, mlir::Location loc, gpu::BlockedEncodingAttr layout,
                        const TargetInfo &target);

/// Inline PTX `asmStr` with `constraints` over `args`; returns its result (null for a void
/// `resultType`). `sideEffects` keeps it in order with other such asm and from being removed.
mlir::Value emitInlineAsm(mlir::OpBuilder &b, mlir::Location loc, mlir::Type resultType,
                          mlir::ValueRange args, llvm::StringRef asmStr,
                          llvm::StringRef constraints, bool sideEffects);

/// A warp id read from lane 0 (shfl.sync.idx) once, at the top of the kernel: the value
/// `makeWarpId` builds there, but one ptxas knows to be warp-uniform, so the code it feeds
/// (wgmma descriptors, a branch for one warp) stays on the uniform datapath. Emitted beside
/// each use inside a loop it would stay there (LLVM does not move inline asm): one shfl and
/// one R2UR an iteration. The read is marked `kiln_gpu.uniform_warp_id = kind` and found
/// again by that mark, so each kind of warp id is read once per kernel.
mlir::Value emitEntryUniformWarpId(mlir::OpBuilder &b, mlir::Location loc, mlir::Attribute kind,
                                   llvm::function_ref<mlir::Value(mlir::OpBuilder &)> makeWarpId);

/// Address (in shared memory, address space 3) of a module-level buffer of `count` elements
/// of `elemType`, created on first use under `name`.
mlir::Value getSharedBuffer(mlir::OpBuilder &b, mlir::Location loc, mlir::Operation *op,
                            mlir::Type elemType, unsigned count, llvm::StringRef name,
                            unsigned alignment = 16);

/// As getSharedBuffer, for a buffer several ops share one after another (each op done with it
/// before the next starts): the array grows to the largest `count` asked for.
mlir::Value getSharedPoolBuffer(mlir::OpBuilder &b, mlir::Location loc, mlir::Operation *op,
                                mlir::Type elemType, unsigned count, llvm::StringRef name,
                                unsigned alignment);

/// An i1 that is true in exactly one of the threads holding each element of `type` (layouts
/// replicate elements when the tile is smaller than the layout, and along sliced dimensions);
/// null when nothing is replicated.
mlir::Value emitOwnerPredicate(mlir::OpBuilder &b, mlir::Location loc, mlir::RankedTensorType type,
                               const TargetInfo &target);

/// Key of an owned element by its static position (repetition, element) per dimension, with
/// dimension `skipDim` left out when given: equal keys name the same element (or, with a
/// skipped dimension, elements that differ only along it).
std::string getElemPosKey(const gpu::ElemPos &pos, int skipDim = -1);

/// For each element the running thread owns of a tile of a blocked `type` (in register
/// order), the constant its coordinate along every dimension adds to the thread's first
/// element's (what emitElementCoordinates adds to a thread-dependent base); none when some
/// coordinate is not base + constant (a tile narrower than its layout wraps around, the
/// wgmma accumulator permutes rows).
std::optional<llvm::SmallVector<llvm::SmallVector<int64_t, 4>>>
getElementCoordinateSteps(mlir::RankedTensorType type);

/// For each element the running thread owns of `type` (in register order), its coordinate
/// along every dimension of the tile, as i32.
llvm::SmallVector<llvm::SmallVector<mlir::Value, 4>>
emitElementCoordinates(mlir::OpBuilder &b, mlir::Location loc, mlir::RankedTensorType type,
                       const TargetInfo &target);

/// kiln.extern_elementwise as a call per owned element, kiln.globaltimer and kiln.smid as
/// special registers, kiln.grid_dependency as griddepcontrol.
void populateExternOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                    mlir::RewritePatternSet &patterns);

/// Per-element lowering of arith and math on tiles (one computation per run the axis analysis
/// proves constant), and tile constants.
void populateElementwiseOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                         mlir::RewritePatternSet &patterns,
                                         const AxisInfoAnalysis &axisInfo,
                                         const TargetInfo &target);
/// program_id, num_programs, make_range, splat, broadcast, expand_dims.
void populateTileOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                  mlir::RewritePatternSet &patterns, const TargetInfo &target);
/// dot with wgmma.mma_async on sm_90a (operands staged in swizzled shared memory).
/// Bytes of the shared buffer a wgmma dot whose A is stored where it is defined
/// (kInvariantAAttr) needs for both operands; 0 for any other dot.
int64_t getWgmmaHoistedBufferBytes(DotOp op);

void populateWgmmaDotToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                    mlir::RewritePatternSet &patterns, const TargetInfo &target);
/// dot: operands through shared memory, then mma.sync or CUDA-core FMAs.
void populateDotOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                 mlir::RewritePatternSet &patterns, const SharedScratch &scratch,
                                 const TargetInfo &target);
/// print and assert: vprintf and __assertfail of the CUDA device runtime.
void populateDebugOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                   mlir::RewritePatternSet &patterns, const TargetInfo &target);
/// scan: Hillis-Steele rounds through shared memory.
void populateScanOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                  mlir::RewritePatternSet &patterns, const SharedScratch &scratch,
                                  const TargetInfo &target);
/// convert_layout, trans and reshape: through shared memory.
void populateLayoutConversionToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                            mlir::RewritePatternSet &patterns,
                                            const SharedScratch &scratch, const TargetInfo &target);
/// Attribute on arith.divf asking for the IEEE-rounded quotient (div.rn) instead of
/// Triton's default div.full.f32.
inline constexpr llvm::StringLiteral kIEEEDivAttr = "kiln.ieee";
/// f32 division as Triton lowers it (div.full.f32).
void populateDivOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                 mlir::RewritePatternSet &patterns);

/// arith.extf from and arith.truncf to fp8 (left by -kiln-expand-fp8 on sm_89+): the PTX
/// conversions of pairs (cvt.rn.f16x2.e4m3x2, cvt.rn.satfinite.e4m3x2.f32, and e5m2's).
void populateFp8ConvertToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                      mlir::RewritePatternSet &patterns);

/// reduce: in thread, then warp shuffles, then across warps through shared memory.
void populateReduceOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                    mlir::RewritePatternSet &patterns, const SharedScratch &scratch,
                                    const TargetInfo &target);
/// atomic_rmw and atomic_cas, on tiles (per owned element) and scalars (thread 0).
void populateAtomicOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                    mlir::RewritePatternSet &patterns, const SharedScratch &scratch,
                                    const TargetInfo &target);
/// Elements per vector access of a memory op on the laid-out pointer tile `ptr` with `mask`
/// (may be null): the per-thread block, the pointers' contiguity and alignment (at most 128
/// bits) and the mask's constancy along the layout's fastest dimension.
unsigned getAccessVectorWidth(mlir::Value ptr, mlir::Value mask, const AxisInfoAnalysis &axis);
/// The shared address (i32) of slot `slot` of a ring whose converted value is `ring`.
mlir::Value emitSlotAddress(mlir::OpBuilder &b, mlir::Location loc, mlir::Value ring,
                            mlir::Value slot, gpu::SharedBufferType type);
/// local_alloc, async_copy, async_commit, async_wait: shared rings filled by cp.async.
void populateSharedRingToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                      mlir::RewritePatternSet &patterns,
                                      const AxisInfoAnalysis &axisInfo, const TargetInfo &target);
/// addptr, load, store.
void populateMemoryOpToLLVMPatterns(KilnLLVMTypeConverter &converter,
                                    mlir::RewritePatternSet &patterns,
                                    const AxisInfoAnalysis &axisInfo, const TargetInfo &target);

} // namespace kiln

#endif // KILN_CONVERSION_KILNTOLLVM_H
