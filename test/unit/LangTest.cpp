//===- LangTest.cpp - Unit tests of the C++ embedded DSL ------------------===//
//
// This file tests kiln::lang: kernels trace to kiln-dialect MLIR with the expected ops and the
// C++ call sites as locations; specialization (Const values, divisibility of integers and
// pointer alignment) selects variants; traced kernels compile to PTX without a GPU; user
// errors throw kiln::lang::CompileError naming the kernel and the line. Tests named GPU_*
// launch the kernel library on the device and skip without one.
//
//===----------------------------------------------------------------------===//

#include "kiln/kiln.h"

#include "Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

using namespace kiln::lang;
using kiln::rt::CUdeviceptr;
using kiln::rt::DeviceBuffer;

namespace {

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

size_t count(const std::string &haystack, const std::string &needle) {
  size_t n = 0;
  for (size_t at = haystack.find(needle); at != std::string::npos;
       at = haystack.find(needle, at + 1))
    ++n;
  return n;
}

/// `"LangTest.cpp":<line>` as the traced MLIR prints a location of this file.
std::string locOf(unsigned line) { return "LangTest.cpp\":" + std::to_string(line) + ":"; }

/// An aligned and an unaligned fake device address: tracing only looks at the alignment.
constexpr CUdeviceptr kAligned = 0x10000, kUnaligned = 0x10004;

/// Runs `fn`, expecting a CompileError at this file's `line` in `kernel` containing `text`.
template <class Fn>
void expectError(const std::string &kernel, const unsigned &line, const std::string &text,
                 Fn &&fn) {
  try {
    fn();
    ADD_FAILURE() << "expected a CompileError containing: " << text;
  } catch (const CompileError &e) {
    EXPECT_TRUE(contains(e.getMessage(), text)) << e.what();
    EXPECT_EQ(e.getKernel(), kernel) << e.what();
    EXPECT_EQ(e.getLine(), line) << e.what();
    EXPECT_TRUE(contains(e.getFile(), "LangTest.cpp")) << e.what();
    EXPECT_TRUE(contains(e.what(), "LangTest.cpp:" + std::to_string(line) + ":")) << e.what();
    EXPECT_TRUE(contains(e.what(), "error: in kernel '" + kernel + "': ")) << e.what();
  }
}

//===----------------------------------------------------------------------===//
// Tracing
//===----------------------------------------------------------------------===//

TEST(LangTrace, VectorAddOpsAndLocations) {
  unsigned offsLine = 0, loadLine = 0;
  auto add =
      kiln::kernel("add", [&](Ptr<f32> x, Ptr<f32> y, Ptr<f32> out, I32 n, Const<int> BLOCK) {
        offsLine = __LINE__ + 1;
        auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
        auto mask = offs < n;
        loadLine = __LINE__ + 1;
        auto sum = load(x + offs, mask) + load(y + offs, mask);
        store(out + offs, sum, mask);
      });
  std::string mlir = add.mlir(kAligned, kAligned, kAligned, 4096, 1024);
  EXPECT_TRUE(contains(mlir, "func.func @add(")) << mlir;
  EXPECT_TRUE(contains(mlir, "kiln.program_id x")) << mlir;
  EXPECT_TRUE(contains(mlir, "kiln.make_range {end = 1024 : i32, start = 0 : i32}")) << mlir;
  EXPECT_TRUE(contains(mlir, "arith.cmpi slt")) << mlir;
  EXPECT_EQ(count(mlir, "kiln.load"), 2u) << mlir;
  EXPECT_EQ(count(mlir, "kiln.addptr"), 3u) << mlir;
  EXPECT_TRUE(contains(mlir, "arith.addf")) << mlir;
  EXPECT_TRUE(contains(mlir, "kiln.store")) << mlir;
  // Three aligned pointers and n = 4096 are all divisible by 16.
  EXPECT_EQ(count(mlir, "kiln.divisibility = 16"), 4u) << mlir;
  // The user's lines, not the DSL's.
  EXPECT_TRUE(contains(mlir, locOf(offsLine))) << mlir;
  EXPECT_TRUE(contains(mlir, locOf(loadLine))) << mlir;
  EXPECT_FALSE(contains(mlir, "kiln.h")) << mlir;
  EXPECT_EQ(add.name(), "add");
}

TEST(LangTrace, LibraryKernelsTrace) {
  const auto &add = kiln::kernels::vectorAddKernel();
  std::string a = add.mlir(kAligned, kAligned, kAligned, 1 << 20, 1024);
  EXPECT_TRUE(contains(a, "func.func @vector_add(")) << a;
  EXPECT_TRUE(contains(a, "vector_add.cpp\":")) << a;

  std::string kl = kiln::kernels::klDivKernel().mlir(kAligned, kAligned, kAligned, 4096, 1024);
  EXPECT_EQ(count(kl, "math.log"), 2u) << kl;
  EXPECT_TRUE(contains(kl, "arith.subf")) << kl;
  EXPECT_TRUE(contains(kl, "arith.mulf")) << kl;
  // `other` = 1.0 makes the loads three-operand.
  EXPECT_TRUE(contains(kl, "arith.constant 1.000000e+00 : f32")) << kl;

  std::string copy =
      kiln::kernels::copy2DKernel().mlir(kAligned, kAligned, 256, 512, 512, 528, 32, 64);
  EXPECT_TRUE(contains(copy, "kiln.program_id y")) << copy;
  EXPECT_TRUE(contains(copy, "kiln.expand_dims %") && contains(copy, "{axis = 1 : i32}") &&
              contains(copy, "{axis = 0 : i32}"))
      << copy;
  EXPECT_TRUE(contains(copy, "tensor<32x64x!kiln.ptr<f32>>")) << copy;
  EXPECT_TRUE(contains(copy, "arith.andi")) << copy;
  EXPECT_EQ(count(copy, "kiln.divisibility = 16"), 6u) << copy;
}

TEST(LangTrace, SpecializationKey) {
  const auto &add = kiln::kernels::vectorAddKernel();
  std::string aligned = add.mlir(kAligned, kAligned, kAligned, 4096, 1024);
  // n = 1000 is not a multiple of 16; one pointer is misaligned.
  std::string ragged = add.mlir(kAligned, kUnaligned, kAligned, 1000, 1024);
  EXPECT_EQ(count(ragged, "kiln.divisibility = 16"), 2u) << ragged;
  EXPECT_NE(aligned, ragged);
  // Another 16-divisible n and other aligned addresses select the same variant.
  EXPECT_EQ(add.mlir(kAligned * 3, kAligned * 5, kAligned * 7, 16, 1024), aligned);
  // A Const is part of the key: BLOCK = 256 is another kernel.
  std::string small = add.mlir(kAligned, kAligned, kAligned, 4096, 256);
  EXPECT_TRUE(contains(small, "kiln.make_range {end = 256 : i32, start = 0 : i32}")) << small;
  // Typed device pointers and DeviceBuffer-free raw addresses are accepted alike.
  float *typed = reinterpret_cast<float *>(kAligned);
  EXPECT_EQ(add.mlir(typed, static_cast<void *>(typed), kAligned, 4096, 1024), aligned);
}

TEST(LangTrace, ConstParameters) {
  auto k = kiln::kernel("consts", [](Ptr<f32> x, Const<bool> DOUBLE, Const<float> SCALE,
                                     Const<DType> OUT, Const<int64_t> BLOCK) {
    auto offs = arange(0, BLOCK);
    auto v = load(x + offs);
    if (DOUBLE) // a C++ branch: constexpr in Triton's terms
      v = v * 2;
    store(x + offs, (v * SCALE).to(OUT));
  });
  std::string a = k.mlir(kAligned, true, 0.5f, float16, int64_t(64));
  EXPECT_EQ(count(a, "arith.mulf"), 2u) << a;
  EXPECT_TRUE(contains(a, "arith.truncf")) << a;
  EXPECT_TRUE(contains(a, "5.000000e-01")) << a;
  std::string b = k.mlir(kAligned, false, 0.5f, float32, int64_t(64));
  EXPECT_EQ(count(b, "arith.mulf"), 1u) << b;
  EXPECT_FALSE(contains(b, "arith.truncf")) << b;
  EXPECT_NE(k.mlir(kAligned, false, 0.25f, float32, int64_t(64)), b);
}

TEST(LangTrace, OperatorsAndLiterals) {
  auto k = kiln::kernel("ops", [](Ptr<i32> p, Ptr<f16> h, I32 n, F32 f, U32 u) {
    auto i = load(p + arange(0, 16));
    store(p + arange(0, 16), i / 3); // C++ `/` on integers truncates
    store(p + arange(0, 16), i % n); // C remainder
    store(p + arange(0, 16), floordiv(i, n));
    store(p + arange(0, 16), (truediv(i, n) * f).to(int32)); // Triton `/`: fp32
    store(p + arange(0, 16), (i << 2) >> 1);
    store(p + arange(0, 16), (i & 7) | (i ^ n) | ~i);
    store(p + arange(0, 16), where((!(i < 0)) & (i != n), -i, 0));
    store(p + arange(0, 16), minimum(i, maximum(n, 3)));
    auto hv = load(h + arange(0, 16));
    store(h + arange(0, 16), hv * 0.5 / hv); // weak literals keep fp16
    store(h + arange(0, 16), exp(hv) + exp2(hv) + log(hv) + log2(hv) + sqrt(hv) + rsqrt(hv) +
                                 sin(hv) + cos(hv) + abs(hv));
    store(p + arange(0, 16), (u >> 1).to(int32));
    Value acc = i;
    acc += 1;
    acc *= n;
    store(p + arange(0, 16), acc);
  });
  std::string m = k.mlir(kAligned, kAligned, 7, 1.5f, 9u);
  for (const char *op :
       {"arith.divsi", "arith.remsi", "arith.sitofp", "arith.divf", "arith.fptosi", "arith.shli",
        "arith.shrsi", "arith.andi",  "arith.ori",    "arith.xori", "arith.select", "arith.minsi",
        "arith.maxsi", "math.exp",    "math.exp2",    "math.log",   "math.log2",    "math.sqrt",
        "math.rsqrt",  "math.sin",    "math.cos",     "math.absf",  "arith.shrui",  "arith.muli"})
    EXPECT_TRUE(contains(m, op)) << op << "\n" << m;
  EXPECT_TRUE(contains(m, "arith.mulf %") && contains(m, ": tensor<16xf16>")) << m;
  // n = 7 and u = 9 are not multiples of 16, floats never specialize.
  EXPECT_EQ(count(m, "kiln.divisibility = 16"), 2u) << m;
}

TEST(LangTrace, ShapesAndIndexing) {
  auto k = kiln::kernel("shapes", [](Ptr<f32> x) {
    auto r = arange(0, 8);
    auto c = arange(0, 16);
    auto col = r[{Slice_, None_}]; // [8, 1]
    auto row = c[None_];           // [1, 16]
    EXPECT_EQ(col.shape(), (Shape{8, 1}));
    EXPECT_EQ(row.shape(), (Shape{1, 16}));
    auto offs = col * 16 + row;
    EXPECT_EQ(offs.shape(), (Shape{8, 16}));
    EXPECT_EQ(offs.dtype(), int32);
    auto z = zeros({8, 16}, float32) + full({8, 16}, 2, float32);
    auto b = broadcast_to(expand_dims(c, 0), {8, 16});
    EXPECT_EQ(b.shape(), (Shape{8, 16}));
    auto [p, q] = broadcast(col, row);
    EXPECT_EQ(p.shape(), q.shape());
    store(x + offs, z + b.to(float32) + (p - q).to(float32));
    EXPECT_EQ((x + offs).dtype(), DType::pointerTo(float32));
    EXPECT_EQ((x + offs).dtype().str(), "pointer<fp32>");
  });
  std::string m = k.mlir(kAligned);
  EXPECT_TRUE(contains(m, "tensor<8x1xi32>")) << m;
  EXPECT_TRUE(contains(m, "tensor<1x16xi32>")) << m;
  EXPECT_TRUE(contains(m, "kiln.broadcast")) << m;
  EXPECT_TRUE(contains(m, "tensor<8x16x!kiln.ptr<f32>>")) << m;
}

TEST(LangTrace, ControlFlow) {
  unsigned loopLine = 0;
  auto k = kiln::kernel("flow", [&](Ptr<f32> x, I32 n) {
    auto offs = arange(0, 64);
    loopLine = __LINE__ + 1;
    Value acc = for_range(0, n, 1, zeros({64}, float32),
                          [&](Value i, Value acc) { return acc + load(x + i * 64 + offs); });
    Values pair = for_range(0, 4, 2, {acc, 0}, [&](Value i, Values c) {
      return Values{c[0] * 2, c[1] + i};
    });
    for_range(0, n, [&](Value i) { store(x + i * 64 + offs, pair[0]); });
    Value v = if_(
        n > 16, [&] { return pair[0] + 1.0f; }, [&] { return pair[0]; });
    if_(n == 0, [&] { store(x + offs, v); });
    Value w = while_(
        n, [](Value c) { return c > 1; }, [](Value c) { return c / 2; });
    store(x + offs, v, offs < w);
  });
  std::string m = k.mlir(kAligned, 100);
  EXPECT_EQ(count(m, "scf.for"), 3u) << m;
  EXPECT_EQ(count(m, "scf.if"), 2u) << m;
  EXPECT_TRUE(contains(m, "scf.while")) << m;
  EXPECT_TRUE(contains(m, "scf.yield")) << m;
  EXPECT_TRUE(contains(m, locOf(loopLine))) << m;
  // The carried literal 0 takes the induction variable's int32.
  EXPECT_TRUE(contains(m, "iter_args")) << m;
  EXPECT_FALSE(contains(m, "kiln.flatten")) << m;
}

TEST(LangTrace, FlattenedLoop) {
  // for_range_flat marks its loop as tl.range(..., flatten=True) does; compiled for sm_90a the
  // tile loop and its inner loop become one (its rings then run across tiles).
  auto k = kiln::kernel("flat", [&](Ptr<f32> x, I32 tiles, I32 n) {
    auto offs = arange(0, 64);
    for_range_flat(program_id(0), tiles, 4, [&](Value t) {
      Value acc = for_range(0, n, 1, zeros({64}, float32), [&](Value i, Value acc) {
        return acc + load(x + (t * n + i) * 64 + offs);
      });
      store(x + t * 64 + offs, acc);
    });
  });
  std::string m = k.mlir(kAligned, 100, 100);
  EXPECT_EQ(count(m, "kiln.flatten"), 1u) << m;
  EXPECT_EQ(count(m, "scf.for"), 2u) << m;
}

TEST(LangTrace, LoopCompilesToPTX) {
  auto k = kiln::kernel("rowsum", [](Ptr<f32> x, Ptr<f32> out, I32 rows, Const<int> BLOCK) {
    auto offs = arange(0, BLOCK);
    auto acc = for_range(0, rows, 1, zeros({BLOCK}, float32),
                         [&](Value r, Value acc) { return acc + load(x + r * BLOCK + offs); });
    store(out + offs, acc);
  });
  Compiled c = k.compile(kAligned, kAligned, 8, 128);
  EXPECT_EQ(c.name, "rowsum");
  EXPECT_TRUE(contains(c.ptx, ".entry rowsum")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "ld.global")) << c.ptx;
}

