//===- ExternOpToHost.cpp - libdevice functions and registers, host -------===//
//
// This file implements the host lowering of kiln.extern_elementwise: each libdevice symbol
// (LibDevice.h) is computed per chunk with arith/math ops on vectors where MLIR has the
// function (the later math approximations and math-to-LLVM take them on), with one call of
// the C math library per lane where only libm has it (asinh, erfc, lgamma, j0, ...), and with
// short exact sequences for the rest: the rounding-mode arithmetic rounds the exact result
// (an error-free transformation in f64 gives the rounded value and the sign of what it left
// out) in the asked direction; conversions saturate as the GPU's cvt does. Symbols without a
// host version are an error naming the function. kiln.globaltimer reads clock_gettime,
// kiln.smid sched_getcpu, and kiln.grid_dependency is nothing (the host runs launches in order).
//
//===----------------------------------------------------------------------===//

#include "kiln/Conversion/KilnToHost.h"
#include "kiln/Dialect/Kiln/IR/LibDevice.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "llvm/ADT/StringSwitch.h"

#include <cmath>

using namespace mlir;
using namespace kiln;
using namespace kiln::host;

namespace {

using FP = arith::CmpFPredicate;
using IP = arith::CmpIPredicate;

/// Rounding direction of the *_rz/_rd/_ru functions.
enum class Rounding { Nearest, Zero, Down, Up };

Rounding parseRounding(StringRef name) {
  if (name.ends_with("_rz"))
    return Rounding::Zero;
  if (name.ends_with("_rd"))
    return Rounding::Down;
  if (name.ends_with("_ru"))
    return Rounding::Up;
  return Rounding::Nearest;
}

/// Builds the code of one chunk: every value is a vector of the chunk's width or, for scalar
/// ops, a scalar.
struct Chunk {
  OpBuilder &b;
  Location loc;
  Operation *at;
  /// The chunk's vector type with another element type, or the element type for scalars.
  VectorType shape;

  Type like(Type elem) const {
    return shape ? Type(VectorType::get(shape.getShape(), elem)) : elem;
  }
  Type f32() const { return like(b.getF32Type()); }
  Type f64() const { return like(b.getF64Type()); }
  Type i32() const { return like(b.getI32Type()); }
  Type i64() const { return like(b.getI64Type()); }

  Value constant(Type type, TypedAttr scalar) const {
    if (auto v = dyn_cast<VectorType>(type))
      return arith::ConstantOp::create(b, loc, SplatElementsAttr::get(v, scalar));
    return arith::ConstantOp::create(b, loc, scalar);
  }
  Value fconst(Type type, double v) const {
    return constant(type, b.getFloatAttr(getElementTypeOrSelf(type), v));
  }
  Value iconst(Type type, int64_t v) const {
    return constant(type, b.getIntegerAttr(getElementTypeOrSelf(type), v));
  }
  Value cmpf(FP p, Value x, Value y) const { return arith::CmpFOp::create(b, loc, p, x, y); }
  Value cmpi(IP p, Value x, Value y) const { return arith::CmpIOp::create(b, loc, p, x, y); }
  Value select(Value c, Value x, Value y) const { return arith::SelectOp::create(b, loc, c, x, y); }
  Value add(Value x, Value y) const { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) const { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) const { return arith::MulFOp::create(b, loc, x, y); }
  Value div(Value x, Value y) const { return arith::DivFOp::create(b, loc, x, y); }
  Value fma(Value x, Value y, Value z) const { return math::FmaOp::create(b, loc, x, y, z); }
  Value neg(Value x) const { return arith::NegFOp::create(b, loc, x); }
  Value abs(Value x) const { return math::AbsFOp::create(b, loc, x); }
  Value ext(Value x) const { return arith::ExtFOp::create(b, loc, f64(), x); }
  Value trunc(Value x, Type to) const {
    return x.getType() == to ? x : Value(arith::TruncFOp::create(b, loc, to, x));
  }
  Value bitcast(Value x, Type to) const { return arith::BitcastOp::create(b, loc, to, x); }
  Value isZero(Value x) const { return cmpf(FP::OEQ, x, fconst(x.getType(), 0.0)); }

  /// libm's `name` (with an `f` suffix for f32 when `suffix`) called once per lane.
  Value libm(StringRef base, Type result, ValueRange args) const {
    bool single =
        llvm::any_of(args, [](Value a) { return getElementTypeOrSelf(a.getType()).isF32(); });
    std::string name = (base + (single ? "f" : "")).str();
    SmallVector<Type> argTypes;
    for (Value a : args)
      argTypes.push_back(getElementTypeOrSelf(a.getType()));
    Type scalarResult = getElementTypeOrSelf(result);
    auto fnType = LLVM::LLVMFunctionType::get(scalarResult, argTypes);
    auto module = at->getParentOfType<ModuleOp>();
    auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
    if (!fn) {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(module.getBody());
      fn = LLVM::LLVMFuncOp::create(b, loc, name, fnType);
    }
    if (!shape)
      return LLVM::CallOp::create(b, loc, fn, args).getResult();
    Value out = LLVM::PoisonOp::create(b, loc, result);
    for (int64_t i = 0; i < shape.getNumElements(); ++i) {
      SmallVector<Value> lane;
      for (Value a : args)
        lane.push_back(vector::ExtractOp::create(b, loc, a, i));
      Value r = LLVM::CallOp::create(b, loc, fn, lane).getResult();
      out = vector::InsertOp::create(b, loc, r, out, i);
    }
    return out;
  }

  /// `x` with its lowest representable step toward +inf (`up`) or -inf; NaN stays NaN.
  Value step(Value t, bool up) const {
    Type type = t.getType();
    unsigned width = getElementTypeOrSelf(type).getIntOrFloatBitWidth();
    Type ints = like(b.getIntegerType(width));
    Value bits = bitcast(t, ints);
    Value one = iconst(ints, 1);
    // Away from zero is one more in the magnitude bits, toward zero one less.
    Value away = cmpf(up ? FP::OGT : FP::OLT, t, fconst(type, 0.0));
    Value moved = select(away, arith::AddIOp::create(b, loc, bits, one),
                         arith::SubIOp::create(b, loc, bits, one));
    // From +-0 the step is the smallest subnormal of the step's sign.
    Value tiny = bitcast(one, type);
    Value fromZero = up ? tiny : neg(tiny);
    return select(isZero(t), fromZero, bitcast(moved, type));
  }

