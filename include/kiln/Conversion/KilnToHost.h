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
#include "mlir/Transforms/DialectConversion.h"

namespace kiln::host {

//===----------------------------------------------------------------------===//
// ABI with the runtime
//===----------------------------------------------------------------------===//

/// Arguments appended to every kernel: program id x, y, z; grid x, y, z (i32); the context.
enum ExtraArg : unsigned { kPidX, kPidY, kPidZ, kGridX, kGridY, kGridZ, kContext, kNumExtraArgs };

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
/// version of.
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

} // namespace kiln::host

#endif // KILN_CONVERSION_KILNTOHOST_H