//===----------------------------------------------------------------------===//
// PTX without a GPU
//===----------------------------------------------------------------------===//

TEST(LangCompile, AlignedAddUsesVectorLoads) {
  const auto &add = kiln::kernels::vectorAddKernel();
  Compiled c = add.compile(kAligned, kAligned, kAligned, 1 << 20, 1024);
  EXPECT_EQ(c.name, "vector_add");
  EXPECT_TRUE(contains(c.ptx, ".entry vector_add")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "ld.global.v4")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "st.global.v4")) << c.ptx;
  // Misaligned pointers and a ragged n: a different, scalar-access variant.
  Compiled r = add.compile(kUnaligned, kUnaligned, kUnaligned, 1000, 1024);
  EXPECT_FALSE(contains(r.ptx, "ld.global.v4")) << r.ptx;
  // Other targets and warp counts.
  Target sm80;
  sm80.arch = "sm_80";
  sm80.num_warps = 8;
  Compiled c80 = add.compile(sm80, kAligned, kAligned, kAligned, 1 << 20, 1024);
  EXPECT_TRUE(contains(c80.ptx, ".target sm_80")) << c80.ptx;
  EXPECT_TRUE(contains(c80.ptx, "ld.global.v4")) << c80.ptx;
}

// Triton's maxnreg: Target::maxnreg and Launch::maxnreg cap the registers per thread.
TEST(LangCompile, MaxnregCapsRegisters) {
  const auto &add = kiln::kernels::vectorAddKernel();
  Target capped;
  capped.maxnreg = 40;
  Compiled c = add.compile(capped, kAligned, kAligned, kAligned, 1 << 20, 1024);
  EXPECT_TRUE(contains(c.ptx, ".maxnreg 40")) << c.ptx;
  Compiled plain = add.compile(kAligned, kAligned, kAligned, 1 << 20, 1024);
  EXPECT_FALSE(contains(plain.ptx, ".maxnreg")) << plain.ptx;
  Target tooMany;
  tooMany.maxnreg = 300;
  try {
    add.compile(tooMany, kAligned, kAligned, kAligned, 1 << 20, 1024);
    ADD_FAILURE() << "expected an error";
  } catch (const kiln::lang::CompileError &e) {
    EXPECT_TRUE(contains(e.what(), "expected a register count per thread from 16 to 255"))
        << e.what();
  }
  EXPECT_EQ(grid(4).maxnreg(64).regs, 64u);
}

