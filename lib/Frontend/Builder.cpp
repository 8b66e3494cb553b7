//===- Builder.cpp - Kiln's shared semantic layer -------------------------===//
//
// This file implements kiln::Builder: Triton 3.x language semantics (dtypes with signedness,
// computation-type promotion, weak literals, numpy broadcasting, casts, pointer arithmetic,
// masked loads and stores, structured control flow) on top of the kiln, arith, math and scf
// dialects. Each entry point checks its operands first and throws CompileError with the user's
// location; only well-typed IR is created. Choices where Triton leaves room: fp16/bf16 math
// functions compute in fp32 and round back; unary minus on floats is arith.negf; pointer casts
// are kiln.ptr_cast (integer <-> pointer as 64 bits, pointer <-> pointer).
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/Builder.h"

#include "BuilderSupport.h"

#include "kiln/Analysis/AxisInfo.h"

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Passes.h"
#include "kiln/Transforms/DescriptorAccess.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/APSInt.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace kiln;

/// Triton's limit on the elements of one tile (TRITON_MAX_TENSOR_NUMEL).

//===----------------------------------------------------------------------===//
// DType, Tile, CompileError
//===----------------------------------------------------------------------===//

Type kiln::toMLIR(DType dtype, MLIRContext &ctx) {
  Type elem;
  switch (dtype.getKind()) {
  case ScalarKind::F16:
    elem = Float16Type::get(&ctx);
    break;
  case ScalarKind::BF16:
    elem = BFloat16Type::get(&ctx);
    break;
  case ScalarKind::F32:
    elem = Float32Type::get(&ctx);
    break;
  case ScalarKind::F64:
    elem = Float64Type::get(&ctx);
    break;
  case ScalarKind::F8E4M3:
    elem = Float8E4M3FNType::get(&ctx);
    break;
  case ScalarKind::F8E5M2:
    elem = Float8E5M2Type::get(&ctx);
    break;
  default:
    elem = IntegerType::get(&ctx, dtype.getPointee().getBitWidth());
  }
  return dtype.isPointer() ? Type(PointerType::get(&ctx, elem)) : elem;
}

bool Tile::isTile() const { return value && isa<RankedTensorType>(value.getType()); }

ArrayRef<int64_t> Tile::getShape() const {
  if (auto tensor = value ? dyn_cast<RankedTensorType>(value.getType()) : RankedTensorType())
    return tensor.getShape();
  return {};
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

/// Prints a shape as [a, b, c].
std::string kiln::fmtShape(ArrayRef<int64_t> shape) {
  std::string s = "[";
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? ", " : "") + std::to_string(d);
  return s + "]";
}

std::string kiln::describe(const Tile &t) {
  return t.dtype.str() + (t.isTile() ? fmtShape(t.getShape()) : "");
}

//===----------------------------------------------------------------------===//
// Kernels and locations
//===----------------------------------------------------------------------===//

kiln::Builder::Builder(MLIRContext &ctx) : ctx(ctx), b(&ctx), loc(UnknownLoc::get(&ctx)) {
  ctx.loadDialect<KilnDialect, arith::ArithDialect, math::MathDialect, scf::SCFDialect,
                  func::FuncDialect>();
}

kiln::Builder::~Builder() = default;

void kiln::Builder::setLocation(StringRef fileName, unsigned lineNo, unsigned colNo) {
  file = fileName.str();
  line = lineNo;
  col = colNo;
  loc = FileLineColLoc::get(&ctx, fileName, lineNo, colNo);
}

void kiln::Builder::error(const Twine &message) const {
  throw CompileError(kernelName, file, line, col, message.str());
}

void kiln::Builder::requireKernel(StringRef what) const {
  if (!kernelOp)
    error("expected a kernel being built (call beginKernel) before " + what);
}

void kiln::Builder::beginKernel(StringRef name, ArrayRef<KernelArg> args) {
  kernelName = name.str();
  kernelOp = nullptr;
  module = nullptr;
  if (name.empty())
    error("expected a kernel name, found an empty string");
  SmallVector<Type> types;
  argTypes.clear();
  recipeFields.clear();
  derivedMaps.clear();
  for (const KernelArg &a : args) {
    recipeFields.push_back(a.recipeField && !a.tensorMap);
    if (a.divisibility) {
      if (*a.divisibility <= 0)
        error("expected a positive divisibility for argument '" + a.name + "', found " +
              Twine(*a.divisibility));
      if (a.dtype.isFloat())
        error("expected an integer or pointer argument for divisibility " + Twine(*a.divisibility) +
              ", found " + a.dtype.str() + " for '" + a.name + "'");
    }
    if (a.tensorMap) {
      types.push_back(TensorMapType::get(&ctx));
      argTypes.push_back(DType::int64()); // not a value the kernel computes with
      continue;
    }
    types.push_back(toMLIR(a.dtype, ctx));
    argTypes.push_back(a.dtype);
  }
  module = ModuleOp::create(loc);
  b.setInsertionPointToEnd(module->getBody());
  auto fn = func::FuncOp::create(b, loc, name, b.getFunctionType(types, {}));
  for (auto [i, a] : llvm::enumerate(args))
    if (a.divisibility)
      fn.setArgAttr(i, kDivisibilityAttr, b.getI32IntegerAttr(*a.divisibility));
  Block *entry = fn.addEntryBlock();
  b.setInsertionPointToStart(entry);
  kernelOp = fn;
}

