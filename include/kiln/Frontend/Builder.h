//===- Builder.h - Kiln's shared semantic layer -----------------*- C++ -*-===//
//
// This file declares kiln::Builder, the one place where the language semantics of Kiln (those
// of triton.language, Triton 3.x) live: dtypes with signedness, type promotion, weak literals,
// numpy-style broadcasting, shape and dtype checks, pointer arithmetic, masked memory access
// and structured control flow. The Python front end and the C++ embedded DSL both build their
// kernels through it; every user error surfaces as a kiln::CompileError that names the kernel
// and the user's file:line:col.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FRONTEND_BUILDER_H
#define KILN_FRONTEND_BUILDER_H

#include "kiln/CompileError.h"
#include "kiln/DType.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Region.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

/// The MLIR element type of `dtype`: signless integers, floats, or !kiln.ptr<T>.
mlir::Type toMLIR(DType dtype, mlir::MLIRContext &ctx);

/// The value of a source literal (a Python or C++ number) kept so that it can take the dtype
/// its context gives it, as in Triton: `x + 1` keeps x's int8, `h * 0.5` keeps h's fp16.
struct Literal {
  enum class Kind : uint8_t { Bool, Int, Float };
  Kind kind = Kind::Int;
  /// Int: true when the value is negative.
  bool negative = false;
  /// Int: the absolute value; Bool: 0 or 1.
  uint64_t magnitude = 0;
  /// Float: the value.
  double floatValue = 0.0;
};

/// A scalar or tile value with its Kiln dtype; the shape is the MLIR type's (scalars are
/// not tensors). Literals carry `literal` and are "weak" in type promotion.
struct Tile {
  mlir::Value value;
  DType dtype;
  std::optional<Literal> literal;

  /// True for a literal that adapts to the dtype of the tile it meets.
  bool isWeak() const { return literal.has_value(); }
  /// True when the value is a tensor (a tile), false for a scalar.
  bool isTile() const;
  /// The tile shape; empty for scalars.
  llvm::ArrayRef<int64_t> getShape() const;
};

/// "[16, 32]".
std::string fmtShape(llvm::ArrayRef<int64_t> shape);
/// Triton's way of printing a value's type: "fp32" for scalars, "fp32[16, 32]" for tiles
/// (what error messages say).
std::string describe(const Tile &t);

/// One kernel argument: a scalar or a pointer, with an optional divisibility hint (Triton's
/// specialization on multiples of 16) that becomes the `kiln.divisibility` arg attribute.
struct KernelArg {
  std::string name;
  DType dtype;
  std::optional<int32_t> divisibility;
  /// The tensor map of a tensor descriptor argument (`!kiln.tensormap`; dtype unused).
  bool tensorMap = false;
  /// A launcher can read this argument's own word for a tensor map recipe (see
  /// Builder::derivedTensorMap); false for the parts of a host tensor descriptor, which the
  /// Python launcher fills from the descriptor object.
  bool recipeField = true;
};

/// Options of `load` with Triton's spellings: cache "" | ".ca" | ".cg" | ".cv", eviction
/// "" | "evict_first" | "evict_last".
struct LoadOptions {
  std::string cache;
  std::string evict;
  bool isVolatile = false;
};

/// Options of `store`: cache "" | ".wb" | ".cs" | ".wt", eviction as for loads.
struct StoreOptions {
  std::string cache;
  std::string evict;
};

/// Builds one kiln kernel at a time with Triton's semantics. Each method checks its operands,
/// applies promotion and broadcasting, creates ops at the current source location and returns
/// a Tile; a failed check throws CompileError. After a CompileError the kernel being built is
/// abandoned: call beginKernel again.
class [[gnu::visibility("default")]] Builder {
public:
  /// Loads the kiln, arith, math, scf and func dialects into `ctx`.
  explicit Builder(mlir::MLIRContext & ctx);
  ~Builder();

  mlir::MLIRContext &getContext() { return ctx; }
  /// The module being built (null outside beginKernel/finishKernel).
  mlir::ModuleOp getModule() { return module ? *module : mlir::ModuleOp(); }

  //===--------------------------------------------------------------------===//
  // Source locations and kernels
  //===--------------------------------------------------------------------===//