// fp8 tiles (float8e4nv, float8e5) as Triton's: loads, conversions both ways, stores.
TEST(LangCompile, Fp8TilesCompile) {
  auto k = kiln::kernel("fp8_scale", [](Ptr<f8e4nv> x, Ptr<f8e5> out, I32 n) {
    auto offs = program_id(0) * 128 + arange(0, 128);
    auto m = offs < n;
    store(out + offs, (load(x + offs, m).to(float32) * 2.0f).to(float8e5), m);
  });
  std::string m = k.mlir(kAligned, kAligned, 1024);
  EXPECT_TRUE(contains(m, "f8E4M3FN")) << m;
  EXPECT_TRUE(contains(m, "f8E5M2")) << m;
  Target h100;
  h100.arch = "sm_90a";
  Compiled c = k.compile(h100, kAligned, kAligned, 1024);
  // -kiln-expand-fp8 converts on the bits (no fp8 types reach LLVM): a byte per thread here.
  EXPECT_TRUE(contains(c.ptx, ".entry fp8_scale")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "ld.global.b8")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "st.global.b8")) << c.ptx;
  EXPECT_EQ(float8e4nv.str(), "fp8e4nv");
  EXPECT_EQ(DType::pointerTo(float8e5).str(), "pointer<fp8e5>");
}

