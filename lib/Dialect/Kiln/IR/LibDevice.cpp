//===- LibDevice.cpp - The libdevice functions Kiln exposes ---------------===//
//
// This file implements the table of kiln.language.extra.cuda.libdevice: each function's
// overloads as libdevice symbols with one-letter dtype codes (see LibDevice.h). The names,
// overloads and result dtypes are those of Triton 3.6's libdevice module, including its
// choices of int32/int64 results for the unsigned conversions (float2uint_rn returns int32).
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/LibDevice.h"

#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/StringMap.h"

using namespace kiln::libdevice;

mlir::Type kiln::libdevice::getCodeType(char code, mlir::MLIRContext &ctx) {
  switch (code) {
  case 'f':
    return mlir::Float32Type::get(&ctx);
  case 'd':
    return mlir::Float64Type::get(&ctx);
  case 'i':
  case 'u':
    return mlir::IntegerType::get(&ctx, 32);
  default:
    return mlir::IntegerType::get(&ctx, 64);
  }
}

llvm::StringRef kiln::libdevice::getCodeDTypeName(char code) {
  switch (code) {
  case 'f':
    return "fp32";
  case 'd':
    return "fp64";
  case 'i':
    return "int32";
  case 'u':
    return "uint32";
  case 'l':
    return "int64";
  default:
    return "uint64";
  }
}

namespace {

/// Builds the table; each helper adds one function.
struct TableBuilder {
  std::vector<Function> functions;