  /// Every op created from now on carries `file:line:col`, and errors report it.
  void setLocation(llvm::StringRef file, unsigned line, unsigned col);
  /// The location given to new ops.
  mlir::Location getLocation() const { return loc; }
  /// Starts a module with one `func.func @name` taking `args`.
  void beginKernel(llvm::StringRef name, llvm::ArrayRef<KernelArg> args);
  /// Argument `i` of the kernel.
  Tile arg(unsigned i);
  /// Appends a tensor map parameter to the kernel being built and returns it: the launcher
  /// encodes it from other arguments (a tl.make_tensor_descriptor of kernel arguments, which
  /// the TMA can then copy).
  Tile appendTensorMapArgument();
  /// Ends the kernel with func.return, verifies the module and hands it over. A module that
  /// fails verification throws CompileError with the verifier's message.
  mlir::OwningOpRef<mlir::ModuleOp> finishKernel();
  /// Throws CompileError at the current location.
  [[noreturn]] void error(const llvm::Twine &message) const;

  //===--------------------------------------------------------------------===//
  // Grid, literals, tile creation
  //===--------------------------------------------------------------------===//

  /// program_id(axis), axis in 0..2; int32.
  Tile programId(int axis);
  /// num_programs(axis), axis in 0..2; int32.
  Tile numPrograms(int axis);
  /// A weak integer literal: int32 if it fits, else uint32, else int64 (Triton's rule).
  Tile intConst(int64_t value);
  /// A weak integer literal for values of 2^63 and above (uint64).
  Tile uintConst(uint64_t value);
  /// A weak float literal: fp32 unless its magnitude only fits fp64.
  Tile floatConst(double value);
  /// A weak bool literal (int1).
  Tile boolConst(bool value);
  /// arange(start, end): int32 tile [start, end); end - start a power of two.
  Tile arange(int64_t start, int64_t end);
  /// full(shape, value, dtype): `value` (a scalar) cast to `dtype`, splatted.
  Tile full(llvm::ArrayRef<int64_t> shape, const Tile &value, DType dtype);
  /// zeros(shape, dtype).
  Tile zeros(llvm::ArrayRef<int64_t> shape, DType dtype);
  /// Materializes a weak literal as a plain value of its own dtype; other tiles unchanged.
  Tile materialize(const Tile &x);

  //===--------------------------------------------------------------------===//
  // Arithmetic, comparisons, bitwise and logical ops
  //===--------------------------------------------------------------------===//

  /// a + b; pointer + integer and integer + pointer advance the pointer.
  Tile add(const Tile &a, const Tile &b);
  /// a - b; pointer - integer moves the pointer back.
  Tile sub(const Tile &a, const Tile &b);
  Tile mul(const Tile &a, const Tile &b);
  /// a / b: integers divide in fp32, fp16/bf16 in fp32.
  Tile truediv(const Tile &a, const Tile &b);
  /// a // b for integers: C-style truncating division, signed or unsigned.
  Tile floordiv(const Tile &a, const Tile &b);
  /// a % b: C-style remainder for integers (sign of a), frem for floats.
  Tile mod(const Tile &a, const Tile &b);
  /// cdiv(a, b) = (a + b - 1) // b.
  Tile cdiv(const Tile &a, const Tile &b);
  Tile lt(const Tile &a, const Tile &b);
  Tile le(const Tile &a, const Tile &b);
  Tile gt(const Tile &a, const Tile &b);
  Tile ge(const Tile &a, const Tile &b);
  Tile eq(const Tile &a, const Tile &b);
  Tile ne(const Tile &a, const Tile &b);
  /// a & b: bitwise on integers (logical on int1).
  Tile bitAnd(const Tile &a, const Tile &b);
  Tile bitOr(const Tile &a, const Tile &b);
  Tile bitXor(const Tile &a, const Tile &b);
  /// a << b.
  Tile shl(const Tile &a, const Tile &b);
  /// a >> b: arithmetic for signed, logical for unsigned integers.
  Tile shr(const Tile &a, const Tile &b);
  /// Logical `and`/`or` of truth values: non-int1 operands are first compared with 0.
  Tile logicalAnd(const Tile &a, const Tile &b);
  Tile logicalOr(const Tile &a, const Tile &b);
  /// -x.
  Tile neg(const Tile &x);
  /// ~x (integers only).
  Tile bitNot(const Tile &x);
  /// `not x`: int1 result.
  Tile logicalNot(const Tile &x);
  /// minimum / maximum. Floats follow Triton's default PropagateNan.NONE (minnumf/maxnumf:
  /// a NaN operand yields the other operand); `propagateNan` selects minimumf/maximumf.
  Tile minimum(const Tile &a, const Tile &b, bool propagateNan = false);
  Tile maximum(const Tile &a, const Tile &b, bool propagateNan = false);
  /// where(cond, a, b): cond cast to int1; a and b promoted; all three broadcast.
  Tile where(const Tile &cond, const Tile &a, const Tile &b);
  /// fma(x, y, z) = x * y + z with one rounding (math.fma): the three operands promoted and
  /// broadcast as binary operators do; fp16, bf16, fp32 or fp64 only.
  Tile fma(const Tile &x, const Tile &y, const Tile &z);
  /// umulhi(a, b): the high half of the double-width unsigned product of two 32- or 64-bit
  /// integers (as Triton: int32, uint32, int64, uint64; signed operands read as unsigned).
  Tile umulhi(const Tile &a, const Tile &b);
  /// div_rn(a, b): fp32 a / b rounded to nearest (IEEE), not the GPU's fast division.
  Tile divRn(const Tile &a, const Tile &b);
  /// sqrt_rn(x): fp32 square root rounded to nearest (IEEE).
  Tile sqrtRn(const Tile &x);