// dot, as tl.dot: a matmul loop on wgmma (sm_90a) and mma.sync (sm_80); errors at the line.
/// c (64 x 64, fp32) = a (64 x K, fp16) @ b (K x 64, fp16), K a multiple of 32.
static kiln::lang::Kernel<void(Ptr<f16>, Ptr<f16>, Ptr<f32>, I32)> &matmulKernel() {
  static auto mm = kiln::kernel("dsl_matmul", [](Ptr<f16> a, Ptr<f16> b, Ptr<f32> c, I32 K) {
    auto rm = arange(0, 64)[{Slice_, None_}];
    auto rn = arange(0, 64)[{None_, Slice_}];
    Value acc = for_range(0, K, 32, zeros({64, 64}, float32), [&](Value k, Value acc) {
      auto x = load(a + rm * K + (k + arange(0, 32))[{None_, Slice_}]);
      auto y = load(b + (k + arange(0, 32))[{Slice_, None_}] * 64 + rn);
      return dot(x, y, acc);
    });
    store(c + rm * 64 + rn, acc);
  });
  return mm;
}

TEST(LangCompile, DotCompiles) {
  auto &mm = matmulKernel();
  Target h100;
  h100.arch = "sm_90a";
  Compiled c = mm.compile(h100, kAligned, kAligned, kAligned, 256);
  EXPECT_TRUE(contains(c.ptx, "wgmma.mma_async")) << c.ptx;
  Target a100;
  a100.arch = "sm_80";
  Compiled c80 = mm.compile(a100, kAligned, kAligned, kAligned, 256);
  EXPECT_TRUE(contains(c80.ptx, "mma.sync.aligned.m16n8k16")) << c80.ptx;

  const unsigned line = __LINE__ + 2;
  auto bad = kiln::kernel("bad_dot", [](Ptr<f16> a) {
    store(a + arange(0, 16), dot(load(a + arange(0, 16)), load(a + arange(0, 16))).to(float16));
  });
  try {
    bad.mlir(kAligned);
    ADD_FAILURE() << "expected an error";
  } catch (const kiln::lang::CompileError &e) {
    EXPECT_EQ(e.getKernel(), "bad_dot") << e.what();
    EXPECT_EQ(e.getLine(), line) << e.what();
  }
}

TEST(LangCompile, LibraryKernelsCompile) {
  Compiled kl = kiln::kernels::klDivKernel().compile(kAligned, kAligned, kAligned, 4096, 1024);
  EXPECT_TRUE(contains(kl.ptx, "ld.global.v4")) << kl.ptx;
  Compiled copy =
      kiln::kernels::copy2DKernel().compile(kAligned, kAligned, 256, 512, 512, 528, 32, 64);
  EXPECT_TRUE(contains(copy.ptx, ".entry copy_2d")) << copy.ptx;
  EXPECT_TRUE(contains(copy.ptx, "ld.global.v4")) << copy.ptx;
}

TEST(LangCompile, JITCompilesTracedTextWithoutGPU) {
  char dir[] = "/tmp/kiln-lang-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  kiln::rt::JIT jit("sm_90", dir);
  std::string text =
      kiln::kernels::vectorAddKernel().mlir(kAligned, kAligned, kAligned, 1 << 20, 1024);
  try {
    std::vector<char> cubin = jit.compileToCubin(text);
    EXPECT_GT(cubin.size(), 0u);
    EXPECT_EQ(jit.getStats().compiles, 1u);
    jit.compileToCubin(text);
    EXPECT_EQ(jit.getStats().memoryHits, 1u);
  } catch (const kiln::rt::Error &e) {
    // Without nvJitLink the JIT keeps PTX only; the text still compiled.
    EXPECT_TRUE(contains(e.what(), "nvJitLink")) << e.what();
  }
  std::string cleanup = std::string("rm -rf ") + dir;
  EXPECT_EQ(std::system(cleanup.c_str()), 0);
}

