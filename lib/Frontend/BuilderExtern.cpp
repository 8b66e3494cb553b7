//===- BuilderExtern.cpp - External elementwise functions and registers ---===//
//
// This file implements kiln::Builder's external elementwise calls: overload resolution over
// argument dtypes (Triton's extern_elementwise takes the overload whose dtypes the arguments
// have; Kiln also promotes arguments no overload takes, computing fp16/bf16 in fp32 as its
// math functions do), broadcasting, and the kiln.extern_elementwise op; libdevice functions
// by name from the table of LibDevice.h; tl.inline_asm_elementwise (kiln.inline_asm_elementwise,
// its constraints counted against the registers its values take); and the hardware-register
// and grid-dependency ops of kiln.language.extra.cuda.
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/Builder.h"

#include "BuilderSupport.h"
#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Dialect/Kiln/IR/LibDevice.h"

using namespace mlir;
using namespace kiln;

namespace {

/// The dtype of a libdevice type code.
DType codeDType(char code) {
  switch (code) {
  case 'f':
    return DType::fp32();
  case 'd':
    return DType::fp64();
  case 'i':
    return DType::int32();
  case 'u':
    return DType::uint32();
  case 'l':
    return DType::int64();
  default:
    return DType::uint64();
  }
}

/// True when argument `t` can be passed as `want` without a conversion: its dtype, or a
/// literal of the same kind (a Python float for a float, an int or bool for an integer).
bool takes(const Tile &t, DType want) {
  if (!t.isWeak())
    return t.dtype == want;
  return t.literal->kind == Literal::Kind::Float ? want.isFloat() : want.isInt();
}

/// The first overload every argument of `args` fits, or null.
const kiln::Builder::ExternOverload *match(ArrayRef<Tile> args,
                                           ArrayRef<kiln::Builder::ExternOverload> overloads) {
  for (const kiln::Builder::ExternOverload &o : overloads)
    if (o.args.size() == args.size() && llvm::all_of(llvm::zip(args, o.args), [](auto p) {
          return takes(std::get<0>(p), std::get<1>(p));
        }))
      return &o;
  return nullptr;
}

/// "(fp32) or (fp64)".
std::string listOverloads(ArrayRef<kiln::Builder::ExternOverload> overloads) {
  std::string s;
  for (auto [i, o] : llvm::enumerate(overloads)) {
    s += i ? (i + 1 == overloads.size() ? " or (" : ", (") : "(";
    for (auto [j, d] : llvm::enumerate(o.args))
      s += (j ? ", " : "") + d.str();
    s += ")";
  }
  return s;
}

} // namespace

Tile kiln::Builder::externElementwise(ArrayRef<Tile> args0, ArrayRef<ExternOverload> overloads,
                                      bool pure, StringRef what, bool promotes) {
  requireKernel(what);
  if (overloads.empty())
    error(Twine("expected at least one overload for ") + what);
  size_t arity = overloads.front().args.size();
  if (args0.size() != arity)
    error(what + " takes " + Twine(arity) + " argument" + (arity == 1 ? "" : "s") + ", found " +
          Twine(args0.size()));
  std::string found;
  for (auto [i, a] : llvm::enumerate(args0)) {
    found += (i ? ", " : "") + describe(a);
    if (a.dtype.isPointer())
      error("expected number arguments for " + what + ", found a pointer: " + describe(a));
  }
  SmallVector<Tile> args(args0.begin(), args0.end());
  const ExternOverload *chosen = match(args, overloads);
  std::optional<DType> roundBack;
  if (!chosen && promotes) {
    // fp16/bf16/fp8 compute in fp32, fp32 meets fp64 in fp64, small integers widen.
    bool anyF64 = false;
    std::optional<DType> half;
    bool oneHalf = true;
    for (const Tile &a : args) {
      if (a.isWeak() || !a.dtype.isFloat())
        continue;
      anyF64 |= a.dtype == DType::fp64();
      if (a.dtype == DType::fp16() || a.dtype == DType::bf16()) {
        oneHalf &= !half || *half == a.dtype;
        half = a.dtype;
      } else if (a.dtype != DType::fp64()) {
        oneHalf &= a.dtype.isFp8();
      }
    }
    for (Tile &a : args) {
      if (a.isWeak())
        continue;
      if (a.dtype.isFloat())
        a = cast(a, anyF64 ? DType::fp64() : DType::fp32());
      else if (a.dtype.isInt() && a.dtype.getBitWidth() < 32)
        a = cast(a, a.dtype.isUnsigned() ? DType::uint32() : DType::int32());
    }
    chosen = match(args, overloads);
    if (chosen && half && oneHalf && !anyF64 && chosen->result == DType::fp32())
      roundBack = half;
  }
  if (!chosen)
    error("expected arguments of dtypes " + listOverloads(overloads) + " for " + what + ", found " +
          found);

  // Arguments in the overload's dtypes, broadcast to one shape.
  SmallVector<int64_t> shape;
  bool tile = false;
  for (auto [i, a] : llvm::enumerate(args)) {
    a = materialize(cast(a, chosen->args[i]));
    if (!a.isTile())
      continue;
    int64_t bad = 0;
    auto joint = broadcastShapes(shape, a.getShape(), bad);
    if (!joint)
      error("cannot broadcast the arguments of " + what + " to one shape: " + found);
    shape = *joint;
    tile = true;
  }
  SmallVector<Value> operands;
  for (Tile &a : args) {
    if (tile)
      a = a.isTile() ? stretchTo(a, shape) : splatTo(a, shape);
    operands.push_back(a.value);
  }
  Type type = typeOf(chosen->result, shape, tile);
  auto op = ExternElementwiseOp::create(b, loc, type, chosen->symbol, operands, pure);
  Tile result{op, chosen->result, std::nullopt};
  return roundBack ? cast(result, *roundBack) : result;
}