Tile kiln::Builder::arg(unsigned i) {
  requireKernel("reading an argument");
  if (i >= argTypes.size())
    error("expected an argument index below " + Twine(argTypes.size()) + ", found " + Twine(i));
  return Tile{llvm::cast<func::FuncOp>(kernelOp).getArgument(i), argTypes[i], std::nullopt};
}

Tile kiln::Builder::appendTensorMapArgument() {
  requireKernel("adding a tensor map argument");
  auto fn = llvm::cast<func::FuncOp>(kernelOp);
  unsigned index = fn.getNumArguments();
  if (failed(fn.insertArgument(index, TensorMapType::get(&ctx), DictionaryAttr(), loc)))
    error("cannot add a tensor map argument to the kernel");
  argTypes.push_back(DType::int64()); // not a value the kernel computes with
  recipeFields.push_back(false);
  return Tile{fn.getArgument(index), argTypes.back(), std::nullopt};
}

OwningOpRef<ModuleOp> kiln::Builder::finishKernel() {
  requireKernel("finishing it");
  func::ReturnOp::create(b, loc);
  // Literals are materialized eagerly at their default dtype; drop the ones promotion made
  // redundant so the IR reads like the source.
  SmallVector<Operation *> dead;
  kernelOp->walk([&](arith::ConstantOp op) {
    if (op->use_empty())
      dead.push_back(op);
  });
  for (Operation *op : dead)
    op->erase();
  kernelOp = nullptr;

  std::string diag;
  Location diagLoc = loc;
  {
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      if (diag.empty()) {
        diag = d.str();
        diagLoc = d.getLocation();
      }
      return success();
    });
    if (succeeded(mlir::verify(*module)))
      return std::move(module);
  }
  module = nullptr;
  if (auto flc = dyn_cast<FileLineColLoc>(diagLoc))
    throw CompileError(kernelName, flc.getFilename().str(), flc.getLine(), flc.getColumn(),
                       "generated IR does not verify: " + diag);
  error("generated IR does not verify: " + diag);
}

//===----------------------------------------------------------------------===//
// Literals and tile creation
//===----------------------------------------------------------------------===//

/// Triton's to_tensor_type for integers: int32, then uint32, int64, uint64.
static DType defaultIntDType(const Literal &lit) {
  if (lit.negative)
    return lit.magnitude <= (1ull << 31) ? DType::int32() : DType::int64();
  if (lit.magnitude < (1ull << 31))
    return DType::int32();
  if (lit.magnitude < (1ull << 32))
    return DType::uint32();
  return lit.magnitude < (1ull << 63) ? DType::int64() : DType::uint64();
}

Tile kiln::Builder::intConst(int64_t value) {
  Literal lit;
  lit.negative = value < 0;
  lit.magnitude = value < 0 ? uint64_t(-(value + 1)) + 1 : uint64_t(value);
  Tile t = literalAs(lit, defaultIntDType(lit), "an integer literal");
  t.literal = lit;
  return t;
}

Tile kiln::Builder::uintConst(uint64_t value) {
  Literal lit;
  lit.magnitude = value;
  Tile t = literalAs(lit, defaultIntDType(lit), "an integer literal");
  t.literal = lit;
  return t;
}

Tile kiln::Builder::floatConst(double value) {
  Literal lit;
  lit.kind = Literal::Kind::Float;
  lit.floatValue = value;
  // fp32 unless the magnitude is a finite non-zero value outside fp32's normal range.
  double mag = std::fabs(value);
  bool fp32 = std::isinf(mag) || std::isnan(value) || mag == 0.0 ||
              (mag >= 0x1p-126 && mag <= 0x1.fffffep127);
  Tile t = literalAs(lit, fp32 ? DType::fp32() : DType::fp64(), "a float literal");
  t.literal = lit;
  return t;
}

Tile kiln::Builder::boolConst(bool value) {
  Literal lit;
  lit.kind = Literal::Kind::Bool;
  lit.magnitude = value;
  Tile t = literalAs(lit, DType::int1(), "a bool literal");
  t.literal = lit;
  return t;
}