TEST(LangCompile, UnsupportedOpNamesTheUserLine) {
  unsigned line = 0;
  auto k = kiln::kernel("transposed", [&](Ptr<f32> x) {
    auto offs = arange(0, 16)[{Slice_, None_}] * 16 + arange(0, 16)[None_];
    line = __LINE__ + 1;
    auto t = trans(load(x + offs));
    store(x + offs, t);
  });
  EXPECT_TRUE(contains(k.mlir(kAligned), "kiln.trans")) << k.mlir(kAligned);
  try {
    k.compile(kAligned);
    // A later compiler may support trans: then there is nothing to check.
  } catch (const CompileError &e) {
    EXPECT_EQ(e.getKernel(), "transposed");
    EXPECT_TRUE(contains(e.getFile(), "LangTest.cpp")) << e.what();
    EXPECT_EQ(e.getLine(), line) << e.what();
  }
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST(LangErrors, LoadOfNonPointer) {
  unsigned line = 0;
  auto k = kiln::kernel("bad_load", [&](Ptr<f32> x, I32 n) {
    line = __LINE__ + 1;
    load(n + arange(0, 16));
  });
  expectError("bad_load", line, "pointer", [&] { k.mlir(kAligned, 16); });
}

TEST(LangErrors, PointerPlusFloat) {
  unsigned line = 0;
  auto k = kiln::kernel("bad_ptr", [&](Ptr<f32> x, F32 f) {
    line = __LINE__ + 1;
    auto p = x + f;
    store(p, 1.0f);
  });
  expectError("bad_ptr", line, "fp32", [&] { k.mlir(kAligned, 1.0f); });
}

TEST(LangErrors, NonPowerOfTwoArange) {
  unsigned line = 0;
  auto k = kiln::kernel("bad_range", [&](Ptr<f32> x, Const<int> BLOCK) {
    line = __LINE__ + 1;
    auto offs = arange(0, BLOCK);
    store(x + offs, 0.0f);
  });
  expectError("bad_range", line, "power of two", [&] { k.mlir(kAligned, 100); });
  // The failed trace is not cached: the next variant traces fine.
  EXPECT_TRUE(contains(k.mlir(kAligned, 128), "kiln.store"));
}

TEST(LangErrors, ShapeMismatch) {
  unsigned line = 0;
  auto k = kiln::kernel("bad_shapes", [&](Ptr<f32> x) {
    auto a = arange(0, 16), b = arange(0, 32);
    line = __LINE__ + 1;
    store(x + a, (a + b).to(float32));
  });
  expectError("bad_shapes", line, "16", [&] { k.mlir(kAligned); });
}

TEST(LangErrors, LoopCarriedTypeChange) {
  unsigned line = 0;
  auto k = kiln::kernel("bad_loop", [&](Ptr<f32> x, I32 n) {
    line = __LINE__ + 1;
    auto acc = for_range(0, n, 1, 0, [&](Value i, Value acc) { return acc + 0.5f; });
    store(x, acc);
  });
  expectError("bad_loop", line, "changes type", [&] { k.mlir(kAligned, 4); });
}

TEST(LangErrors, ValuesOutsideTheirKernel) {
  Value leaked;
  auto k = kiln::kernel("leak", [&](Ptr<f32> x) { leaked = arange(0, 16); });
  k.mlir(kAligned);
  unsigned line = __LINE__ + 1;
  EXPECT_THROW(program_id(0), CompileError);
  try {
    Value v = leaked + 1;
    (void)v;
    ADD_FAILURE() << "expected an error";
  } catch (const CompileError &e) {
    EXPECT_TRUE(contains(e.getMessage(), "outside a kernel body")) << e.what();
    EXPECT_EQ(e.getLine(), line + 2);
  }
  // Inside another kernel, a stale value is caught instead of followed.
  unsigned useLine = 0;
  auto other = kiln::kernel("other", [&](Ptr<f32> x) {
    useLine = __LINE__ + 1;
    store(x + leaked, 1.0f);
  });
  expectError("other", useLine, "another trace", [&] { other.mlir(kAligned); });
}

TEST(LangErrors, BadHostArguments) {
  const auto &add = kiln::kernels::vectorAddKernel();
  try {
    add.mlir(kAligned, kAligned, kAligned, int64_t(1) << 40, 1024);
    ADD_FAILURE() << "expected an error";
  } catch (const kiln::rt::Error &e) {
    EXPECT_TRUE(contains(e.what(), "kernel 'vector_add' argument 3")) << e.what();
    EXPECT_TRUE(contains(e.what(), "does not fit int32")) << e.what();
  }
  auto u = kiln::kernel("unsigned_arg", [](Ptr<f32> x, U32 n) { store(x, n.to(float32)); });
  EXPECT_THROW(u.mlir(kAligned, -1), kiln::rt::Error);
  EXPECT_THROW(grid(-1), kiln::rt::Error);
  EXPECT_EQ(cdiv(1000, 16), 63);
  EXPECT_EQ(cdiv(Const<int>(1024), 256), 4);
}

// A launch's maxnreg: checked (16..255, naming the kernel), then ignored by the host backend
// or applied by the GPU's (ptxas's .maxnreg); the answer is the same.
TEST(LangHost, MaxnregLaunchOption) {
  auto add = kiln::kernel("capped_add", [](Ptr<f32> x, Ptr<f32> out, I32 n) {
    auto offs = program_id(0) * 128 + arange(0, 128);
    auto m = offs < n;
    store(out + offs, load(x + offs, m) * 2.0f, m);
  });
  const int n = 300;
  const bool host = kiln::lang::jit().isHost();
  kiln::rt::Buffer x(n * sizeof(float), host), out(n * sizeof(float), host);
  std::vector<float> hx(n), hout(n);
  for (int i = 0; i < n; ++i)
    hx[i] = float(i);
  x.copyFromHost(hx.data(), n * sizeof(float));
  auto ptr = [](const kiln::rt::Buffer &b) { return kiln::rt::CUdeviceptr(b.get()); };
  add(grid(cdiv(n, 128)).maxnreg(32), nullptr, ptr(x), ptr(out), n);
  if (!host)
    kiln::rt::synchronize();
  out.copyToHost(hout.data(), n * sizeof(float));
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(hout[i], 2.0f * float(i)) << i;
  try {
    add(grid(1).maxnreg(8), nullptr, ptr(x), ptr(out), n);
    ADD_FAILURE() << "expected an error";
  } catch (const kiln::rt::Error &e) {
    EXPECT_TRUE(contains(e.what(), "kernel 'capped_add': expected maxnreg from 16 to 255"))
        << e.what();
  }
}

// fp8 on the host backend: e4m3 bytes in, doubled, rounded to e4m3 and saturated out.
static kiln::lang::Kernel<void(Ptr<f8e4nv>, Ptr<f8e4nv>, Ptr<f32>, I32)> &fp8DoubleKernel() {
  static auto k =
      kiln::kernel("fp8_double", [](Ptr<f8e4nv> x, Ptr<f8e4nv> out, Ptr<f32> wide, I32 n) {
        auto offs = arange(0, 8);
        auto m = offs < n;
        auto v = load(x + offs, m).to(float32) * 2.0f;
        store(wide + offs, v, m);
        store(out + offs, v.to(float8e4nv), m);
      });
  return k;
}
// e4m3fn: 0x38 = 1.0, 0x40 = 2.0, 0xB8 = -1.0, 0x3C = 1.5, 0x7E = 448 (the largest), 0x00 = 0;
// doubled: 896 saturates to 448 (as cvt.rn.satfinite), the rest are exact.
static const std::vector<uint8_t> kFp8In = {0x38, 0x40, 0xB8, 0x3C, 0x7E, 0x00};
static const std::vector<uint8_t> kFp8Out = {0x40, 0x48, 0xC0, 0x44, 0x7E, 0x00};
static const std::vector<float> kFp8Wide = {2.0f, 4.0f, -2.0f, 3.0f, 896.0f, 0.0f};

TEST(LangHost, Fp8RoundTrip) {
  if (kiln::rt::hasGPU())
    GTEST_SKIP() << "a GPU is present";
  std::vector<uint8_t> x = kFp8In, out(x.size(), 0xFF);
  std::vector<float> wide(x.size(), -1.0f);
  auto addr = [](auto &v) { return kiln::rt::CUdeviceptr(uintptr_t(v.data())); };
  fp8DoubleKernel()(grid(1), nullptr, addr(x), addr(out), addr(wide), int(x.size()));
  EXPECT_EQ(wide, kFp8Wide);
  EXPECT_EQ(out, kFp8Out);
}

// dot on the host backend: a 16 x 16 x 16 fp32 product (ieee) plus an accumulator.
TEST(LangHost, DotOnTheHost) {
  if (kiln::rt::hasGPU())
    GTEST_SKIP() << "a GPU is present";
  auto k = kiln::kernel("dot16", [](Ptr<f32> a, Ptr<f32> b, Ptr<f32> c) {
    auto r = arange(0, 16)[{Slice_, None_}];
    auto col = arange(0, 16)[{None_, Slice_}];
    auto acc = full({16, 16}, 1.0f, float32);
    store(c + r * 16 + col, dot(load(a + r * 16 + col), load(b + r * 16 + col), acc, "ieee"));
  });
  std::vector<float> a(256), b(256), c(256, -1.0f);
  for (int i = 0; i < 256; ++i) {
    a[i] = float(i % 7) - 3.0f;
    b[i] = float(i % 5) * 0.5f;
  }
  auto addr = [](auto &v) { return kiln::rt::CUdeviceptr(uintptr_t(v.data())); };
  k(grid(1), nullptr, addr(a), addr(b), addr(c));
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 16; ++j) {
      float want = 1.0f;
      for (int l = 0; l < 16; ++l)
        want += a[i * 16 + l] * b[l * 16 + j];
      ASSERT_EQ(c[i * 16 + j], want) << i << "," << j;
    }
}

