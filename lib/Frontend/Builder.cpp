//===- Builder.cpp - Kiln's shared semantic layer -------------------------===//
//
// This file implements kiln::Builder: Triton 3.x language semantics (dtypes with signedness,
// computation-type promotion, weak literals, numpy broadcasting, casts, pointer arithmetic,
// masked loads and stores, structured control flow) on top of the kiln, arith, math and scf
// dialects. Each entry point checks its operands first and throws CompileError with the user's
// location; only well-typed IR is created. Choices where Triton leaves room: fp16/bf16 math
// functions compute in fp32 and round back; unary minus on floats is arith.negf; pointer casts
// do not exist in the kiln dialect and are rejected.
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/Builder.h"

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
static constexpr int64_t kMaxTileElements = 1 << 20;

//===----------------------------------------------------------------------===//
// DType, Tile, CompileError
//===----------------------------------------------------------------------===//

DType DType::pointerTo(DType pointee) {
  DType d(pointee.kind);
  d.pointer = true;
  return d;
}

bool DType::isInt() const { return !pointer && kind <= ScalarKind::U64; }

bool DType::isSigned() const {
  return !pointer && kind >= ScalarKind::I8 && kind <= ScalarKind::I64;
}

bool DType::isFloat() const { return !pointer && kind >= ScalarKind::F16; }

unsigned DType::getBitWidth() const {
  if (pointer)
    return 64;
  switch (kind) {
  case ScalarKind::I1:
    return 1;
  case ScalarKind::I8:
  case ScalarKind::U8:
  case ScalarKind::F8E4M3:
  case ScalarKind::F8E5M2:
    return 8;
  case ScalarKind::I16:
  case ScalarKind::U16:
  case ScalarKind::F16:
  case ScalarKind::BF16:
    return 16;
  case ScalarKind::I32:
  case ScalarKind::U32:
  case ScalarKind::F32:
    return 32;
  default:
    return 64;
  }
}

unsigned DType::getMantissaWidth() const {
  switch (pointer ? ScalarKind::I32 : kind) {
  case ScalarKind::F16:
    return 10;
  case ScalarKind::BF16:
    return 7;
  case ScalarKind::F32:
    return 23;
  case ScalarKind::F64:
    return 52;
  case ScalarKind::F8E4M3:
    return 3;
  case ScalarKind::F8E5M2:
    return 2;
  default:
    return 0;
  }
}

/// Triton's names, indexed by ScalarKind.
static constexpr const char *kScalarNames[] = {"int1",  "int8",   "int16",  "int32",  "int64",
                                               "uint8", "uint16", "uint32", "uint64", "fp16",
                                               "bf16",  "fp32",   "fp64",   "fp8e4nv",
                                               "fp8e5"};

std::string DType::str() const {
  std::string name = kScalarNames[static_cast<int>(kind)];
  return pointer ? "pointer<" + name + ">" : name;
}

Type DType::toMLIR(MLIRContext &ctx) const {
  Type elem;
  switch (kind) {
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
    elem = IntegerType::get(&ctx, DType(kind).getBitWidth());
  }
  return pointer ? Type(PointerType::get(&ctx, elem)) : elem;
}

std::optional<DType> DType::parse(StringRef name) {
  name = name.trim();
  if (name.consume_front("*") || (name.consume_front("pointer<") && name.consume_back(">"))) {
    std::optional<DType> pointee = parse(name);
    if (!pointee || pointee->isPointer())
      return std::nullopt;
    return pointerTo(*pointee);
  }
  static const std::pair<const char *, ScalarKind> aliases[] = {
      {"i1", ScalarKind::I1},       {"bool", ScalarKind::I1},     {"i8", ScalarKind::I8},
      {"i16", ScalarKind::I16},     {"i32", ScalarKind::I32},     {"i64", ScalarKind::I64},
      {"u8", ScalarKind::U8},       {"u16", ScalarKind::U16},     {"u32", ScalarKind::U32},
      {"u64", ScalarKind::U64},     {"float16", ScalarKind::F16}, {"bfloat16", ScalarKind::BF16},
      {"float32", ScalarKind::F32}, {"float64", ScalarKind::F64},
      {"float8e4nv", ScalarKind::F8E4M3}, {"float8_e4m3fn", ScalarKind::F8E4M3},
      {"float8e5", ScalarKind::F8E5M2}, {"float8_e5m2", ScalarKind::F8E5M2}};
  for (auto [i, n] : llvm::enumerate(kScalarNames))
    if (name == n)
      return DType(static_cast<ScalarKind>(i));
  for (auto &[n, k] : aliases)
    if (name == n)
      return DType(k);
  return std::nullopt;
}

bool Tile::isTile() const { return value && isa<RankedTensorType>(value.getType()); }

ArrayRef<int64_t> Tile::getShape() const {
  if (auto tensor = value ? dyn_cast<RankedTensorType>(value.getType()) : RankedTensorType())
    return tensor.getShape();
  return {};
}

CompileError::CompileError(std::string kernel, std::string file, unsigned line, unsigned column,
                           std::string message)
    : kernel(std::move(kernel)), file(std::move(file)), line(line), column(column),
      message(std::move(message)) {
  full = this->file + ":" + std::to_string(line) + ":" + std::to_string(column) + ": error: ";
  if (!this->kernel.empty())
    full += "in kernel '" + this->kernel + "': ";
  full += this->message;
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

/// Prints a literal's value.
static std::string fmtLiteral(const Literal &lit) {
  if (lit.kind == Literal::Kind::Float) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", lit.floatValue);
    return buf;
  }
  return (lit.negative ? "-" : "") + std::to_string(lit.magnitude);
}

/// Type-promotion kinds, ordered as Triton orders them: bool < integer < float.
static int kindRank(DType d) { return d.isBool() ? 0 : d.isInt() ? 1 : 2; }

/// Triton's integer_promote_impl, the C "usual arithmetic conversions": with one signedness
/// the wider wins; otherwise the unsigned type wins unless the signed one is strictly wider.
static DType integerPromote(DType a, DType b) {
  unsigned wa = a.getBitWidth(), wb = b.getBitWidth();
  if (a.isSigned() == b.isSigned())
    return wa > wb ? a : b;
  if (a.isUnsigned())
    return wa >= wb ? a : b;
  return wb >= wa ? b : a;
}

/// The mlir constant `scalar` of `type` (splatted when `type` is a tile).
static Value constantOf(OpBuilder &b, Location loc, Type type, TypedAttr scalar) {
  if (auto tensor = dyn_cast<RankedTensorType>(type))
    return arith::ConstantOp::create(b, loc, SplatElementsAttr::get(tensor, scalar));
  return arith::ConstantOp::create(b, loc, scalar);
}

/// Zero of `type`'s element type, as a scalar attribute.
static TypedAttr zeroAttr(OpBuilder &b, Type type) {
  Type elem = getElementTypeOrSelf(type);
  if (isa<FloatType>(elem))
    return b.getFloatAttr(elem, 0.0);
  return b.getIntegerAttr(elem, 0);
}