  /// The value v = r + (something of the sign of e) rounded to `to` (f32 or f64) in direction
  /// `mode` (not Nearest); r and e are f64, r the nearest f64 to v.
  Value directed(Value r, Value e, Type to, Rounding mode) const {
    Value t = trunc(r, to);
    Value dir = e;
    if (t.getType() != r.getType()) {
      // v lies on the side of t where r lies, or where e points when r is t itself.
      Value d = sub(r, ext(t));
      dir = select(cmpf(FP::ONE, d, fconst(d.getType(), 0.0)), d, e);
    }
    Value zero = fconst(dir.getType(), 0.0);
    Value below = cmpf(FP::OLT, dir, zero), above = cmpf(FP::OGT, dir, zero);
    Value down = select(below, step(t, false), t);
    Value upward = select(above, step(t, true), t);
    if (mode == Rounding::Down)
      return down;
    if (mode == Rounding::Up)
      return upward;
    Value tZero = fconst(to, 0.0);
    Value positive =
        arith::OrIOp::create(b, loc, cmpf(FP::OGT, t, tZero),
                             arith::AndIOp::create(b, loc, cmpf(FP::OEQ, t, tZero), above));
    return select(positive, down, upward);
  }

  /// Knuth's TwoSum: s = fl(a + b) and the exact error e = (a + b) - s.
  std::pair<Value, Value> twoSum(Value a, Value c) const {
    Value s = add(a, c);
    Value bb = sub(s, a);
    Value e = add(sub(a, sub(s, bb)), sub(c, bb));
    return {s, e};
  }
  /// The sign of `rem` (0 for 0 and NaN) times the sign of `by`.
  Value signOf(Value rem, Value by) const {
    Type type = rem.getType();
    Value one = fconst(type, 1.0);
    Value s =
        mul(math::CopySignOp::create(b, loc, one, rem), math::CopySignOp::create(b, loc, one, by));
    return select(cmpf(FP::ONE, rem, fconst(type, 0.0)), s, fconst(type, 0.0));
  }

  /// The float `x` rounded by `mode` to an integer of `width` bits, saturating as cvt.*.s32 /
  /// .u32 / .s64 / .u64 do (out of range: the nearest bound, NaN: 0).
  Value toInt(Value x, unsigned width, bool isSigned, Rounding mode) const {
    Type fty = x.getType();
    switch (mode) {
    case Rounding::Nearest:
      x = math::RoundEvenOp::create(b, loc, x);
      break;
    case Rounding::Down:
      x = math::FloorOp::create(b, loc, x);
      break;
    case Rounding::Up:
      x = math::CeilOp::create(b, loc, x);
      break;
    case Rounding::Zero:
      x = math::TruncOp::create(b, loc, x);
      break;
    }
    Type ity = like(b.getIntegerType(width));
    double hi = std::ldexp(1.0, isSigned ? width - 1 : width);
    double lo = isSigned ? -hi : 0.0;
    Value inRange = arith::AndIOp::create(b, loc, cmpf(FP::OLT, x, fconst(fty, hi)),
                                          cmpf(FP::OGE, x, fconst(fty, lo)));
    Value safe = select(inRange, x, fconst(fty, 0.0));
    Value conv = isSigned ? Value(arith::FPToSIOp::create(b, loc, ity, safe))
                          : Value(arith::FPToUIOp::create(b, loc, ity, safe));
    APInt maxV = isSigned ? APInt::getSignedMaxValue(width) : APInt::getMaxValue(width);
    APInt minV = isSigned ? APInt::getSignedMinValue(width) : APInt::getZero(width);
    Value big = constant(ity, b.getIntegerAttr(b.getIntegerType(width), maxV));
    Value small = constant(ity, b.getIntegerAttr(b.getIntegerType(width), minV));
    Value zero = iconst(ity, 0);
    Value result = select(cmpf(FP::OGE, x, fconst(fty, hi)), big, zero);
    result = select(cmpf(FP::OLT, x, fconst(fty, lo)), small, result);
    return select(inRange, conv, result);
  }

