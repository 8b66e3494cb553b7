//===- BuilderReduceTest.cpp - Tests of the Builder's reductions ----------===//
//
// This file tests tl.sum / max / min / argmax / argmin / xor_sum / reduce in the Builder:
// result dtypes and shapes, keep_dims, the kiln.reduce they build, their error messages, and
// a reduction kernel built through the Builder compiling to PTX with warp shuffles.
//
//===----------------------------------------------------------------------===//

#include "BuilderFixture.h"

using kiln::CompileError;
using kiln::DType;
using kiln::Tile;
using kiln::test::print;

namespace {

class BuilderReduceTest : public kiln::test::BuilderFixture {
protected:
  void SetUp() override {
    begin("red.py", 3, 5, "red",
          {{"x", DType::pointerTo(DType::fp32()), 16}, {"y", DType::pointerTo(DType::int8()), 16}});
  }
  /// A 2-D fp32 tile of 16 x 64 loaded from x.
  Tile tile2d() {
    Tile r = b.expandDims(b.arange(0, 16), 1), c = b.expandDims(b.arange(0, 64), 0);
    Tile off = b.add(b.mul(r, b.intConst(64)), c);
    return b.load(b.add(b.arg(0), off));
  }
};

TEST_F(BuilderReduceTest, SumOfVectorIsScalarOfSameFloat) {
  Tile x = b.load(b.add(b.arg(0), b.arange(0, 128)));
  Tile s = b.sum(x, 0);
  EXPECT_FALSE(s.isTile());
  EXPECT_EQ(s.dtype, DType::fp32());
  auto module = b.finishKernel();
  std::string ir = print(*module);
  EXPECT_NE(ir.find("kiln.reduce"), std::string::npos) << ir;
  EXPECT_NE(ir.find("arith.addf"), std::string::npos) << ir;
}

TEST_F(BuilderReduceTest, SumOfNarrowIntegersAccumulatesInInt32) {
  Tile y = b.load(b.add(b.arg(1), b.arange(0, 64)));
  EXPECT_EQ(b.sum(y, 0).dtype, DType::int32());
}

TEST_F(BuilderReduceTest, AxisAndKeepDims) {
  Tile x = tile2d();
  Tile rows = b.max(x, 1);
  ASSERT_TRUE(rows.isTile());
  EXPECT_EQ(rows.getShape(), llvm::ArrayRef<int64_t>({16}));
  Tile cols = b.min(x, -2, /*keepDims=*/true);
  EXPECT_EQ(cols.getShape(), llvm::ArrayRef<int64_t>({1, 64}));
  b.finishKernel();
}

TEST_F(BuilderReduceTest, ArgmaxIsInt32WithTwoOperandReduce) {
  Tile x = tile2d();
  Tile i = b.argmax(x, 1);
  EXPECT_EQ(i.dtype, DType::int32());
  EXPECT_EQ(i.getShape(), llvm::ArrayRef<int64_t>({16}));
  Tile j = b.argmin(x, 0);
  EXPECT_EQ(j.getShape(), llvm::ArrayRef<int64_t>({64}));
  std::string ir = print(*b.finishKernel());
  EXPECT_NE(ir.find("kiln.reduce(%"), std::string::npos) << ir;
  EXPECT_NE(ir.find("(tensor<16x64xf32>, tensor<16x64xi32>) -> (tensor<16xf32>, tensor<16xi32>)"),
            std::string::npos)
      << ir;
}

TEST_F(BuilderReduceTest, UserCombineWithSeveralInputs) {
  Tile x = tile2d();
  std::vector<Tile> out = b.reduce({x, x}, 1, [&](llvm::ArrayRef<Tile> a, llvm::ArrayRef<Tile> n) {
    return std::vector<Tile>{b.add(a[0], n[0]), b.maximum(a[1], n[1])};
  });
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].getShape(), llvm::ArrayRef<int64_t>({16}));
  b.finishKernel();
}

TEST_F(BuilderReduceTest, ErrorsNameTheProblemAndTheLine) {
  EXPECT_EQ(
      errorOf([&] { b.sum(b.intConst(3), 0); }),
      "red.py:3:5: error: in kernel 'red': expected a tile to reduce, found a scalar of int32");
  EXPECT_EQ(errorOf([&] { b.sum(tile2d(), 2); }),
            "red.py:3:5: error: in kernel 'red': expected a reduction axis in [-2, 2), found 2");
  EXPECT_EQ(errorOf([&] { b.xorSum(tile2d(), 0); }),
            "red.py:3:5: error: in kernel 'red': expected an integer tile for xor_sum, found fp32");
  EXPECT_EQ(errorOf([&] {
              b.reduce({tile2d()}, 0, [&](llvm::ArrayRef<Tile>, llvm::ArrayRef<Tile>) {
                return std::vector<Tile>{};
              });
            }),
            "red.py:3:5: error: in kernel 'red': expected the combine function to return 1 "
            "values, found 0");
}

TEST_F(BuilderReduceTest, ReductionKernelCompilesToShuffles) {
  // out[0] = max over a 256-element row: in-thread, warp shuffles, shared memory across warps.
  Tile x = b.load(b.add(b.arg(0), b.arange(0, 256)));
  b.store(b.arg(0), b.max(x, 0));
  auto module = b.finishKernel();
  kiln::CompileOptions options;
  options.arch = "sm_90";
  mlir::FailureOr<kiln::CompiledKernel> out = kiln::compile(*module, options);
  ASSERT_TRUE(mlir::succeeded(out));
  EXPECT_NE(out->ptx.find("shfl.sync.bfly"), std::string::npos);
  EXPECT_NE(out->ptx.find("bar.sync"), std::string::npos);
}

} // namespace