/// Parses a Triton cache modifier, with or without its leading dot.
static std::optional<CacheModifier> parseCache(StringRef s) {
  s.consume_front(".");
  return symbolizeCacheModifier(s);
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
  for (const KernelArg &a : args) {
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
    types.push_back(a.dtype.toMLIR(ctx));
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
  Type type = dtype.toMLIR(ctx);
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
  Type elem = dtype.toMLIR(ctx);
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

//===----------------------------------------------------------------------===//
// Broadcasting and shapes
//===----------------------------------------------------------------------===//

Tile kiln::Builder::splatTo(const Tile &x, ArrayRef<int64_t> shape) {
  Type type = typeOf(x.dtype, shape, true);
  return Tile{SplatOp::create(b, loc, type, x.value), x.dtype, std::nullopt};
}

Tile kiln::Builder::stretchTo(const Tile &x, ArrayRef<int64_t> shape) {
  if (!x.isTile())
    return splatTo(x, shape);
  Tile t = materialize(x);
  // Prepend unit dimensions (numpy rule 1), then stretch the size-1 ones (rule 2).
  while (t.getShape().size() < shape.size()) {
    SmallVector<int64_t> s(t.getShape());
    s.insert(s.begin(), 1);
    t.value = ExpandDimsOp::create(b, loc, typeOf(t.dtype, s, true), t.value, uint32_t(0));
  }
  if (t.getShape() != shape)
    t.value = BroadcastOp::create(b, loc, typeOf(t.dtype, shape, true), t.value);
  return t;
}

/// The numpy broadcast of two shapes, or std::nullopt with the offending dimension.
static std::optional<SmallVector<int64_t>> broadcastShapes(ArrayRef<int64_t> a, ArrayRef<int64_t> b,
                                                           int64_t &bad) {
  size_t rank = std::max(a.size(), b.size());
  SmallVector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da != db && da != 1 && db != 1) {
      bad = i;
      return std::nullopt;
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

std::pair<Tile, Tile> kiln::Builder::broadcast(const Tile &a, const Tile &bb) {
  requireKernel("broadcast");
  Tile x = materialize(a), y = materialize(bb);
  if (!x.isTile() && !y.isTile())
    return {x, y};
  if (!y.isTile())
    return {x, splatTo(y, x.getShape())};
  if (!x.isTile())
    return {splatTo(x, y.getShape()), y};
  int64_t bad = 0;
  auto shape = broadcastShapes(x.getShape(), y.getShape(), bad);
  if (!shape)
    error("cannot broadcast shapes " + fmtShape(x.getShape()) + " and " + fmtShape(y.getShape()) +
          ": expected equal sizes or 1 in dimension " + Twine(bad) + " of the broadcast result");
  return {stretchTo(x, *shape), stretchTo(y, *shape)};
}

Tile kiln::Builder::expandDims(const Tile &x, int axis) {
  requireKernel("expand_dims");
  int rank = x.getShape().size() + 1;
  if (axis < -rank || axis >= rank)
    error("expected expand_dims axis in [" + Twine(-rank) + ", " + Twine(rank) +
          ") for a value of shape " + fmtShape(x.getShape()) + ", found " + Twine(axis));
  if (axis < 0)
    axis += rank;
  if (!x.isTile())
    return splatTo(materialize(x), {1});
  SmallVector<int64_t> shape(x.getShape());
  shape.insert(shape.begin() + axis, 1);
  return Tile{ExpandDimsOp::create(b, loc, typeOf(x.dtype, shape, true), x.value, uint32_t(axis)),
              x.dtype, std::nullopt};
}

Tile kiln::Builder::broadcastTo(const Tile &x, ArrayRef<int64_t> shape) {
  requireKernel("broadcast_to");
  checkShape(shape, "broadcast_to");
  if (!x.isTile())
    return shape.empty() ? materialize(x) : splatTo(materialize(x), shape);
  ArrayRef<int64_t> src = x.getShape();
  if (src.size() != shape.size())
    error("cannot broadcast shape " + fmtShape(src) + " to " + fmtShape(shape) +
          ": expected rank " + Twine(shape.size()) + ", found " + Twine(src.size()));
  for (auto [i, s] : llvm::enumerate(src))
    if (s != shape[i] && s != 1)
      error("cannot broadcast shape " + fmtShape(src) + " to " + fmtShape(shape) +
            ": expected dimension " + Twine(i) + " to be 1 or " + Twine(shape[i]) + ", found " +
            Twine(s));
  return stretchTo(x, shape);
}

Tile kiln::Builder::reshape(const Tile &x, ArrayRef<int64_t> shape, bool canReorder) {
  requireKernel("reshape");
  if (shape.empty())
    error("expected a non-empty shape for reshape, found []");
  checkShape(shape, "reshape");
  int64_t numel = 1, srcNumel = 1;
  for (int64_t d : shape)
    numel *= d;
  for (int64_t d : x.getShape())
    srcNumel *= d;
  if (numel != srcNumel)
    error("cannot reshape " + fmtShape(x.getShape()) + " (" + Twine(srcNumel) + " elements) to " +
          fmtShape(shape) + " (" + Twine(numel) +
          " elements): expected the same number of elements");
  if (!x.isTile())
    return splatTo(materialize(x), shape);
  return Tile{ReshapeOp::create(b, loc, typeOf(x.dtype, shape, true), x.value, canReorder), x.dtype,
              std::nullopt};
}

Tile kiln::Builder::trans(const Tile &x, ArrayRef<int32_t> order) {
  requireKernel("trans");
  SmallVector<int32_t> perm(order);
  if (perm.empty())
    perm = {1, 0};
  ArrayRef<int64_t> src = x.getShape();
  auto fmtOrder = [&] {
    std::string s = "(";
    for (auto [i, d] : llvm::enumerate(perm))
      s += (i ? ", " : "") + std::to_string(d);
    return s + ")";
  };
  if (!x.isTile() || perm.size() != src.size())
    error("expected trans order " + fmtOrder() + " to list the " + Twine(src.size()) +
          " dimensions of shape " + fmtShape(src));
  SmallVector<bool> seen(perm.size(), false);
  SmallVector<int64_t> shape;
  for (int32_t d : perm) {
    if (d < 0 || d >= int32_t(perm.size()) || seen[d])
      error("expected trans order to be a permutation of 0.." + Twine(perm.size() - 1) +
            ", found " + fmtOrder());
    seen[d] = true;
    shape.push_back(src[d]);
  }
  return Tile{TransOp::create(b, loc, typeOf(x.dtype, shape, true), x.value, perm), x.dtype,
              std::nullopt};
}

//===----------------------------------------------------------------------===//
// Promotion and binary operand checking
//===----------------------------------------------------------------------===//

DType kiln::Builder::computationType(const Tile &a, const Tile &bb, bool divOrMod, StringRef op) {
  DType ta = a.dtype, tb = bb.dtype;
  // fp8 has no arithmetic of its own: operations compute in fp32 (fp64 with an fp64 operand).
  if (ta.isFp8() || tb.isFp8())
    return ta == DType::fp64() || tb == DType::fp64() ? DType::fp64() : DType::fp32();
  // A literal of a kind no higher than the other operand's takes the other operand's dtype.
  if (a.isWeak() != bb.isWeak()) {
    DType lit = a.isWeak() ? ta : tb, other = a.isWeak() ? tb : ta;
    if (kindRank(lit) <= kindRank(other)) {
      if (divOrMod && (other == DType::fp16() || other == DType::bf16()))
        return DType::fp32();
      return other;
    }
  }
  auto either = [&](DType d) { return ta == d || tb == d; };
  if (either(DType::fp64()))
    return DType::fp64();
  if (either(DType::fp32()))
    return DType::fp32();
  // fp16 and bf16 hold neither each other's range nor precision: their supremum is fp32
  // (current Triton's documented rule; Triton 3.0/3.1 code returned fp16 here).
  if (either(DType::fp16()) && either(DType::bf16()))
    return DType::fp32();
  // PTX has no fp16/bf16 division or remainder: those compute in fp32.
  if (either(DType::fp16()))
    return divOrMod ? DType::fp32() : DType::fp16();
  if (ta == DType::bf16() && tb == DType::bf16())
    return divOrMod ? DType::fp32() : DType::bf16();
  if (either(DType::bf16()))
    return DType::fp32();
  if (divOrMod && ta.isSigned() != tb.isSigned())
    error("expected operands of one signedness for '" + op + "', found " + ta.str() + " and " +
          tb.str() + "; cast them to the same signedness");
  return integerPromote(ta, tb);
}

/// Rejects pointer operands where `allow` is false, pointer + float and mixed pointers.
static std::optional<std::string> checkPtr(DType x, DType y, bool allow, StringRef op) {
  if (!x.isPointer())
    return std::nullopt;
  if (!allow)
    return ("expected numeric operands for '" + op + "', found " + x.str() + " and " + y.str())
        .str();
  if ((y.isPointer() && x != y) || y.isFloat())
    return ("expected an integer offset for pointer '" + op + "', found " + x.str() + " and " +
            y.str())
        .str();
  return std::nullopt;
}

std::pair<Tile, Tile> kiln::Builder::binaryOperands(const Tile &a, const Tile &bb, StringRef op,
                                                    bool allowLhsPtr, bool allowRhsPtr,
                                                    bool arithmetic, bool divOrMod) {
  requireKernel(("'" + op + "'").str());
  if (auto msg = checkPtr(a.dtype, bb.dtype, allowLhsPtr, op))
    error(*msg);
  if (auto msg = checkPtr(bb.dtype, a.dtype, allowRhsPtr, op))
    error(*msg);
  Tile x = materialize(a), y = materialize(bb);
  if (arithmetic && !a.dtype.isPointer() && !bb.dtype.isPointer()) {
    DType ret = computationType(a, bb, divOrMod, op);
    auto convert = [&](const Tile &t) {
      if (!t.isWeak())
        return cast(t, ret);
      const Literal &lit = *t.literal;
      if (ret.isInt() && lit.kind != Literal::Kind::Float) {
        if (ret.isUnsigned() && lit.negative && lit.magnitude)
          error("expected a non-negative literal with " + ret.str() + " operands of '" + op +
                "', found " + fmtLiteral(lit) + "; cast one of them explicitly");
        unsigned w = ret.getBitWidth();
        uint64_t max = ret.isSigned() ? (1ull << (w - 1)) - (lit.negative ? 0 : 1)
                                      : (w == 64 ? ~0ull : (1ull << w) - 1);
        if (lit.magnitude > max)
          error("expected a literal in the range of " + ret.str() + " for '" + op + "', found " +
                fmtLiteral(lit));
      }
      return literalAs(lit, ret, op);
    };
    x = convert(a);
    y = convert(bb);
  }
  return broadcast(x, y);
}

std::pair<Tile, Tile> kiln::Builder::bitwiseOperands(const Tile &a, const Tile &bb, StringRef op) {
  auto [x, y] = binaryOperands(a, bb, op, false, false, true, false);
  if (!x.dtype.isInt())
    error("expected integer operands for '" + op + "', found " + a.dtype.str() + " and " +
          bb.dtype.str());
  return {x, y};
}

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

Tile kiln::Builder::addPtr(const Tile &ptr, const Tile &offset, bool negate) {
  Value off = offset.value;
  Type offType = off.getType();
  // kiln.addptr reads offsets as signed: zero-extend unsigned ones so they stay positive.
  if (offset.dtype.isUnsigned() && offset.dtype.getBitWidth() < 64) {
    offType = getSameShape(offType, b.getI64Type());
    off = arith::ExtUIOp::create(b, loc, offType, off);
  }
  if (negate)
    off = arith::SubIOp::create(b, loc, constantOf(b, loc, offType, zeroAttr(b, offType)), off);
  return Tile{AddPtrOp::create(b, loc, ptr.value.getType(), ptr.value, off), ptr.dtype,
              std::nullopt};
}

Tile kiln::Builder::add(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "+", true, true, true, false);
  if (x.dtype.isPointer() && y.dtype.isPointer())
    error("expected an integer offset for pointer '+', found " + x.dtype.str() + " and " +
          y.dtype.str());
  if (y.dtype.isPointer())
    std::swap(x, y);
  if (x.dtype.isPointer())
    return addPtr(x, y, false);
  Value v = x.dtype.isFloat() ? Value(arith::AddFOp::create(b, loc, x.value, y.value))
                              : Value(arith::AddIOp::create(b, loc, x.value, y.value));
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::sub(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "-", true, false, true, false);
  if (x.dtype.isPointer())
    return addPtr(x, y, true);
  Value v = x.dtype.isFloat() ? Value(arith::SubFOp::create(b, loc, x.value, y.value))
                              : Value(arith::SubIOp::create(b, loc, x.value, y.value));
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::mul(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "*", false, false, true, false);
  Value v = x.dtype.isFloat() ? Value(arith::MulFOp::create(b, loc, x.value, y.value))
                              : Value(arith::MulIOp::create(b, loc, x.value, y.value));
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::truediv(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "/", false, false, true, true);
  if (x.dtype.isInt()) {
    x = cast(x, DType::fp32());
    y = cast(y, DType::fp32());
  }
  return Tile{arith::DivFOp::create(b, loc, x.value, y.value), x.dtype, std::nullopt};
}

Tile kiln::Builder::floordiv(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "//", false, false, true, true);
  if (!x.dtype.isInt())
    error("expected integer operands for '//', found " + a.dtype.str() + " and " + bb.dtype.str());
  Value v = x.dtype.isSigned() ? Value(arith::DivSIOp::create(b, loc, x.value, y.value))
                               : Value(arith::DivUIOp::create(b, loc, x.value, y.value));
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::mod(const Tile &a, const Tile &bb) {
  auto [x, y] = binaryOperands(a, bb, "%", false, false, true, true);
  Value v;
  if (x.dtype.isFloat())
    v = arith::RemFOp::create(b, loc, x.value, y.value);
  else if (x.dtype.isSigned())
    v = arith::RemSIOp::create(b, loc, x.value, y.value);
  else
    v = arith::RemUIOp::create(b, loc, x.value, y.value);
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::cdiv(const Tile &a, const Tile &bb) {
  return floordiv(sub(add(a, bb), intConst(1)), bb);
}

Tile kiln::Builder::compare(const Tile &a, const Tile &bb, StringRef op, int signedPred,
                            int unsignedPred, int floatPred) {
  auto [x, y] = binaryOperands(a, bb, op, false, false, true, false);
  Value v;
  if (x.dtype.isFloat())
    v = arith::CmpFOp::create(b, loc, arith::CmpFPredicate(floatPred), x.value, y.value);
  else
    v = arith::CmpIOp::create(b, loc,
                              arith::CmpIPredicate(x.dtype.isSigned() ? signedPred : unsignedPred),
                              x.value, y.value);
  return Tile{v, DType::int1(), std::nullopt};
}

using IP = arith::CmpIPredicate;
using FP = arith::CmpFPredicate;

Tile kiln::Builder::lt(const Tile &a, const Tile &bb) {
  return compare(a, bb, "<", int(IP::slt), int(IP::ult), int(FP::OLT));
}
Tile kiln::Builder::le(const Tile &a, const Tile &bb) {
  return compare(a, bb, "<=", int(IP::sle), int(IP::ule), int(FP::OLE));
}
Tile kiln::Builder::gt(const Tile &a, const Tile &bb) {
  return compare(a, bb, ">", int(IP::sgt), int(IP::ugt), int(FP::OGT));
}
Tile kiln::Builder::ge(const Tile &a, const Tile &bb) {
  return compare(a, bb, ">=", int(IP::sge), int(IP::uge), int(FP::OGE));
}
Tile kiln::Builder::eq(const Tile &a, const Tile &bb) {
  return compare(a, bb, "==", int(IP::eq), int(IP::eq), int(FP::OEQ));
}
// Triton's `!=` on floats is unordered (NaN != NaN is true).
Tile kiln::Builder::ne(const Tile &a, const Tile &bb) {
  return compare(a, bb, "!=", int(IP::ne), int(IP::ne), int(FP::UNE));
}

Tile kiln::Builder::bitAnd(const Tile &a, const Tile &bb) {
  auto [x, y] = bitwiseOperands(a, bb, "&");
  return Tile{arith::AndIOp::create(b, loc, x.value, y.value), x.dtype, std::nullopt};
}
Tile kiln::Builder::bitOr(const Tile &a, const Tile &bb) {
  auto [x, y] = bitwiseOperands(a, bb, "|");
  return Tile{arith::OrIOp::create(b, loc, x.value, y.value), x.dtype, std::nullopt};
}
Tile kiln::Builder::bitXor(const Tile &a, const Tile &bb) {
  auto [x, y] = bitwiseOperands(a, bb, "^");
  return Tile{arith::XOrIOp::create(b, loc, x.value, y.value), x.dtype, std::nullopt};
}
Tile kiln::Builder::shl(const Tile &a, const Tile &bb) {
  auto [x, y] = bitwiseOperands(a, bb, "<<");
  return Tile{arith::ShLIOp::create(b, loc, x.value, y.value), x.dtype, std::nullopt};
}
Tile kiln::Builder::shr(const Tile &a, const Tile &bb) {
  auto [x, y] = bitwiseOperands(a, bb, ">>");
  Value v = x.dtype.isSigned() ? Value(arith::ShRSIOp::create(b, loc, x.value, y.value))
                               : Value(arith::ShRUIOp::create(b, loc, x.value, y.value));
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::truthValue(const Tile &x, StringRef what) {
  if (x.dtype.isPointer())
    error("expected a number or int1 for " + what + ", found " + describe(x));
  return cast(x, DType::int1());
}

Tile kiln::Builder::logicalAnd(const Tile &a, const Tile &bb) {
  return bitAnd(truthValue(a, "'and'"), truthValue(bb, "'and'"));
}
Tile kiln::Builder::logicalOr(const Tile &a, const Tile &bb) {
  return bitOr(truthValue(a, "'or'"), truthValue(bb, "'or'"));
}

Tile kiln::Builder::neg(const Tile &x) {
  requireKernel("unary '-'");
  if (x.dtype.isPointer())
    error("expected a number for unary '-', found " + describe(x));
  if (x.isWeak()) {
    // -literal stays a literal, as Python folds it before Triton sees it.
    Literal lit = *x.literal;
    if (lit.kind == Literal::Kind::Float) {
      lit.floatValue = -lit.floatValue;
      return floatConst(lit.floatValue);
    }
    if (lit.magnitude == 0)
      return intConst(0);
    if (!lit.negative && lit.magnitude <= (1ull << 63))
      return intConst(int64_t(0) - int64_t(lit.magnitude - 1) - 1);
    if (lit.negative)
      return uintConst(lit.magnitude);
    error("expected a literal representable in 64 bits, found -" + fmtLiteral(lit));
  }
  if (x.dtype.isFp8())
    return neg(cast(x, DType::fp32()));
  if (x.dtype.isFloat())
    return Tile{arith::NegFOp::create(b, loc, x.value), x.dtype, std::nullopt};
  Type t = x.value.getType();
  return Tile{arith::SubIOp::create(b, loc, constantOf(b, loc, t, zeroAttr(b, t)), x.value),
              x.dtype, std::nullopt};
}

Tile kiln::Builder::bitNot(const Tile &x) {
  requireKernel("'~'");
  if (!x.dtype.isInt())
    error("expected an integer for '~', found " + describe(x));
  Type t = x.value.getType();
  Type elem = getElementTypeOrSelf(t);
  Value ones = constantOf(
      b, loc, t, b.getIntegerAttr(elem, llvm::APInt::getAllOnes(elem.getIntOrFloatBitWidth())));
  return Tile{arith::XOrIOp::create(b, loc, x.value, ones), x.dtype, std::nullopt};
}

Tile kiln::Builder::logicalNot(const Tile &x) {
  requireKernel("'not'");
  Tile t = truthValue(x, "'not'");
  Value one = constantOf(b, loc, t.value.getType(), b.getIntegerAttr(b.getI1Type(), 1));
  return Tile{arith::XOrIOp::create(b, loc, t.value, one), t.dtype, std::nullopt};
}

/// min/max of two promoted operands: floats through `NanF` (propagates NaN) or `NumF`
/// (Triton's default: the number wins), integers through the signed or unsigned op.
template <typename NanF, typename NumF, typename SignedI, typename UnsignedI>
static Value createExtremum(OpBuilder &b, Location loc, const Tile &x, const Tile &y,
                            bool propagateNan) {
  if (x.dtype.isFloat())
    return propagateNan ? Value(NanF::create(b, loc, x.value, y.value))
                        : Value(NumF::create(b, loc, x.value, y.value));
  if (x.dtype.isSigned())
    return SignedI::create(b, loc, x.value, y.value);
  return UnsignedI::create(b, loc, x.value, y.value);
}

Tile kiln::Builder::minimum(const Tile &a, const Tile &bb, bool propagateNan) {
  auto [x, y] = binaryOperands(a, bb, "minimum", false, false, true, false);
  Value v = createExtremum<arith::MinimumFOp, arith::MinNumFOp, arith::MinSIOp, arith::MinUIOp>(
      b, loc, x, y, propagateNan);
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::maximum(const Tile &a, const Tile &bb, bool propagateNan) {
  auto [x, y] = binaryOperands(a, bb, "maximum", false, false, true, false);
  Value v = createExtremum<arith::MaximumFOp, arith::MaxNumFOp, arith::MaxSIOp, arith::MaxUIOp>(
      b, loc, x, y, propagateNan);
  return Tile{v, x.dtype, std::nullopt};
}

Tile kiln::Builder::where(const Tile &cond, const Tile &a, const Tile &bb) {
  requireKernel("where");
  if ((a.dtype.isPointer() || bb.dtype.isPointer()) && a.dtype != bb.dtype)
    error("expected where operands of one dtype, found " + a.dtype.str() + " and " +
          bb.dtype.str());
  Tile c = truthValue(cond, "the where condition");
  auto [x, y] = binaryOperands(a, bb, "where", true, true, true, false);
  // Broadcast all three to one shape: cond with x, x with y, then cond again.
  std::tie(c, x) = broadcast(c, x);
  std::tie(x, y) = broadcast(x, y);
  std::tie(c, x) = broadcast(c, x);
  return Tile{arith::SelectOp::create(b, loc, c.value, x.value, y.value), x.dtype, std::nullopt};
}

//===----------------------------------------------------------------------===//
// Math and casts
//===----------------------------------------------------------------------===//

Tile kiln::Builder::unaryFloatMath(const Tile &x, StringRef name,
                                   Value (*create)(OpBuilder &, Location, Value)) {
  requireKernel(name);
  if (x.dtype.isFp8())
    return unaryFloatMath(cast(x, DType::fp32()), name, create);
  if (!x.dtype.isFloat())
    error("expected a floating-point argument (fp16, bf16, fp32, fp64) for " + name + ", found " +
          describe(x));
  Tile in = materialize(x);
  if (x.dtype == DType::fp16() || x.dtype == DType::bf16()) {
    // No fp16/bf16 versions in libdevice: compute in fp32 and round back.
    Tile wide = cast(in, DType::fp32());
    return cast(Tile{create(b, loc, wide.value), DType::fp32(), std::nullopt}, x.dtype);
  }
  return Tile{create(b, loc, in.value), x.dtype, std::nullopt};
}

/// Creates the one-operand op OpT; the math functions below differ only in it.
template <typename OpT> static Value createUnary(OpBuilder &b, Location loc, Value v) {
  return OpT::create(b, loc, v);
}

Tile kiln::Builder::exp(const Tile &x) {
  return unaryFloatMath(x, "exp", createUnary<math::ExpOp>);
}
Tile kiln::Builder::exp2(const Tile &x) {
  return unaryFloatMath(x, "exp2", createUnary<math::Exp2Op>);
}
Tile kiln::Builder::log(const Tile &x) {
  return unaryFloatMath(x, "log", createUnary<math::LogOp>);
}
Tile kiln::Builder::log2(const Tile &x) {
  return unaryFloatMath(x, "log2", createUnary<math::Log2Op>);
}
Tile kiln::Builder::sqrt(const Tile &x) {
  return unaryFloatMath(x, "sqrt", createUnary<math::SqrtOp>);
}
Tile kiln::Builder::rsqrt(const Tile &x) {
  return unaryFloatMath(x, "rsqrt", createUnary<math::RsqrtOp>);
}
Tile kiln::Builder::sin(const Tile &x) {
  return unaryFloatMath(x, "sin", createUnary<math::SinOp>);
}
Tile kiln::Builder::cos(const Tile &x) {
  return unaryFloatMath(x, "cos", createUnary<math::CosOp>);
}
Tile kiln::Builder::erf(const Tile &x) {
  return unaryFloatMath(x, "erf", createUnary<math::ErfOp>);
}
Tile kiln::Builder::floor(const Tile &x) {
  return unaryFloatMath(x, "floor", createUnary<math::FloorOp>);
}
Tile kiln::Builder::ceil(const Tile &x) {
  return unaryFloatMath(x, "ceil", createUnary<math::CeilOp>);
}

Tile kiln::Builder::abs(const Tile &x) {
  requireKernel("abs");
  if (x.dtype.isFp8())
    return abs(cast(x, DType::fp32()));
  Tile in = materialize(x);
  if (x.dtype.isFloat())
    return Tile{math::AbsFOp::create(b, loc, in.value), x.dtype, std::nullopt};
  if (x.dtype.isSigned())
    return Tile{math::AbsIOp::create(b, loc, in.value), x.dtype, std::nullopt};
  if (x.dtype.isUnsigned())
    return in;
  error("expected a number for abs, found " + describe(x));
}

Tile kiln::Builder::cast(const Tile &x, DType dst) {
  requireKernel("a cast");
  DType src = x.dtype;
  if (src.isPointer() || dst.isPointer()) {
    if (src == dst)
      return materialize(x);
    error("cannot cast " + describe(x) + " to " + dst.str() +
          ": expected number dtypes (kiln has no pointer casts)");
  }
  if (x.isWeak())
    return literalAs(*x.literal, dst, "a cast");
  if (src == dst)
    return x;
  Type type = getSameShape(x.value.getType(), dst.toMLIR(ctx));
  auto make = [&](Value v) { return Tile{v, dst, std::nullopt}; };
  // fp16, bf16 and fp8 convert to anything but fp32 through fp32 (-kiln-expand-fp8 lowers the
  // fp8 <-> fp32 conversions).
  bool half = src == DType::fp16() || src == DType::bf16() || src.isFp8();
  if (half && dst != DType::fp32())
    return cast(cast(x, DType::fp32()), dst);
  if (dst.isFp8() && src != DType::fp32())
    return cast(cast(x, DType::fp32()), dst);
  if (src.isFloat() && dst.isFloat())
    return dst.getBitWidth() < src.getBitWidth()
               ? make(arith::TruncFOp::create(b, loc, type, x.value))
               : make(arith::ExtFOp::create(b, loc, type, x.value));
  if (dst.isBool()) {
    // To int1 is a comparison with zero (unordered for floats: NaN is true).
    Type t = x.value.getType();
    Value zero = constantOf(b, loc, t, zeroAttr(b, t));
    if (src.isFloat())
      return make(arith::CmpFOp::create(b, loc, FP::UNE, x.value, zero));
    return make(arith::CmpIOp::create(b, loc, IP::ne, x.value, zero));
  }
  if (src.isInt() && dst.isInt()) {
    unsigned ws = src.getBitWidth(), wd = dst.getBitWidth();
    if (ws == wd)
      return make(x.value);
    if (wd < ws)
      return make(arith::TruncIOp::create(b, loc, type, x.value));
    return src.isSigned() ? make(arith::ExtSIOp::create(b, loc, type, x.value))
                          : make(arith::ExtUIOp::create(b, loc, type, x.value));
  }
  if (src.isFloat())
    return dst.isSigned() ? make(arith::FPToSIOp::create(b, loc, type, x.value))
                          : make(arith::FPToUIOp::create(b, loc, type, x.value));
  return src.isSigned() ? make(arith::SIToFPOp::create(b, loc, type, x.value))
                        : make(arith::UIToFPOp::create(b, loc, type, x.value));
}

Tile kiln::Builder::hint(const Tile &x, StringRef kind, ArrayRef<int64_t> values) {
  requireKernel(kind);
  StringRef attr;
  if (kind == "multiple_of")
    attr = kMultipleOfAttr;
  else if (kind == "max_contiguous")
    attr = kMaxContiguousAttr;
  else if (kind == "max_constancy")
    attr = kMaxConstancyAttr;
  if (attr.empty())
    error("unknown hint '" + kind + "' (expected multiple_of, max_contiguous or max_constancy)");
  if (!x.dtype.isInt() || x.dtype.isBool())
    error("expected an integer tile or scalar for " + kind + ", found " + describe(x));
  Tile t = materialize(x);
  unsigned rank = t.isTile() ? t.getShape().size() : 1;
  if (values.size() != rank && values.size() != 1)
    error("expected " + Twine(rank) + " value" + (rank == 1 ? "" : "s") + " for " + kind +
          " of " + describe(x) + ", found " + Twine(values.size()));
  SmallVector<int64_t> field;
  for (unsigned d = 0; d < rank; ++d) {
    int64_t v = values.size() == 1 ? values[0] : values[d];
    if (v < 1)
      error("expected positive values for " + kind + ", found " + Twine(v));
    // The analysis works in powers of two: the largest one dividing the value is as true.
    field.push_back(int64_t(1) << llvm::countr_zero(uint64_t(v)));
  }
  // Recorded on the op that computes the value (a function argument has its own
  // specialization); the axis analysis reads it there.
  if (Operation *def = t.value.getDefiningOp(); def && def->getNumResults() == 1)
    def->setAttr(attr, DenseI64ArrayAttr::get(&ctx, field));
  return t;
}

std::vector<Tile> kiln::Builder::widenFp8(ArrayRef<Tile> inputs) {
  std::vector<Tile> out;
  for (const Tile &t : inputs)
    out.push_back(t.dtype.isFp8() ? cast(t, DType::fp32()) : t);
  return out;
}

Tile kiln::Builder::bitcast(const Tile &x, DType dst) {
  requireKernel("a bitcast");
  if (x.dtype.isPointer() || dst.isPointer()) {
    if (x.dtype == dst)
      return materialize(x);
    error("cannot bitcast " + describe(x) + " to " + dst.str() +
          ": expected number dtypes (kiln has no pointer casts)");
  }
  if (x.dtype.getBitWidth() != dst.getBitWidth())
    error("cannot bitcast " + describe(x) + " to " + dst.str() + ": expected " +
          Twine(x.dtype.getBitWidth()) + " bits, found " + Twine(dst.getBitWidth()));
  Tile in = materialize(x);
  Type type = getSameShape(in.value.getType(), dst.toMLIR(ctx));
  if (type == in.value.getType())
    return Tile{in.value, dst, std::nullopt};
  return Tile{arith::BitcastOp::create(b, loc, type, in.value), dst, std::nullopt};
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

/// Parses Triton's eviction policy spelling into `out` ("" is the default policy); false
/// for an unknown spelling.
static bool parseEvict(StringRef s, EvictionPolicyAttr &out, MLIRContext &ctx) {
  out = {};
  if (s == "evict_first")
    out = EvictionPolicyAttr::get(&ctx, EvictionPolicy::evict_first);
  else if (s == "evict_last")
    out = EvictionPolicyAttr::get(&ctx, EvictionPolicy::evict_last);
  return out || s.empty();
}

/// The cache modifier (one of `allowed`, Triton's ".cg" spelling) and eviction policy of a
/// `what` ("load" or "store"); an unknown or disallowed one is a user error.
static std::pair<std::optional<CacheModifier>, EvictionPolicyAttr>
parseAccessModifiers(kiln::Builder &b, const std::string &cacheName,
                     const std::string &evictName, std::initializer_list<CacheModifier> allowed,
                     StringRef what) {
  std::optional<CacheModifier> cache;
  if (!cacheName.empty()) {
    cache = parseCache(cacheName);
    if (!cache || !llvm::is_contained(allowed, *cache)) {
      std::string names;
      for (CacheModifier c : allowed)
        names += (names.empty() ? "'." : ", '.") + stringifyCacheModifier(c).str() + "'";
      b.error("expected a " + what + " cache modifier (" + names + "), found '" + cacheName + "'");
    }
  }
  EvictionPolicyAttr evict;
  if (!parseEvict(evictName, evict, b.getContext()))
    b.error("expected an eviction policy ('evict_first', 'evict_last'), found '" + evictName +
            "'");
  return {cache, evict};
}

/// `values` cast to `to`, each an integer scalar of any width (else an error naming `what`):
/// the offsets of a descriptor access, the extents and strides of a descriptor the kernel
/// built.
static SmallVector<Value> descriptorScalars(kiln::Builder &builder, ArrayRef<Tile> values,
                                           DType to, const std::string &what) {
  return llvm::map_to_vector(values, [&](const Tile &t) {
    if (t.isTile() || !t.dtype.isInt())
      builder.error("expected integer scalars as " + what + ", found " + describe(t));
    return builder.materialize(builder.cast(t, to)).value;
  });
}

/// The operands descriptorLoad and descriptorStore share, checked: int32 offsets (cast from
/// any integer), the base pointer's element dtype, a power-of-two block of the tensor's rank.
static SmallVector<Value> descriptorOffsets(kiln::Builder &builder, const Tile &desc, const Tile &base,
                                            ArrayRef<Tile> offsets, ArrayRef<Tile> shape,
                                            ArrayRef<Tile> strides, ArrayRef<int64_t> block,
                                            StringRef what) {
  // A descriptor the kernel built (tl.make_tensor_descriptor) has no tensor map.
  if (desc.value && !isa<TensorMapType>(desc.value.getType()))
    builder.error("expected a tensor descriptor for " + what);
  if (!base.dtype.isPointer() || base.isTile())
    builder.error("expected a scalar pointer as the base of a tensor descriptor, found " +
                  describe(base));
  if (shape.size() != block.size() || strides.size() + 1 != block.size())
    builder.error("expected a tensor descriptor of rank " + Twine(block.size()) + ", found " +
                  Twine(shape.size()) + " extents and " + Twine(strides.size() + 1) +
                  " strides");
  if (offsets.size() != block.size())
    builder.error("expected " + Twine(block.size()) + " offsets for " + what +
                  " of a rank-" + Twine(block.size()) + " tensor descriptor, found " +
                  Twine(offsets.size()));
  for (int64_t d : block)
    if (d <= 0 || !llvm::isPowerOf2_64(uint64_t(d)))
      builder.error("expected a block shape of powers of two for " + what + ", found " +
                    fmtShape(block));
  return descriptorScalars(builder, offsets, DType::int32(), "the offsets of " + what.str());
}

static SmallVector<Value> tileValues(ArrayRef<Tile> tiles) {
  return llvm::map_to_vector(tiles, [](const Tile &t) { return t.value; });
}

/// The extents (int32) and strides (int64) of a descriptor the kernel built, from integer
/// scalars of any width.
static SmallVector<Value> descriptorExtents(kiln::Builder &builder, ArrayRef<Tile> shape) {
  return descriptorScalars(builder, shape, DType::int32(),
                           "the shape of tl.make_tensor_descriptor");
}
static SmallVector<Value> descriptorStrides(kiln::Builder &builder, ArrayRef<Tile> strides) {
  return descriptorScalars(builder, strides, DType::int64(),
                           "the strides of tl.make_tensor_descriptor");
}

Tile kiln::Builder::descriptorLoad(const Tile &desc, const Tile &base, ArrayRef<Tile> offsets,
                                   ArrayRef<Tile> shape, ArrayRef<Tile> strides,
                                   ArrayRef<int64_t> block) {
  requireKernel("desc.load");
  SmallVector<Value> offs =
      descriptorOffsets(*this, desc, base, offsets, shape, strides, block, "desc.load");
  DType elem = base.dtype.getPointee();
  auto type = RankedTensorType::get(block, elem.toMLIR(ctx));
  if (!desc.value) { // built in the kernel: the masked load of the block, now
    auto [ptrs, mask] = emitDescriptorBlockAddress(b, loc, type, base.value, offs,
                                                   descriptorExtents(*this, shape),
                                                   descriptorStrides(*this, strides));
    Value zero = arith::ConstantOp::create(b, loc, type, b.getZeroAttr(type));
    return Tile{LoadOp::create(b, loc, ptrs, mask, zero), elem, std::nullopt};
  }
  Value v = DescriptorLoadOp::create(b, loc, type, desc.value, base.value, offs,
                                     tileValues(shape), tileValues(strides));
  return Tile{v, elem, std::nullopt};
}

void kiln::Builder::descriptorStore(const Tile &desc, const Tile &base, ArrayRef<Tile> offsets,
                                    const Tile &value, ArrayRef<Tile> shape,
                                    ArrayRef<Tile> strides, ArrayRef<int64_t> block) {
  requireKernel("desc.store");
  SmallVector<Value> offs =
      descriptorOffsets(*this, desc, base, offsets, shape, strides, block, "desc.store");
  if (!value.isTile() || value.getShape() != block)
    error("expected a value of the descriptor's block shape " + fmtShape(block) +
          " for desc.store, found " + describe(value));
  Tile v = materialize(cast(value, base.dtype.getPointee()));
  if (!desc.value) { // built in the kernel: the masked store of the block, now
    auto [ptrs, mask] = emitDescriptorBlockAddress(
        b, loc, mlir::cast<RankedTensorType>(v.value.getType()), base.value, offs,
        descriptorExtents(*this, shape), descriptorStrides(*this, strides));
    StoreOp::create(b, loc, ptrs, v.value, mask, CacheModifierAttr(), EvictionPolicyAttr());
    return;
  }
  DescriptorStoreOp::create(b, loc, desc.value, base.value, offs, v.value, tileValues(shape),
                            tileValues(strides));
}

Tile kiln::Builder::load(const Tile &ptr, std::optional<Tile> mask, std::optional<Tile> other,
                         const LoadOptions &options) {
  requireKernel("load");
  if (mask && !mask->value)
    mask.reset();
  if (other && !other->value)
    other.reset();
  if (!ptr.dtype.isPointer())
    error("expected a pointer or a tile of pointers for load, found " + describe(ptr));
  if (other && !mask)
    error("expected a mask for load when `other` is given, found none");
  if (!ptr.isTile()) {
    if (mask && mask->isTile())
      error("expected a scalar mask for a load through a scalar pointer, found " + describe(*mask));
    if (other && other->isTile())
      error("expected a scalar `other` for a load through a scalar pointer, found " +
            describe(*other));
  }
  if (mask && !mask->dtype.isBool())
    error("expected a mask of dtype int1 for load, found " + describe(*mask));
  auto [cache, evict] = parseAccessModifiers(
      *this, options.cache, options.evict,
      {CacheModifier::ca, CacheModifier::cg, CacheModifier::cv}, "load");
  // ld.volatile takes no cache operator and no cache hint (PTX ISA 9.7.9.8).
  if (options.isVolatile && (cache || evict))
    error("expected no cache modifier or eviction policy on a volatile load, found '" +
          options.cache + "' and '" + options.evict + "'");

  // Triton broadcasts ptr, mask and other together; other takes the pointee dtype.
  Tile p = materialize(ptr);
  DType elem = ptr.dtype.getPointee();
  std::optional<Tile> m, o;
  if (mask)
    std::tie(p, m) = broadcast(p, cast(*mask, DType::int1()));
  if (other)
    std::tie(p, o) = broadcast(p, cast(*other, elem));
  if (m && m->getShape() != p.getShape())
    m = stretchTo(*m, p.getShape());
  Type result = getSameShape(p.value.getType(), elem.toMLIR(ctx));
  auto op = LoadOp::create(b, loc, result, p.value, m ? m->value : Value(), o ? o->value : Value(),
                           cache ? CacheModifierAttr::get(&ctx, *cache) : CacheModifierAttr(),
                           evict, options.isVolatile);
  return Tile{op.getResult(), elem, std::nullopt};
}

void kiln::Builder::store(const Tile &ptr, const Tile &value, std::optional<Tile> mask,
                          const StoreOptions &options) {
  requireKernel("store");
  if (mask && !mask->value)
    mask.reset();
  if (!ptr.dtype.isPointer())
    error("expected a pointer or a tile of pointers for store, found " + describe(ptr));
  if (!ptr.isTile()) {
    if (value.isTile())
      error("expected a scalar value for a store through a scalar pointer, found " +
            describe(value));
    if (mask && mask->isTile())
      error("expected a scalar mask for a store through a scalar pointer, found " +
            describe(*mask));
  }
  if (mask && !mask->dtype.isBool())
    error("expected a mask of dtype int1 for store, found " + describe(*mask));
  auto [cache, evict] = parseAccessModifiers(
      *this, options.cache, options.evict,
      {CacheModifier::wb, CacheModifier::cs, CacheModifier::wt}, "store");

  // value and mask broadcast to the pointer's shape, never the other way round.
  ArrayRef<int64_t> shape = ptr.getShape();
  auto fit = [&](const Tile &t, StringRef what) {
    int64_t bad = 0;
    auto common = broadcastShapes(shape, t.getShape(), bad);
    if (!common || ArrayRef<int64_t>(*common) != shape)
      error("expected a " + what + " that broadcasts to the pointer shape " + fmtShape(shape) +
            " for store, found " + describe(t));
    return ptr.isTile() ? stretchTo(t, shape) : t;
  };
  Tile v = fit(cast(value, ptr.dtype.getPointee()), "value");
  std::optional<Tile> m;
  if (mask)
    m = fit(materialize(*mask), "mask");
  StoreOp::create(b, loc, ptr.value, v.value, m ? m->value : Value(),
                  cache ? CacheModifierAttr::get(&ctx, *cache) : CacheModifierAttr(), evict);
}

//===----------------------------------------------------------------------===//
// Debugging
//===----------------------------------------------------------------------===//

void kiln::Builder::print(StringRef prefix, ArrayRef<Tile> args, bool hex) {
  requireKernel("device_print");
  SmallVector<Value> values;
  for (const Tile &a : args)
    values.push_back(materialize(a).value);
  // Triton's semantic.device_print: a prefix followed by values reads " prefix: ".
  std::string p = prefix.str();
  if (!args.empty()) {
    if (!StringRef(p).ends_with(" "))
      p += " ";
    if (!StringRef(p).ends_with(": "))
      p = p.substr(0, p.size() - 1) + ": ";
  }
  if (p.size() > 2 && !StringRef(p).starts_with(" "))
    p = " " + p;
  PrintOp::create(b, loc, p, hex, values);
}

void kiln::Builder::deviceAssert(const Tile &cond, StringRef message) {
  requireKernel("device_assert");
  Tile c = materialize(truthValue(cond, "device_assert"));
  AssertOp::create(b, loc, c.value, message);
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

/// The name of value `i` for messages: `names[i]` when given, else "#i".
static std::string nameOf(ArrayRef<std::string> names, size_t i) {
  return i < names.size() ? names[i] : "#" + std::to_string(i);
}

/// True when the literal `value` may take `like`'s dtype where the two meet in control flow:
/// `like` is a non-literal scalar number of a kind at least the literal's.
static bool adoptsDType(const Tile &value, const Tile &like) {
  return value.isWeak() && !like.isWeak() && !like.isTile() && !like.dtype.isPointer() &&
         kindRank(value.dtype) <= kindRank(like.dtype);
}

Tile kiln::Builder::loopCarried(const Tile &value, const Tile &init, StringRef name) {
  if (adoptsDType(value, init))
    return literalAs(*value.literal, init.dtype, "a loop-carried value");
  if (value.dtype != init.dtype || value.value.getType() != init.value.getType())
    error("loop-carried value '" + name + "' changes type from " + describe(init) + " to " +
          describe(value));
  return materialize(value);
}

std::vector<Tile> kiln::Builder::forLoop(const Tile &lb, const Tile &ub, const Tile &step,
                                         ArrayRef<Tile> inits, const ForBody &body,
                                         ArrayRef<std::string> names, bool flatten) {
  requireKernel("a for loop");
  const std::pair<const Tile *, const char *> bounds[] = {
      {&lb, "lower bound"}, {&ub, "upper bound"}, {&step, "step"}};
  for (auto [t, what] : bounds) {
    if (t->isTile() || !t->dtype.isInt() || t->dtype.isBool())
      error(Twine("expected a scalar integer loop ") + what + ", found " + describe(*t));
  }
  if (step.isWeak() && (step.literal->negative || step.literal->magnitude == 0))
    error("expected a positive loop step, found " + fmtLiteral(*step.literal));
  DType ivType = integerPromote(integerPromote(lb.dtype, ub.dtype), step.dtype);
  Value lbv = cast(lb, ivType).value, ubv = cast(ub, ivType).value,
        stepv = cast(step, ivType).value;
  SmallVector<Value> initValues;
  SmallVector<Tile> initTiles;
  for (const Tile &t : inits) {
    initTiles.push_back(materialize(t));
    initValues.push_back(t.value);
  }
  auto forOp =
      scf::ForOp::create(b, loc, lbv, ubv, stepv, initValues, nullptr, ivType.isUnsigned());
  if (flatten)
    forOp->setAttr(kFlattenAttr, b.getUnitAttr());
  std::vector<Tile> results;
  {
    OpBuilder::InsertionGuard guard(b);
    Block *block = forOp.getBody();
    if (!block->empty() && block->back().hasTrait<OpTrait::IsTerminator>())
      block->back().erase();
    b.setInsertionPointToEnd(block);
    SmallVector<Tile> iters;
    for (auto [i, t] : llvm::enumerate(initTiles))
      iters.push_back(Tile{forOp.getRegionIterArgs()[i], t.dtype, std::nullopt});
    std::vector<Tile> next = body(Tile{forOp.getInductionVar(), ivType, std::nullopt}, iters);
    if (next.size() != inits.size())
      error("expected the loop body to yield " + Twine(inits.size()) +
            " loop-carried values, found " + Twine(next.size()));
    SmallVector<Value> yielded;
    for (auto [i, v] : llvm::enumerate(next))
      yielded.push_back(loopCarried(v, initTiles[i], nameOf(names, i)).value);
    scf::YieldOp::create(b, loc, yielded);
  }
  for (auto [i, t] : llvm::enumerate(initTiles))
    results.push_back(Tile{forOp.getResult(i), t.dtype, std::nullopt});
  return results;
}

std::vector<Tile> kiln::Builder::ifThenElse(const Tile &cond, const BranchBody &thenFn,
                                            const BranchBody &elseFn, ArrayRef<std::string> names) {
  requireKernel("an if statement");
  if (cond.isTile())
    error("expected a scalar condition for if, found " + describe(cond));
  Tile c = truthValue(cond, "an if condition");
  Location ifLoc = loc;
  auto tmp = scf::IfOp::create(b, loc, TypeRange{}, c.value, /*withElseRegion=*/bool(elseFn));
  Block *thenBlock = tmp.thenBlock(), *elseBlock = elseFn ? tmp.elseBlock() : nullptr;
  thenBlock->back().erase();
  if (elseBlock)
    elseBlock->back().erase();
  std::vector<Tile> thenVals, elseVals;
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(thenBlock);
    thenVals = thenFn();
    if (elseFn) {
      b.setInsertionPointToEnd(elseBlock);
      elseVals = elseFn();
    } else if (!thenVals.empty()) {
      error("expected an else branch for an if whose then branch yields " + Twine(thenVals.size()) +
            " values, found none");
    }
    if (thenVals.size() != elseVals.size())
      error("expected both branches of if to yield the same number of values, found " +
            Twine(thenVals.size()) + " and " + Twine(elseVals.size()));
    // Line the branches up: a literal takes the other branch's dtype.
    SmallVector<Value> thenYield, elseYield;
    SmallVector<Type> types;
    for (size_t i = 0; i < thenVals.size(); ++i) {
      Tile &t = thenVals[i], &e = elseVals[i];
      std::string name = nameOf(names, i);
      if (adoptsDType(t, e)) {
        b.setInsertionPointToEnd(thenBlock);
        t = literalAs(*t.literal, e.dtype, "an if result");
      } else if (adoptsDType(e, t)) {
        b.setInsertionPointToEnd(elseBlock);
        e = literalAs(*e.literal, t.dtype, "an if result");
      }
      if (t.dtype != e.dtype || t.value.getType() != e.value.getType())
        error("value '" + name + "' has type " + describe(t) + " in the then branch but " +
              describe(e) + " in the else branch");
      thenYield.push_back(t.value);
      elseYield.push_back(e.value);
      types.push_back(t.value.getType());
    }
    b.setInsertionPointToEnd(thenBlock);
    scf::YieldOp::create(b, loc, thenYield);
    if (elseBlock) {
      b.setInsertionPointToEnd(elseBlock);
      scf::YieldOp::create(b, loc, elseYield);
    }
    if (types.empty())
      return {};
    // scf.if needs its result types up front: move the built regions into a typed op.
    b.setInsertionPoint(tmp);
    auto ifOp = scf::IfOp::create(b, ifLoc, types, c.value, false, false);
    ifOp.getThenRegion().takeBody(tmp.getThenRegion());
    ifOp.getElseRegion().takeBody(tmp.getElseRegion());
    tmp.erase();
    std::vector<Tile> results;
    for (auto [i, t] : llvm::enumerate(thenVals))
      results.push_back(Tile{ifOp.getResult(i), t.dtype, std::nullopt});
    return results;
  }
}

std::vector<Tile> kiln::Builder::whileLoop(ArrayRef<Tile> inits, const CondBody &condFn,
                                           const RegionBody &bodyFn, ArrayRef<std::string> names) {
  requireKernel("a while loop");
  SmallVector<Tile> initTiles;
  SmallVector<Value> initValues;
  SmallVector<Type> types;
  SmallVector<Location> locs;
  for (const Tile &t : inits) {
    initTiles.push_back(materialize(t));
    initValues.push_back(t.value);
    types.push_back(t.value.getType());
    locs.push_back(loc);
  }
  auto whileOp = scf::WhileOp::create(b, loc, types, initValues);
  {
    OpBuilder::InsertionGuard guard(b);
    auto regionArgs = [&](Block *block) {
      SmallVector<Tile> args;
      for (auto [i, t] : llvm::enumerate(initTiles))
        args.push_back(Tile{block->getArgument(i), t.dtype, std::nullopt});
      return args;
    };
    Block *before = b.createBlock(&whileOp.getBefore(), {}, types, locs);
    Tile c = condFn(regionArgs(before));
    if (c.isTile())
      error("expected a scalar while condition, found " + describe(c));
    c = truthValue(c, "a while condition");
    scf::ConditionOp::create(b, loc, c.value, before->getArguments());
    Block *after = b.createBlock(&whileOp.getAfter(), {}, types, locs);
    std::vector<Tile> next = bodyFn(regionArgs(after));
    if (next.size() != inits.size())
      error("expected the loop body to yield " + Twine(inits.size()) +
            " loop-carried values, found " + Twine(next.size()));
    SmallVector<Value> yielded;
    for (auto [i, v] : llvm::enumerate(next))
      yielded.push_back(loopCarried(v, initTiles[i], nameOf(names, i)).value);
    scf::YieldOp::create(b, loc, yielded);
  }
  std::vector<Tile> results;
  for (auto [i, t] : llvm::enumerate(initTiles))
    results.push_back(Tile{whileOp.getResult(i), t.dtype, std::nullopt});
  return results;
}