// Reductions, scans and atomics (tl.max / tl.sum / tl.argmax / tl.cumsum / tl.atomic_add):
// a row softmax of a 4 x 32 tile, each row's argmax and running sum, and the total through
// an atomic; on the host backend against C++, and to PTX for sm_90.
static kiln::lang::Kernel<void(Ptr<f32>, Ptr<f32>, Ptr<i32>, Ptr<f32>, Ptr<f32>)> &
reductionsKernel() {
  static auto k = kiln::kernel(
      "reductions", [](Ptr<f32> x, Ptr<f32> y, Ptr<i32> arg, Ptr<f32> cum, Ptr<f32> total) {
        auto rows = arange(0, 4)[{Slice_, None_}];
        auto cols = arange(0, 32)[{None_, Slice_}];
        auto v = load(x + rows * 32 + cols);
        auto e = exp(v - max(v, 1, /*keep_dims=*/true));
        store(y + rows * 32 + cols, e / sum(e, 1, true));
        store(arg + arange(0, 4), argmax(v, 1));
        store(cum + rows * 32 + cols, cumsum(v, 1));
        atomic_add(total, sum(sum(v, 1), 0));
      });
  return k;
}

static std::vector<float> reductionsInput() {
  std::vector<float> x(128);
  for (int i = 0; i < 128; ++i)
    x[i] = float((i * 37) % 23) * 0.25f - 2.0f;
  return x;
}

/// Checks reductionsKernel's outputs for reductionsInput() (total started at 0.5).
static void checkReductions(const std::vector<float> &x, const std::vector<float> &y,
                            const std::vector<int32_t> &arg, const std::vector<float> &cum,
                            float total) {
  float all = 0.5f;
  for (int r = 0; r < 4; ++r) {
    const float *row = &x[r * 32];
    float m = *std::max_element(row, row + 32), s = 0.0f, run = 0.0f;
    for (int c = 0; c < 32; ++c)
      s += std::exp(row[c] - m);
    for (int c = 0; c < 32; ++c) {
      EXPECT_NEAR(y[r * 32 + c], std::exp(row[c] - m) / s, 1e-6f) << r << "," << c;
      run += row[c];
      EXPECT_NEAR(cum[r * 32 + c], run, 1e-5f) << r << "," << c;
    }
    EXPECT_EQ(arg[r], int(std::max_element(row, row + 32) - row)) << r;
    all += run;
  }
  EXPECT_NEAR(total, all, 1e-4f);
}

// User combine functions (tl.reduce / tl.associative_scan): a max with its first index from
// two tiles reduced together, a one-tile product, and a running maximum.
static kiln::lang::Kernel<void(Ptr<f32>, Ptr<f32>, Ptr<i32>, Ptr<f32>, Ptr<f32>)> &combineKernel() {
  static auto k = kiln::kernel("combine", [](Ptr<f32> x, Ptr<f32> best, Ptr<i32> at, Ptr<f32> prod,
                                             Ptr<f32> runmax) {
    auto offs = arange(0, 64);
    auto v = load(x + offs);
    Values r = reduce({v, offs}, 0, [](const Values &a, const Values &b) {
      auto take = (a[0] > b[0]) | ((a[0] == b[0]) & (a[1] < b[1]));
      return Values{where(take, a[0], b[0]), where(take, a[1], b[1])};
    });
    store(best, r[0]);
    store(at, r[1]);
    store(prod, reduce(v * 0.0625f + 1.0f, 0, [](Value a, Value b) { return a * b; }));
    store(runmax + offs, associative_scan(v, 0, [](Value a, Value b) { return maximum(a, b); }));
  });
  return k;
}

// device_print on the host backend: the prefix, then each element on its line.
TEST(LangHost, DevicePrint) {
  if (kiln::rt::hasGPU())
    GTEST_SKIP() << "a GPU is present";
  auto k = kiln::kernel("printer", [](Ptr<i32> x) { device_print("x", {load(x + arange(0, 2))}); });
  std::vector<int32_t> x = {7, 42};
  testing::internal::CaptureStdout();
  k(grid(1), nullptr, kiln::rt::CUdeviceptr(uintptr_t(x.data())));
  std::fflush(stdout);
  std::string out = testing::internal::GetCapturedStdout();
  EXPECT_TRUE(contains(out, "7")) << out;
  EXPECT_TRUE(contains(out, "42")) << out;
  EXPECT_TRUE(contains(out, " x: ")) << out;
}

TEST(LangHost, UserCombineFunctions) {
  if (kiln::rt::hasGPU())
    GTEST_SKIP() << "a GPU is present";
  std::vector<float> x(64), best(1), prod(1), runmax(64);
  std::vector<int32_t> at(1, -1);
  for (int i = 0; i < 64; ++i)
    x[i] = float((i * 29) % 31) - 10.0f; // the largest, 20, at i = 16 and 47: the first wins
  auto addr = [](auto &v) { return kiln::rt::CUdeviceptr(uintptr_t(v.data())); };
  combineKernel()(grid(1), nullptr, addr(x), addr(best), addr(at), addr(prod), addr(runmax));
  EXPECT_EQ(best[0], 20.0f);
  EXPECT_EQ(at[0], int(std::max_element(x.begin(), x.end()) - x.begin()));
  double p = 1.0;
  float m = x[0];
  for (int i = 0; i < 64; ++i) {
    p *= double(x[i] * 0.0625f + 1.0f);
    m = std::max(m, x[i]);
    EXPECT_EQ(runmax[i], m) << i;
  }
  EXPECT_NEAR(prod[0], float(p), std::abs(float(p)) * 1e-5f);
}

