//===- LangMatmulTest.cpp - The C++ DSL's tutorial matmul through the TMA -===//
//
// This file tests that the C++ door compiles a tutorial matmul as the Python door does: on
// sm_90a (Target::tma_pointer_tiles, what launches on an sm_90a GPU compile) the pointer
// tiles of A and B become TMA copies of tensor maps the compiler appends, and the C store a
// TMA store; without it (or off sm_90a) cp.async rings. rt::encodeRecipeTensorMap's checks
// run without a GPU; GPU_* launch the matmul and skip without one. An int8 matmul (column-major
// B) takes the TMA the same way (maps of dtype code 'c').
//
//===----------------------------------------------------------------------===//

#include "kiln/kiln.h"

#include "Kernels.h"
#include "LangTestSupport.h"
#include "examples/MatmulCheck.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

using namespace kiln::lang;

namespace {

using kiln::test::contains;
using kiln::test::kAligned;

/// The tutorial's launch arguments for contiguous M x K, K x N, M x N matrices.
Compiled compileMatmul(const Target &target, int32_t M, int32_t N, int32_t K) {
  return kiln::kernels::matmulKernel().compile(target, kAligned, kAligned, kAligned, M, N, K, K, 1,
                                               N, 1, N, 1, 128, 128, 64, 8);
}

} // namespace

TEST(LangMatmul, TmaPointerTilesOnSm90a) {
  Target h100{"sm_90a", 8, 3, 0, /*tma_pointer_tiles=*/true};
  Compiled c = compileMatmul(h100, 4096, 4096, 4096);
  // A, B and C: three maps, each with its base parameter (0, 1, 2), f16, rank 2.
  ASSERT_EQ(c.tensor_maps.size(), 3u) << c.ptx;
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(c.tensor_maps[i].size(), 8u);
    EXPECT_EQ(c.tensor_maps[i][0], int64_t(i));
    EXPECT_EQ(c.tensor_maps[i][1], int64_t('h'));
    EXPECT_EQ(c.tensor_maps[i][2], 2);
  }
  EXPECT_TRUE(contains(c.ptx, "cp.async.bulk.tensor.2d.shared::cluster.global")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "cp.async.bulk.tensor.2d.global.shared::cta")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "wgmma.mma_async")) << c.ptx;
  // The loop as written stays beside the TMA loop for what the pass only assumes.
  EXPECT_TRUE(contains(c.ptx, "cp.async.cg.shared.global")) << c.ptx;

  // Without the option, and on plain sm_90, the pointer loads feed cp.async rings only.
  Target plain{"sm_90a", 8, 3, 0, false};
  Compiled p = compileMatmul(plain, 4096, 4096, 4096);
  EXPECT_TRUE(p.tensor_maps.empty());
  EXPECT_FALSE(contains(p.ptx, "cp.async.bulk.tensor")) << p.ptx;
  Target sm90{"sm_90", 8, 3, 0, true};
  Compiled q = compileMatmul(sm90, 4096, 4096, 4096);
  EXPECT_TRUE(q.tensor_maps.empty());
  EXPECT_FALSE(contains(q.ptx, "cp.async.bulk.tensor")) << q.ptx;
}

TEST(LangMatmul, RowStrideNotAMultipleOf16BytesKeepsPointers) {
  // K = 300: A's rows are 600 bytes apart, so its map cannot be proven; the loop is taken only
  // when every operand of its dots is, so it keeps its pointer loads (cp.async rings).
  Target h100{"sm_90a", 8, 3, 0, true};
  Compiled c = compileMatmul(h100, 512, 512, 300);
  EXPECT_FALSE(contains(c.ptx, "cp.async.bulk.tensor.2d.shared::cluster.global")) << c.ptx;
}

