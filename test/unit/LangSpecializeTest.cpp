//===- LangSpecializeTest.cpp - The C++ DSL's specialization and options ---===//
//
// The C++ DSL applies kiln/Specialization.h, the rule the Python launcher applies: an integer
// argument equal to 1 is the constant 1 in its variant, a multiple of 16 marks divisibility;
// num_stages is a launch option like num_warps, compiled beside the module. Runs on the host
// backend without a GPU.
//
//===----------------------------------------------------------------------===//

#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace kiln::lang;
using kiln::rt::CUdeviceptr;

namespace {
constexpr CUdeviceptr kAligned = 0x10000;

size_t count(const std::string &s, const std::string &what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
    ++n;
  return n;
}

/// out[i] = x[i * stride] for 16 elements.
auto &stridedCopy() {
  static auto k = kiln::kernel("strided_copy", [](Ptr<f32> x, Ptr<f32> out, I32 stride) {
    auto offs = arange(0, 16);
    store(out + offs, load(x + offs * stride));
  });
  return k;
}
} // namespace

TEST(LangSpecialize, IntegerOneIsAConstant) {
  auto &k = stridedCopy();
  std::string one = k.mlir(kAligned, kAligned, 1);
  std::string three = k.mlir(kAligned, kAligned, 3);
  std::string sixteen = k.mlir(kAligned, kAligned, 32);
  // Three variants: == 1, neither, divisible by 16.
  EXPECT_NE(one, three);
  EXPECT_NE(three, sixteen);
  EXPECT_NE(one, sixteen);
  // Another value of the same class selects the same variant.
  EXPECT_EQ(k.mlir(kAligned, kAligned, 5), three);
  EXPECT_EQ(k.mlir(kAligned, kAligned, 48), sixteen);
  // The == 1 variant multiplies by the constant (folded away before lowering) and reads no
  // stride; the others multiply by the third argument.
  EXPECT_EQ(count(one, "%arg2"), 1u) << one; // only its declaration
  EXPECT_GT(count(three, "%arg2"), 1u) << three;
  EXPECT_EQ(count(sixteen, "kiln.divisibility = 16"), 3u) << sixteen;
  EXPECT_EQ(count(three, "kiln.divisibility = 16"), 2u) << three;
}

TEST(LangSpecialize, IntegerOneRunsOnTheHost) {
  if (!kiln::lang::jit().isHost())
    GTEST_SKIP() << "the GPU runs this in LangDeviceTest";
  std::vector<float> x(64), out(16);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(i);
  auto addr = [](auto &v) { return CUdeviceptr(reinterpret_cast<uintptr_t>(v.data())); };
  for (int stride : {1, 3, 4}) {
    stridedCopy()(grid(1), nullptr, addr(x), addr(out), stride);
    for (int i = 0; i < 16; ++i)
      ASSERT_EQ(out[i], float(i * stride)) << "stride " << stride << ", element " << i;
  }
}

TEST(LangSpecialize, NumStagesIsACompileOption) {
  auto k = kiln::kernel("staged_mm", [](Ptr<f16> a, Ptr<f16> b, Ptr<f32> c, I32 K) {
    auto rm = arange(0, 64)[{Slice_, None_}];
    auto rn = arange(0, 64)[{None_, Slice_}];
    Value acc = for_range(0, K, 32, zeros({64, 64}, float32), [&](Value k, Value acc) {
      auto x = load(a + rm * K + (k + arange(0, 32))[{None_, Slice_}]);
      auto y = load(b + (k + arange(0, 32))[{Slice_, None_}] * 64 + rn);
      return dot(x, y, acc);
    });
    store(c + rm * 64 + rn, acc);
  });
  Target three{"sm_90a", 4, 3}, four{"sm_90a", 4, 4}, none{"sm_90a", 4, 1};
  std::string p3 = k.compile(three, kAligned, kAligned, kAligned, 128).ptx;
  std::string p4 = k.compile(four, kAligned, kAligned, kAligned, 128).ptx;
  std::string p1 = k.compile(none, kAligned, kAligned, kAligned, 128).ptx;
  // Rings of 3 and 4 slots wait for different numbers of copy groups; 1 stage has no rings.
  EXPECT_NE(p3, p4);
  EXPECT_NE(p3.find("cp.async"), std::string::npos);
  EXPECT_EQ(p1.find("cp.async"), std::string::npos);
  EXPECT_EQ(grid(1).num_stages(2).stages, 2u);
}