Tile kiln::Builder::libdevice(StringRef name, ArrayRef<Tile> args) {
  std::string what = ("libdevice." + name).str();
  const libdevice::Function *f = libdevice::lookupFunction(name);
  if (!f)
    error("unknown libdevice function '" + name + "'");
  SmallVector<ExternOverload> overloads;
  for (const libdevice::Overload &o : f->overloads) {
    ExternOverload e{o.symbol, {}, codeDType(o.result)};
    for (char c : o.args)
      e.args.push_back(codeDType(c));
    overloads.push_back(std::move(e));
  }
  return externElementwise(args, overloads, /*pure=*/true, what, f->promotes);
}

std::vector<Tile> kiln::Builder::inlineAsmElementwise(StringRef asmText, StringRef constraints,
                                                      ArrayRef<Tile> args0, ArrayRef<DType> dtypes,
                                                      bool pure, int64_t pack) {
  requireKernel("inline_asm_elementwise");
  if (dtypes.empty())
    error("expected at least one result dtype for inline_asm_elementwise (as in Triton: return "
          "a value you leave unused when the asm has no output)");
  if (pack < 1 || pack > 64)
    error("expected pack in [1, 64] for inline_asm_elementwise, found " + Twine(pack));

  // Arguments as they are (no promotion, literals in their own dtypes), broadcast together.
  SmallVector<Tile> args;
  SmallVector<int64_t> shape;
  bool tile = false;
  std::string found;
  for (auto [i, a] : llvm::enumerate(args0)) {
    args.push_back(materialize(a));
    found += (i ? ", " : "") + describe(args.back());
    if (!args.back().isTile())
      continue;
    int64_t bad = 0;
    auto joint = broadcastShapes(shape, args.back().getShape(), bad);
    if (!joint)
      error("cannot broadcast the arguments of inline_asm_elementwise to one shape: " + found);
    shape = *joint;
    tile = true;
  }
  SmallVector<Value> operands;
  for (Tile &a : args) {
    if (tile)
      a = a.isTile() ? stretchTo(a, shape) : splatTo(a, shape);
    operands.push_back(a.value);
  }

  // The constraints must name each register the values take: "=r" outputs, then inputs.
  auto registers = [&](DType d, unsigned &count, std::string &list) {
    unsigned n = getInlineAsmRegisters(toMLIR(d, ctx), unsigned(pack));
    count += n;
    list += (list.empty() ? "" : ", ") + d.str() + " x" + std::to_string(n);
  };
  unsigned outputs = 0, inputs = 0;
  std::string outList, inList;
  for (DType d : dtypes)
    registers(d, outputs, outList);
  for (const Tile &a : args)
    registers(a.dtype, inputs, inList);
  auto [namedOutputs, namedInputs] = countInlineAsmConstraints(constraints);
  if (namedOutputs != outputs || namedInputs != inputs)
    error("expected the constraints of inline_asm_elementwise to name " + Twine(outputs) +
          " output and " + Twine(inputs) + " input registers with pack = " + Twine(pack) +
          " (outputs: " + outList + "; inputs: " + (inList.empty() ? "none" : inList) +
          "; values under 32 bits share registers), found " + Twine(namedOutputs) + " and " +
          Twine(namedInputs) + " in \"" + constraints + "\"");

  SmallVector<Type> types;
  for (DType d : dtypes)
    types.push_back(typeOf(d, shape, tile));
  auto op = InlineAsmElementwiseOp::create(
      b, loc, types, b.getStringAttr(asmText), b.getStringAttr(constraints),
      pure ? b.getUnitAttr() : UnitAttr(), b.getI32IntegerAttr(int32_t(pack)), operands);
  std::vector<Tile> results;
  for (auto [r, d] : llvm::zip(op.getResults(), dtypes))
    results.push_back(Tile{r, d, std::nullopt});
  return results;
}

Tile kiln::Builder::globalTimer() {
  requireKernel("globaltimer");
  return Tile{GlobalTimerOp::create(b, loc, b.getI64Type()), DType::int64(), std::nullopt};
}

Tile kiln::Builder::smId() {
  requireKernel("smid");
  return Tile{SmIdOp::create(b, loc, b.getI32Type()), DType::int32(), std::nullopt};
}

void kiln::Builder::gridDependency(bool wait) {
  requireKernel(wait ? "gdc_wait" : "gdc_launch_dependents");
  GridDependencyOp::create(b, loc,
                           wait ? GridDependencyKind::wait : GridDependencyKind::launch_dependents);
}