  /// An int64 (`isSigned`) or uint64 `v` rounded to `to` in direction `mode`.
  Value fromInt64(Value v, bool isSigned, Type to, Rounding mode) const {
    Type f = f64();
    Value r = isSigned ? Value(arith::SIToFPOp::create(b, loc, f, v))
                       : Value(arith::UIToFPOp::create(b, loc, f, v));
    if (mode == Rounding::Nearest)
      return trunc(r, to);
    // The sign of v - r, from r converted back (r = 2^63 or 2^64 is above every v).
    double top = std::ldexp(1.0, isSigned ? 63 : 64);
    Value atTop = cmpf(FP::OGE, r, fconst(f, top));
    Value safe = select(atTop, fconst(f, 0.0), r);
    Value back = isSigned ? Value(arith::FPToSIOp::create(b, loc, v.getType(), safe))
                          : Value(arith::FPToUIOp::create(b, loc, v.getType(), safe));
    Value greater = cmpi(isSigned ? IP::sgt : IP::ugt, v, back);
    Value less = cmpi(isSigned ? IP::slt : IP::ult, v, back);
    Value e = select(greater, fconst(f, 1.0), select(less, fconst(f, -1.0), fconst(f, 0.0)));
    e = select(atTop, fconst(f, -1.0), e);
    return directed(r, e, to, mode);
  }
};

/// Integer-only functions; null when `name` is none of them.
Value emitInteger(const Chunk &c, StringRef name, StringRef symbol, ValueRange a, Type result) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  bool isUnsigned = symbol.starts_with("__nv_u");
  auto to32 = [&](Value v) {
    return v.getType() == result ? v : Value(arith::TruncIOp::create(b, loc, result, v));
  };
  auto halve = [&](Value v) {
    Value one = c.iconst(v.getType(), 1);
    return isUnsigned ? Value(arith::ShRUIOp::create(b, loc, v, one))
                      : Value(arith::ShRSIOp::create(b, loc, v, one));
  };
  if (name == "clz")
    return to32(math::CountLeadingZerosOp::create(b, loc, a[0]));
  if (name == "popc")
    return to32(math::CtPopOp::create(b, loc, a[0]));
  if (name == "ffs") {
    // 1 + the index of the lowest set bit; 0 for 0.
    Value tz = math::CountTrailingZerosOp::create(b, loc, a[0]);
    Value one = c.iconst(a[0].getType(), 1);
    Value r = c.select(c.cmpi(IP::eq, a[0], c.iconst(a[0].getType(), 0)),
                       c.iconst(a[0].getType(), 0), arith::AddIOp::create(b, loc, tz, one));
    return to32(r);
  }
  if (name == "brev")
    return LLVM::BitReverseOp::create(b, loc, a[0].getType(), a[0]);
  if (name == "mulhi")
    return isUnsigned || symbol == "__nv_umul64hi"
               ? arith::MulUIExtendedOp::create(b, loc, a[0], a[1]).getHigh()
               : arith::MulSIExtendedOp::create(b, loc, a[0], a[1]).getHigh();
  if (name == "mul24") {
    // The low 32 bits of the product of the operands' low 24 bits (sign-extended for mul24).
    auto low24 = [&](Value v) -> Value {
      if (isUnsigned)
        return arith::AndIOp::create(b, loc, v, c.iconst(v.getType(), 0xffffff));
      Value eight = c.iconst(v.getType(), 8);
      return arith::ShRSIOp::create(b, loc, arith::ShLIOp::create(b, loc, v, eight), eight);
    };
    return arith::MulIOp::create(b, loc, low24(a[0]), low24(a[1]));
  }
  if (name == "sad") {
    // |x - y| + z, the difference taken in the operands' signedness.
    Value gt = c.cmpi(isUnsigned ? IP::ugt : IP::sgt, a[0], a[1]);
    Value d = c.select(gt, arith::SubIOp::create(b, loc, a[0], a[1]),
                       arith::SubIOp::create(b, loc, a[1], a[0]));
    return arith::AddIOp::create(b, loc, d, a[2]);
  }
  if (name == "hadd" || name == "rhadd") {
    // (x + y) >> 1 and (x + y + 1) >> 1 without overflow: x & y + (x ^ y) >> 1 and
    // x | y - (x ^ y) >> 1.
    Value x = arith::XOrIOp::create(b, loc, a[0], a[1]);
    if (name == "hadd")
      return arith::AddIOp::create(b, loc, arith::AndIOp::create(b, loc, a[0], a[1]), halve(x));
    return arith::SubIOp::create(b, loc, arith::OrIOp::create(b, loc, a[0], a[1]), halve(x));
  }
  if (name == "byte_perm") {
    // Byte i of the result is byte (selector nibble i & 7) of the 8 bytes {y, x}.
    Type i64 = c.i64(), i32 = c.i32();
    Value both = arith::OrIOp::create(
        b, loc,
        arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i64, a[1]), c.iconst(i64, 32)),
        arith::ExtUIOp::create(b, loc, i64, a[0]));
    Value out = c.iconst(i32, 0);
    for (int i = 0; i < 4; ++i) {
      Value sel = arith::AndIOp::create(
          b, loc, arith::ShRUIOp::create(b, loc, a[2], c.iconst(i32, 4 * i)), c.iconst(i32, 7));
      Value shift =
          arith::ExtUIOp::create(b, loc, i64, arith::MulIOp::create(b, loc, sel, c.iconst(i32, 8)));
      Value byte = arith::AndIOp::create(b, loc, arith::ShRUIOp::create(b, loc, both, shift),
                                         c.iconst(i64, 0xff));
      Value placed = arith::ShLIOp::create(b, loc, arith::TruncIOp::create(b, loc, i32, byte),
                                           c.iconst(i32, 8 * i));
      out = arith::OrIOp::create(b, loc, out, placed);
    }
    return out;
  }
  if (name == "abs" && isa<IntegerType>(getElementTypeOrSelf(a[0].getType())))
    return math::AbsIOp::create(b, loc, a[0]);
  return {};
}