TEST(LangCompile, UserCombineFunctionsCompile) {
  Compiled c = combineKernel().compile(kAligned, kAligned, kAligned, kAligned, kAligned);
  EXPECT_TRUE(contains(c.ptx, "shfl.sync")) << c.ptx;
}

TEST(LangHost, ReductionsScansAtomics) {
  if (kiln::rt::hasGPU())
    GTEST_SKIP() << "a GPU is present";
  std::vector<float> x = reductionsInput(), y(128), cum(128), total(1, 0.5f);
  std::vector<int32_t> arg(4, -1);
  auto addr = [](auto &v) { return kiln::rt::CUdeviceptr(uintptr_t(v.data())); };
  reductionsKernel()(grid(1), nullptr, addr(x), addr(y), addr(arg), addr(cum), addr(total));
  checkReductions(x, y, arg, cum, total[0]);
}

TEST(LangCompile, ReductionsScansAtomicsCompile) {
  Compiled c = reductionsKernel().compile(kAligned, kAligned, kAligned, kAligned, kAligned);
  EXPECT_TRUE(contains(c.ptx, "shfl.sync")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "global.add.f32")) << c.ptx; // atom.acq_rel.gpu.global.add.f32
}

// Without a GPU, DSL kernels run on the host backend with host pointers.
TEST(LangHost, WithoutGPUKernelsRunOnTheHost) {
  if (kiln::rt::hasGPU())
    GTEST_SKIP() << "a GPU is present";
  ASSERT_TRUE(kiln::lang::jit().isHost());
  const int n = 1000; // a masked tail in the last program
  std::vector<float> x(n), y(n), out(n, -1.0f);
  for (int i = 0; i < n; ++i) {
    x[i] = float(i) * 0.5f;
    y[i] = float(n - i);
  }
  auto addr = [](std::vector<float> &v) { return kiln::rt::CUdeviceptr(uintptr_t(v.data())); };
  kiln::kernels::vectorAdd(nullptr, addr(x), addr(y), addr(out), n);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(out[i], x[i] + y[i]) << i;
}

//===----------------------------------------------------------------------===//
// On the GPU
//===----------------------------------------------------------------------===//

#define REQUIRE_GPU()                                                                              \
  if (!kiln::rt::hasGPU())                                                                         \
  GTEST_SKIP() << "no GPU"