TEST(LangMatmul, RecipeEncodingChecksWithoutGPU) {
  alignas(64) unsigned char map[128];
  std::vector<kiln::ArgKind> sig = {kiln::ArgKind::Pointer, kiln::ArgKind::I32, kiln::ArgKind::I32};
  uint64_t words[3] = {0x10000, 64, 128};
  // [base, dtype, rank, block 64 x 64, extents (parameter 1, constant 256), stride (param 2)]
  std::vector<int64_t> recipe = {0, 'h', 2, 64, 64, 1, -1 - 256, 2};
  // Box rows 0: the kernel never reads the map; it stays zeros (no driver call).
  std::memset(map, 0xab, sizeof(map));
  kiln::rt::encodeRecipeTensorMap(map, recipe, sig, words, 0);
  for (unsigned char byte : map)
    ASSERT_EQ(byte, 0);
  // An extent that is not positive: the kernel's pointer loop runs; zeros again.
  uint64_t negative[3] = {0x10000, uint64_t(uint32_t(-5)), 128};
  kiln::rt::encodeRecipeTensorMap(map, recipe, sig, negative, 64);
  for (unsigned char byte : map)
    ASSERT_EQ(byte, 0);
  // fp8 maps ('e' e4m3, 'E' e5m2) and int8 / uint8 ones ('c', 'C'), bytes to the TMA, are
  // recipes too.
  for (int64_t code : {'e', 'E', 'c', 'C'}) {
    std::memset(map, 0xab, sizeof(map));
    kiln::rt::encodeRecipeTensorMap(map, {0, code, 2, 64, 128, 1, -257, 2}, sig, words, 0);
    for (unsigned char byte : map)
      ASSERT_EQ(byte, 0);
  }
  // Malformed recipes are errors, not reads past the arguments.
  auto malformed = [&](std::vector<int64_t> r) {
    EXPECT_THROW(kiln::rt::encodeRecipeTensorMap(map, r, sig, words, 64), kiln::rt::Error);
  };
  malformed({0, 'h', 2, 64, 64, 1, 2});       // a field short
  malformed({5, 'h', 2, 64, 64, 1, -257, 2}); // base past the parameters
  malformed({0, 'f', 2, 64, 64, 1, -257, 2}); // not 16-bit floats or 8-bit elements
  malformed({0, 'h', 2, 64, 64, 7, -257, 2}); // an extent from parameter 7 of 3
}

TEST(LangMatmul, GPU_TutorialMatmulThroughTheTMA) {
  if (!kiln::rt::hasGPU())
    GTEST_SKIP() << "no GPU";
  // 512^3 whole tiles; 1000 x 776 x 328 edge tiles (wrapped rows, the K edge masked); K = 200
  // rows of 400 bytes: the cp.async rings on any GPU.
  for (auto [M, N, K] : {std::tuple{512, 512, 512}, {1000, 776, 328}, {300, 264, 200}}) {
    kiln::examples::MatmulInputs in(M, N, K);
    kiln::rt::DeviceBuffer da(in.a.size() * 2), db(in.b.size() * 2), dc(in.c.size() * 2);
    da.copyFromHost(in.a.data(), in.a.size() * 2);
    db.copyFromHost(in.b.data(), in.b.size() * 2);
    dc.copyFromHost(in.c.data(), in.c.size() * 2);
    kiln::kernels::matmul(nullptr, da.get(), db.get(), dc.get(), M, N, K);
    kiln::rt::synchronize();
    dc.copyToHost(in.c.data(), in.c.size() * 2);
    int64_t bad = in.countWrong();
    EXPECT_EQ(bad, 0) << M << "x" << N << "x" << K;
  }
}