  //===--------------------------------------------------------------------===//
  // Math and casts
  //===--------------------------------------------------------------------===//

  /// Float-only math. fp16/bf16 inputs are computed in fp32 and rounded back (the result
  /// keeps the input dtype); integer inputs are an error.
  Tile exp(const Tile &x);
  Tile exp2(const Tile &x);
  Tile log(const Tile &x);
  Tile log2(const Tile &x);
  Tile sqrt(const Tile &x);
  Tile rsqrt(const Tile &x);
  Tile sin(const Tile &x);
  Tile cos(const Tile &x);
  Tile erf(const Tile &x);
  Tile floor(const Tile &x);
  Tile ceil(const Tile &x);
  /// abs: floats, signed integers; a no-op on unsigned integers (as in Triton).
  Tile abs(const Tile &x);
  /// One overload of an external elementwise function: `symbol` takes arguments of the
  /// dtypes `args` and returns `result`.
  struct ExternOverload {
    std::string symbol;
    std::vector<DType> args;
    DType result;
  };
  /// tl.extern_elementwise (lib/Frontend/BuilderExtern.cpp): the overload whose argument
  /// dtypes are those of `args` (literals take the dtype the overload wants), all arguments
  /// broadcast to one shape, applied element by element (kiln.extern_elementwise). With
  /// `promotes`, arguments no overload takes are first promoted: fp16/bf16/fp8 compute in
  /// fp32 (a float result is rounded back to the arguments' half dtype), fp32 with fp64 in
  /// fp64, int8/int16 as int32. `what` names the function in errors.
  Tile externElementwise(llvm::ArrayRef<Tile> args, llvm::ArrayRef<ExternOverload> overloads,
                         bool pure, llvm::StringRef what, bool promotes = true);
  /// tl.inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack): `asm` (PTX)
  /// run once per `pack` elements of the arguments (broadcast to one shape, not promoted),
  /// giving one result of each of `dtypes` (that shape; scalars when every argument is
  /// one). `constraints` must name the output registers, then the input registers the values
  /// take (kiln::getInlineAsmRegisters: values under 32 bits share registers when pack > 1).
  /// Runs on the GPU only (the CPU backend rejects it).
  std::vector<Tile> inlineAsmElementwise(llvm::StringRef asmText, llvm::StringRef constraints,
                                         llvm::ArrayRef<Tile> args, llvm::ArrayRef<DType> dtypes,
                                         bool pure, int64_t pack);
  /// libdevice.<name>(args...) of kiln.language.extra.cuda.libdevice (the functions of
  /// kiln/Dialect/Kiln/IR/LibDevice.h).
  Tile libdevice(llvm::StringRef name, llvm::ArrayRef<Tile> args);
  /// extra.cuda.globaltimer(): a nanosecond clock (int64).
  Tile globalTimer();
  /// extra.cuda.smid(): the multiprocessor (CPU: core) running this program (int32).
  Tile smId();
  /// extra.cuda.gdc_wait() (`wait`) or gdc_launch_dependents().
  void gridDependency(bool wait);
  /// x.to(dtype): value conversion with Triton's rules.
  Tile cast(const Tile &x, DType dtype);
  /// x.to(dtype, fp_downcast_rounding=rounding): a float narrowed to a narrower float
  /// rounded to nearest even ("rtne", as cast) or toward zero ("rtz"); a cast to the same
  /// dtype is x. Other conversions with a rounding mode are an error, as in Triton.
  Tile cast(const Tile &x, DType dtype, llvm::StringRef rounding);
  /// cast's pointer cases (kiln.ptr_cast): integer -> pointer, pointer -> int64/int1,
  /// pointer -> pointer.
  Tile castPointer(const Tile &x, DType dst);
  /// x.to(dtype, bitcast=True): reinterpret the bits; widths must match.
  Tile bitcast(const Tile &x, DType dtype);
  /// tl.multiple_of / tl.max_contiguous / tl.max_constancy (`kind`: "multiple_of",
  /// "max_contiguous", "max_constancy"): records `values` (one per dimension, or one for all)
  /// on the op that computes the integer tile or scalar `x` (kAxisHintAttr names), where the
  /// axis analysis takes them over what it derives, as Triton does. Returns x.
  Tile hint(const Tile &x, llvm::StringRef kind, llvm::ArrayRef<int64_t> values);
  /// `inputs` with fp8 tiles cast to fp32 (fp8 has no arithmetic of its own: reductions and
  /// scans of fp8 compute in fp32).
  std::vector<Tile> widenFp8(llvm::ArrayRef<Tile> inputs);

