//===- Session.h - Kiln's front-end facade without MLIR types ---*- C++ -*-===//
//
// This file declares kiln::facade::Session, a language-neutral facade over kiln::Builder for
// front ends that cannot see LLVM or MLIR headers (the Python extension is one: it is compiled
// on machines without them, against the prebuilt libkiln.so). Values are integer handles into the
// session's value table, dtypes are Triton's names ("fp32", "int32", "pointer<fp16>", also
// "*fp16"), and every user error is a kiln::CompileError carrying the kernel, file, line, column
// and message. The facade adds no semantics: each call is one Builder call (or a fixed composition
// of Builder calls, documented at the method).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_FACADE_SESSION_H
#define KILN_FACADE_SESSION_H

#include "kiln/Compile.h"
#include "kiln/kiln_c.h"

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace kiln::facade {

/// A value of the kernel being built: an index into the session's value table.
using Handle = int32_t;

/// One kernel parameter: name, dtype name, and Triton's divisibility hint (0 = none).
struct ArgSpec {
  std::string name;
  std::string dtype;
  int32_t divisibility = 0;
  /// A tensor map recipe may name it (KernelArg::recipeField): false for the parts of a host
  /// tensor descriptor.
  bool recipeField = true;
};

/// Builds one kernel at a time through kiln::Builder (its own MLIRContext inside). Methods
/// throw CompileError for user errors; after an error the kernel is abandoned (call beginKernel).
class KILN_EXPORT Session {
public:
  Session();
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  //===--------------------------------------------------------------------===//
  // Kernels and locations
  //===--------------------------------------------------------------------===//

  /// Ops created from now on carry `file:line:col` (1-based), and errors report it.
  void setLocation(const std::string &file, unsigned line, unsigned col);
  /// Starts a kernel `name(args...)`; clears the value table.
  void beginKernel(const std::string &name, const std::vector<ArgSpec> &args);
  /// Parameter `index` of the kernel.
  Handle arg(unsigned index);
  /// tl.make_tensor_descriptor's tensor map where a launcher can encode one
  /// (Builder::derivedTensorMap): the map parameter's handle and number, or none.
  std::optional<std::pair<Handle, unsigned>> derivedTensorMap(Handle base,
                                                              const std::vector<Handle> &shape,
                                                              const std::vector<Handle> &strides,
                                                              const std::vector<int64_t> &block);
  /// Ends and verifies the kernel; returns its module, in memory, for the compiler. With
  /// `tmaPointerTiles` (a target whose dots copy tensor maps with the TMA: sm_90a), loops'
  /// loads of dot operands through advancing pointer tiles become loads of tensor maps the
  /// compiler appends (-kiln-pointer-tiles-to-descriptors; see tensorMapRecipes). With
  /// `attentionTiles` too, also tiles read transposed and bases a program moves (the pass's
  /// attention-tiles; the Python front end asks for both on sm_90a by default).
  KernelSource finishKernel(bool tmaPointerTiles = false, bool attentionTiles = false);
  /// The tensor map parameters of the kernel the last finishKernel returned that a launcher
  /// encodes from other arguments (derivedTensorMap's and the compiler's), in parameter order:
  /// each its number and recipe (kTensorMapRecipeAttr: parameter numbers of the kernel).
  std::vector<std::pair<unsigned, std::vector<int64_t>>> tensorMapRecipes() const;
  /// Throws CompileError with `message` at the current location.
  [[noreturn]] void error(const std::string &message);

  //===--------------------------------------------------------------------===//
  // What a value is
  //===--------------------------------------------------------------------===//

  /// The dtype's Triton name: "fp32", "int1", "pointer<fp16>".
  std::string dtype(Handle h) const;
  /// The tile shape; empty for scalars.
  std::vector<int64_t> shape(Handle h) const;
  bool isTile(Handle h) const;
  /// True for a literal that still adapts to the dtype it meets (Triton's weak scalars).
  bool isWeak(Handle h) const;

  //===--------------------------------------------------------------------===//
  // Literals, grid, tile creation
  //===--------------------------------------------------------------------===//

  Handle intConst(int64_t value);
  Handle uintConst(uint64_t value);
  Handle floatConst(double value);
  Handle boolConst(bool value);
  /// A weak literal made a plain value of its default dtype (Triton's to_tensor).
  Handle materialize(Handle h);
  Handle programId(int axis);
  Handle numPrograms(int axis);
  Handle arange(int64_t start, int64_t end);
  /// full(shape, value, dtype); an empty shape gives a scalar.
  Handle full(const std::vector<int64_t> &shape, Handle value, const std::string &dtype);
  Handle zeros(const std::vector<int64_t> &shape, const std::string &dtype);

  //===--------------------------------------------------------------------===//
  // Operators and functions
  //===--------------------------------------------------------------------===//

  /// A binary operator by name: add sub mul truediv floordiv mod lt le gt ge eq ne and or
  /// xor lshift rshift logical_and logical_or minimum maximum cdiv umulhi div_rn;
  /// "minimum_nan" and "maximum_nan" propagate NaNs (PropagateNan.ALL).
  Handle binary(const std::string &op, Handle a, Handle b);
  /// A unary operator or function by name: neg not invert exp exp2 log log2 sqrt rsqrt sin
  /// cos erf floor ceil abs sqrt_rn.
  Handle unary(const std::string &op, Handle x);
  Handle where(Handle cond, Handle a, Handle b);
  /// tl.fma(x, y, z): Builder::fma.
  Handle fma(Handle x, Handle y, Handle z);
  /// libdevice.<name>(args...) (Builder::libdevice).
  Handle libdevice(const std::string &name, const std::vector<Handle> &args);
  /// One overload of extern_elementwise: argument dtypes, symbol, result dtype.
  using ExternOverload = std::tuple<std::vector<std::string>, std::string, std::string>;
  /// extern_elementwise(args, overloads, is_pure) (Builder::externElementwise; `what` names it
  /// in errors).
  Handle externElementwise(const std::vector<Handle> &args,
                           const std::vector<ExternOverload> &overloads, bool pure,
                           const std::string &what);
  /// tl.inline_asm_elementwise(asm, constraints, args, dtypes, is_pure, pack)
  /// (Builder::inlineAsmElementwise): one handle per result dtype.
  std::vector<Handle> inlineAsmElementwise(const std::string &asmText,
                                           const std::string &constraints,
                                           const std::vector<Handle> &args,
                                           const std::vector<std::string> &dtypes, bool pure,
                                           int64_t pack);
  /// extra.cuda.globaltimer() ("globaltimer") or smid() ("smid").
  Handle hardwareRegister(const std::string &name);
  /// extra.cuda.gdc_wait() (`wait`) or gdc_launch_dependents().
  void gridDependency(bool wait);
  /// x.to(dtype) or, with `bitcast`, x.to(dtype, bitcast=True); a non-empty `rounding` is
  /// fp_downcast_rounding (ignored with `bitcast`, as in Triton).
  Handle cast(Handle x, const std::string &dtype, bool bitcast = false,
              const std::string &rounding = "");
  /// tl.multiple_of / tl.max_contiguous / tl.max_constancy (`kind`) with `values`.
  Handle hint(Handle x, const std::string &kind, const std::vector<int64_t> &values);

  //===--------------------------------------------------------------------===//
  // Memory (a negative handle leaves an operand out)
  //===--------------------------------------------------------------------===//

  Handle load(Handle ptr, Handle mask = -1, Handle other = -1, const std::string &cache = "",
              const std::string &evict = "", bool isVolatile = false);
  /// desc.load / desc.store of a tensor descriptor (Builder::descriptorLoad/Store).
  Handle descriptorLoad(Handle desc, Handle base, const std::vector<Handle> &offsets,
                        const std::vector<Handle> &shape, const std::vector<Handle> &strides,
                        const std::vector<int64_t> &block);
  void descriptorStore(Handle desc, Handle base, const std::vector<Handle> &offsets, Handle value,
                       const std::vector<Handle> &shape, const std::vector<Handle> &strides,
                       const std::vector<int64_t> &block);
  void store(Handle ptr, Handle value, Handle mask = -1, const std::string &cache = "",
             const std::string &evict = "");

  //===--------------------------------------------------------------------===//
  // Debugging
  //===--------------------------------------------------------------------===//

  /// tl.device_print(prefix, *args, hex): Builder::print.
  void devicePrint(const std::string &prefix, const std::vector<Handle> &args, bool hex = false);
  /// tl.device_assert(cond, msg): Builder::deviceAssert.
  void deviceAssert(Handle cond, const std::string &message);
  /// tl.debug_barrier(): Builder::debugBarrier.
  void debugBarrier();
  /// tl.assume(cond): Builder::assume.
  void assume(Handle cond);

  /// tl.atomic_<op> (add max min and or xor xchg) and tl.atomic_cas; "" takes the defaults
  /// (acq_rel, gpu).
  Handle atomicRMW(const std::string &op, Handle ptr, Handle val, Handle mask = -1,
                   const std::string &sem = "", const std::string &scope = "");
  Handle atomicCAS(Handle ptr, Handle cmp, Handle val, const std::string &sem = "",
                   const std::string &scope = "");

  //===--------------------------------------------------------------------===//
  // Shapes
  //===--------------------------------------------------------------------===//

  Handle expandDims(Handle x, int axis);
  Handle broadcastTo(Handle x, const std::vector<int64_t> &shape);
  /// broadcast(a, b): both to their common shape.
  std::vector<Handle> broadcast(Handle a, Handle b);
  Handle reshape(Handle x, const std::vector<int64_t> &shape, bool canReorder = false);
  Handle trans(Handle x, const std::vector<int32_t> &order = {});
  /// tl.join, tl.split (two handles), tl.interleave, tl.cat: Builder::join, split,
  /// interleave, cat.
  Handle join(Handle a, Handle b);
  std::vector<Handle> split(Handle a);
  Handle interleave(Handle a, Handle b);
  Handle cat(Handle a, Handle b, bool canReorder);
  /// tl.flip(x, dim), tl.gather(src, index, axis): Builder::flip, gather (no dim: the last).
  Handle flip(Handle x, std::optional<int> dim = std::nullopt);
  Handle gather(Handle src, Handle index, int axis);
  /// tl.sort(x, dim, descending), tl.topk(x, k, dim), tl.histogram(x, num_bins, mask):
  /// Builder::sort, topk, histogram (`mask` -1 for none).
  Handle sort(Handle x, std::optional<int> dim = std::nullopt, bool descending = false);
  Handle topk(Handle x, int64_t k, std::optional<int> dim = std::nullopt);
  Handle histogram(Handle x, int64_t numBins, Handle mask = -1);

  //===--------------------------------------------------------------------===//
  // Reductions
  //===--------------------------------------------------------------------===//

  /// A reduction by name along `axis` (negative counts from the end): sum max min argmax
  /// argmin xor_sum. The result drops `axis` unless `keepDims`.
  Handle reduceOp(const std::string &op, Handle x, int axis, bool keepDims = false);
  /// (accumulators, new values) -> combined values, one scalar per input.
  using CombineBody =
      std::function<std::vector<Handle>(const std::vector<Handle> &, const std::vector<Handle> &)>;
  /// tl.reduce(inputs, axis, combine_fn, keep_dims) over same-shape tiles.
  std::vector<Handle> reduce(const std::vector<Handle> &inputs, int axis,
                             const CombineBody &combine, bool keepDims = false);

  //===--------------------------------------------------------------------===//
  // Scans and matrix products
  //===--------------------------------------------------------------------===//

  /// tl.associative_scan(inputs, axis, combine_fn, reverse) over same-shape tiles.
  std::vector<Handle> scan(const std::vector<Handle> &inputs, int axis, const CombineBody &combine,
                           bool reverse = false);
  /// A scan by name along `axis`: cumsum (with `dtype`, a dtype name or "" for Triton's
  /// default) or cumprod (`dtype` must be "").
  Handle scanOp(const std::string &op, Handle x, int axis, bool reverse = false,
                const std::string &dtype = "");
  /// tl.dot(a, b, acc, input_precision, out_dtype, max_num_imprecise_acc): Builder::dot;
  /// `acc` -1 for none, `inputPrecision` "" for the default (tf32).
  Handle dot(Handle a, Handle b, Handle acc = -1, const std::string &inputPrecision = "",
             const std::string &outDtype = "fp32", int32_t maxNumImpreciseAcc = 0);

  //===--------------------------------------------------------------------===//
  // Control flow (bodies are called once, with the insertion point inside the region)
  //===--------------------------------------------------------------------===//

  /// (induction variable, iteration values) -> next iteration values.
  using ForBody = std::function<std::vector<Handle>(Handle, const std::vector<Handle> &)>;
  /// () -> yielded values.
  using BranchBody = std::function<std::vector<Handle>()>;
  /// (loop values) -> scalar truth value.
  using CondBody = std::function<Handle(const std::vector<Handle> &)>;
  /// (loop values) -> next loop values.
  using RegionBody = std::function<std::vector<Handle>(const std::vector<Handle> &)>;

  std::vector<Handle> forLoop(Handle lb, Handle ub, Handle step, const std::vector<Handle> &inits,
                              const ForBody &body, const std::vector<std::string> &names = {},
                              bool flatten = false, bool warpSpecialize = false);
  /// `elseFn` may be empty (no else branch) only when `thenFn` yields nothing.
  std::vector<Handle> ifThenElse(Handle cond, const BranchBody &thenFn, const BranchBody &elseFn,
                                 const std::vector<std::string> &names = {});
  std::vector<Handle> whileLoop(const std::vector<Handle> &inits, const CondBody &condFn,
                                const RegionBody &bodyFn,
                                const std::vector<std::string> &names = {});

  struct Impl;

private:
  std::unique_ptr<Impl> impl;
};

/// The functions of kiln.language.extra.cuda.libdevice: (name, overloads as "symbol:args:result"
/// with LibDevice.h's dtype letters, true when half arguments compute in fp32).
KILN_EXPORT std::vector<std::tuple<std::string, std::vector<std::string>, bool>>
libdeviceFunctions();

} // namespace kiln::facade

#endif // KILN_FACADE_SESSION_H