std::vector<float> randomFloats(size_t n, float lo, float hi, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

/// fp16 bits of a float that fp16 holds exactly (normal numbers and 0).
static uint16_t halfBits(float f) {
  if (f == 0.0f)
    return 0;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u, exp = ((u >> 23) & 0xFFu) - 127 + 15;
  return uint16_t(sign | (exp << 10) | ((u >> 13) & 0x3FFu));
}

// The DSL's dot (wgmma on the H100), reductions/scans/atomics, fp8 and a launch with
// maxnreg, on the GPU, against the same references as the host tests.
TEST(LangGPU, GPU_DotReductionsFp8Maxnreg) {
  REQUIRE_GPU();
  {
    const int K = 128;
    std::vector<float> a(64 * K), b(K * 64), c(64 * 64);
    std::vector<uint16_t> ha(a.size()), hb(b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      a[i] = float(int(i * 7 % 9) - 4) * 0.5f;
      b[i] = float(int(i * 5 % 7) - 3) * 0.25f;
      ha[i] = halfBits(a[i]);
      hb[i] = halfBits(b[i]);
    }
    DeviceBuffer da(ha.size() * 2), db(hb.size() * 2), dc(c.size() * 4);
    da.copyFromHost(ha.data(), ha.size() * 2);
    db.copyFromHost(hb.data(), hb.size() * 2);
    matmulKernel()(grid(1), nullptr, da, db, dc, K);
    kiln::rt::synchronize();
    dc.copyToHost(c.data(), c.size() * 4);
    for (int i = 0; i < 64; ++i)
      for (int j = 0; j < 64; ++j) {
        float want = 0.0f; // products of halves and quarters: exact in fp32
        for (int l = 0; l < K; ++l)
          want += a[i * K + l] * b[l * 64 + j];
        ASSERT_EQ(c[i * 64 + j], want) << i << "," << j;
      }
  }
  {
    std::vector<float> x = reductionsInput(), y(128), cum(128), total(1, 0.5f);
    std::vector<int32_t> arg(4, -1);
    DeviceBuffer dx(512), dy(512), darg(16), dcum(512), dtotal(4);
    dx.copyFromHost(x.data(), 512);
    dtotal.copyFromHost(total.data(), 4);
    reductionsKernel()(grid(1).maxnreg(32), nullptr, dx, dy, darg, dcum, dtotal);
    kiln::rt::synchronize();
    dy.copyToHost(y.data(), 512);
    darg.copyToHost(arg.data(), 16);
    dcum.copyToHost(cum.data(), 512);
    dtotal.copyToHost(total.data(), 4);
    checkReductions(x, y, arg, cum, total[0]);
  }
  {
    std::vector<uint8_t> out(kFp8In.size());
    std::vector<float> wide(kFp8In.size());
    DeviceBuffer dx(kFp8In.size()), dout(out.size()), dwide(wide.size() * 4);
    dx.copyFromHost(kFp8In.data(), kFp8In.size());
    fp8DoubleKernel()(grid(1), nullptr, dx, dout, dwide, int(kFp8In.size()));
    kiln::rt::synchronize();
    dout.copyToHost(out.data(), out.size());
    dwide.copyToHost(wide.data(), wide.size() * 4);
    EXPECT_EQ(wide, kFp8Wide);
    EXPECT_EQ(out, kFp8Out);
  }
}

TEST(LangGPU, GPU_VectorAdd) {
  REQUIRE_GPU();
  for (int32_t n : {1 << 16, 4099}) {
    std::vector<float> x = randomFloats(n, -10, 10, 1), y = randomFloats(n, -10, 10, 2), out(n);
    DeviceBuffer dx(n * 4), dy(n * 4), dout(n * 4);
    dx.copyFromHost(x.data(), n * 4);
    dy.copyFromHost(y.data(), n * 4);
    dout.fill32(0xffffffffu);
    // DeviceBuffers straight into the kernel object.
    kiln::kernels::vectorAddKernel()(grid(cdiv(n, 1024)), nullptr, dx, dy, dout, n, 1024);
    kiln::rt::synchronize();
    dout.copyToHost(out.data(), n * 4);
    int bad = 0;
    for (int32_t i = 0; i < n; ++i) {
      float ref = x[i] + y[i];
      bad += std::memcmp(&out[i], &ref, 4) != 0;
    }
    EXPECT_EQ(bad, 0) << "n = " << n;
  }
}

TEST(LangGPU, GPU_KLDiv) {
  REQUIRE_GPU();
  int32_t n = 100003;
  std::vector<float> p = randomFloats(n, 1e-3f, 1, 3), q = randomFloats(n, 1e-3f, 1, 4), out(n);
  DeviceBuffer dp(n * 4), dq(n * 4), dout(n * 4);
  dp.copyFromHost(p.data(), n * 4);
  dq.copyFromHost(q.data(), n * 4);
  kiln::kernels::klDiv(nullptr, dp.get(), dq.get(), dout.get(), n);
  kiln::rt::synchronize();
  dout.copyToHost(out.data(), n * 4);
  double err = 0, ref = 0;
  for (int32_t i = 0; i < n; ++i) {
    double r = double(p[i]) * (std::log(double(p[i])) - std::log(double(q[i])));
    err += std::fabs(double(out[i]) - r);
    ref += std::fabs(r);
  }
  EXPECT_LT(err / ref, 1e-6);
}

TEST(LangGPU, GPU_Copy2D) {
  REQUIRE_GPU();
  int32_t M = 100, N = 70, ss = 80, ds = 96;
  std::vector<float> src = randomFloats(size_t(M) * ss, -1, 1, 5), dst(size_t(M) * ds);
  DeviceBuffer dsrc(src.size() * 4), ddst(dst.size() * 4);
  dsrc.copyFromHost(src.data(), src.size() * 4);
  ddst.fill32(0u);
  kiln::kernels::copy2D(nullptr, dsrc.get(), ddst.get(), M, N, ss, ds);
  kiln::rt::synchronize();
  ddst.copyToHost(dst.data(), dst.size() * 4);
  int bad = 0;
  for (int32_t r = 0; r < M; ++r)
    for (int32_t c = 0; c < ds; ++c)
      bad += dst[size_t(r) * ds + c] != (c < N ? src[size_t(r) * ss + c] : 0.0f);
  EXPECT_EQ(bad, 0);
}

TEST(LangGPU, GPU_LoopsScalarsAndWarps) {
  REQUIRE_GPU();
  // out[c] = a * sum_r x[r, c] + b, with a for loop, float scalars and 8 warps.
  static const auto k = kiln::kernel(
      "axpy_rows", [](Ptr<f32> x, Ptr<f32> out, I32 rows, F32 a, F32 b, Const<int> BLOCK) {
        auto offs = program_id(0) * BLOCK + arange(0, BLOCK);
        auto acc = for_range(0, rows, 1, zeros({BLOCK}, float32), [&](Value r, Value acc) {
          return acc + load(x + r * (num_programs(0) * BLOCK) + offs);
        });
        auto res = if_(
            a != 0.0f, [&] { return acc * a + b; }, [&] { return full({BLOCK}, b, float32); });
        store(out + offs, res);
      });
  int32_t rows = 5, cols = 512;
  std::vector<float> x = randomFloats(size_t(rows) * cols, -1, 1, 6), out(cols);
  DeviceBuffer dx(x.size() * 4), dout(cols * 4);
  dx.copyFromHost(x.data(), x.size() * 4);
  k(grid(cols / 128).num_warps(8), nullptr, dx, dout, rows, 2.0f, 0.5f, 128);
  kiln::rt::synchronize();
  dout.copyToHost(out.data(), cols * 4);
  int bad = 0;
  for (int32_t c = 0; c < cols; ++c) {
    float s = 0;
    for (int32_t r = 0; r < rows; ++r)
      s += x[size_t(r) * cols + c];
    bad += std::fabs(out[c] - (s * 2.0f + 0.5f)) > 1e-5f;
  }
  EXPECT_EQ(bad, 0);
}

TEST(LangGPU, GPU_RepeatLaunchIsCheap) {
  REQUIRE_GPU();
  const auto &add = kiln::kernels::vectorAddKernel();
  int32_t n = 1 << 12;
  DeviceBuffer x(n * 4), y(n * 4), out(n * 4);
  add(grid(cdiv(n, 1024)), nullptr, x, y, out, n, 1024); // traces and compiles
  kiln::rt::synchronize();
  const kiln::rt::JITStats &stats = jit().getStats();
  unsigned builds = stats.compiles + stats.diskHits;
  // The same kernel through the runtime's prepared launch, the floor for a launch.
  const kiln::rt::Kernel &raw = jit().get(add.mlir(x.get(), y.get(), out.get(), n, 1024));
  kiln::rt::PreparedLaunch prepared(raw, {kiln::rt::Arg::ptr(x.get()), kiln::rt::Arg::ptr(y.get()),
                                          kiln::rt::Arg::ptr(out.get()), kiln::rt::Arg::i32(n)});
  // Host time of the enqueue loop only, in batches short enough not to fill the launch queue.
  auto hostMicros = [](auto &&launch) {
    constexpr int kBatches = 40, kPerBatch = 250;
    double total = 0;
    for (int b = 0; b < kBatches; ++b) {
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kPerBatch; ++i)
        launch();
      total += std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                   .count();
      kiln::rt::synchronize();
    }
    return total / (kBatches * kPerBatch);
  };
  double dsl = hostMicros([&] { add(grid(cdiv(n, 1024)), nullptr, x, y, out, n, 1024); });
  double floor = hostMicros([&] { prepared(kiln::rt::Grid{unsigned(cdiv(n, 1024)), 1, 1}); });
  EXPECT_EQ(stats.compiles + stats.diskHits, builds);
  std::printf("host time per launch: kiln::lang %.2f us, rt::PreparedLaunch %.2f us\n", dsl, floor);
}

} // namespace