/// The rounding-mode arithmetic (add/sub/mul/div/rcp/sqrt/fma_<mode>, rsqrt_rn); null when
/// `name` is none of them or has no host version (fp64 fma with a directed rounding).
Value emitRounded(const Chunk &c, StringRef name, ValueRange a, Type result) {
  StringRef op = name.take_front(name.size() - 3);
  Rounding mode = parseRounding(name);
  if (!llvm::is_contained({"add", "sub", "mul", "div", "rcp", "sqrt", "fma", "rsqrt"}, op) ||
      !name.drop_front(op.size()).starts_with("_r"))
    return {};
  if (op == "rsqrt") // rsqrt_rn (fp32 only): 1/sqrt in f64, rounded once to f32.
    return c.trunc(c.div(c.fconst(c.f64(), 1.0), math::SqrtOp::create(c.b, c.loc, c.ext(a[0]))),
                   result);
  if (mode == Rounding::Nearest) {
    if (op == "add")
      return c.add(a[0], a[1]);
    if (op == "sub")
      return c.sub(a[0], a[1]);
    if (op == "mul")
      return c.mul(a[0], a[1]);
    if (op == "div")
      return c.div(a[0], a[1]);
    if (op == "rcp")
      return c.div(c.fconst(result, 1.0), a[0]);
    if (op == "sqrt")
      return math::SqrtOp::create(c.b, c.loc, a[0]);
    return c.fma(a[0], a[1], a[2]);
  }
  bool single = getElementTypeOrSelf(result).isF32();
  if (op == "fma" && !single) {
    // v = a*b + c = ph + pl + c exactly (pl = fma(a, b, -ph)); (s, e1) = TwoSum(ph, c),
    // (u, e2) = TwoSum(e1, pl), (r, e3) = TwoSum(s, u): v = r + e3 + e2 with |e3 + e2| below
    // an ulp of r, and fl(e3 + e2) has the sign of e3 + e2.
    Value ph = c.mul(a[0], a[1]);
    Value pl = c.fma(a[0], a[1], c.neg(ph));
    auto [s1, e1] = c.twoSum(ph, a[2]);
    auto [u, e2] = c.twoSum(e1, pl);
    auto [r, e3] = c.twoSum(s1, u);
    return c.directed(r, c.add(e3, e2), result, mode);
  }
  // r = the f64 nearest the exact result v, e = something of the sign of v - r.
  SmallVector<Value> w;
  for (Value v : a)
    w.push_back(single ? c.ext(v) : v);
  Value r, e;
  if (op == "add" || op == "sub") {
    std::tie(r, e) = c.twoSum(w[0], op == "sub" ? c.neg(w[1]) : w[1]);
  } else if (op == "mul") {
    r = c.mul(w[0], w[1]);
    e = c.fma(w[0], w[1], c.neg(r));
  } else if (op == "div" || op == "rcp") {
    Value x = op == "rcp" ? c.fconst(w[0].getType(), 1.0) : w[0];
    Value y = op == "rcp" ? w[0] : w[1];
    r = c.div(x, y);
    e = c.signOf(c.fma(c.neg(r), y, x), y);
  } else if (op == "sqrt") {
    r = math::SqrtOp::create(c.b, c.loc, w[0]);
    e = c.signOf(c.fma(c.neg(r), r, w[0]), c.fconst(r.getType(), 1.0));
  } else { // fp32 fma: the product is exact in f64.
    std::tie(r, e) = c.twoSum(c.mul(w[0], w[1]), w[2]);
  }
  return c.directed(r, e, result, mode);
}

/// Conversions and bit casts; null when `name` is none of them.
Value emitConversion(const Chunk &c, StringRef name, ValueRange a, Type result) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  Rounding mode = parseRounding(name);
  StringRef stem = name.split('_').first;
  Type resElem = getElementTypeOrSelf(result);
  if (name.ends_with("_as_float") || name.ends_with("_as_int") || name.ends_with("_as_uint") ||
      name == "longlong_as_double" || name == "double_as_longlong")
    return c.bitcast(a[0], result);
  if (name == "hiloint2double") {
    Type i64 = c.i64();
    Value hi =
        arith::ShLIOp::create(b, loc, arith::ExtUIOp::create(b, loc, i64, a[0]), c.iconst(i64, 32));
    Value lo = arith::ExtUIOp::create(b, loc, i64, a[1]);
    return c.bitcast(arith::OrIOp::create(b, loc, hi, lo), result);
  }
  if (name == "double2loint" || name == "double2hiint") {
    Value bits = c.bitcast(a[0], c.i64());
    if (name == "double2hiint")
      bits = arith::ShRUIOp::create(b, loc, bits, c.iconst(c.i64(), 32));
    return arith::TruncIOp::create(b, loc, result, bits);
  }
  auto [from, to] = stem.split('2');
  if (to.empty() || !llvm::is_contained({"float", "double", "int", "uint", "ll", "ull"}, from))
    return {};
  if (from == "float" || from == "double") {
    if (isa<FloatType>(resElem)) // double2float
      return mode == Rounding::Nearest ? c.trunc(a[0], result)
                                       : c.directed(a[0], c.fconst(c.f64(), 0.0), result, mode);
    bool isSigned = to == "int" || to == "ll";
    return c.toInt(a[0], resElem.getIntOrFloatBitWidth(), isSigned, mode);
  }
  bool isSigned = from == "int" || from == "ll";
  if (from == "ll" || from == "ull")
    return c.fromInt64(a[0], isSigned, result, mode);
  // int/uint (32 bits) are exact in f64.
  Value r = isSigned ? Value(arith::SIToFPOp::create(b, loc, c.f64(), a[0]))
                     : Value(arith::UIToFPOp::create(b, loc, c.f64(), a[0]));
  if (mode == Rounding::Nearest)
    return c.trunc(r, result);
  return c.directed(r, c.fconst(c.f64(), 0.0), result, mode);
}

/// sinpi / cospi: x = n/2 + r with n = roundeven(2x) and |r| <= 1/4, then sin or cos of
/// pi * r by the quadrant n mod 4 (exact zeros and ones at integers and half-integers).
Value emitSinCosPi(const Chunk &c, Value x, bool isCos) {
  Type t = x.getType();
  Value n = math::RoundEvenOp::create(c.b, c.loc, c.mul(x, c.fconst(t, 2.0)));
  Value r = c.fma(n, c.fconst(t, -0.5), x);
  Value pr = c.mul(r, c.fconst(t, M_PI));
  Value s = math::SinOp::create(c.b, c.loc, pr), co = math::CosOp::create(c.b, c.loc, pr);
  // q = n mod 4 in [0, 4), exact for floats.
  Value q = c.sub(
      n, c.mul(math::FloorOp::create(c.b, c.loc, c.mul(n, c.fconst(t, 0.25))), c.fconst(t, 4.0)));
  if (isCos)
    q = c.add(q, c.fconst(t, 1.0)); // cos(pi x) = sin(pi (x + 1/2))
  auto is = [&](double k) {
    Value m = c.sub(
        q, c.mul(math::FloorOp::create(c.b, c.loc, c.mul(q, c.fconst(t, 0.25))), c.fconst(t, 4.0)));
    return c.cmpf(FP::OEQ, m, c.fconst(t, k));
  };
  Value v = c.select(is(0), s, c.select(is(1), co, c.select(is(2), c.neg(s), c.neg(co))));
  // sinpi(+-0) keeps its sign; cospi of integers is +-1 exactly through cos(0).
  return isCos ? c.add(v, c.fconst(t, 0.0)) : v;
}