  Function &add(std::string name, std::initializer_list<Overload> overloads, bool promotes = true) {
    functions.push_back(Function{std::move(name), {}, promotes});
    functions.back().overloads.assign(overloads.begin(), overloads.end());
    return functions.back();
  }
  /// name(fp32 x n) -> fp32 as __nv_<name>f, name(fp64 x n) -> fp64 as __nv_<name>.
  void floats(std::string name, unsigned arity = 1) {
    add(name, {{"__nv_" + name + "f", std::string(arity, 'f'), 'f'},
               {"__nv_" + name, std::string(arity, 'd'), 'd'}});
  }
  /// The four rounding modes of an fp32/fp64 operation named `<stem>_<mode>` whose symbols
  /// are `<f32>_<mode>` and `<f64>_<mode>`.
  void rounding(std::string stem, std::string f32, std::string f64, unsigned arity,
                llvm::ArrayRef<const char *> modes = {"rn", "rz", "rd", "ru"}) {
    for (const char *m : modes)
      add(stem + "_" + m,
          {{"__nv_" + f32 + "_" + m, std::string(arity, 'f'), 'f'},
           {"__nv_" + f64 + "_" + m, std::string(arity, 'd'), 'd'}},
          /*promotes=*/false);
  }
  /// A conversion `<name>_<mode>` for every mode: one overload.
  void convert(std::string name, char from, char to,
               llvm::ArrayRef<const char *> modes = {"rn", "rz", "rd", "ru"}) {
    for (const char *m : modes) {
      std::string full = name + "_" + m;
      add(full, {{"__nv_" + full, std::string(1, from), to}}, /*promotes=*/false);
    }
  }
  /// A function with one overload (`promotes` false: exact dtypes only).
  void one(std::string name, std::string symbol, std::string args, char result,
           bool promotes = true) {
    add(name, {{std::move(symbol), std::move(args), result}}, promotes);
  }
};

std::vector<Function> buildTable() {
  TableBuilder t;
  // Integers.
  t.add("clz", {{"__nv_clz", "i", 'i'}, {"__nv_clzll", "l", 'i'}});
  t.add("popc", {{"__nv_popc", "i", 'i'}, {"__nv_popcll", "l", 'i'}});
  t.one("byte_perm", "__nv_byte_perm", "iii", 'i');
  t.add("mulhi", {{"__nv_mulhi", "ii", 'i'},
                  {"__nv_umulhi", "uu", 'u'},
                  {"__nv_mul64hi", "ll", 'l'},
                  {"__nv_umul64hi", "LL", 'L'}});
  t.add("mul24", {{"__nv_mul24", "ii", 'i'}, {"__nv_umul24", "uu", 'u'}});
  t.add("brev", {{"__nv_brev", "i", 'i'}, {"__nv_brevll", "l", 'l'}});
  t.add("sad", {{"__nv_sad", "iiu", 'i'}, {"__nv_usad", "uuu", 'u'}});
  t.add("abs", {{"__nv_abs", "i", 'i'},
                {"__nv_llabs", "l", 'l'},
                {"__nv_fabsf", "f", 'f'},
                {"__nv_fabs", "d", 'd'}});
  // Rounding to integral values, roots, exponentials.
  t.floats("floor");
  t.one("rcp64h", "__nv_rcp64h", "d", 'd');
  t.floats("rsqrt");
  t.floats("ceil");
  t.floats("trunc");
  t.floats("exp2");
  t.one("saturatef", "__nv_saturatef", "f", 'f');
  // Arithmetic with an explicit rounding mode.
  t.rounding("fma", "fmaf", "fma", 3);
  t.one("fast_dividef", "__nv_fast_fdividef", "ff", 'f');
  t.rounding("div", "fdiv", "ddiv", 2);
  t.rounding("rcp", "frcp", "drcp", 1);
  t.rounding("sqrt", "fsqrt", "dsqrt", 1);
  t.floats("sqrt");
  t.rounding("add", "fadd", "dadd", 2);
  t.rounding("mul", "fmul", "dmul", 2);
  // Conversions (Triton's result dtypes: the unsigned ones return int32/int64).
  t.convert("double2float", 'd', 'f');
  t.convert("double2int", 'd', 'i');
  t.convert("double2uint", 'd', 'i');
  t.convert("int2double", 'i', 'd', {"rn"});
  t.convert("uint2double", 'u', 'd', {"rn"});
  t.convert("float2int", 'f', 'i');
  t.convert("float2uint", 'f', 'i');
  t.convert("int2float", 'i', 'f');
  t.convert("uint2float", 'u', 'f');
  t.one("hiloint2double", "__nv_hiloint2double", "ii", 'd', false);
  t.one("double2loint", "__nv_double2loint", "d", 'i', false);
  t.one("double2hiint", "__nv_double2hiint", "d", 'i', false);
  t.convert("float2ll", 'f', 'l');
  t.convert("float2ull", 'f', 'l');
  t.convert("double2ll", 'd', 'l');
  t.convert("double2ull", 'd', 'l');
  t.convert("ll2float", 'l', 'f');
  t.convert("ull2float", 'L', 'f');
  t.convert("ll2double", 'l', 'd');
  t.convert("ull2double", 'L', 'd');
  // Bit casts.
  t.one("int_as_float", "__nv_int_as_float", "i", 'f', false);
  t.one("float_as_int", "__nv_float_as_int", "f", 'i', false);
  t.one("uint_as_float", "__nv_uint_as_float", "u", 'f', false);
  t.one("float_as_uint", "__nv_float_as_uint", "f", 'i', false);
  t.one("longlong_as_double", "__nv_longlong_as_double", "l", 'd', false);
  t.one("double_as_longlong", "__nv_double_as_longlong", "d", 'l', false);
  // Fast approximations (fp32 only).
  for (const char *f : {"sinf", "cosf", "log2f", "logf", "expf", "tanf", "exp10f", "log10f"})
    t.one(std::string("fast_") + f, std::string("__nv_fast_") + f, "f", 'f');
  t.one("fast_powf", "__nv_fast_powf", "ff", 'f');
  // Halving additions.
  t.add("hadd", {{"__nv_hadd", "ii", 'i'}, {"__nv_uhadd", "uu", 'u'}});
  t.add("rhadd", {{"__nv_rhadd", "ii", 'i'}, {"__nv_urhadd", "uu", 'u'}});
  t.rounding("sub", "fsub", "dsub", 2);
  t.one("rsqrt_rn", "__nv_frsqrt_rn", "f", 'f', false);
  t.add("ffs", {{"__nv_ffs", "i", 'i'}, {"__nv_ffsll", "l", 'i'}});
  t.floats("rint");
  t.add("llrint", {{"__nv_llrintf", "f", 'l'}, {"__nv_llrint", "d", 'l'}});
  t.floats("nearbyint");
  // Classification (int32 results).
  t.add("isnan", {{"__nv_isnanf", "f", 'i'}, {"__nv_isnand", "d", 'i'}});
  t.add("signbit", {{"__nv_signbitf", "f", 'i'}, {"__nv_signbitd", "d", 'i'}});
  t.floats("copysign", 2);
  t.one("finitef", "__nv_finitef", "f", 'i');
  t.add("isinf", {{"__nv_isinff", "f", 'i'}, {"__nv_isinfd", "d", 'i'}});
  t.floats("nextafter", 2);
  // Transcendentals.
  for (const char *f :
       {"sin", "cos", "sinpi", "cospi", "tan", "log2", "exp", "exp10", "cosh", "sinh", "tanh"})
    t.floats(f);
  t.floats("atan2", 2);
  for (const char *f :
       {"atan", "asin", "acos", "log", "log10", "log1p", "acosh", "asinh", "atanh", "expm1"})
    t.floats(f);
  t.floats("hypot", 2);
  t.floats("rhypot", 2);
  t.floats("norm3d", 3);
  t.floats("rnorm3d", 3);
  t.floats("norm4d", 4);
  t.floats("rnorm4d", 4);
  for (const char *f : {"cbrt", "rcbrt", "j0", "j1", "y0", "y1"})
    t.floats(f);
  t.add("yn", {{"__nv_ynf", "if", 'f'}, {"__nv_yn", "id", 'd'}});
  t.add("jn", {{"__nv_jnf", "if", 'f'}, {"__nv_jn", "id", 'd'}});
  for (const char *f : {"cyl_bessel_i0", "cyl_bessel_i1", "erf", "erfinv", "erfc", "erfcx",
                        "erfcinv", "normcdfinv", "normcdf", "lgamma"})
    t.floats(f);
  t.add("ldexp", {{"__nv_ldexpf", "fi", 'f'}, {"__nv_ldexp", "di", 'd'}});
  t.add("scalbn", {{"__nv_scalbnf", "fi", 'f'}, {"__nv_scalbn", "di", 'd'}});
  t.floats("fmod", 2);
  t.floats("remainder", 2);
  t.floats("fma", 3);
  t.add("pow", {{"__nv_powif", "fi", 'f'},
                {"__nv_powi", "di", 'd'},
                {"__nv_powf", "ff", 'f'},
                {"__nv_pow", "dd", 'd'}});
  t.floats("tgamma");
  t.floats("round");
  t.add("llround", {{"__nv_llroundf", "f", 'l'}, {"__nv_llround", "d", 'l'}});
  t.floats("fdim", 2);
  t.add("ilogb", {{"__nv_ilogbf", "f", 'i'}, {"__nv_ilogb", "d", 'i'}});
  t.floats("logb");
  t.one("isfinited", "__nv_isfinited", "d", 'i');
  return std::move(t.functions);
}

struct Index {
  std::vector<Function> functions = buildTable();
  llvm::StringMap<unsigned> byName;
  llvm::StringMap<std::pair<unsigned, unsigned>> bySymbol;
  Index() {
    for (auto [i, f] : llvm::enumerate(functions)) {
      byName[f.name] = i;
      for (auto [j, o] : llvm::enumerate(f.overloads))
        bySymbol.try_emplace(o.symbol, unsigned(i), unsigned(j));
    }
  }
};

const Index &getIndex() {
  static const Index index;
  return index;
}

} // namespace

llvm::ArrayRef<Function> kiln::libdevice::getFunctions() { return getIndex().functions; }

const Function *kiln::libdevice::lookupFunction(llvm::StringRef name) {
  const Index &index = getIndex();
  auto it = index.byName.find(name);
  return it == index.byName.end() ? nullptr : &index.functions[it->second];
}

std::pair<const Function *, const Overload *>
kiln::libdevice::lookupSymbol(llvm::StringRef symbol) {
  const Index &index = getIndex();
  auto it = index.bySymbol.find(symbol);
  if (it == index.bySymbol.end())
    return {nullptr, nullptr};
  const Function &f = index.functions[it->second.first];
  return {&f, &f.overloads[it->second.second]};
}