namespace {
/// Triton's tutorial 09 matmul with descriptors made in the kernel: one BLOCK_M x BLOCK_N
/// tile of c = a @ b per program, contiguous fp16 matrices.
using DescMatmul =
    Kernel<void(Ptr<f16>, Ptr<f16>, Ptr<f16>, I32, I32, I32, Const<int>, Const<int>, Const<int>)>;
const DescMatmul &descriptorMatmul() {
  static const DescMatmul kernel =
      kiln::kernel("desc_matmul", [](Ptr<f16> a, Ptr<f16> b, Ptr<f16> c, I32 M, I32 N, I32 K,
                                     Const<int> BLOCK_M, Const<int> BLOCK_N, Const<int> BLOCK_K) {
        TensorDescriptor a_desc = make_tensor_descriptor(a, {M, K}, {K, 1}, {BLOCK_M, BLOCK_K});
        TensorDescriptor b_desc = make_tensor_descriptor(b, {K, N}, {N, 1}, {BLOCK_K, BLOCK_N});
        TensorDescriptor c_desc = make_tensor_descriptor(c, {M, N}, {N, 1}, {BLOCK_M, BLOCK_N});
        Value pid = program_id(0), num_n = cdiv(N, BLOCK_N);
        Value off_m = (pid / num_n) * BLOCK_M, off_n = (pid % num_n) * BLOCK_N;
        Value acc = for_range(0, cdiv(K, BLOCK_K), 1, zeros({BLOCK_M, BLOCK_N}, float32),
                              [&](Value k, Value acc) {
                                Value x = a_desc.load({off_m, k * BLOCK_K});
                                Value y = b_desc.load({k * BLOCK_K, off_n});
                                return dot(x, y, acc);
                              });
        c_desc.store({off_m, off_n}, acc.to(float16));
      });
  return kernel;
}

/// Runs it on `in` (host buffers on the host backend); returns the wrong outputs.
int64_t runDescriptorMatmul(kiln::examples::MatmulInputs &in, int bm, int bn, int bk) {
  const bool host = kiln::lang::jit().isHost();
  kiln::rt::Buffer da(in.a.size() * 2, host), db(in.b.size() * 2, host), dc(in.c.size() * 2, host);
  da.copyFromHost(in.a.data(), in.a.size() * 2);
  db.copyFromHost(in.b.data(), in.b.size() * 2);
  dc.copyFromHost(in.c.data(), in.c.size() * 2);
  auto ptr = [](const kiln::rt::Buffer &x) { return kiln::rt::CUdeviceptr(x.get()); };
  descriptorMatmul()(grid(cdiv(in.M, bm) * cdiv(in.N, bn)).num_warps(host ? 4 : 8), nullptr,
                     ptr(da), ptr(db), ptr(dc), in.M, in.N, in.K, bm, bn, bk);
  if (!host)
    kiln::rt::synchronize();
  dc.copyToHost(in.c.data(), in.c.size() * 2);
  return in.countWrong();
}
} // namespace

TEST(LangMatmul, DescriptorsMadeInTheKernelTakeTensorMaps) {
  // Extents and row strides from parameters specialized to multiples of 16: three maps, read
  // unguarded (their recipes end in 0), TMA copies and store on sm_90a.
  Compiled c = descriptorMatmul().compile(Target{"sm_90a", 8, 3}, kAligned, kAligned, kAligned, 512,
                                          512, 512, 128, 128, 64);
  ASSERT_EQ(c.tensor_maps.size(), 3u) << c.mlir;
  for (const std::vector<int64_t> &r : c.tensor_maps) {
    ASSERT_EQ(r.size(), 9u);
    EXPECT_EQ(r.back(), 0);
  }
  EXPECT_TRUE(contains(c.ptx, "cp.async.bulk.tensor.2d.shared::cluster.global")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "cp.async.bulk.tensor.2d.global.shared::cta")) << c.ptx;
  // K = 300: A's rows are 600 bytes apart, not a multiple of 16: no map for A (masked loads);
  // B's and C's (N = 512) stay.
  Compiled k300 = descriptorMatmul().compile(Target{"sm_90a", 8, 3}, kAligned, kAligned, kAligned,
                                             512, 512, 300, 128, 128, 64);
  EXPECT_EQ(k300.tensor_maps.size(), 2u) << k300.mlir;
}

