//===- BuilderDotScanTest.cpp - Tests of the Builder's dot and scans -------===//
//
// This file tests tl.dot, tl.associative_scan, tl.cumsum and tl.cumprod in the Builder:
// result dtypes and shapes, the kiln.dot / kiln.scan they build, Triton's dtype rules (fp16
// accumulators, int8 -> int32, cumsum widening narrow integers, bf16 scanned in fp32), and
// their error messages at the user's location.
//
//===----------------------------------------------------------------------===//

#include "BuilderFixture.h"

using kiln::CompileError;
using kiln::DType;
using kiln::Tile;
using kiln::test::print;

namespace {

class BuilderDotScanTest : public kiln::test::BuilderFixture {
protected:
  void SetUp() override {
    begin("mm.py", 7, 9, "mm",
          {{"f32", DType::pointerTo(DType::fp32()), 16},
           {"f16", DType::pointerTo(DType::fp16()), 16},
           {"bf16", DType::pointerTo(DType::bf16()), 16},
           {"i8", DType::pointerTo(DType::int8()), 16},
           {"i32", DType::pointerTo(DType::int32()), 16}});
  }
  /// A rows x cols tile loaded from kernel argument `arg`.
  Tile tile(unsigned arg, int64_t rows, int64_t cols) {
    Tile r = b.expandDims(b.arange(0, rows), 1), c = b.expandDims(b.arange(0, cols), 0);
    Tile off = b.add(b.mul(r, b.intConst(cols)), c);
    return b.load(b.add(b.arg(arg), off));
  }
  static std::string at(const std::string &message) {
    return "mm.py:7:9: error: in kernel 'mm': " + message;
  }
};

TEST_F(BuilderDotScanTest, DotResultDtypesFollowTriton) {
  Tile f16 = tile(1, 32, 16), f16b = tile(1, 16, 64);
  Tile d = b.dot(f16, f16b);
  EXPECT_EQ(d.dtype, DType::fp32());
  EXPECT_EQ(d.getShape(), llvm::ArrayRef<int64_t>({32, 64}));
  EXPECT_EQ(b.dot(f16, f16b, std::nullopt, "", DType::fp16()).dtype, DType::fp16());
  EXPECT_EQ(b.dot(tile(2, 16, 16), tile(2, 16, 16)).dtype, DType::fp32());
  // int8 accumulates in int32 with the default out_dtype (fp32) as with int32.
  EXPECT_EQ(b.dot(tile(3, 16, 32), tile(3, 32, 16)).dtype, DType::int32());
  EXPECT_EQ(b.dot(tile(3, 16, 32), tile(3, 32, 16), std::nullopt, "", DType::int32()).dtype,
            DType::int32());
  std::string ir = print(*b.finishKernel());
  EXPECT_NE(ir.find("kiln.dot"), std::string::npos) << ir;
  // out_dtype fp16: accumulated in fp32 (the tensor cores' accumulators), rounded once.
  EXPECT_NE(ir.find("tensor<32x16xf16> * tensor<16x64xf16> -> tensor<32x64xf32>"),
            std::string::npos)
      << ir;
  EXPECT_NE(ir.find("arith.truncf"), std::string::npos) << ir;
  EXPECT_NE(ir.find("tensor<16x32xi8> * tensor<32x16xi8> -> tensor<16x16xi32>"), std::string::npos)
      << ir;
}

TEST_F(BuilderDotScanTest, DotFp32PrecisionAndAccumulator) {
  Tile a = tile(0, 16, 16), c = tile(0, 16, 16);
  Tile d = b.dot(a, a, c, "IEEE");
  Tile e = b.dot(a, a, d, "tf32x3");
  b.dot(a, e);
  // For non-fp32 inputs the precision is ignored, as in Triton (allow_tf32=False on fp16).
  b.dot(tile(1, 16, 16), tile(1, 16, 16), std::nullopt, "ieee");
  std::string ir = print(*b.finishKernel());
  EXPECT_NE(ir.find("inputPrecision = ieee"), std::string::npos) << ir;
  // tf32x3: three TF32 dots of the operands' big and small parts (Triton's passes).
  EXPECT_EQ(ir.find("inputPrecision = tf32x3"), std::string::npos) << ir;
  size_t dots = 0;
  for (size_t at = ir.find("kiln.dot"); at != std::string::npos; at = ir.find("kiln.dot", at + 1))
    ++dots;
  EXPECT_EQ(dots, 6u) << ir;                            // ieee, 3 for tf32x3, tf32, fp16
  EXPECT_NE(ir.find("-8192"), std::string::npos) << ir; // 0xFFFFE000: TF32's mantissa
}

TEST_F(BuilderDotScanTest, DotErrors) {
  EXPECT_EQ(errorOf([&] { b.dot(tile(1, 16, 32), tile(1, 16, 16)); }),
            at("expected the K dimensions of dot to match (a is M x K, b is K x N), found a "
               "fp16[16, 32] (K = 32) and b fp16[16, 16] (K = 16)"));
  EXPECT_EQ(errorOf([&] { b.dot(tile(1, 16, 8), tile(1, 8, 16)); }),
            at("expected dot dimensions that are powers of two, K >= 16, found K = 8 (a "
               "fp16[16, 8], b fp16[8, 16])"));
  EXPECT_EQ(errorOf([&] { b.dot(tile(1, 16, 16), tile(2, 16, 16)); }),
            at("expected a and b of one dtype for dot, found fp16 and bf16"));
  EXPECT_EQ(errorOf([&] { b.dot(tile(4, 16, 16), tile(4, 16, 16)); }),
            at("expected dot operands of dtype fp16, bf16, fp32, fp8e4nv, fp8e5 or int8, found "
               "int32"));
  EXPECT_EQ(
      errorOf([&] { b.dot(tile(2, 16, 16), tile(2, 16, 16), std::nullopt, "", DType::bf16()); }),
      at("expected out_dtype fp32 for dot of bf16 tiles, found bf16 (cast the fp32 result "
         "with .to(tl.bfloat16))"));
  EXPECT_EQ(errorOf([&] { b.dot(tile(0, 16, 16), tile(0, 16, 16), tile(0, 16, 32)); }),
            at("expected the dot accumulator to be fp32[16, 16], found fp32[16, 32]"));
  EXPECT_EQ(errorOf([&] { b.dot(tile(1, 16, 16), tile(1, 16, 16), tile(1, 16, 16)); }),
            at("expected the dot accumulator to be fp32[16, 16], found fp16[16, 16]"));
  EXPECT_EQ(errorOf([&] { b.dot(tile(0, 16, 16), tile(0, 16, 16), std::nullopt, "fp64"); }),
            at("expected input_precision 'tf32', 'tf32x3' or 'ieee' for dot, found 'fp64'"));
  EXPECT_EQ(errorOf([&] { b.dot(b.arange(0, 16), tile(0, 16, 16)); }),
            at("expected two 2-D tiles, or two 3-D tiles (a batched dot), for dot, found "
               "int32[16] and fp32[16, 16]"));
}

TEST_F(BuilderDotScanTest, BatchedDotIsOneTwoDimensionalDotPerBatchElement) {
  Tile a = b.reshape(tile(1, 64, 32), {2, 32, 32}), bm = b.reshape(tile(1, 32, 32), {1, 32, 32});
  Tile acc = b.reshape(tile(0, 64, 32), {2, 32, 32});
  Tile d = b.dot(a, b.broadcastTo(bm, {2, 32, 32}), acc, "", DType::fp32());
  EXPECT_EQ(d.dtype, DType::fp32());
  EXPECT_EQ(d.getShape(), llvm::ArrayRef<int64_t>({2, 32, 32}));
  Tile one = b.dot(bm, bm);
  EXPECT_EQ(one.getShape(), llvm::ArrayRef<int64_t>({1, 32, 32}));
  std::string ir = print(*b.finishKernel());
  size_t dots = 0;
  for (size_t at = ir.find("kiln.dot"); at != std::string::npos; at = ir.find("kiln.dot", at + 1))
    ++dots;
  EXPECT_EQ(dots, 3u) << ir;
  EXPECT_NE(ir.find("tensor<32x32xf16> * tensor<32x32xf16> -> tensor<32x32xf32>"),
            std::string::npos)
      << ir;
}

TEST_F(BuilderDotScanTest, BatchedDotErrors) {
  Tile a = b.reshape(tile(1, 64, 16), {2, 32, 16});
  EXPECT_EQ(errorOf([&] { b.dot(a, tile(1, 16, 16)); }),
            at("expected two 2-D tiles, or two 3-D tiles (a batched dot), for dot, found "
               "fp16[2, 32, 16] and fp16[16, 16]"));
  EXPECT_EQ(errorOf([&] {
              b.dot(a, b.reshape(tile(1, 64, 16), {4, 16, 16}));
            }),
            at("expected the batch dimensions of dot to match (a is B x M x K, b is B x K x N), "
               "found a fp16[2, 32, 16] (B = 2) and b fp16[4, 16, 16] (B = 4)"));
  EXPECT_EQ(errorOf([&] {
              b.dot(a, b.reshape(tile(1, 64, 16), {2, 32, 16}));
            }),
            at("expected the K dimensions of dot to match (a is B x M x K, b is B x K x N), "
               "found a fp16[2, 32, 16] (K = 16) and b fp16[2, 32, 16] (K = 32)"));
  EXPECT_EQ(errorOf([&] {
              b.dot(b.reshape(tile(1, 64, 8), {2, 32, 8}), b.reshape(tile(1, 16, 16), {2, 8, 16}));
            }),
            at("expected dot dimensions that are powers of two, K >= 16, found K = 8 (a "
               "fp16[2, 32, 8], b fp16[2, 8, 16])"));
  EXPECT_EQ(errorOf([&] {
              b.dot(a, b.reshape(tile(1, 32, 16), {2, 16, 16}), tile(0, 32, 16));
            }),
            at("expected the dot accumulator to be fp32[2, 32, 16], found fp32[32, 16]"));
}

TEST_F(BuilderDotScanTest, CumsumDtypesAndAxes) {
  Tile i8 = tile(3, 16, 32);
  Tile s = b.cumsum(i8, 1);
  EXPECT_EQ(s.dtype, DType::int32());
  EXPECT_EQ(s.getShape(), llvm::ArrayRef<int64_t>({16, 32}));
  EXPECT_EQ(b.cumsum(b.lt(i8, b.intConst(0)), 0).dtype, DType::uint32()); // int1 is unsigned
  EXPECT_EQ(b.cumsum(tile(2, 16, 16), -1).dtype, DType::fp32());          // bf16 in fp32
  EXPECT_EQ(b.cumsum(tile(1, 16, 16), 0).dtype, DType::fp16());
  EXPECT_EQ(b.cumsum(i8, 0, false, DType::int64()).dtype, DType::int64());
  EXPECT_EQ(b.cumprod(i8, 0).dtype, DType::int8()); // Triton does not widen cumprod
  EXPECT_EQ(b.cumprod(tile(2, 16, 16), 1, true).dtype, DType::fp32());
  std::string ir = print(*b.finishKernel());
  EXPECT_NE(ir.find("kiln.scan(%"), std::string::npos) << ir;
  EXPECT_NE(ir.find("axis = 1 reverse"), std::string::npos) << ir;
  EXPECT_NE(ir.find("arith.muli"), std::string::npos) << ir;
}

TEST_F(BuilderDotScanTest, AssociativeScanWithTwoOperands) {
  Tile x = tile(0, 16, 32), idx = tile(4, 16, 32);
  std::vector<Tile> out = b.scan({x, idx}, 1, [&](llvm::ArrayRef<Tile> a, llvm::ArrayRef<Tile> n) {
    Tile keep = b.ge(a[0], n[0]);
    return std::vector<Tile>{b.where(keep, a[0], n[0]), b.where(keep, a[1], n[1])};
  });
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dtype, DType::fp32());
  EXPECT_EQ(out[1].dtype, DType::int32());
  std::string ir = print(*b.finishKernel());
  EXPECT_NE(ir.find("(tensor<16x32xf32>, tensor<16x32xi32>) -> (tensor<16x32xf32>, "
                    "tensor<16x32xi32>)"),
            std::string::npos)
      << ir;
}

TEST_F(BuilderDotScanTest, ScanErrors) {
  EXPECT_EQ(errorOf([&] { b.cumsum(b.intConst(3), 0); }),
            at("expected a tile for cumsum, found a scalar of int32"));
  EXPECT_EQ(errorOf([&] { b.cumprod(tile(0, 16, 16), 2); }),
            at("expected a scan axis in [-2, 2), found 2"));
  EXPECT_EQ(errorOf([&] {
              b.scan({tile(0, 16, 16), tile(4, 16, 32)}, 0,
                     [&](llvm::ArrayRef<Tile> a, llvm::ArrayRef<Tile>) { return a.vec(); });
            }),
            at("expected the tiles of a scan to share one shape, found [16, 16] and [16, 32]"));
  EXPECT_EQ(errorOf([&] {
              b.scan({tile(0, 16, 16)}, 0, [&](llvm::ArrayRef<Tile> a, llvm::ArrayRef<Tile> n) {
                return std::vector<Tile>{b.cast(b.add(a[0], n[0]), DType::fp16())};
              });
            }),
            at("expected combine result 0 of dtype fp32, found fp16"));
}

} // namespace