  //===--------------------------------------------------------------------===//
  // Memory
  //===--------------------------------------------------------------------===//

  /// load(ptr, mask, other): mask and other broadcast with ptr, other cast to the pointee
  /// dtype, mask must be int1, other requires mask. Pass a null Tile (value == nullptr) or
  /// std::nullopt to leave one out.
  Tile load(const Tile &ptr, std::optional<Tile> mask = std::nullopt,
            std::optional<Tile> other = std::nullopt, const LoadOptions &options = {});
  /// desc.load(offsets) of Triton's tensor descriptors: the `block` at integer `offsets` of
  /// the tensor at pointer `base` with int32 extents `shape` and int64 `strides` (all but the
  /// last dimension's, which is contiguous), zero outside it. `desc` is the tensor map
  /// argument (see KernelArg::tensorMap).
  Tile descriptorLoad(const Tile &desc, const Tile &base, llvm::ArrayRef<Tile> offsets,
                      llvm::ArrayRef<Tile> shape, llvm::ArrayRef<Tile> strides,
                      llvm::ArrayRef<int64_t> block);
  /// desc.store(offsets, value): `value` (of the block's shape, cast to the element dtype)
  /// written where it falls inside the tensor.
  void descriptorStore(const Tile &desc, const Tile &base, llvm::ArrayRef<Tile> offsets,
                       const Tile &value, llvm::ArrayRef<Tile> shape, llvm::ArrayRef<Tile> strides,
                       llvm::ArrayRef<int64_t> block);
  /// The tensor map of tl.make_tensor_descriptor(base, shape, strides + [1], block) where a
  /// launcher can encode one from the launch's arguments, so that the TMA copies its blocks
  /// (both front ends ask here): a 2-D to 5-D fp16 or bf16 tensor whose base is a pointer
  /// argument specialized 16-byte aligned, whose extents are int32/int64 arguments, int32
  /// arguments times positive constants or positive constants, and whose strides are such
  /// arguments specialized multiples of 16 bytes or constant multiples of 16 bytes. Returns the
  /// map parameter, appended once per distinct recipe with the recipe on it
  /// (kTensorMapRecipeAttr: base, dtype code 'h' / 'H', rank, block, per extent and stride an
  /// argument number (an extent's plus factor << 32 for the argument times a factor) or
  /// -1 - value, then 0: the kernel reads it unguarded), or nullopt: the descriptor's accesses
  /// are then masked loads and stores.
  std::optional<Tile> derivedTensorMap(const Tile &base, llvm::ArrayRef<Tile> shape,
                                       llvm::ArrayRef<Tile> strides, llvm::ArrayRef<int64_t> block);
  /// store(ptr, value, mask): value and mask broadcast to ptr's shape, value cast to the
  /// pointee dtype.
  void store(const Tile &ptr, const Tile &value, std::optional<Tile> mask = std::nullopt,
             const StoreOptions &options = {});

  //===--------------------------------------------------------------------===//
  // Debugging
  //===--------------------------------------------------------------------===//