/// sqrt(sum of squares) of `a` (hypot, norm3d, norm4d), scaled by the largest magnitude so
/// nothing overflows; inf if any is infinite (as C's hypot).
Value emitNorm(const Chunk &c, ValueRange a, Type result) {
  bool single = getElementTypeOrSelf(result).isF32();
  SmallVector<Value> w;
  for (Value v : a)
    w.push_back(c.abs(single ? c.ext(v) : v));
  Type t = w[0].getType();
  Value m = w[0];
  for (Value v : ArrayRef<Value>(w).drop_front())
    m = arith::MaxNumFOp::create(c.b, c.loc, m, v);
  Value safe = c.select(c.isZero(m), c.fconst(t, 1.0), m);
  Value sum = c.fconst(t, 0.0);
  for (Value v : w) {
    Value s = c.div(v, safe);
    sum = c.fma(s, s, sum);
  }
  Value n = c.mul(math::SqrtOp::create(c.b, c.loc, sum), safe);
  Value inf = c.fconst(t, INFINITY);
  for (Value v : w)
    n = c.select(c.cmpf(FP::OEQ, v, inf), inf, n);
  return c.trunc(n, result);
}

/// erfinv(y) for |y| = ay <= 1 with om = 1 - ay given exactly (erfcinv passes its argument):
/// M. Giles' single-precision approximation ("Approximating the erfinv function", GPU
/// Computing Gems, 2011) as the start (in the far tail an asymptotic one), then three Newton steps
/// in f64 on erf(x) - ay, or on erfc(x) - om where ay >= 1/2 so that the tail keeps its relative
/// accuracy. Returns |x|.
Value emitErfInvCore(const Chunk &c, Value ay, Value om) {
  Type t = ay.getType();
  auto k = [&](double v) { return c.fconst(t, v); };
  Value w = c.neg(math::LogOp::create(c.b, c.loc, c.mul(om, c.add(k(1.0), ay))));
  auto horner = [&](Value z, ArrayRef<double> coeffs) {
    Value p = k(coeffs.front());
    for (double a : coeffs.drop_front())
      p = c.fma(p, z, k(a));
    return p;
  };
  Value central = horner(c.sub(w, k(2.5)),
                         {2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06,
                          0.00021858087, -0.00125372503, -0.00417768164, 0.246640727, 1.50140941});
  Value tail = horner(c.sub(math::SqrtOp::create(c.b, c.loc, w), k(3.0)),
                      {-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844,
                       0.00573950773, -0.0076224613, 0.00943887047, 1.00167406, 2.83297682});
  Value x = c.mul(c.select(c.cmpf(FP::OLT, w, k(5.0)), central, tail), ay);
  // Past the approximation's range (1 - ay below ~1e-7), erfc(x) ~ exp(-x^2) / (x sqrt(pi))
  // gives x^2 ~ L - log(pi L) / 2 with L = -log(1 - ay).
  Value l = c.neg(math::LogOp::create(c.b, c.loc, om));
  Value far = math::SqrtOp::create(
      c.b, c.loc, c.sub(l, c.mul(k(0.5), math::LogOp::create(c.b, c.loc, c.mul(l, k(M_PI))))));
  x = c.select(c.cmpf(FP::OLT, w, k(16.0)), x, far);
  Value useTail = c.cmpf(FP::OGE, ay, k(0.5));
  for (int i = 0; i < 3; ++i) {
    // d/dx erf(x) = 2/sqrt(pi) exp(-x^2).
    Value slope = c.mul(k(M_2_SQRTPI), math::ExpOp::create(c.b, c.loc, c.neg(c.mul(x, x))));
    Value head = c.sub(c.libm("erf", t, x), ay);
    Value rest = c.sub(om, c.libm("erfc", t, x));
    Value f = c.select(useTail, rest, head);
    Value next = c.sub(x, c.div(f, slope));
    x = c.select(c.cmpf(FP::OGT, slope, k(0.0)), next, x);
  }
  return x;
}

/// erfinv, erfcinv, normcdfinv of `v` (f64), with their special values.
Value emitInverseErf(const Chunk &c, StringRef name, Value v) {
  Type t = v.getType();
  auto k = [&](double x) { return c.fconst(t, x); };
  if (name == "normcdfinv") // -sqrt(2) erfcinv(2p)
    return c.mul(emitInverseErf(c, "erfcinv", c.mul(v, k(2.0))), k(-M_SQRT2));
  Value ay, om, negative;
  if (name == "erfinv") {
    ay = c.abs(v);
    om = c.sub(k(1.0), ay);
    negative = c.cmpf(FP::OLT, v, k(0.0));
  } else { // erfcinv(q) = erfinv(1 - q); for q > 1, -erfcinv(2 - q)
    negative = c.cmpf(FP::OGT, v, k(1.0));
    om = c.select(negative, c.sub(k(2.0), v), v);
    ay = c.sub(k(1.0), om);
  }
  Value x = emitErfInvCore(c, ay, om);
  x = c.select(c.cmpf(FP::OEQ, om, k(0.0)), k(INFINITY), x);
  x = c.select(c.cmpf(FP::OEQ, ay, k(0.0)), k(0.0), x);
  x = c.select(negative, c.neg(x), x);
  // Outside the domain ([-1, 1], [0, 2]) and NaN: NaN.
  Value outside =
      name == "erfinv" ? c.cmpf(FP::UGT, c.abs(v), k(1.0)) : c.cmpf(FP::ULT, om, k(0.0));
  return c.select(outside, k(NAN), x);
}

/// erfcx(x) = exp(x^2) erfc(x), in f64: directly below 25, by the asymptotic series
/// 1/(x sqrt(pi)) (1 - 1/(2x^2) + 3/(4x^4) - 15/(8x^6) + 105/(16x^8)) above.
Value emitErfcx(const Chunk &c, Value x) {
  Type t = x.getType();
  auto k = [&](double v) { return c.fconst(t, v); };
  Value direct = c.mul(math::ExpOp::create(c.b, c.loc, c.mul(x, x)), c.libm("erfc", t, x));
  Value big = arith::MaxNumFOp::create(c.b, c.loc, x, k(25.0));
  Value z = c.div(k(1.0), c.mul(big, big));
  Value series = k(105.0 / 16.0);
  for (double a : {-15.0 / 8.0, 3.0 / 4.0, -0.5, 1.0})
    series = c.fma(series, z, k(a));
  Value asym = c.div(series, c.mul(big, k(std::sqrt(M_PI))));
  return c.select(c.cmpf(FP::OGT, x, k(25.0)), asym, direct);
}