TEST(LangMatmul, DescriptorsMadeInTheKernelRunOnTheHost) {
  if (!kiln::lang::jit().isHost())
    GTEST_SKIP() << "the GPU test below runs them there";
  kiln::examples::MatmulInputs in(64, 96, 80);
  EXPECT_EQ(runDescriptorMatmul(in, 32, 32, 32), 0);
  kiln::examples::MatmulInputs edges(50, 70, 40); // K, M and N edges, strides not aligned
  EXPECT_EQ(runDescriptorMatmul(edges, 32, 32, 32), 0);
}

TEST(LangMatmul, GPU_DescriptorsMadeInTheKernelThroughTheTMA) {
  if (!kiln::rt::hasGPU())
    GTEST_SKIP() << "no GPU";
  kiln::examples::MatmulInputs in(512, 512, 512), edges(1000, 776, 328), odd(300, 260, 200);
  EXPECT_EQ(runDescriptorMatmul(in, 128, 128, 64), 0);
  EXPECT_EQ(runDescriptorMatmul(edges, 128, 128, 64), 0);
  EXPECT_EQ(runDescriptorMatmul(odd, 128, 128, 64), 0);
}

TEST(LangMatmul, DescriptorErrorsNameTheKernelAndLine) {
  auto bad = kiln::kernel("bad_desc", [](Ptr<f16> a, I32 M, I32 K) {
    TensorDescriptor d = make_tensor_descriptor(a, {M, K}, {K, 2}, {64, 64});
    d.store({0, 0}, zeros({64, 64}, float16));
  });
  const unsigned line = __LINE__ - 3;
  try {
    bad.mlir(kAligned, 128, 128);
    ADD_FAILURE() << "expected a CompileError";
  } catch (const CompileError &e) {
    EXPECT_TRUE(contains(e.getMessage(), "expected the constant 1 as the last stride")) << e.what();
    EXPECT_EQ(e.getKernel(), "bad_desc");
    EXPECT_EQ(e.getLine(), line) << e.what();
  }
}

TEST(LangMatmul, DescriptorOfUnsignedExtentsHasNoMap) {
  // As the Python front end: an extent from an unsigned parameter is not a map field (the
  // launch would read its word as signed); the descriptor's accesses stay masked loads.
  auto k = kiln::kernel("u32_desc", [](Ptr<f16> a, U32 M, I32 K) {
    TensorDescriptor d = make_tensor_descriptor(a, {M, K}, {K, 1}, {64, 64});
    d.store({0, 0}, zeros({64, 64}, float16));
  });
  Compiled c = k.compile(Target{"sm_90a", 4, 3}, kAligned, 128u, 128);
  EXPECT_TRUE(c.tensor_maps.empty()) << c.mlir;
  EXPECT_FALSE(contains(c.ptx, "cp.async.bulk.tensor")) << c.ptx;
}