  /// tl.device_print(prefix, *args, hex): kiln.print of `args` (weak literals materialized)
  /// after `prefix` (as Triton's: made to read " prefix: " before values), integers in
  /// hexadecimal when `hex`.
  void print(llvm::StringRef prefix, llvm::ArrayRef<Tile> args, bool hex = false);
  /// tl.device_assert(cond, msg): kiln.assert of `cond` as int1 (numbers compared with 0);
  /// the kernel fails with `message` where it is false.
  void deviceAssert(const Tile &cond, llvm::StringRef message);
  /// tl.debug_barrier(): kiln.barrier, a barrier of all threads of the program (bar.sync on
  /// the GPU; nothing on the CPU backend, where one thread runs a program).
  void debugBarrier();
  /// tl.assume(cond): a hint; `cond` must be a truth value (a number or a tile of numbers).
  /// Nothing is emitted.
  void assume(const Tile &cond);

  //===--------------------------------------------------------------------===//
  // Shapes
  //===--------------------------------------------------------------------===//

  /// expand_dims(x, axis); axis may be negative (counted from the new rank).
  Tile expandDims(const Tile &x, int axis);
  /// broadcast_to(x, shape): scalars splat; tiles stretch size-1 dims (same rank).
  Tile broadcastTo(const Tile &x, llvm::ArrayRef<int64_t> shape);
  /// broadcast(a, b): both to their common numpy-broadcast shape.
  std::pair<Tile, Tile> broadcast(const Tile &a, const Tile &b);
  /// reshape(x, shape, can_reorder).
  Tile reshape(const Tile &x, llvm::ArrayRef<int64_t> shape, bool canReorder = false);
  /// trans(x, order) / permute; an empty order means (1, 0).
  Tile trans(const Tile &x, llvm::ArrayRef<int32_t> order = {});

  //===--------------------------------------------------------------------===//
  // Joins, splits and permutations (BuilderPermute.cpp); each is composed of the ops above
  // (arange, expand_dims, broadcast, reshape, select, reduce), so no backend lowers a new op
  //===--------------------------------------------------------------------===//

  /// tl.join(a, b): a and b broadcast to one shape S and stacked along a new last dimension
  /// of size 2 (S + [2]; [2] for two scalars). The operands must share a dtype (a weak literal
  /// takes the other's).
  Tile join(const Tile &a, const Tile &b);
  /// tl.split(a), join's inverse: a's last dimension must be 2; returns (a[..., 0],
  /// a[..., 1]) bit for bit (scalars for a of shape [2]).
  std::pair<Tile, Tile> split(const Tile &a);
  /// tl.interleave(a, b): join(a, b) with its last two dimensions merged, so that a and b
  /// alternate along the last dimension.
  Tile interleave(const Tile &a, const Tile &b);
  /// tl.cat(a, b, can_reorder): two 1-D tiles of one dtype and shape end to end. As in
  /// Triton, `canReorder` must be true (the order is then unspecified; Kiln keeps a then b).
  Tile cat(const Tile &a, const Tile &b, bool canReorder);
  /// tl.flip(x, dim): x reversed along `dim` (the last dimension when not given; negative
  /// counts from the end), bit for bit.
  Tile flip(const Tile &x, std::optional<int> dim = std::nullopt);
  /// tl.gather(src, index, axis): out[..., i, ...] = src[..., index[..., i, ...], ...] along
  /// `axis`; index is an integer tile of src's rank whose other dimensions equal src's. The
  /// result has index's shape and src's dtype; an index outside [0, src.shape[axis]) gives 0.
  Tile gather(const Tile &src, const Tile &index, int axis);

  //===--------------------------------------------------------------------===//
  // Sorting and counting (BuilderSort.cpp)
  //===--------------------------------------------------------------------===//

  /// tl.sort(x, dim, descending): x sorted along its last dimension (the only `dim` Triton
  /// takes: none, rank - 1 or -1) by a bitonic network of compare-exchange steps; the result
  /// is a permutation of each row (NaNs are kept, at unspecified places).
  Tile sort(const Tile &x, std::optional<int> dim = std::nullopt, bool descending = false);
  /// tl.topk(x, k, dim): the k largest elements of each row of the last dimension, largest
  /// first (shape x.shape[:-1] + [k]); k a power of two no larger than the row.
  Tile topk(const Tile &x, int64_t k, std::optional<int> dim = std::nullopt);
  /// tl.histogram(x, num_bins, mask): int32 counts of the values 0 .. num_bins - 1 in the 1-D
  /// integer tile x, over the elements where `mask` (int1, broadcast to x) holds. Values
  /// outside [0, num_bins) are not counted.
  Tile histogram(const Tile &x, int64_t numBins, std::optional<Tile> mask = std::nullopt);