/// cyl_bessel_i0 / i1 (`order` 0 or 1) of `x` (f64): the power series
/// I_n(x) = (x/2)^n sum_k (x^2/4)^k / (k! (k+n)!) up to |x| = 20 (60 terms, all positive),
/// above it the asymptotic series e^x / sqrt(2 pi x) sum_k (-1)^k prod_j (4n^2 - (2j-1)^2) /
/// (k! (8x)^k) (20 terms; the first term left out is below 1e-17 there). I1 is odd.
Value emitBesselI(const Chunk &c, Value x, int order) {
  Type t = x.getType();
  auto k = [&](double v) { return c.fconst(t, v); };
  Value ax = c.abs(x);
  Value small = arith::MinNumFOp::create(c.b, c.loc, ax, k(20.0));
  Value q = c.mul(c.mul(small, small), k(0.25));
  Value term = order == 0 ? k(1.0) : c.mul(small, k(0.5));
  Value sum = term;
  for (int i = 1; i <= 60; ++i) {
    term = c.mul(term, c.div(q, k(double(i) * double(i + order))));
    sum = c.add(sum, term);
  }
  Value big = arith::MaxNumFOp::create(c.b, c.loc, ax, k(20.0));
  double mu = 4.0 * order * order;
  Value a = k(1.0), series = k(1.0);
  Value inv8x = c.div(k(0.125), big);
  for (int i = 1; i <= 20; ++i) {
    double odd = 2.0 * i - 1.0;
    a = c.mul(a, c.mul(inv8x, k(-(mu - odd * odd) / i)));
    series = c.add(series, a);
  }
  // e^x / sqrt(2 pi x) as two halves, so that it overflows only where I_n does.
  Value half = math::ExpOp::create(c.b, c.loc, c.mul(big, k(0.5)));
  Value scale = c.div(half, math::SqrtOp::create(c.b, c.loc, c.mul(big, k(2.0 * M_PI))));
  Value asym = c.mul(c.mul(series, scale), half);
  Value v = c.select(c.cmpf(FP::OGT, ax, k(20.0)), asym, sum);
  v = c.select(c.cmpf(FP::OEQ, ax, k(INFINITY)), ax, v); // inf/inf above
  if (order == 1)
    v = math::CopySignOp::create(c.b, c.loc, v, x);
  // NaN in, NaN out (min/max would have dropped it).
  return c.select(c.cmpf(FP::UNO, x, x), x, v);
}

