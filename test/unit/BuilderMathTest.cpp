//===- BuilderMathTest.cpp - Tests of fma, umulhi, div_rn, sqrt_rn, barrier ===//
//
// This file tests the Builder's tl.fma, tl.umulhi, tl.div_rn, tl.sqrt_rn, tl.debug_barrier and
// tl.assume: result dtypes and promotion, the ops they build (math.fma, the widened unsigned
// product, arith.divf / math.sqrt marked kiln.ieee, kiln.barrier), and their dtype errors.
//
//===----------------------------------------------------------------------===//

#include "BuilderFixture.h"

using kiln::CompileError;
using kiln::DType;
using kiln::Tile;
using kiln::test::print;

namespace {

class BuilderMathTest : public kiln::test::BuilderFixture {
protected:
  void SetUp() override {
    begin("math.py", 7, 3, "math",
          {{"f", DType::pointerTo(DType::fp32()), 16},
           {"h", DType::pointerTo(DType::fp16()), 16},
           {"i", DType::pointerTo(DType::int32()), 16},
           {"u", DType::pointerTo(DType::uint64()), 16},
           {"s", DType::pointerTo(DType::int16()), 16}});
  }
  Tile load(int arg) { return b.load(b.add(b.arg(arg), b.arange(0, 64))); }
};

TEST_F(BuilderMathTest, FmaPromotesAndBuildsMathFma) {
  Tile r = b.fma(load(1), load(0), b.floatConst(1.0));
  EXPECT_EQ(r.dtype, DType::fp32());
  EXPECT_TRUE(r.isTile());
  EXPECT_NE(print(r.value.getDefiningOp()).find("math.fma"), std::string::npos);
  Tile h = b.fma(load(1), load(1), b.floatConst(2.0));
  EXPECT_EQ(h.dtype, DType::fp16());
}

TEST_F(BuilderMathTest, FmaRejectsIntegers) {
  EXPECT_NE(errorOf([&] { b.fma(load(2), load(2), load(2)); })
                .find("expected floating-point operands (fp16, bf16, fp32, fp64) for fma, found "
                      "int32, int32 and int32"),
            std::string::npos);
}

TEST_F(BuilderMathTest, UmulhiKeepsDtypeAndReadsUnsigned) {
  Tile r = b.umulhi(load(2), load(2));
  EXPECT_EQ(r.dtype, DType::int32());
  std::string trunc = print(r.value.getDefiningOp());
  EXPECT_NE(trunc.find("arith.trunci"), std::string::npos);
  EXPECT_NE(trunc.find("tensor<64xi64>"), std::string::npos);
  Tile u = b.umulhi(load(3), load(3));
  EXPECT_EQ(u.dtype, DType::uint64());
  EXPECT_NE(print(u.value.getDefiningOp()).find("i128"), std::string::npos);
}

TEST_F(BuilderMathTest, UmulhiRejectsOtherWidthsAndFloats) {
  EXPECT_NE(errorOf([&] { b.umulhi(load(4), load(4)); })
                .find("expected 32- or 64-bit integer operands (int32, uint32, int64, uint64) for "
                      "umulhi, found int16 and int16"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { b.umulhi(load(0), load(0)); }).find("for umulhi, found fp32 and fp32"),
            std::string::npos);
}

TEST_F(BuilderMathTest, DivRnAndSqrtRnAreMarkedIEEE) {
  Tile q = b.divRn(load(0), b.floatConst(3.0));
  EXPECT_EQ(q.dtype, DType::fp32());
  std::string div = print(q.value.getDefiningOp());
  EXPECT_NE(div.find("arith.divf"), std::string::npos);
  EXPECT_NE(div.find("kiln.ieee"), std::string::npos);
  std::string sq = print(b.sqrtRn(load(0)).value.getDefiningOp());
  EXPECT_NE(sq.find("math.sqrt"), std::string::npos);
  EXPECT_NE(sq.find("kiln.ieee"), std::string::npos);
  // Plain division and sqrt are not marked.
  EXPECT_EQ(print(b.truediv(load(0), load(0)).value.getDefiningOp()).find("kiln.ieee"),
            std::string::npos);
}

TEST_F(BuilderMathTest, DivRnAndSqrtRnAreFp32Only) {
  EXPECT_NE(errorOf([&] {
              b.divRn(load(1), load(1));
            }).find("expected fp32 operands for div_rn, found fp16 and fp16"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              b.divRn(load(0), load(1));
            }).find("expected fp32 operands for div_rn, found fp32 and fp16"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { b.sqrtRn(load(2)); }).find("expected an fp32 argument for sqrt_rn"),
            std::string::npos);
}

TEST_F(BuilderMathTest, DebugBarrierAndAssume) {
  b.debugBarrier();
  b.assume(b.gt(load(2), b.intConst(0)));
  b.assume(b.intConst(1));
  std::string mod = print(b.getModule().getOperation());
  EXPECT_NE(mod.find("kiln.barrier"), std::string::npos);
  EXPECT_EQ(mod.find("assume"), std::string::npos);
}

} // namespace