  //===--------------------------------------------------------------------===//
  // Control flow
  //===--------------------------------------------------------------------===//

  /// Body of a for loop: (induction variable, iteration values) -> next iteration values.
  using ForBody = std::function<std::vector<Tile>(const Tile &, llvm::ArrayRef<Tile>)>;
  /// A region body: (region arguments) -> yielded values.
  using RegionBody = std::function<std::vector<Tile>(llvm::ArrayRef<Tile>)>;
  /// A branch body: () -> yielded values.
  using BranchBody = std::function<std::vector<Tile>()>;
  /// A loop condition: (loop values) -> scalar truth value.
  using CondBody = std::function<Tile(llvm::ArrayRef<Tile>)>;

  /// for iv in range(lb, ub, step): scf.for whose induction variable has the integer
  /// promotion of the bounds' dtypes (int32 for literals). Yielded values must keep the
  /// dtype and shape of their init values; `names` name them in errors. Returns the results.
  /// `flatten` (tl.range's flatten=True) marks the loop kFlattenAttr, `warpSpecialize`
  /// (warp_specialize=True) kWarpSpecializeAttr.
  std::vector<Tile> forLoop(const Tile &lb, const Tile &ub, const Tile &step,
                            llvm::ArrayRef<Tile> inits, const ForBody &body,
                            llvm::ArrayRef<std::string> names = {}, bool flatten = false,
                            bool warpSpecialize = false);
  /// if cond: then else: else, as scf.if; both branches must yield values of the same dtypes
  /// and shapes. `elseFn` may be empty only when `thenFn` yields nothing.
  std::vector<Tile> ifThenElse(const Tile &cond, const BranchBody &thenFn,
                               const BranchBody &elseFn = nullptr,
                               llvm::ArrayRef<std::string> names = {});
  /// while cond(values): values = body(values), as scf.while; returns the final values.
  std::vector<Tile> whileLoop(llvm::ArrayRef<Tile> inits, const CondBody &condFn,
                              const RegionBody &bodyFn, llvm::ArrayRef<std::string> names = {});

  //===--------------------------------------------------------------------===//
  // Reductions (BuilderReduce.cpp)
  //===--------------------------------------------------------------------===//

  /// Combine function of a reduction: (accumulators, new values) -> combined values, one
  /// scalar per input, of the inputs' dtypes.
  using CombineBody = std::function<std::vector<Tile>(llvm::ArrayRef<Tile>, llvm::ArrayRef<Tile>)>;
  /// tl.reduce(inputs, axis, combine_fn, keep_dims): kiln.reduce of same-shape tiles along
  /// `axis` (negative counts from the end). Results drop `axis` (a scalar from a 1-D tile),
  /// or keep it as size 1 with `keepDims`.
  std::vector<Tile> reduce(llvm::ArrayRef<Tile> inputs, int axis, const CombineBody &combine,
                           bool keepDims = false);
  /// tl.sum: integers narrower than 32 bits accumulate as (u)int32, as in Triton.
  Tile sum(const Tile &x, int axis, bool keepDims = false);
  /// The sum in x's own dtype (Triton's `sum(x, dtype=...)`: narrow integers wrap, int1 adds
  /// modulo 2), without sum's widening of narrow integers to 32 bits.
  Tile sumInDType(const Tile &x, int axis, bool keepDims = false);
  /// tl.max / tl.min (floats: maxnum/minnum, Triton's default NaN handling).
  Tile max(const Tile &x, int axis, bool keepDims = false);
  Tile min(const Tile &x, int axis, bool keepDims = false);
  /// tl.argmax / tl.argmin: int32 index of the first extreme value along `axis`.
  Tile argmax(const Tile &x, int axis, bool keepDims = false);
  Tile argmin(const Tile &x, int axis, bool keepDims = false);
  /// tl.xor_sum (integers).
  Tile xorSum(const Tile &x, int axis, bool keepDims = false);

  //===--------------------------------------------------------------------===//
  // Scans (BuilderScan.cpp)
  //===--------------------------------------------------------------------===//