/// The float functions; null when `name` has no host version.
Value emitFloat(const Chunk &c, StringRef name, ValueRange a, Type result) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  bool single = getElementTypeOrSelf(result).isF32();
  Value x = a.empty() ? Value() : a[0];
  name.consume_front("fast_");
  if (name.size() > 1 && name.ends_with("f") && name != "saturatef" && name != "finitef" &&
      name != "erf" && name != "erfcinv" && name != "normcdf" && name != "powf")
    name = name.drop_back(); // fast_sinf -> sin
  if ((name == "powf" || name == "pow") && isa<IntegerType>(getElementTypeOrSelf(a[1].getType()))) {
    // powi: the int32 exponent is exact in f64 (llvm.powi takes no vector exponents).
    Value n = arith::SIToFPOp::create(b, loc, c.f64(), a[1]);
    return c.trunc(math::PowFOp::create(b, loc, single ? c.ext(a[0]) : a[0], n), result);
  }
  if (name == "powf" || name == "pow")
    return math::PowFOp::create(b, loc, a[0], a[1]);
  if (name == "divide") // fast_dividef
    return c.div(a[0], a[1]);
  // One math op.
  using Unary = Value (*)(OpBuilder &, Location, Value);
  Unary unary = llvm::StringSwitch<Unary>(name)
                    .Case("abs",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::AbsFOp::create(b, l, v);
                          })
                    .Case("floor",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::FloorOp::create(b, l, v);
                          })
                    .Case("ceil",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::CeilOp::create(b, l, v);
                          })
                    .Case("trunc",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::TruncOp::create(b, l, v);
                          })
                    .Case("round",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::RoundOp::create(b, l, v);
                          })
                    .Case("rint",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::RoundEvenOp::create(b, l, v);
                          })
                    .Case("nearbyint",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::RoundEvenOp::create(b, l, v);
                          })
                    .Case("sqrt",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::SqrtOp::create(b, l, v);
                          })
                    .Case("rsqrt",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::RsqrtOp::create(b, l, v);
                          })
                    .Case("exp",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::ExpOp::create(b, l, v);
                          })
                    .Case("exp2",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::Exp2Op::create(b, l, v);
                          })
                    .Case("log",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::LogOp::create(b, l, v);
                          })
                    .Case("log2",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::Log2Op::create(b, l, v);
                          })
                    .Case("log10",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::Log10Op::create(b, l, v);
                          })
                    .Case("sin",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::SinOp::create(b, l, v);
                          })
                    .Case("cos",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::CosOp::create(b, l, v);
                          })
                    .Case("tan",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::TanOp::create(b, l, v);
                          })
                    .Case("sinh",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::SinhOp::create(b, l, v);
                          })
                    .Case("cosh",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::CoshOp::create(b, l, v);
                          })
                    .Case("tanh",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::TanhOp::create(b, l, v);
                          })
                    .Case("asin",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::AsinOp::create(b, l, v);
                          })
                    .Case("acos",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::AcosOp::create(b, l, v);
                          })
                    .Case("atan",
                          [](OpBuilder &b, Location l, Value v) -> Value {
                            return math::AtanOp::create(b, l, v);
                          })
                    .Default(nullptr);
  // The f32 polynomial approximations exist for these; f64 goes to libm.
  if (single && unary == nullptr)
    unary = llvm::StringSwitch<Unary>(name)
                .Case("erf",
                      [](OpBuilder &b, Location l, Value v) -> Value {
                        return math::ErfOp::create(b, l, v);
                      })
                .Case("log1p",
                      [](OpBuilder &b, Location l, Value v) -> Value {
                        return math::Log1pOp::create(b, l, v);
                      })
                .Case("expm1",
                      [](OpBuilder &b, Location l, Value v) -> Value {
                        return math::ExpM1Op::create(b, l, v);
                      })
                .Default(nullptr);
  if (unary)
    return unary(b, loc, x);
  // C math library (one call per lane).
  if (llvm::is_contained({"asinh", "acosh", "atanh", "cbrt", "erf", "erfc", "log1p", "expm1",
                          "lgamma", "tgamma", "j0", "j1", "y0", "y1", "exp10", "logb"},
                         name))
    return c.libm(name, result, x);
  if (llvm::is_contained({"remainder", "nextafter", "ldexp", "scalbn", "hypot"}, name))
    return c.libm(name, result, a);
  if (name == "jn" || name == "yn") // jnf(int n, float x)
    return c.libm(name, result, a);
  if (name == "rcbrt")
    return c.div(c.fconst(result, 1.0), c.libm("cbrt", result, x));
  if (name == "rhypot")
    return c.div(c.fconst(result, 1.0), c.libm("hypot", result, a));
  if (name == "norm3d" || name == "norm4d")
    return emitNorm(c, a, result);
  if (name == "rnorm3d" || name == "rnorm4d")
    return c.div(c.fconst(result, 1.0), emitNorm(c, a, result));
  if (name == "atan2")
    return math::Atan2Op::create(b, loc, a[0], a[1]);
  if (name == "copysign")
    return math::CopySignOp::create(b, loc, a[0], a[1]);
  if (name == "fmod")
    return arith::RemFOp::create(b, loc, a[0], a[1]);
  if (name == "fma")
    return c.fma(a[0], a[1], a[2]);
  if (name == "fdim") // x - y where x > y (or either is NaN), else +0
    return c.select(c.cmpf(FP::UGT, a[0], a[1]), c.sub(a[0], a[1]), c.fconst(result, 0.0));
  if (name == "saturatef") // clamp to [0, 1], NaN to 0
    return c.select(c.cmpf(FP::OGT, x, c.fconst(result, 0.0)),
                    arith::MinNumFOp::create(b, loc, x, c.fconst(result, 1.0)),
                    c.fconst(result, 0.0));
  if (name == "sinpi" || name == "cospi") {
    Value v = emitSinCosPi(c, single ? c.ext(x) : x, name == "cospi");
    return c.trunc(v, result);
  }
  if (name == "erfinv" || name == "erfcinv" || name == "normcdfinv")
    return c.trunc(emitInverseErf(c, name, single ? c.ext(x) : x), result);
  if (name == "cyl_bessel_i0" || name == "cyl_bessel_i1")
    return c.trunc(emitBesselI(c, single ? c.ext(x) : x, name.back() == '1'), result);
  if (name == "erfcx")
    return c.trunc(emitErfcx(c, single ? c.ext(x) : x), result);
  if (name == "normcdf") { // erfc(-x / sqrt(2)) / 2
    Value w = single ? c.ext(x) : x;
    Value v = c.libm("erfc", w.getType(), c.mul(w, c.fconst(w.getType(), -M_SQRT1_2)));
    return c.trunc(c.mul(v, c.fconst(w.getType(), 0.5)), result);
  }
  return {};
}

/// Classification (int32 results) and float-to-integer rounding; null when `name` is none.
Value emitClassify(const Chunk &c, StringRef name, ValueRange a, Type result) {
  OpBuilder &b = c.b;
  Location loc = c.loc;
  Value x = a[0];
  Type t = x.getType();
  auto asInt = [&](Value bit) { return arith::ExtUIOp::create(b, loc, result, bit); };
  Value inf = c.fconst(t, INFINITY);
  if (name == "isnan")
    return asInt(c.cmpf(FP::UNO, x, x));
  if (name == "isinf")
    return asInt(c.cmpf(FP::OEQ, c.abs(x), inf));
  if (name == "finitef" || name == "isfinited")
    return asInt(c.cmpf(FP::ONE, c.abs(x), inf));
  if (name == "signbit") {
    unsigned w = getElementTypeOrSelf(t).getIntOrFloatBitWidth();
    Type ints = c.like(b.getIntegerType(w));
    Value bit = arith::ShRUIOp::create(b, loc, c.bitcast(x, ints), c.iconst(ints, w - 1));
    return w == 32 ? bit : Value(arith::TruncIOp::create(b, loc, result, bit));
  }
  if (name == "ilogb")
    return c.libm(name, result, x);
  if (name == "llrint")
    return c.toInt(x, 64, true, Rounding::Nearest);
  if (name == "llround")
    return c.toInt(math::RoundOp::create(b, loc, x), 64, true, Rounding::Zero);
  return {};
}

/// The host code of `symbol` on one chunk; null when it has none.
Value emitSymbol(const Chunk &c, StringRef symbol, ValueRange args, Type result) {
  auto [function, overload] = libdevice::lookupSymbol(symbol);
  if (!function)
    return {};
  StringRef name = function->name;
  if (Value v = emitInteger(c, name, symbol, args, result))
    return v;
  if (Value v = emitRounded(c, name, args, result))
    return v;
  if (Value v = emitConversion(c, name, args, result))
    return v;
  if (Value v = emitClassify(c, name, args, result))
    return v;
  if (isa<FloatType>(getElementTypeOrSelf(result)))
    return emitFloat(c, name, args, result);
  return {};
}