Tile kiln::Builder::literalAs(const Literal &lit, DType dtype, StringRef op) {
  requireKernel(op);
  if (dtype.isPointer())
    error("expected a number dtype for the literal " + fmtLiteral(lit) + " in " + op + ", found " +
          dtype.str());
  Type type = toMLIR(dtype, ctx);
  TypedAttr attr;
  if (dtype.isFloat()) {
    double v = lit.kind == Literal::Kind::Float ? lit.floatValue
               : lit.negative                   ? -double(lit.magnitude)
                                                : double(lit.magnitude);
    attr = b.getFloatAttr(type, v);
  } else if (lit.kind == Literal::Kind::Float) {
    // float -> int truncates toward zero; float -> bool is `!= 0`.
    unsigned width = dtype.getBitWidth();
    llvm::APSInt result(width, dtype.isUnsigned());
    bool exact;
    if (dtype.isBool())
      result = llvm::APSInt(llvm::APInt(1, lit.floatValue != 0.0), true);
    else
      llvm::APFloat(lit.floatValue).convertToInteger(result, llvm::APFloat::rmTowardZero, &exact);
    attr = b.getIntegerAttr(type, result);
  } else {
    unsigned width = dtype.getBitWidth();
    llvm::APInt v(64, lit.magnitude);
    if (lit.negative)
      v.negate();
    if (dtype.isBool())
      v = llvm::APInt(1, lit.magnitude != 0);
    else if (width < 64)
      v = v.trunc(width);
    attr = b.getIntegerAttr(type, v);
  }
  return Tile{arith::ConstantOp::create(b, loc, attr), dtype, std::nullopt};
}

Tile kiln::Builder::materialize(const Tile &x) { return Tile{x.value, x.dtype, std::nullopt}; }

Tile kiln::Builder::programId(int axis) {
  requireKernel("program_id");
  if (axis < 0 || axis > 2)
    error("expected program_id axis 0, 1 or 2, found " + Twine(axis));
  return Tile{ProgramIdOp::create(b, loc, static_cast<ProgramDim>(axis)), DType::int32(),
              std::nullopt};
}

Tile kiln::Builder::numPrograms(int axis) {
  requireKernel("num_programs");
  if (axis < 0 || axis > 2)
    error("expected num_programs axis 0, 1 or 2, found " + Twine(axis));
  return Tile{NumProgramsOp::create(b, loc, static_cast<ProgramDim>(axis)), DType::int32(),
              std::nullopt};
}

Tile kiln::Builder::arange(int64_t start, int64_t end) {
  requireKernel("arange");
  if (start < 0 || end < 0 || start > INT32_MAX || end > INT32_MAX)
    error("expected arange bounds in [0, 2^31), found start = " + Twine(start) +
          ", end = " + Twine(end));
  if (end <= start)
    error("expected arange end > start, found start = " + Twine(start) + ", end = " + Twine(end));
  int64_t n = end - start;
  if (!llvm::isPowerOf2_64(n))
    error("expected arange length end - start to be a power of two, found " + Twine(n));
  checkShape({n}, "arange");
  auto type = RankedTensorType::get({n}, b.getI32Type());
  return Tile{MakeRangeOp::create(b, loc, type, uint32_t(start), uint32_t(end)), DType::int32(),
              std::nullopt};
}

void kiln::Builder::checkShape(ArrayRef<int64_t> shape, StringRef what) {
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d <= 0 || !llvm::isPowerOf2_64(d))
      error("expected " + what + " dimensions to be powers of two, found " + fmtShape(shape));
    numel *= d;
    if (numel > kMaxTileElements)
      error("expected at most " + Twine(kMaxTileElements) + " elements in a tile for " + what +
            ", found shape " + fmtShape(shape));
  }
}

Type kiln::Builder::typeOf(DType dtype, ArrayRef<int64_t> shape, bool isTile) {
  Type elem = toMLIR(dtype, ctx);
  return isTile ? Type(RankedTensorType::get(shape, elem)) : elem;
}

Tile kiln::Builder::full(ArrayRef<int64_t> shape, const Tile &value, DType dtype) {
  requireKernel("full");
  checkShape(shape, "full");
  if (value.isTile())
    error("expected a scalar fill value for full, found " + describe(value));
  if (dtype.isPointer())
    error("expected a number dtype for full, found " + dtype.str());
  Tile v = cast(value, dtype);
  return shape.empty() ? v : splatTo(v, shape);
}

Tile kiln::Builder::zeros(ArrayRef<int64_t> shape, DType dtype) {
  requireKernel("zeros");
  if (dtype.isPointer())
    error("expected a number dtype for zeros, found " + dtype.str());
  checkShape(shape, "zeros");
  Tile zero = literalAs(Literal(), dtype, "zeros");
  return shape.empty() ? zero : splatTo(zero, shape);
}
