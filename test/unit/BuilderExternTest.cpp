//===- BuilderExternTest.cpp - Tests of libdevice and extern_elementwise --===//
//
// This file tests the Builder's overload resolution for external elementwise functions: the
// symbol picked per dtype, literals taking the dtype an overload wants, the promotions Kiln
// adds (fp16 computed in fp32 and rounded back, fp32 with fp64 in fp64, int16 as int32), the
// exact dtypes of rounding-mode functions, broadcasting, and the errors.
//
//===----------------------------------------------------------------------===//

#include "BuilderFixture.h"

using kiln::DType;
using kiln::Tile;
using kiln::test::print;

namespace {

class BuilderExternTest : public kiln::test::BuilderFixture {
protected:
  void SetUp() override {
    begin("ext.py", 4, 5, "ext",
          {{"f", DType::pointerTo(DType::fp32()), 16},
           {"d", DType::pointerTo(DType::fp64()), 16},
           {"h", DType::pointerTo(DType::fp16()), 16},
           {"i", DType::pointerTo(DType::int32()), 16},
           {"s", DType::pointerTo(DType::int16()), 16}});
  }
  Tile load(int arg) { return b.load(b.add(b.arg(arg), b.arange(0, 64))); }
  /// The text of the extern_elementwise op that computes `t` (through a cast back, if any),
  /// in the generic form (the kernel is not finished).
  std::string externOf(const Tile &t) {
    mlir::Operation *op = t.value.getDefiningOp();
    if (op->getName().getStringRef() != "kiln.extern_elementwise")
      op = op->getOperand(0).getDefiningOp();
    return print(op);
  }
};

TEST_F(BuilderExternTest, PicksTheSymbolOfTheDtype) {
  Tile f = b.libdevice("asin", {load(0)});
  EXPECT_EQ(f.dtype, DType::fp32());
  EXPECT_NE(externOf(f).find("symbol = @__nv_asinf}"), std::string::npos);
  EXPECT_NE(externOf(f).find("pure"), std::string::npos);
  Tile d = b.libdevice("asin", {load(1)});
  EXPECT_EQ(d.dtype, DType::fp64());
  EXPECT_NE(externOf(d).find("symbol = @__nv_asin}"), std::string::npos);
  Tile n = b.libdevice("isnan", {load(0)});
  EXPECT_EQ(n.dtype, DType::int32());
}

TEST_F(BuilderExternTest, LiteralsTakeTheWantedDtype) {
  // pow(fp64, 2.0) is __nv_pow (Triton would see fp32 for the literal and fail), pow(x, 3)
  // is powi.
  EXPECT_NE(externOf(b.libdevice("pow", {load(1), b.floatConst(2.0)})).find("symbol = @__nv_pow}"),
            std::string::npos);
  EXPECT_NE(externOf(b.libdevice("pow", {load(0), b.intConst(3)})).find("symbol = @__nv_powif}"),
            std::string::npos);
}

TEST_F(BuilderExternTest, PromotesHalfToFp32AndBack) {
  Tile h = b.libdevice("tanh", {load(2)});
  EXPECT_EQ(h.dtype, DType::fp16());
  EXPECT_NE(externOf(h).find("symbol = @__nv_tanhf}"), std::string::npos);
  Tile mixed = b.libdevice("atan2", {load(0), load(1)});
  EXPECT_EQ(mixed.dtype, DType::fp64());
  Tile s = b.libdevice("clz", {load(4)});
  EXPECT_EQ(s.dtype, DType::int32());
}

TEST_F(BuilderExternTest, BroadcastsScalarsAgainstTiles) {
  Tile r = b.libdevice("copysign", {b.load(b.arg(0)), load(0)});
  EXPECT_TRUE(r.isTile());
  EXPECT_NE(externOf(r).find("(tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>"),
            std::string::npos);
}

TEST_F(BuilderExternTest, Errors) {
  EXPECT_NE(errorOf([&] { b.libdevice("asin", {load(3)}); })
                .find("expected arguments of dtypes (fp32) or (fp64) for libdevice.asin, found "
                      "int32[64]"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              b.libdevice("add_rz", {load(2), load(2)});
            })
                .find("expected arguments of dtypes (fp32, fp32) or (fp64, fp64) for "
                      "libdevice.add_rz, found fp16[64], fp16[64]"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              b.libdevice("pow", {load(0)});
            }).find("libdevice.pow takes 2 arguments, found 1"),
            std::string::npos);
  EXPECT_NE(errorOf([&] {
              b.libdevice("no_such", {load(0)});
            }).find("unknown libdevice function 'no_such'"),
            std::string::npos);
  EXPECT_NE(errorOf([&] { b.libdevice("sin", {b.arg(0)}); }).find("found a pointer"),
            std::string::npos);
}

} // namespace