  /// tl.associative_scan(inputs, axis, combine_fn, reverse): kiln.scan of same-shape tiles
  /// along `axis` (negative counts from the end); inclusive, from the end with `reverse`.
  /// Results have the inputs' dtypes and shapes.
  std::vector<Tile> scan(llvm::ArrayRef<Tile> inputs, int axis, const CombineBody &combine,
                         bool reverse = false);
  /// tl.cumsum(x, axis, reverse, dtype): bf16 is summed in fp32; without `dtype`, integers
  /// narrower than 32 bits in int32 (signed) or uint32 (unsigned and int1), as in Triton.
  Tile cumsum(const Tile &x, int axis, bool reverse = false,
              std::optional<DType> dtype = std::nullopt);
  /// tl.cumprod(x, axis, reverse): bf16 multiplied in fp32; other dtypes kept (as Triton).
  Tile cumprod(const Tile &x, int axis, bool reverse = false);

  //===--------------------------------------------------------------------===//
  // Atomics (BuilderAtomic.cpp)
  //===--------------------------------------------------------------------===//

  /// tl.atomic_<op>(ptr, val, mask, sem, scope) for op in add, max, min, and, or, xor, xchg:
  /// kiln.atomic_rmw with ptr, val and mask broadcast together and val cast to the pointee
  /// dtype; returns the old values. `sem` is "acq_rel" (default, also ""), "acquire",
  /// "release" or "relaxed"; `scope` "gpu" (default), "cta" or "sys". Bitwise ops take
  /// integers; max/min on unsigned integers compare unsigned.
  Tile atomicRMW(llvm::StringRef op, const Tile &ptr, const Tile &val, std::optional<Tile> mask,
                 llvm::StringRef sem = "", llvm::StringRef scope = "");
  /// tl.atomic_cas(ptr, cmp, val, sem, scope): where *ptr == cmp stores val; returns the old
  /// values (integers of 32 or 64 bits, or floats compared by their bits).
  Tile atomicCAS(const Tile &ptr, const Tile &cmp, const Tile &val, llvm::StringRef sem = "",
                 llvm::StringRef scope = "");

  //===--------------------------------------------------------------------===//
  // Matrix products (BuilderDot.cpp)
  //===--------------------------------------------------------------------===//