struct ExternElementwiseConversion final : OpConversionPattern<ExternElementwiseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(ExternElementwiseOp op, OpAdaptor adaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    if (isLargeTile(op.getType())) { // checkExternFunctions left only functions emitSymbol has
      lowerLargeElementwise(rewriter, op, adaptor.getSrcs(), *getTypeConverter(),
                            [&](OpBuilder &b, Location l, ValueRange args, TypeRange types) {
                              Chunk c{b, l, op, cast<VectorType>(types[0])};
                              return SmallVector<Value>{
                                  emitSymbol(c, op.getSymbol(), args, types[0])};
                            });
      return success();
    }
    Type type = getTypeConverter()->convertType(op.getType());
    SmallVector<SmallVector<Value>> chunks;
    for (Value v : adaptor.getSrcs())
      chunks.push_back(unpack(rewriter, loc, v));
    Type chunkType =
        isa<LLVM::LLVMArrayType>(type) ? cast<LLVM::LLVMArrayType>(type).getElementType() : type;
    SmallVector<Value> results;
    for (size_t i = 0; i < chunks.front().size(); ++i) {
      SmallVector<Value> args;
      for (auto &cs : chunks)
        args.push_back(cs[i]);
      Chunk c{rewriter, loc, op, dyn_cast<VectorType>(chunkType)};
      Value r = emitSymbol(c, op.getSymbol(), args, chunkType);
      if (!r)
        return rewriter.notifyMatchFailure(op, "no host version (checkExternFunctions)");
      results.push_back(r);
    }
    rewriter.replaceOp(op, pack(rewriter, loc, type, results));
    return success();
  }
};

/// Declares (once) and calls the libc function `name`.
Value callLibc(OpBuilder &b, Location loc, Operation *at, StringRef name, Type result,
               ValueRange args) {
  auto module = at->getParentOfType<ModuleOp>();
  auto fn = module.lookupSymbol<LLVM::LLVMFuncOp>(name);
  if (!fn) {
    SmallVector<Type> types;
    for (Value a : args)
      types.push_back(a.getType());
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(module.getBody());
    fn = LLVM::LLVMFuncOp::create(b, loc, name, LLVM::LLVMFunctionType::get(result, types));
  }
  return LLVM::CallOp::create(b, loc, fn, args).getResult();
}

/// globaltimer: CLOCK_REALTIME (0 on Linux) in nanoseconds, from clock_gettime's
/// struct timespec {int64 tv_sec; int64 tv_nsec}.
struct GlobalTimerConversion final : OpConversionPattern<GlobalTimerOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GlobalTimerOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Type i32 = rewriter.getI32Type(), i64 = rewriter.getI64Type();
    auto ptr = LLVM::LLVMPointerType::get(rewriter.getContext());
    Value one = arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(1));
    Value ts = LLVM::AllocaOp::create(rewriter, loc, ptr, LLVM::LLVMArrayType::get(i64, 2), one);
    Value realtime = arith::ConstantOp::create(rewriter, loc, rewriter.getI32IntegerAttr(0));
    callLibc(rewriter, loc, op, "clock_gettime", i32, {realtime, ts});
    Value sec = LLVM::LoadOp::create(rewriter, loc, i64, ts);
    Value nsecPtr =
        LLVM::GEPOp::create(rewriter, loc, ptr, i64, ts, ArrayRef<LLVM::GEPArg>{int32_t(1)});
    Value nsec = LLVM::LoadOp::create(rewriter, loc, i64, nsecPtr);
    Value billion =
        arith::ConstantOp::create(rewriter, loc, rewriter.getI64IntegerAttr(1000000000));
    rewriter.replaceOp(op, arith::AddIOp::create(rewriter, loc,
                                                 arith::MulIOp::create(rewriter, loc, sec, billion),
                                                 nsec));
    return success();
  }
};

/// smid: the CPU the program runs on (sched_getcpu; -1 where the system cannot tell).
struct SmIdConversion final : OpConversionPattern<SmIdOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(SmIdOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(
        op, callLibc(rewriter, op.getLoc(), op, "sched_getcpu", rewriter.getI32Type(), {}));
    return success();
  }
};

/// The host runs one launch after another: nothing to wait for or release.
struct GridDependencyConversion final : OpConversionPattern<GridDependencyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult matchAndRewrite(GridDependencyOp op, OpAdaptor,
                                ConversionPatternRewriter &rewriter) const override {
    rewriter.eraseOp(op);
    return success();
  }
};

} // namespace

void kiln::host::routeF64ErfThroughLibdevice(ModuleOp module) {
  SmallVector<math::ErfOp> erfs;
  module.walk([&](math::ErfOp op) {
    if (getElementTypeOrSelf(op.getType()).isF64())
      erfs.push_back(op);
  });
  for (math::ErfOp op : erfs) {
    OpBuilder b(op);
    auto call = ExternElementwiseOp::create(b, op.getLoc(), op.getType(), "__nv_erf",
                                            ValueRange{op.getOperand()}, /*pure=*/true);
    op.replaceAllUsesWith(call.getResult());
    op.erase();
  }
}

LogicalResult kiln::host::checkExternFunctions(ModuleOp module) {
  WalkResult asmWalk = module.walk([](InlineAsmElementwiseOp op) {
    op.emitError() << "tl.inline_asm_elementwise is not supported by the CPU backend: its asm "
                      "is PTX, which runs on the GPU only";
    return WalkResult::interrupt();
  });
  if (asmWalk.wasInterrupted())
    return failure();
  WalkResult walk = module.walk([](ExternElementwiseOp op) {
    auto [function, overload] = libdevice::lookupSymbol(op.getSymbol());
    if (!function) {
      op.emitError() << "the external function @" << op.getSymbol()
                     << " has no CPU backend version (the CPU backend knows libdevice's "
                        "functions only)";
      return WalkResult::interrupt();
    }
    // What emitSymbol has no code for.
    StringRef name = function->name;
    if (name != "rcp64h")
      return WalkResult::advance();
    op.emitError() << "libdevice." << name << " (@" << op.getSymbol()
                   << ") has no CPU backend version in Kiln; it runs on the GPU";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

void kiln::host::populateExternOpToHostPatterns(TypeConverter &converter,
                                                RewritePatternSet &patterns) {
  patterns.add<ExternElementwiseConversion, GlobalTimerConversion, SmIdConversion,
               GridDependencyConversion>(converter, patterns.getContext());
}