namespace {

TEST_F(BuilderExternTest, InlineAsmBroadcastsAndCountsRegisters) {
  // An fp16 tile and an int32 scalar with pack = 2: two fp16 elements share a register, the
  // scalar broadcasts and takes one per element; fp32 and fp16 results (2 + 1 registers).
  Tile h = load(2);
  std::vector<Tile> r = b.inlineAsmElementwise("op;", "=r,=r,=r,r,r,r", {h, b.intConst(3)},
                                               {DType::fp32(), DType::fp16()}, true, 2);
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0].dtype, DType::fp32());
  EXPECT_EQ(r[1].dtype, DType::fp16());
  EXPECT_EQ(r[1].getShape(), llvm::ArrayRef<int64_t>({64}));
  std::string text = print(r[0].value.getDefiningOp());
  EXPECT_NE(text.find("pack = 2"), std::string::npos) << text;
  EXPECT_NE(text.find("pure"), std::string::npos) << text;
  // Scalars give scalars.
  std::vector<Tile> s = b.inlineAsmElementwise("mov.b32 $0, $1;", "=r,r", {b.intConst(1)},
                                               {DType::int32()}, false, 1);
  EXPECT_FALSE(s[0].isTile());
}

TEST_F(BuilderExternTest, InlineAsmErrors) {
  EXPECT_EQ(
      errorOf([&] { b.inlineAsmElementwise("", "=r,r", {load(2)}, {DType::fp32()}, true, 4); }),
      "ext.py:4:5: error: in kernel 'ext': expected the constraints of "
      "inline_asm_elementwise to name 4 output and 2 input registers with pack = 4 "
      "(outputs: fp32 x4; inputs: fp16 x2; values under 32 bits share registers), found 1 "
      "and 1 in \"=r,r\"");
  EXPECT_EQ(errorOf([&] { b.inlineAsmElementwise("", "r", {load(0)}, {}, true, 1); }),
            "ext.py:4:5: error: in kernel 'ext': expected at least one result dtype for "
            "inline_asm_elementwise (as in Triton: return a value you leave unused when the asm "
            "has no output)");
}

TEST_F(BuilderExternTest, CastRoundingTowardZero) {
  Tile f = load(0);
  Tile z = b.cast(f, DType::fp16(), "rtz");
  EXPECT_EQ(z.dtype, DType::fp16());
  // rtne is the plain cast; the same dtype is the value.
  EXPECT_EQ(b.cast(f, DType::fp16(), "rtne").value.getDefiningOp()->getName().getStringRef(),
            "arith.truncf");
  EXPECT_EQ(b.cast(f, DType::fp32(), "rtz").value, f.value);
  EXPECT_EQ(errorOf([&] { b.cast(load(2), DType::fp32(), "rtz"); }),
            "ext.py:4:5: error: in kernel 'ext': expected fp_downcast_rounding only for a cast "
            "to a narrower float (Triton's rule), found a cast from fp16 to fp32");
  EXPECT_EQ(errorOf([&] { b.cast(f, DType::fp16(), "up"); }),
            "ext.py:4:5: error: in kernel 'ext': expected fp_downcast_rounding 'rtne' or 'rtz' "
            "for a cast, found 'up'");
}

} // namespace
