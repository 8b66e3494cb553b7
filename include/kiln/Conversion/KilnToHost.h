//===- KilnToHost.h - Lowering kiln tiles for the host (CPU) ----*- C++ -*-===//
//
// This file declares what the files of the -kiln-convert-to-host pass share: the type
// converter (a tile is a flat row-major vector, a kiln pointer an !llvm.ptr), the pattern
// groups, the helpers that build shuffles and splats, and the ABI between generated host code
// and the runtime (lib/Runtime/HostRuntime.cpp): the trailing kernel arguments and the
// function table at the start of the runtime context.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_CONVERSION_KILNTOHOST_H
#define KILN_CONVERSION_KILNTOHOST_H

#include "kiln/Analysis/AxisInfo.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Transforms/DialectConversion.h"

namespace kiln::host {

//===----------------------------------------------------------------------===//
// ABI with the runtime
//===----------------------------------------------------------------------===//

/// Arguments appended to every kernel: program id x, y, z; grid x, y, z (i32); the context;
/// the scratch memory of the kernel's large tiles (see kMaxRegisterTile), which the host
/// entry allocates once per call (null when the kernel has none).
enum ExtraArg : unsigned {
  kPidX,
  kPidY,
  kPidZ,
  kGridX,
  kGridY,
  kGridZ,
  kContext,
  kScratch,
  kNumExtraArgs
};

/// Slots of the function table the context starts with (one pointer each).
enum ContextSlot : unsigned {
  /// void check(ctx, i32 px, i32 py, i32 pz, const char *site, const void **ptrs,
  ///            uint8_t *mask, i64 n, i64 elemBytes, i32 isStore)
  /// Clears the mask of every unmasked lane whose [ptr, ptr + elemBytes) lies outside the
  /// launch's buffers, and records the first such access.
  kCheckAccess,
  /// void print(ctx, i32 px, i32 py, i32 pz, const char *prefix, const void *data,
  ///            i32 kind, i64 n, i32 hex)
  kPrint,
  /// void assertFail(ctx, i32 px, i32 py, i32 pz, const char *message, const char *site)
  kAssertFail,
  /// i32 inside(ctx, u64 begin, u64 end)
  /// 1 when [begin, end) lies inside one of the launch's buffers, is empty (begin >= end), or
  /// the launch has no buffers to check against; 0 otherwise. Every access in normal mode asks
  /// this once for the span of its unmasked lanes, and only where the answer is 0 hands its
  /// lanes to `check`, which masks off and reports the stray ones (kernel, line, program).
  kCheckRange,
};

/// Element kinds in print calls.
enum PrintKind : int32_t {
  kPrintI1,
  kPrintI8,
  kPrintI16,
  kPrintI32,
  kPrintI64,
  kPrintF16,
  kPrintBF16,
  kPrintF32,
  kPrintF64,
  kPrintPtr
};

/// The name of the entry function generated for kernel `name`:
/// void entry(void **params, const i32 *grid, i64 begin, i64 end, void *ctx)
/// runs programs with linear ids in [begin, end) (x fastest).
std::string getEntryName(llvm::StringRef kernel);

//===----------------------------------------------------------------------===//
// Conversion
//===----------------------------------------------------------------------===//

/// Elements per vector of a tile. A tile of n <= kChunk elements is one vector<n x T>; a
/// larger one is !llvm.array<n / kChunk x vector<kChunk x T>>, chunks in row-major order, so
/// that code size and LLVM's compile time grow linearly with the tile (LLVM's back end is
/// superlinear on single vectors of thousands of lanes).
inline constexpr int64_t kChunk = 128;

/// Tiles of more than kMaxRegisterTile elements are large: they live in memory (an !llvm.ptr
/// to their elements in row-major order, i1 as bytes) and each op on them is a loop over
/// chunks of kChunk lanes, so that code size and LLVM's compile time do not grow with the
/// tile (a fully unrolled tile of 2^20 elements took LLVM minutes). Smaller tiles stay in
/// registers, as vectors or chunk arrays.
inline constexpr int64_t kMaxRegisterTile = 4096;

/// On an llvm.alloca of a large tile's buffer: -kiln-convert-to-host places it in the
/// kernel's scratch memory (kScratch) once the conversion is done.
inline constexpr llvm::StringLiteral kTileBufferAttr = "kiln.tile_buffer";

/// On an scf.yield of a loop carrying large tiles (-kiln-convert-to-host sets it before the
/// conversion): per operand, 0 (passed as is), 1 (copied into a buffer of the yield) or 2
/// (copied through a temporary first: an operand may share a buffer with a loop argument).
inline constexpr llvm::StringLiteral kYieldCopiesAttr = "kiln.yield_copies";

/// On a load, store or atomic: its addresses were computed by the kernel from integers
/// (kiln.ptr_cast) or read from memory, so the bounds check against the launch's buffers is
/// not applied (-kiln-convert-to-host marks them before lowering).
inline constexpr llvm::StringLiteral kUncheckedAccessAttr = "kiln.unchecked_access";

/// tensor<d0 x ... x T> -> chunks of vector<w x T'> (see kChunk), kiln.ptr<T> -> !llvm.ptr;
/// the rest as is.
class HostTypeConverter : public mlir::TypeConverter {
public:
  explicit HostTypeConverter(mlir::MLIRContext *ctx);
};

/// What the patterns need to know about the module being converted.
struct HostLoweringOptions {
  bool debug = false;
};

/// make_range, splat, broadcast, expand_dims, reshape, trans, addptr, program_id,
/// num_programs, and arith/math ops on tiles (same op on vectors).
void populateTileOpToHostPatterns(mlir::TypeConverter &converter,
                                  mlir::RewritePatternSet &patterns);
/// load, store, atomic_rmw, atomic_cas, print, assert.
void populateMemoryOpToHostPatterns(mlir::TypeConverter &converter,
                                    mlir::RewritePatternSet &patterns, const AxisInfoAnalysis &axis,
                                    const HostLoweringOptions &options);
/// reduce, scan, dot.
void populateReduceOpToHostPatterns(mlir::TypeConverter &converter,
                                    mlir::RewritePatternSet &patterns);
/// extern_elementwise (libdevice functions: vector code or libm calls), globaltimer, smid,
/// grid_dependency.
void populateExternOpToHostPatterns(mlir::TypeConverter &converter,
                                    mlir::RewritePatternSet &patterns);
/// Errors (at the op, naming the function) for every extern_elementwise the CPU backend has no
/// version of, and for inline_asm_elementwise (PTX: the GPU only).
mlir::LogicalResult checkExternFunctions(mlir::ModuleOp module);
/// Rewrites f64 math.erf (tl.erf on fp64) as the libdevice call extern_elementwise lowers:
/// the math approximations cover f32 only and math-to-LLVM has no erf.
void routeF64ErfThroughLibdevice(mlir::ModuleOp module);

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Elements of a tile type (tensor, vector or chunk array; 1 for scalars).
int64_t getNumElements(mlir::Type type);
/// Lanes per chunk of a tile of `n` elements.
inline int64_t getChunkWidth(int64_t n) { return n < kChunk ? n : kChunk; }
/// The converted type of a tile of `n` elements of `elem`.
mlir::Type getTileType(int64_t n, mlir::Type elem);
/// The element type of a converted tile (or the type itself for scalars).
mlir::Type getTileElementType(mlir::Type type);
/// True for converted tiles (vectors and chunk arrays).
bool isTile(mlir::Type type);
/// The chunks of a converted tile (the value itself when it is one vector).
llvm::SmallVector<mlir::Value> unpack(mlir::OpBuilder &b, mlir::Location loc, mlir::Value tile);
/// A converted tile of type `type` from its chunks.
mlir::Value pack(mlir::OpBuilder &b, mlir::Location loc, mlir::Type type, mlir::ValueRange chunks);
/// `scalar` in every lane of a vector of type `type`.
mlir::Value splat(mlir::OpBuilder &b, mlir::Location loc, mlir::Value scalar,
                  mlir::VectorType type);
/// `scalar` in every lane of the converted tile type `type`.
mlir::Value splatTile(mlir::OpBuilder &b, mlir::Location loc, mlir::Value scalar, mlir::Type type);
/// A vector of `indices.size()` lanes, lane i taken from lane indices[i] of `v`.
mlir::Value shuffle(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                    llvm::ArrayRef<int32_t> indices);
/// The chunks of a tile of `indices.size()` elements whose element i is element indices[i]
/// of the tile with chunks `src` (of `srcN` elements): one shuffle per chunk and source chunk
/// it reads (none for a chunk it copies whole).
llvm::SmallVector<mlir::Value> permute(mlir::OpBuilder &b, mlir::Location loc,
                                       llvm::ArrayRef<mlir::Value> src, int64_t srcN,
                                       llvm::ArrayRef<int32_t> indices);
/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> getStrides(llvm::ArrayRef<int64_t> shape);
/// The enclosing kernel's extra argument `which` (see ExtraArg).
mlir::Value getExtraArg(mlir::Operation *op, ExtraArg which);
/// Loads slot `slot` of the context's function table and calls it with `args`; returns its
/// result of type `result` (none: a void function, null returned).
mlir::Value callRuntime(mlir::OpBuilder &b, mlir::Location loc, mlir::Operation *at,
                        ContextSlot slot, mlir::ValueRange args, mlir::Type result = {});
/// A pointer to a NUL-terminated global string constant `text` (created once per module).
mlir::Value getStringPtr(mlir::OpBuilder &b, mlir::Location loc, mlir::Operation *at,
                         llvm::StringRef text);
/// "file:line:col" of `loc` (the innermost file location), or "<unknown>".
std::string formatSite(mlir::Location loc);
/// Where `holds` (i1) is false: the runtime's assertion failure for `assertOp` (its message
/// and source site), which fails the launch.
void emitAssertFailure(mlir::OpBuilder &b, mlir::Location loc, AssertOp assertOp,
                       mlir::Value holds);

//===----------------------------------------------------------------------===//
// Large tiles (kMaxRegisterTile): buffers in memory, ops as loops over chunks
//===----------------------------------------------------------------------===//

/// True for a tensor type of more than kMaxRegisterTile elements.
bool isLargeTile(mlir::Type type);
/// True when an operand or a result of `op` is a large tile.
bool hasLargeTile(mlir::Operation *op);
/// The type a converted element type has in a buffer: i1 as i8.
mlir::Type getMemoryType(mlir::Type elem);
/// A buffer of `n` elements of the converted element type `elem`: an llvm.alloca in the entry
/// block of the function of `at`, marked kTileBufferAttr (placed in scratch memory later).
mlir::Value allocTileBuffer(mlir::OpBuilder &b, mlir::Location loc, mlir::Operation *at, int64_t n,
                            mlir::Type elem);
/// Asks LLVM not to unroll `loop` (an scf.for over the chunks or lanes of a large tile):
/// fully unrolled, a loop of 64 chunks would cost the compile time the loop saves. SCF-to-CF
/// carries the annotation (kLoopAnnotationAttr) to the latch branch; emitHostObject makes it
/// the branch's loop metadata.
void disableUnrolling(mlir::scf::ForOp loop);
/// The discardable attribute SCF-to-CF moves from an scf.for to its latch branch.
inline constexpr llvm::StringLiteral kLoopAnnotationAttr = "llvm.loop_annotation";
/// Runs `body(b, loc, c)` for every chunk c (an i32) of a tile of `n` elements: one scf.for.
void forEachChunk(mlir::OpBuilder &b, mlir::Location loc, int64_t n,
                  llvm::function_ref<void(mlir::OpBuilder &, mlir::Location, mlir::Value)> body);
/// Chunk `c` of a buffer of `elem` as it is in memory: vector<kChunk x getMemoryType(elem)>.
mlir::Value loadRawChunk(mlir::OpBuilder &b, mlir::Location loc, mlir::Value buf, mlir::Type elem,
                         mlir::Value c);
/// Chunk `c` of a buffer of `elem`: vector<kChunk x elem> (i1 read from bytes).
mlir::Value loadTileChunk(mlir::OpBuilder &b, mlir::Location loc, mlir::Value buf, mlir::Type elem,
                          mlir::Value c);
/// Stores `v` (vector<kChunk x elem>, i1 as bytes, or already in memory form) as chunk `c`.
void storeTileChunk(mlir::OpBuilder &b, mlir::Location loc, mlir::Value buf, mlir::Value c,
                    mlir::Value v);
/// The linear indices of the lanes of chunk `c`: c * kChunk + [0, kChunk), vector<kChunk x i32>.
mlir::Value getChunkLanes(mlir::OpBuilder &b, mlir::Location loc, mlir::Value c);
/// Elements `indices` (vector<kChunk x i32>) of a buffer of `elem`: a gather.
mlir::Value gatherElements(mlir::OpBuilder &b, mlir::Location loc, mlir::Value buf, mlir::Type elem,
                           mlir::Value indices);
/// For each lane i of chunk `c` of a tile of shape `dstShape`, element
///   offset + sum_d ((i / dstStride[d]) % dstShape[d]) * srcStrides[d]
/// of the buffer `src`: broadcast, trans and the halving steps of reduce. When a chunk lies in
/// one row of the last dimension, one vector load (srcStrides.back() == 1), one element
/// splat (== 0), or a gather of a strided run; otherwise a gather.
mlir::Value gatherPermuted(mlir::OpBuilder &b, mlir::Location loc, mlir::Value src, mlir::Type elem,
                           mlir::Value c, llvm::ArrayRef<int64_t> dstShape,
                           llvm::ArrayRef<int64_t> srcStrides, int64_t offset);
/// The buffer of the converted tile `v` of type `type`: a large tile is one; a small one
/// (vector or chunk array) is stored in a new tile buffer.
mlir::Value toTileBuffer(mlir::OpBuilder &b, mlir::Location loc, mlir::Operation *at, mlir::Value v,
                         mlir::RankedTensorType type, const mlir::TypeConverter &converter);
/// The register form (vector or chunk array) of a tile of `n` <= kMaxRegisterTile elements of
/// `elem` held in the buffer `buf`.
mlir::Value fromTileBuffer(mlir::OpBuilder &b, mlir::Location loc, mlir::Value buf, int64_t n,
                           mlir::Type elem);
/// make_range, splat, broadcast, trans, addptr, ptr_cast, arith/math and constants on large
/// tiles, and the copies that give loop-carried large tiles value semantics (scf.yield).
void populateLargeTileToHostPatterns(mlir::TypeConverter &converter,
                                     mlir::RewritePatternSet &patterns);
/// Replaces the elementwise op `op` on large tiles (`operands` converted: large tiles are
/// buffers, scalars are shared by every chunk) by a loop over chunks; `perChunk` builds the op
/// on one chunk's operands with results of the given vector types.
void lowerLargeElementwise(
    mlir::ConversionPatternRewriter &rewriter, mlir::Operation *op, mlir::ValueRange operands,
    const mlir::TypeConverter &converter,
    llvm::function_ref<llvm::SmallVector<mlir::Value>(mlir::OpBuilder &, mlir::Location,
                                                      mlir::ValueRange, mlir::TypeRange)>
        perChunk);
/// Marks (kYieldCopiesAttr) the yields of loops that carry large tiles.
void markLargeYields(mlir::ModuleOp module);
/// Replaces the tile buffers (kTileBufferAttr) of `func` by places in its scratch memory and
/// returns the bytes that memory needs (0 without large tiles).
int64_t placeTileBuffers(mlir::FunctionOpInterface func);

} // namespace kiln::host

#endif // KILN_CONVERSION_KILNTOHOST_H