  /// tl.dot(a, b, acc, input_precision, out_dtype, max_num_imprecise_acc) as Triton's
  /// semantic.dot: `a` M x K and `b` K x N tiles of one dtype, M, N and K powers of two
  /// >= 16. fp16 -> fp32 or fp16 (`outDType`), bf16 -> fp32, fp32 -> fp32, int8 -> int32
  /// (`outDType` int32 or the default fp32). `inputPrecision` ("tf32" when empty, "tf32x3",
  /// "ieee"; any case) applies to fp32 inputs and is ignored for others. `acc`, when given,
  /// must be the result's dtype and M x N; else the product starts from zeros. Batched:
  /// `a` B x M x K and `b` B x K x N give B x M x N (`acc` too), one 2-D kiln.dot per batch
  /// element.
  Tile dot(const Tile &a, const Tile &b, std::optional<Tile> acc = std::nullopt,
           llvm::StringRef inputPrecision = "", DType outDType = DType::fp32(),
           int32_t maxNumImpreciseAcc = 0);

private:
  /// Checks the inputs of a reduction or scan (`noun` "reduction" or "scan", `verb` "reduce"
  /// or "scan" in the messages): same-shape tiles, an axis in range. Returns the axis made
  /// non-negative.
  int combineInputs(llvm::ArrayRef<Tile> inputs, int axis, llvm::StringRef noun,
                    llvm::StringRef verb);
  /// Fills `region` with the combine function of `inputs` (2N scalar block arguments) and
  /// ends it with `terminate(yielded values)` after checking what `combine` returns.
  void buildCombiner(mlir::Region & region, llvm::ArrayRef<Tile> inputs, const CombineBody &combine,
                     llvm::function_ref<void(mlir::ValueRange)> terminate);
  /// The element of `x` along `axis` where `chosen` (int1, x's shape) holds, bit for bit, and
  /// whether one was chosen (int1); `axis` is dropped. At most one element of each lane along
  /// `axis` may be chosen; with none the value is unspecified.
  std::pair<Tile, Tile> pickAlong(const Tile &x, const Tile &chosen, int axis);
  /// Each element's partner along `axis` (of size 2) of `x`, bit for bit.
  Tile pairPartner(const Tile &x, int axis);
  /// One stage of a bitonic network on `cube`, rows of 2^bits elements held as [R, 2, ..., 2]
  /// (dimension `bits - b + 1` is bit b of the position in the row, so that no step needs a
  /// reshape): merges the bitonic runs of 2^runBits elements by compare-exchange steps at
  /// distances 2^(runBits - 1) .. 1; a run is ascending when bit runBits of its position is
  /// clear, the order reversed when `descending` (one order for all when runBits == bits).
  Tile bitonicMerge(const Tile &cube, int bits, int runBits, bool descending);
  /// Checks that `x` is a tile of numbers for `what` (sort, topk, flip, ...).
  void requireNumberTile(const Tile &x, llvm::StringRef what);
  /// argmax (`greater`) or argmin.
  Tile argExtreme(const Tile &x, int axis, bool keepDims, bool greater);
  /// Triton's binary_op_type_checking: rejects pointer operands where not allowed, promotes
  /// both operands to the computation type (when `arithmetic`), broadcasts them.
  std::pair<Tile, Tile> binaryOperands(const Tile &a, const Tile &b, llvm::StringRef op,
                                       bool allowLhsPtr, bool allowRhsPtr, bool arithmetic,
                                       bool divOrMod);
  /// Triton's computation_type_impl, weak literals included.
  DType computationType(const Tile &a, const Tile &b, bool divOrMod, llvm::StringRef op);
  /// binaryOperands for integer-only operators.
  std::pair<Tile, Tile> bitwiseOperands(const Tile &a, const Tile &b, llvm::StringRef op);
  /// A comparison; the predicates are arith::CmpIPredicate / CmpFPredicate values.
  Tile compare(const Tile &a, const Tile &b, llvm::StringRef op, int signedPred, int unsignedPred,
               int floatPred);
  /// A float-only math function built by `create`.
  Tile unaryFloatMath(const Tile &x, llvm::StringRef name,
                      mlir::Value (*create)(mlir::OpBuilder &, mlir::Location, mlir::Value));
  /// kiln.addptr of broadcast operands; `negate` subtracts the offset.
  Tile addPtr(const Tile &ptr, const Tile &offset, bool negate);
  /// The constant `lit` converted to `dtype` (not weak).
  Tile literalAs(const Literal &lit, DType dtype, llvm::StringRef op);
  /// kiln.splat of a scalar to `shape`.
  Tile splatTo(const Tile &x, llvm::ArrayRef<int64_t> shape);
  /// Numpy-broadcasts `x` to `shape` (known compatible): unit dims first, then kiln.broadcast.
  Tile stretchTo(const Tile &x, llvm::ArrayRef<int64_t> shape);
  /// `x` as int1: `x != 0` for numbers and pointers (a null pointer is false), as Triton.
  Tile truthValue(const Tile &x);
  /// Checks that a loop-carried value keeps the dtype and shape of its init value `init`; a
  /// literal takes `init`'s dtype. `name` names the value in the error.
  Tile loopCarried(const Tile &value, const Tile &init, llvm::StringRef name);
  /// The MLIR type of a scalar (`isTile` false) or tile of `dtype`.
  mlir::Type typeOf(DType dtype, llvm::ArrayRef<int64_t> shape, bool isTile);
  /// Tile shapes: power-of-two dimensions, at most 2^20 elements.
  void checkShape(llvm::ArrayRef<int64_t> shape, llvm::StringRef what);
  /// Elements a tile may have (checkShape).
  static constexpr int64_t kMaxTileElements = 1 << 20;
  /// Errors unless a kernel is being built.
  void requireKernel(llvm::StringRef what) const;

  mlir::MLIRContext &ctx;
  /// Creates every op, at `loc`.
  mlir::OpBuilder b;
  /// The user's location set last, and its parts for errors.
  mlir::Location loc;
  std::string file = "<unknown>";
  unsigned line = 0, col = 0;
  /// The kernel being built: its name, argument dtypes, module and func.func.
  std::string kernelName;
  std::vector<DType> argTypes;
  /// Per argument, KernelArg::recipeField.
  std::vector<bool> recipeFields;
  /// derivedTensorMap's parameters by recipe.
  std::map<std::vector<int64_t>, unsigned> derivedMaps;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::Operation *kernelOp = nullptr;
};

} // namespace kiln

#endif // KILN_FRONTEND_BUILDER_H