namespace {
/// The tutorial matmul on int8 (int32 accumulation and output), B column-major (K contiguous,
/// columns stride_bn apart): on sm_90a A and B are copied by the TMA (maps of dtype code 'c').
using Int8Matmul = Kernel<void(Ptr<i8>, Ptr<i8>, Ptr<i32>, I32, I32, I32, I32, I32, Const<int>,
                               Const<int>, Const<int>)>;
const Int8Matmul &int8Matmul() {
  static const Int8Matmul kernel = kiln::kernel(
      "matmul_i8", [](Ptr<i8> a, Ptr<i8> b, Ptr<i32> c, I32 M, I32 N, I32 K, I32 stride_am,
                      I32 stride_bn, Const<int> BLOCK_M, Const<int> BLOCK_N, Const<int> BLOCK_K) {
        Value pid_m = program_id(0), pid_n = program_id(1);
        Value offs_am = (pid_m * BLOCK_M + arange(0, BLOCK_M)) % M;
        Value offs_bn = (pid_n * BLOCK_N + arange(0, BLOCK_N)) % N;
        Value offs_k = arange(0, BLOCK_K);
        Value a_ptrs = a + (offs_am[{Slice_, None_}] * stride_am + offs_k[{None_, Slice_}]);
        Value b_ptrs = b + (offs_k[{Slice_, None_}] + offs_bn[{None_, Slice_}] * stride_bn);
        Values loop =
            for_range(0, cdiv(K, BLOCK_K), 1, {zeros({BLOCK_M, BLOCK_N}, int32), a_ptrs, b_ptrs},
                      [&](Value k, Values carried) -> Values {
                        Value x = load(carried[1], offs_k[{None_, Slice_}] < K - k * BLOCK_K, 0);
                        Value y = load(carried[2], offs_k[{Slice_, None_}] < K - k * BLOCK_K, 0);
                        return {dot(x, y, carried[0]), carried[1] + BLOCK_K, carried[2] + BLOCK_K};
                      });
        Value offs_cm = pid_m * BLOCK_M + arange(0, BLOCK_M);
        Value offs_cn = pid_n * BLOCK_N + arange(0, BLOCK_N);
        store(c + (offs_cm[{Slice_, None_}] * N + offs_cn[{None_, Slice_}]), loop[0],
              (offs_cm[{Slice_, None_}] < M) & (offs_cn[{None_, Slice_}] < N));
      });
  return kernel;
}
} // namespace

TEST(LangMatmul, Int8OperandsTakeTheTMA) {
  Compiled c = int8Matmul().compile(Target{"sm_90a", 8, 3, 0, true}, kAligned, kAligned, kAligned,
                                    512, 512, 512, 512, 512, 128, 128, 64);
  ASSERT_GE(c.tensor_maps.size(), 2u) << c.mlir;
  EXPECT_EQ(c.tensor_maps[0][1], 'c');
  EXPECT_EQ(c.tensor_maps[1][1], 'c');
  EXPECT_TRUE(contains(c.ptx, "cp.async.bulk.tensor.2d.shared::cluster.global")) << c.ptx;
  EXPECT_TRUE(contains(c.ptx, "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8")) << c.ptx;
}

TEST(LangMatmul, GPU_Int8MatmulThroughTheTMA) {
  if (!kiln::rt::hasGPU())
    GTEST_SKIP() << "no GPU";
  // Whole tiles; edge tiles (wrapped rows, the K edge masked; rows of 16-byte multiples).
  for (auto [M, N, K] : {std::tuple{512, 384, 512}, {200, 144, 1040}}) {
    std::vector<int8_t> a(size_t(M) * K), bt(size_t(N) * K); // B column-major: N rows of K
    uint32_t seed = 12345;
    auto next = [&] { return int8_t((seed = seed * 1103515245u + 12345u) >> 24); };
    for (int8_t &x : a)
      x = next();
    for (int8_t &x : bt)
      x = next();
    std::vector<int32_t> c(size_t(M) * N, -7);
    kiln::rt::DeviceBuffer da(a.size()), db(bt.size()), dc(c.size() * 4);
    da.copyFromHost(a.data(), a.size());
    db.copyFromHost(bt.data(), bt.size());
    dc.copyFromHost(c.data(), c.size() * 4);
    int8Matmul()(grid(cdiv(M, 128), cdiv(N, 128)).num_warps(8).num_stages(3), nullptr, da.get(),
                 db.get(), dc.get(), M, N, K, K, K, 128, 128, 64);
    kiln::rt::synchronize();
    dc.copyToHost(c.data(), c.size() * 4);
    int64_t bad = 0;
    for (int m = 0; m < M; ++m)
      for (int n = 0; n < N; ++n) {
        int64_t ref = 0;
        for (int k = 0; k < K; ++k)
          ref += int64_t(a[size_t(m) * K + k]) * bt[size_t(n) * K + k];
        bad += c[size_t(m) * N + n] != ref;
      }
    EXPECT_EQ(bad, 0) << M << "x" << N << "x" << K;
  }
}
