//===- BuilderTest.cpp - Unit tests of kiln::Builder ----------------------===//
//
// This file tests kiln::Builder against Triton 3.x semantics: dtype names, computation-type
// promotion and weak literals, numpy broadcasting, pointer arithmetic, load/store rules,
// casts, math, shapes and control flow, and that every user error is a CompileError that
// names the kernel, says what was expected and found, and points at the location set last.
//
//===----------------------------------------------------------------------===//

#include "kiln/Frontend/Builder.h"

#include "kiln/Dialect/Kiln/IR/Dialect.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using kiln::CompileError;
using kiln::DType;
using kiln::KernelArg;
using kiln::Tile;

namespace {

/// Prints an op; `locs` adds the source locations.
std::string print(mlir::Operation *op, bool locs = false) {
  std::string s;
  llvm::raw_string_ostream os(s);
  mlir::OpPrintingFlags flags;
  if (locs)
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false);
  op->print(os, flags);
  return s;
}

/// Runs `fn` and returns the CompileError it throws, if any.
template <typename Fn> std::optional<CompileError> catchError(Fn &&fn) {
  try {
    fn();
  } catch (const CompileError &e) {
    return e;
  }
  return std::nullopt;
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

/// Each test builds one kernel `k` with a few arguments of every flavour.
class BuilderTest : public ::testing::Test {
protected:
  mlir::MLIRContext ctx;
  kiln::Builder b{ctx};

  static DType ptr(DType d) { return DType::pointerTo(d); }

  void SetUp() override {
    b.setLocation("k.py", 1, 1);
    b.beginKernel("k", {{"x_ptr", ptr(DType::fp32()), 16},
                        {"n", DType::int32(), std::nullopt},
                        {"h_ptr", ptr(DType::fp16()), 16},
                        {"i8", DType::int8(), std::nullopt},
                        {"u32", DType::uint32(), std::nullopt},
                        {"n64", DType::int64(), std::nullopt},
                        {"f", DType::fp32(), std::nullopt}});
  }

  /// A tile of `dtype` and `shape` (a splatted zero).
  Tile tile(DType dtype, llvm::ArrayRef<int64_t> shape) { return b.zeros(shape, dtype); }

  /// Finishes the kernel (which verifies it) and prints it.
  std::string finish() {
    auto module = b.finishKernel();
    EXPECT_TRUE(mlir::succeeded(mlir::verify(*module)));
    return print(*module);
  }

  /// Expects `fn` to throw a CompileError containing `text` at k.py:line:col.
  template <typename Fn>
  void expectError(unsigned line, unsigned col, const std::string &text, Fn &&fn) {
    b.setLocation("k.py", line, col);
    std::optional<CompileError> e = catchError(fn);
    ASSERT_TRUE(e.has_value()) << "expected an error containing: " << text;
    EXPECT_TRUE(contains(e->getMessage(), text)) << e->what();
    EXPECT_EQ(e->getFile(), "k.py");
    EXPECT_EQ(e->getLine(), line);
    EXPECT_EQ(e->getColumn(), col);
    EXPECT_EQ(e->getKernel(), "k");
    EXPECT_TRUE(contains(e->what(), "k.py:" + std::to_string(line) + ":" + std::to_string(col) +
                                        ": error: in kernel 'k': "))
        << e->what();
  }

  Tile x() { return b.arg(0); }
  Tile n() { return b.arg(1); }
  Tile h() { return b.arg(2); }
};

//===----------------------------------------------------------------------===//
// DTypes and errors
//===----------------------------------------------------------------------===//

TEST(DTypeTest, NamesAndParsing) {
  EXPECT_EQ(DType::int1().str(), "int1");
  EXPECT_EQ(DType::int32().str(), "int32");
  EXPECT_EQ(DType::uint8().str(), "uint8");
  EXPECT_EQ(DType::fp16().str(), "fp16");
  EXPECT_EQ(DType::bf16().str(), "bf16");
  EXPECT_EQ(DType::fp32().str(), "fp32");
  EXPECT_EQ(DType::pointerTo(DType::fp32()).str(), "pointer<fp32>");
  EXPECT_EQ(DType::parse("pointer<fp32>"), DType::pointerTo(DType::fp32()));
  EXPECT_EQ(DType::parse("*i32"), DType::pointerTo(DType::int32()));
  EXPECT_EQ(DType::parse("float16"), DType::fp16());
  EXPECT_EQ(DType::parse("uint64"), DType::uint64());
  EXPECT_FALSE(DType::parse("int3").has_value());
  EXPECT_FALSE(DType::parse("pointer<pointer<fp32>>").has_value());
  // Triton counts int1 as unsigned.
  EXPECT_TRUE(DType::int1().isUnsigned());
  EXPECT_TRUE(DType::int8().isSigned());
  EXPECT_EQ(DType::bf16().getMantissaWidth(), 7u);
}

TEST(DTypeTest, MapsToMLIRTypes) {
  mlir::MLIRContext ctx;
  kiln::Builder b(ctx);
  EXPECT_TRUE(toMLIR(DType::uint16(), ctx).isInteger(16));
  EXPECT_TRUE(toMLIR(DType::bf16(), ctx).isBF16());
  auto p = llvm::dyn_cast<kiln::PointerType>(toMLIR(DType::pointerTo(DType::fp16()), ctx));
  ASSERT_TRUE(p);
  EXPECT_TRUE(p.getPointeeType().isF16());
}

TEST(CompileErrorTest, WhatNamesFileLineColumnAndKernel) {
  CompileError e("add", "file.py", 12, 5, "expected int32, found fp32");
  EXPECT_STREQ(e.what(), "file.py:12:5: error: in kernel 'add': expected int32, found fp32");
  EXPECT_EQ(e.getMessage(), "expected int32, found fp32");
}

TEST(BuilderKernelTest, OpsOutsideAKernelAreAnError) {
  mlir::MLIRContext ctx;
  kiln::Builder b(ctx);
  b.setLocation("k.py", 2, 3);
  auto e = catchError([&] { b.arange(0, 4); });
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(contains(e->getMessage(), "expected a kernel being built")) << e->what();
  EXPECT_EQ(e->getLine(), 2u);
}

//===----------------------------------------------------------------------===//
// Promotion and literals
//===----------------------------------------------------------------------===//

TEST_F(BuilderTest, PromotesInt32WithFp16ToFp16) {
  Tile r = b.add(tile(DType::int32(), {16}), tile(DType::fp16(), {16}));
  EXPECT_EQ(r.dtype, DType::fp16());
  EXPECT_TRUE(contains(finish(), "arith.sitofp"));
}

TEST_F(BuilderTest, PromotesFp16WithBf16ToFp32) {
  Tile r = b.mul(tile(DType::fp16(), {16}), tile(DType::bf16(), {16}));
  EXPECT_EQ(r.dtype, DType::fp32());
  EXPECT_TRUE(llvm::cast<mlir::RankedTensorType>(r.value.getType()).getElementType().isF32());
}

TEST_F(BuilderTest, PromotesIntegersLikeC) {
  EXPECT_EQ(b.add(tile(DType::int8(), {4}), tile(DType::uint32(), {4})).dtype, DType::uint32());
  EXPECT_EQ(b.add(tile(DType::int32(), {4}), tile(DType::uint32(), {4})).dtype, DType::uint32());
  EXPECT_EQ(b.add(tile(DType::int64(), {4}), tile(DType::uint32(), {4})).dtype, DType::int64());
  EXPECT_EQ(b.add(tile(DType::uint16(), {4}), tile(DType::int32(), {4})).dtype, DType::int32());
  EXPECT_EQ(b.add(tile(DType::int1(), {4}), tile(DType::int8(), {4})).dtype, DType::int8());
  finish();
}

TEST_F(BuilderTest, PromotesFloatWidths) {
  EXPECT_EQ(b.add(tile(DType::fp32(), {4}), tile(DType::fp64(), {4})).dtype, DType::fp64());
  EXPECT_EQ(b.add(tile(DType::fp16(), {4}), tile(DType::fp32(), {4})).dtype, DType::fp32());
  EXPECT_EQ(b.add(tile(DType::bf16(), {4}), tile(DType::bf16(), {4})).dtype, DType::bf16());
  EXPECT_EQ(b.add(tile(DType::bf16(), {4}), tile(DType::int32(), {4})).dtype, DType::fp32());
  finish();
}

TEST_F(BuilderTest, IntLiteralsTakeTheTileDtype) {
  EXPECT_EQ(b.add(tile(DType::int8(), {4}), b.intConst(1)).dtype, DType::int8());
  EXPECT_EQ(b.add(b.intConst(1), tile(DType::uint8(), {4})).dtype, DType::uint8());
  // A runtime scalar is not weak, but a literal next to it is.
  EXPECT_EQ(b.add(b.arg(3), b.intConst(2)).dtype, DType::int8());
  EXPECT_EQ(b.add(b.arg(3), n()).dtype, DType::int32());
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "arith.constant 1 : i8")) << ir;
  EXPECT_FALSE(contains(ir, "arith.constant 1 : i32")) << ir;
}

TEST_F(BuilderTest, FloatLiteralsTakeTheFloatTileDtype) {
  EXPECT_EQ(b.mul(tile(DType::fp16(), {4}), b.floatConst(0.5)).dtype, DType::fp16());
  EXPECT_EQ(b.add(b.floatConst(2.0), tile(DType::bf16(), {4})).dtype, DType::bf16());
  EXPECT_TRUE(contains(finish(), "arith.constant 5.000000e-01 : f16"));
}

TEST_F(BuilderTest, FloatLiteralsWithIntegersPromote) {
  EXPECT_EQ(b.add(tile(DType::int32(), {4}), b.floatConst(1.5)).dtype, DType::fp32());
  EXPECT_EQ(b.add(tile(DType::int8(), {4}), b.floatConst(1e300)).dtype, DType::fp64());
  // Two literals follow the ordinary rules.
  Tile r = b.add(b.intConst(1), b.floatConst(2.5));
  EXPECT_EQ(r.dtype, DType::fp32());
  EXPECT_FALSE(r.isWeak());
  finish();
}

TEST_F(BuilderTest, BareLiteralDtypes) {
  EXPECT_EQ(b.intConst(7).dtype, DType::int32());
  EXPECT_EQ(b.intConst(-(int64_t(1) << 31)).dtype, DType::int32());
  EXPECT_EQ(b.intConst(int64_t(1) << 31).dtype, DType::uint32());
  EXPECT_EQ(b.intConst(int64_t(1) << 40).dtype, DType::int64());
  EXPECT_EQ(b.intConst(-(int64_t(1) << 40)).dtype, DType::int64());
  EXPECT_EQ(b.uintConst(uint64_t(1) << 63).dtype, DType::uint64());
  EXPECT_EQ(b.floatConst(0.5).dtype, DType::fp32());
  EXPECT_EQ(b.floatConst(0.0).dtype, DType::fp32());
  EXPECT_EQ(b.floatConst(1e300).dtype, DType::fp64());
  EXPECT_EQ(b.floatConst(1e-300).dtype, DType::fp64());
  EXPECT_EQ(b.boolConst(true).dtype, DType::int1());
  EXPECT_TRUE(b.intConst(7).isWeak());
  EXPECT_FALSE(b.materialize(b.intConst(7)).isWeak());
  finish();
}

TEST_F(BuilderTest, LiteralOutOfRangeIsAnError) {
  Tile t = tile(DType::int8(), {4});
  expectError(3, 7, "expected a literal in the range of int8 for '+', found 300",
              [&] { b.add(t, b.intConst(300)); });
}

TEST_F(BuilderTest, NegativeLiteralWithUnsignedIsAnError) {
  Tile t = tile(DType::uint32(), {4});
  expectError(4, 2, "expected a non-negative literal with uint32 operands of '+', found -1",
              [&] { b.add(t, b.intConst(-1)); });
}

//===----------------------------------------------------------------------===//
// Arithmetic
//===----------------------------------------------------------------------===//

TEST_F(BuilderTest, TruedivComputesInFloat) {
  EXPECT_EQ(b.truediv(tile(DType::int32(), {4}), tile(DType::int32(), {4})).dtype, DType::fp32());
  EXPECT_EQ(b.truediv(tile(DType::fp16(), {4}), tile(DType::fp16(), {4})).dtype, DType::fp32());
  EXPECT_EQ(b.truediv(tile(DType::fp16(), {4}), b.floatConst(2.0)).dtype, DType::fp32());
  EXPECT_EQ(b.truediv(tile(DType::fp64(), {4}), b.intConst(2)).dtype, DType::fp64());
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "arith.divf"));
  EXPECT_TRUE(contains(ir, "arith.sitofp"));
}

TEST_F(BuilderTest, FloordivAndModFollowSignedness) {
  b.floordiv(tile(DType::int32(), {4}), b.intConst(3));
  b.floordiv(tile(DType::uint32(), {4}), b.intConst(3));
  b.mod(tile(DType::int64(), {4}), b.intConst(3));
  b.mod(tile(DType::uint8(), {4}), b.intConst(3));
  EXPECT_EQ(b.mod(tile(DType::fp32(), {4}), b.floatConst(1.5)).dtype, DType::fp32());
  EXPECT_EQ(b.mod(tile(DType::bf16(), {4}), tile(DType::bf16(), {4})).dtype, DType::fp32());
  std::string ir = finish();
  for (const char *op : {"arith.divsi", "arith.divui", "arith.remsi", "arith.remui", "arith.remf"})
    EXPECT_TRUE(contains(ir, op)) << op << "\n" << ir;
}

TEST_F(BuilderTest, DivisionOfMixedSignednessIsAnError) {
  Tile a = tile(DType::int32(), {4}), c = tile(DType::uint32(), {4});
  expectError(5, 9, "expected operands of one signedness for '//', found int32 and uint32",
              [&] { b.floordiv(a, c); });
}

TEST_F(BuilderTest, FloordivOfFloatsIsAnError) {
  Tile a = tile(DType::fp32(), {4});
  expectError(6, 1, "expected integer operands for '//', found fp32 and fp32",
              [&] { b.floordiv(a, a); });
}

TEST_F(BuilderTest, ComparisonsPickPredicates) {
  Tile r = b.lt(tile(DType::int32(), {8}), n());
  EXPECT_EQ(r.dtype, DType::int1());
  EXPECT_EQ(r.getShape(), llvm::ArrayRef<int64_t>({8}));
  b.lt(tile(DType::uint32(), {8}), b.intConst(3));
  b.ge(tile(DType::fp32(), {8}), b.floatConst(0.0));
  b.ne(tile(DType::fp32(), {8}), b.floatConst(0.0));
  b.eq(tile(DType::int8(), {8}), b.intConst(0));
  std::string ir = finish();
  for (const char *op :
       {"arith.cmpi slt", "arith.cmpi ult", "arith.cmpf oge", "arith.cmpf une", "arith.cmpi eq"})
    EXPECT_TRUE(contains(ir, op)) << op << "\n" << ir;
}

TEST_F(BuilderTest, BitwiseOpsAndShifts) {
  EXPECT_EQ(b.bitAnd(tile(DType::int1(), {4}), tile(DType::int1(), {4})).dtype, DType::int1());
  EXPECT_EQ(b.bitOr(tile(DType::int8(), {4}), b.intConst(1)).dtype, DType::int8());
  b.shr(tile(DType::int32(), {4}), b.intConst(1));
  b.shr(tile(DType::uint32(), {4}), b.intConst(1));
  b.shl(tile(DType::int32(), {4}), b.intConst(2));
  b.bitXor(tile(DType::int32(), {4}), n());
  std::string ir = finish();
  for (const char *op : {"arith.shrsi", "arith.shrui", "arith.shli", "arith.xori"})
    EXPECT_TRUE(contains(ir, op)) << op;
}

TEST_F(BuilderTest, BitwiseOnFloatsIsAnError) {
  Tile a = tile(DType::fp32(), {4});
  expectError(7, 3, "expected integer operands for '&', found fp32 and fp32",
              [&] { b.bitAnd(a, a); });
}

TEST_F(BuilderTest, UnaryOps) {
  Tile m3 = b.neg(b.intConst(3));
  EXPECT_TRUE(m3.isWeak());
  EXPECT_EQ(b.add(tile(DType::int8(), {4}), m3).dtype, DType::int8());
  EXPECT_EQ(b.neg(tile(DType::fp32(), {4})).dtype, DType::fp32());
  EXPECT_EQ(b.neg(n()).dtype, DType::int32());
  EXPECT_EQ(b.logicalNot(n()).dtype, DType::int1());
  EXPECT_EQ(b.bitNot(tile(DType::uint8(), {4})).dtype, DType::uint8());
  EXPECT_EQ(b.logicalAnd(n(), b.arg(3)).dtype, DType::int1());
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "arith.negf"));
  EXPECT_TRUE(contains(ir, "arith.constant -3 : i8"));
}

TEST_F(BuilderTest, BitNotOfFloatIsAnError) {
  Tile a = tile(DType::fp32(), {4});
  expectError(8, 8, "expected an integer for '~', found fp32[4]", [&] { b.bitNot(a); });
}

TEST_F(BuilderTest, MinimumMaximumNanSemantics) {
  b.maximum(tile(DType::fp32(), {4}), b.floatConst(0.0));
  b.minimum(tile(DType::fp32(), {4}), b.floatConst(0.0), /*propagateNan=*/true);
  b.maximum(tile(DType::int32(), {4}), n());
  b.minimum(tile(DType::uint32(), {4}), b.intConst(7));
  std::string ir = finish();
  for (const char *op : {"arith.maxnumf", "arith.minimumf", "arith.maxsi", "arith.minui"})
    EXPECT_TRUE(contains(ir, op)) << op << "\n" << ir;
}

TEST_F(BuilderTest, CdivOnScalarsAndTiles) {
  Tile s = b.cdiv(n(), b.intConst(128));
  EXPECT_EQ(s.dtype, DType::int32());
  EXPECT_FALSE(s.isTile());
  Tile t = b.cdiv(tile(DType::int64(), {4}), b.intConst(4));
  EXPECT_EQ(t.dtype, DType::int64());
  EXPECT_TRUE(contains(finish(), "arith.divsi"));
}

//===----------------------------------------------------------------------===//
// Broadcasting and shapes
//===----------------------------------------------------------------------===//

TEST_F(BuilderTest, ScalarsSplatToTiles) {
  Tile r = b.add(tile(DType::fp32(), {16}), b.arg(6));
  EXPECT_EQ(r.getShape(), llvm::ArrayRef<int64_t>({16}));
  EXPECT_TRUE(contains(finish(), "kiln.splat"));
}

TEST_F(BuilderTest, NumpyBroadcastPrependsAndStretches) {
  Tile row = b.arange(0, 8);
  Tile col = b.expandDims(b.arange(0, 4), 1);
  Tile r = b.add(row, col);
  EXPECT_EQ(r.getShape(), llvm::ArrayRef<int64_t>({4, 8}));
  auto [p, q] = b.broadcast(tile(DType::fp16(), {1, 8}), tile(DType::fp32(), {2, 1, 1}));
  EXPECT_EQ(p.getShape(), llvm::ArrayRef<int64_t>({2, 1, 8}));
  EXPECT_EQ(q.getShape(), llvm::ArrayRef<int64_t>({2, 1, 8}));
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "kiln.expand_dims"));
  EXPECT_TRUE(contains(ir, "kiln.broadcast"));
}

TEST_F(BuilderTest, IncompatibleShapesAreAnError) {
  Tile a = tile(DType::fp32(), {4, 8}), c = tile(DType::fp32(), {4, 16});
  expectError(9, 4, "cannot broadcast shapes [4, 8] and [4, 16]", [&] { b.add(a, c); });
}

TEST_F(BuilderTest, ExpandDimsTakesNegativeAxes) {
  Tile r = b.arange(0, 8);
  EXPECT_EQ(b.expandDims(r, -1).getShape(), llvm::ArrayRef<int64_t>({8, 1}));
  EXPECT_EQ(b.expandDims(r, 0).getShape(), llvm::ArrayRef<int64_t>({1, 8}));
  EXPECT_EQ(b.expandDims(n(), 0).getShape(), llvm::ArrayRef<int64_t>({1}));
  expectError(10, 2, "expected expand_dims axis in [-2, 2) for a value of shape [8], found 2",
              [&] { b.expandDims(r, 2); });
}

TEST_F(BuilderTest, BroadcastToChecksShapes) {
  EXPECT_EQ(b.broadcastTo(tile(DType::fp32(), {1, 8}), {4, 8}).getShape(),
            llvm::ArrayRef<int64_t>({4, 8}));
  EXPECT_EQ(b.broadcastTo(b.arg(6), {4, 8}).getShape(), llvm::ArrayRef<int64_t>({4, 8}));
  Tile a = tile(DType::fp32(), {2, 8});
  expectError(11, 1, "cannot broadcast shape [2, 8] to [4, 8]: expected dimension 0 to be 1 or 4",
              [&] {
                b.broadcastTo(a, {4, 8});
              });
}

TEST_F(BuilderTest, BroadcastToRequiresEqualRank) {
  Tile a = tile(DType::fp32(), {8});
  expectError(11, 5, "expected rank 2, found 1", [&] { b.broadcastTo(a, {4, 8}); });
}

TEST_F(BuilderTest, ReshapeAndTrans) {
  Tile a = tile(DType::fp16(), {4, 8});
  EXPECT_EQ(b.reshape(a, {32}).getShape(), llvm::ArrayRef<int64_t>({32}));
  EXPECT_EQ(b.trans(a).getShape(), llvm::ArrayRef<int64_t>({8, 4}));
  Tile c = tile(DType::fp16(), {2, 4, 8});
  EXPECT_EQ(b.trans(c, {2, 0, 1}).getShape(), llvm::ArrayRef<int64_t>({8, 2, 4}));
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "kiln.reshape"));
  EXPECT_TRUE(contains(ir, "kiln.trans"));
}

TEST_F(BuilderTest, ReshapeMustKeepTheElementCount) {
  Tile a = tile(DType::fp16(), {4, 8});
  expectError(12, 3, "cannot reshape [4, 8] (32 elements) to [16] (16 elements)",
              [&] { b.reshape(a, {16}); });
}

TEST_F(BuilderTest, TransOrderMustBeAPermutation) {
  Tile a = tile(DType::fp16(), {4, 8});
  expectError(12, 9, "expected trans order to be a permutation of 0..1, found (0, 0)", [&] {
    b.trans(a, {0, 0});
  });
}

TEST_F(BuilderTest, ArangeChecksItsBounds) {
  Tile r = b.arange(0, 128);
  EXPECT_EQ(r.dtype, DType::int32());
  EXPECT_EQ(r.getShape(), llvm::ArrayRef<int64_t>({128}));
  expectError(13, 1, "expected arange length end - start to be a power of two, found 3",
              [&] { b.arange(0, 3); });
  expectError(13, 2, "expected arange end > start, found start = 4, end = 4",
              [&] { b.arange(4, 4); });
}

TEST_F(BuilderTest, FullAndZeros) {
  Tile f = b.full({4, 8}, b.floatConst(1.5), DType::fp16());
  EXPECT_EQ(f.dtype, DType::fp16());
  EXPECT_EQ(f.getShape(), llvm::ArrayRef<int64_t>({4, 8}));
  EXPECT_EQ(b.full({16}, n(), DType::int64()).dtype, DType::int64());
  EXPECT_EQ(b.zeros({16}, DType::int64()).dtype, DType::int64());
  expectError(14, 6, "expected full dimensions to be powers of two, found [3]",
              [&] { b.full({3}, b.intConst(0), DType::int32()); });
  expectError(14, 7, "expected a scalar fill value for full, found fp16[4, 8]", [&] {
    b.full({4, 8}, f, DType::fp16());
  });
}

//===----------------------------------------------------------------------===//
// Pointers
//===----------------------------------------------------------------------===//

TEST_F(BuilderTest, PointerPlusOffsets) {
  Tile p = b.add(x(), b.arange(0, 128));
  EXPECT_EQ(p.dtype, DType::pointerTo(DType::fp32()));
  EXPECT_EQ(p.getShape(), llvm::ArrayRef<int64_t>({128}));
  Tile q = b.add(b.arange(0, 128), x());
  EXPECT_EQ(q.dtype, p.dtype);
  EXPECT_EQ(b.add(x(), b.intConst(4)).dtype, p.dtype);
  EXPECT_TRUE(contains(finish(), "kiln.addptr"));
}

TEST_F(BuilderTest, PointerMinusOffsetNegates) {
  Tile p = b.sub(x(), n());
  EXPECT_EQ(p.dtype, DType::pointerTo(DType::fp32()));
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "arith.subi"));
  EXPECT_TRUE(contains(ir, "kiln.addptr"));
}

TEST_F(BuilderTest, UnsignedOffsetsAreZeroExtended) {
  b.add(x(), tile(DType::uint32(), {16}));
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "arith.extui")) << ir;
  EXPECT_TRUE(contains(ir, "tensor<16xi64>")) << ir;
}

TEST_F(BuilderTest, PointerPlusFloatIsAnError) {
  expectError(15, 3, "expected an integer offset for pointer '+', found pointer<fp32> and fp32",
              [&] { b.add(x(), b.arg(6)); });
}

TEST_F(BuilderTest, PointerPlusPointerIsAnError) {
  expectError(15, 4,
              "expected an integer offset for pointer '+', found pointer<fp32> and pointer<fp32>",
              [&] { b.add(x(), x()); });
  expectError(15, 5, "found pointer<fp32> and pointer<fp16>", [&] { b.add(x(), h()); });
}

TEST_F(BuilderTest, PointerOnlyAddsAndSubtracts) {
  expectError(16, 1, "expected numeric operands for '*', found pointer<fp32> and int32",
              [&] { b.mul(x(), b.intConst(2)); });
  expectError(16, 2, "expected numeric operands for '-', found pointer<fp32> and int32",
              [&] { b.sub(b.intConst(2), x()); });
  expectError(16, 3, "expected numeric operands for '<'", [&] { b.lt(x(), x()); });
}

//===----------------------------------------------------------------------===//
// Loads and stores
//===----------------------------------------------------------------------===//

TEST_F(BuilderTest, LoadBroadcastsMaskAndCastsOther) {
  Tile rows = b.expandDims(b.arange(0, 4), 1);
  Tile cols = b.expandDims(b.arange(0, 8), 0);
  Tile ptrs = b.add(h(), b.add(b.mul(rows, b.intConst(8)), cols));
  Tile mask = b.lt(rows, n());
  ASSERT_EQ(mask.getShape(), llvm::ArrayRef<int64_t>({4, 1}));
  Tile v = b.load(ptrs, mask, b.intConst(0));
  EXPECT_EQ(v.dtype, DType::fp16());
  EXPECT_EQ(v.getShape(), llvm::ArrayRef<int64_t>({4, 8}));
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "kiln.load")) << ir;
  EXPECT_TRUE(contains(ir, "arith.constant 0.000000e+00 : f16")) << ir;
  EXPECT_TRUE(contains(ir, "tensor<4x8xi1>")) << ir;
}

TEST_F(BuilderTest, LoadOptions) {
  Tile p = b.add(x(), b.arange(0, 16));
  b.load(p, std::nullopt, std::nullopt, {".cg", "evict_last", false});
  b.load(p, std::nullopt, std::nullopt, {"", "", true});
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "cache = cg")) << ir;
  EXPECT_TRUE(contains(ir, "evict = evict_last")) << ir;
  EXPECT_TRUE(contains(ir, "volatile")) << ir;
}

TEST_F(BuilderTest, VolatileLoadTakesNoCacheModifiers) {
  Tile p = b.add(x(), b.arange(0, 16));
  expectError(
      17, 3, "expected no cache modifier or eviction policy on a volatile load, found '.cg' and ''",
      [&] {
        b.load(p, std::nullopt, std::nullopt, {".cg", "", true});
      });
}

TEST_F(BuilderTest, LoadRejectsStoreCacheModifiers) {
  Tile p = b.add(x(), b.arange(0, 16));
  expectError(17, 1, "expected a load cache modifier ('.ca', '.cg', '.cv'), found '.wb'", [&] {
    b.load(p, std::nullopt, std::nullopt, {".wb", "", false});
  });
  expectError(17, 2, "expected an eviction policy ('evict_first', 'evict_last'), found 'soon'",
              [&] {
                b.load(p, std::nullopt, std::nullopt, {"", "soon", false});
              });
}

TEST_F(BuilderTest, LoadOtherNeedsAMask) {
  Tile p = b.add(x(), b.arange(0, 16));
  expectError(18, 1, "expected a mask for load when `other` is given",
              [&] { b.load(p, std::nullopt, b.floatConst(0.0)); });
}

TEST_F(BuilderTest, LoadMaskMustBeInt1) {
  Tile p = b.add(x(), b.arange(0, 16));
  expectError(18, 2, "expected a mask of dtype int1 for load, found int32[16]",
              [&] { b.load(p, b.arange(0, 16)); });
}

TEST_F(BuilderTest, LoadThroughANumberIsAnError) {
  expectError(18, 3, "expected a pointer or a tile of pointers for load, found int32[16]",
              [&] { b.load(b.arange(0, 16)); });
}

TEST_F(BuilderTest, ScalarLoadRejectsTileMask) {
  Tile mask = b.lt(b.arange(0, 16), n());
  expectError(18, 4, "expected a scalar mask for a load through a scalar pointer, found int1[16]",
              [&] { b.load(x(), mask); });
}

TEST_F(BuilderTest, ScalarLoadAndStore) {
  Tile v = b.load(x());
  EXPECT_EQ(v.dtype, DType::fp32());
  EXPECT_FALSE(v.isTile());
  b.store(h(), v, b.gt(n(), b.intConst(0)));
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "arith.truncf")) << ir;
}

TEST_F(BuilderTest, StoreCastsAndBroadcastsValue) {
  Tile p = b.add(h(), b.arange(0, 128));
  b.store(p, tile(DType::fp32(), {128}));
  b.store(p, b.floatConst(1.0), b.lt(b.arange(0, 128), n()), {".cs", "evict_first"});
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "arith.truncf")) << ir;
  EXPECT_TRUE(contains(ir, "kiln.store")) << ir;
  EXPECT_TRUE(contains(ir, "cache = cs")) << ir;
}

TEST_F(BuilderTest, StoreValueMustFitThePointerShape) {
  Tile p = b.add(x(), b.arange(0, 128));
  Tile v = tile(DType::fp32(), {2, 128});
  expectError(19, 5,
              "expected a value that broadcasts to the pointer shape [128] for store, found "
              "fp32[2, 128]",
              [&] { b.store(p, v); });
}

TEST_F(BuilderTest, StoreRejectsLoadCacheModifiers) {
  Tile p = b.add(x(), b.arange(0, 16));
  expectError(19, 6, "expected a store cache modifier ('.wb', '.cg', '.cs', '.wt'), found '.ca'",
              [&] {
                b.store(p, b.floatConst(0.0), std::nullopt, {".ca", ""});
              });
  b.store(p, b.floatConst(0.0), std::nullopt, {".cg", ""}); // (L2 only, as Triton's)
}

//===----------------------------------------------------------------------===//
// Casts, math, where
//===----------------------------------------------------------------------===//

TEST_F(BuilderTest, CastsFollowTritonRules) {
  EXPECT_EQ(b.cast(tile(DType::uint8(), {4}), DType::int32()).dtype, DType::int32());
  b.cast(tile(DType::int8(), {4}), DType::int32());
  b.cast(tile(DType::int32(), {4}), DType::int1());
  b.cast(tile(DType::fp32(), {4}), DType::uint32());
  b.cast(tile(DType::fp32(), {4}), DType::int16());
  b.cast(tile(DType::int1(), {4}), DType::fp32());
  b.cast(tile(DType::int64(), {4}), DType::fp64());
  b.cast(tile(DType::fp64(), {4}), DType::fp32());
  Tile same = tile(DType::int32(), {4});
  EXPECT_EQ(b.cast(same, DType::uint32()).value, same.value);
  std::string ir = finish();
  for (const char *op : {"arith.extui", "arith.extsi", "arith.cmpi ne", "arith.fptoui",
                         "arith.fptosi", "arith.uitofp", "arith.sitofp", "arith.truncf"})
    EXPECT_TRUE(contains(ir, op)) << op << "\n" << ir;
}

TEST_F(BuilderTest, HalfToBf16GoesThroughFp32) {
  Tile r = b.cast(tile(DType::fp16(), {4}), DType::bf16());
  EXPECT_EQ(r.dtype, DType::bf16());
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "arith.extf")) << ir;
  EXPECT_TRUE(contains(ir, "tensor<4xf32> to tensor<4xbf16>")) << ir;
}

TEST_F(BuilderTest, PointerCastsAreTritons) {
  // A pointer to int64 (its address), back to a pointer of another element type, and to int1
  // (not null): kiln.ptr_cast; a pointer to int32 is an error naming what Triton accepts.
  Tile addr = b.cast(x(), DType::int64());
  EXPECT_EQ(addr.dtype, DType::int64());
  EXPECT_EQ(b.cast(addr, DType::pointerTo(DType::fp16())).dtype, DType::pointerTo(DType::fp16()));
  EXPECT_EQ(b.cast(x(), DType::int1()).dtype, DType::int1());
  std::string ir = print(b.getModule(), false);
  EXPECT_TRUE(contains(ir, "kiln.ptr_cast")) << ir;
  expectError(20, 1, "cannot cast pointer<fp32> to int32: expected int64, uint64 or int1",
              [&] { b.cast(x(), DType::int32()); });
}

TEST_F(BuilderTest, BitcastChecksWidths) {
  EXPECT_EQ(b.bitcast(tile(DType::fp32(), {4}), DType::int32()).dtype, DType::int32());
  EXPECT_TRUE(contains(print(b.getModule(), false), "arith.bitcast"));
  Tile a = tile(DType::fp32(), {4});
  expectError(20, 2, "cannot bitcast fp32[4] to int16: expected 32 bits, found 16",
              [&] { b.bitcast(a, DType::int16()); });
}

TEST_F(BuilderTest, MathComputesHalfInFp32) {
  Tile e = b.exp(tile(DType::fp16(), {4}));
  EXPECT_EQ(e.dtype, DType::fp16());
  EXPECT_EQ(b.sqrt(b.arg(6)).dtype, DType::fp32());
  EXPECT_EQ(b.abs(tile(DType::int32(), {4})).dtype, DType::int32());
  Tile u = tile(DType::uint32(), {4});
  EXPECT_EQ(b.abs(u).value, u.value);
  b.rsqrt(tile(DType::fp64(), {4}));
  b.erf(tile(DType::bf16(), {4}));
  std::string ir = finish();
  for (const char *op : {"math.exp", "arith.extf", "arith.truncf", "math.sqrt", "math.absi",
                         "math.rsqrt", "math.erf"})
    EXPECT_TRUE(contains(ir, op)) << op << "\n" << ir;
}

TEST_F(BuilderTest, MathOnIntegersIsAnError) {
  Tile a = tile(DType::int32(), {4});
  expectError(21, 3,
              "expected a floating-point argument (fp16, bf16, fp32, fp64) for exp, found "
              "int32[4]",
              [&] { b.exp(a); });
}

TEST_F(BuilderTest, WherePromotesAndBroadcasts) {
  Tile mask = b.lt(b.expandDims(b.arange(0, 4), 1), n());
  Tile r = b.where(mask, tile(DType::fp16(), {1, 8}), b.floatConst(0.0));
  EXPECT_EQ(r.dtype, DType::fp16());
  EXPECT_EQ(r.getShape(), llvm::ArrayRef<int64_t>({4, 8}));
  Tile s = b.where(b.gt(n(), b.intConst(0)), x(), b.add(x(), b.intConst(1)));
  EXPECT_EQ(s.dtype, DType::pointerTo(DType::fp32()));
  EXPECT_TRUE(contains(finish(), "arith.select"));
}

TEST_F(BuilderTest, WhereOfPointerAndNumberIsAnError) {
  Tile c = b.gt(n(), b.intConst(0));
  expectError(22, 4, "expected where operands of one dtype, found pointer<fp32> and int32",
              [&] { b.where(c, x(), b.intConst(0)); });
}

//===----------------------------------------------------------------------===//
// Kernels and locations
//===----------------------------------------------------------------------===//

TEST_F(BuilderTest, ProgramIdAxisIsChecked) {
  EXPECT_EQ(b.programId(2).dtype, DType::int32());
  EXPECT_EQ(b.numPrograms(0).dtype, DType::int32());
  expectError(23, 1, "expected program_id axis 0, 1 or 2, found 3", [&] { b.programId(3); });
  expectError(23, 2, "expected an argument index below 7, found 9", [&] { b.arg(9); });
}

TEST(BuilderKernelTest, VectorAddKernel) {
  mlir::MLIRContext ctx;
  kiln::Builder b(ctx);
  DType f32ptr = DType::pointerTo(DType::fp32());
  b.setLocation("add.py", 3, 1);
  b.beginKernel("add", {{"x_ptr", f32ptr, 16},
                        {"y_ptr", f32ptr, 16},
                        {"out_ptr", f32ptr, 16},
                        {"n", DType::int32(), 16}});
  b.setLocation("add.py", 4, 11);
  Tile pid = b.programId(0);
  b.setLocation("add.py", 5, 5);
  Tile offs = b.add(b.mul(pid, b.intConst(1024)), b.arange(0, 1024));
  b.setLocation("add.py", 6, 12);
  Tile mask = b.lt(offs, b.arg(3));
  b.setLocation("add.py", 7, 9);
  Tile xv = b.load(b.add(b.arg(0), offs), mask);
  b.setLocation("add.py", 8, 9);
  Tile yv = b.load(b.add(b.arg(1), offs), mask);
  b.setLocation("add.py", 9, 5);
  b.store(b.add(b.arg(2), offs), b.add(xv, yv), mask);
  auto module = b.finishKernel();
  ASSERT_TRUE(module);
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));

  std::string ir = print(*module, /*locs=*/true);
  EXPECT_TRUE(contains(ir, "func.func @add")) << ir;
  EXPECT_TRUE(contains(ir, "kiln.divisibility = 16 : i32")) << ir;
  EXPECT_TRUE(contains(ir, "kiln.load")) << ir;
  EXPECT_TRUE(contains(ir, "kiln.store")) << ir;
  EXPECT_TRUE(contains(ir, "\"add.py\":7:9")) << ir;
  EXPECT_FALSE(contains(ir, "arith.constant 1024 : i32\n")) << "dead literal left: " << ir;

  int loads = 0, stores = 0;
  module->walk([&](mlir::Operation *op) {
    auto flc = llvm::dyn_cast<mlir::FileLineColLoc>(op->getLoc());
    if (llvm::isa<kiln::LoadOp>(op)) {
      ASSERT_TRUE(flc);
      EXPECT_EQ(flc.getFilename(), "add.py");
      EXPECT_EQ(flc.getLine(), loads++ ? 8u : 7u);
      EXPECT_EQ(flc.getColumn(), 9u);
    }
    if (llvm::isa<kiln::StoreOp>(op)) {
      ++stores;
      ASSERT_TRUE(flc);
      EXPECT_EQ(flc.getLine(), 9u);
      EXPECT_EQ(flc.getColumn(), 5u);
    }
  });
  EXPECT_EQ(loads, 2);
  EXPECT_EQ(stores, 1);

  // The printed kernel parses back and verifies.
  auto reparsed = mlir::parseSourceString<mlir::ModuleOp>(print(*module), &ctx);
  ASSERT_TRUE(reparsed);
  EXPECT_TRUE(mlir::succeeded(mlir::verify(*reparsed)));
}

TEST(BuilderKernelTest, DivisibilityNeedsAnIntegerOrPointer) {
  mlir::MLIRContext ctx;
  kiln::Builder b(ctx);
  b.setLocation("k.py", 1, 2);
  auto e = catchError([&] { b.beginKernel("k", {{"f", DType::fp32(), 16}}); });
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(contains(e->getMessage(), "expected an integer or pointer argument for "
                                        "divisibility 16, found fp32 for 'f'"))
      << e->what();
}

TEST(BuilderKernelTest, VerifierFailureBecomesACompileError) {
  mlir::MLIRContext ctx;
  kiln::Builder b(ctx);
  b.setLocation("k.py", 1, 1);
  b.beginKernel("bad", {});
  // Bypass the Builder's checks to plant an op its verifier rejects.
  auto fn = *b.getModule().getOps<mlir::func::FuncOp>().begin();
  mlir::OpBuilder ob(&ctx);
  ob.setInsertionPointToStart(&fn.getBody().front());
  auto badLoc = mlir::FileLineColLoc::get(&ctx, "bad.py", 7, 3);
  kiln::MakeRangeOp::create(ob, badLoc, mlir::RankedTensorType::get({3}, ob.getI32Type()), 0u, 3u);
  auto e = catchError([&] { b.finishKernel(); });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->getFile(), "bad.py");
  EXPECT_EQ(e->getLine(), 7u);
  EXPECT_EQ(e->getColumn(), 3u);
  EXPECT_TRUE(contains(e->getMessage(), "power of two")) << e->what();
  EXPECT_TRUE(contains(e->what(), "in kernel 'bad'")) << e->what();
}

//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

TEST_F(BuilderTest, ForLoopCarriesValues) {
  Tile acc0 = b.zeros({16}, DType::fp32());
  std::vector<Tile> out =
      b.forLoop(b.intConst(0), n(), b.intConst(1), {acc0, b.intConst(0)},
                [&](const Tile &iv, llvm::ArrayRef<Tile> it) -> std::vector<Tile> {
                  EXPECT_EQ(iv.dtype, DType::int32());
                  return {b.add(it[0], b.cast(iv, DType::fp32())), b.add(it[1], iv)};
                },
                {"acc", "count"});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dtype, DType::fp32());
  EXPECT_EQ(out[0].getShape(), llvm::ArrayRef<int64_t>({16}));
  EXPECT_EQ(out[1].dtype, DType::int32());
  b.store(b.add(x(), b.arange(0, 16)), out[0]);
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "scf.for")) << ir;
  EXPECT_TRUE(contains(ir, "scf.yield")) << ir;
  EXPECT_TRUE(contains(ir, ": i32")) << ir;
}

TEST_F(BuilderTest, ForLoopWithInt64BoundUsesI64) {
  std::vector<Tile> out =
      b.forLoop(b.intConst(0), b.arg(5), b.intConst(2), {b.arg(5)},
                [&](const Tile &iv, llvm::ArrayRef<Tile> it) -> std::vector<Tile> {
                  EXPECT_EQ(iv.dtype, DType::int64());
                  return {b.intConst(0)}; // a literal takes the carried int64
                });
  EXPECT_EQ(out[0].dtype, DType::int64());
  EXPECT_TRUE(contains(finish(), "arith.constant 0 : i64"));
}

TEST_F(BuilderTest, ForLoopWithoutValues) {
  std::vector<Tile> out = b.forLoop(b.intConst(0), n(), b.intConst(1), {},
                                    [&](const Tile &iv, llvm::ArrayRef<Tile>) -> std::vector<Tile> {
                                      b.store(b.add(x(), iv), b.floatConst(1.0));
                                      return {};
                                    });
  EXPECT_TRUE(out.empty());
  EXPECT_TRUE(contains(finish(), "scf.for"));
}

TEST_F(BuilderTest, ForLoopTypeChangeIsAnError) {
  Tile acc = b.materialize(b.floatConst(0.0));
  b.setLocation("k.py", 24, 9);
  auto e = catchError([&] {
    b.forLoop(b.intConst(0), n(), b.intConst(1), {acc},
              [&](const Tile &, llvm::ArrayRef<Tile> it) -> std::vector<Tile> {
                b.setLocation("k.py", 25, 13);
                return {b.cast(it[0], DType::fp16())};
              },
              {"acc"});
  });
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->getMessage(), "loop-carried value 'acc' changes type from fp32 to fp16");
  EXPECT_EQ(e->getLine(), 25u);
  EXPECT_EQ(e->getColumn(), 13u);
}

TEST_F(BuilderTest, ForLoopBoundsMustBeScalarIntegers) {
  expectError(26, 1, "expected a scalar integer loop upper bound, found fp32",
              [&] { b.forLoop(b.intConst(0), b.arg(6), b.intConst(1), {}, nullptr); });
  expectError(26, 2, "expected a positive loop step, found 0",
              [&] { b.forLoop(b.intConst(0), n(), b.intConst(0), {}, nullptr); });
}

TEST_F(BuilderTest, IfThenElseYieldsResults) {
  Tile cond = b.gt(n(), b.intConst(0));
  std::vector<Tile> r = b.ifThenElse(
      cond, [&]() -> std::vector<Tile> { return {b.load(x())}; },
      [&]() -> std::vector<Tile> { return {b.floatConst(0.0)}; }, {"v"});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].dtype, DType::fp32());
  b.store(x(), r[0]);
  std::vector<Tile> none = b.ifThenElse(cond, [&]() -> std::vector<Tile> {
    b.store(x(), b.floatConst(2.0));
    return {};
  });
  EXPECT_TRUE(none.empty());
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "scf.if")) << ir;
  EXPECT_TRUE(contains(ir, "-> (f32)")) << ir;
  EXPECT_FALSE(contains(ir, "} else {\n    }")) << "empty else region: " << ir;
}

TEST_F(BuilderTest, IfLiteralTakesTheOtherBranchDtype) {
  Tile cond = b.lt(b.arg(3), b.intConst(0));
  std::vector<Tile> r = b.ifThenElse(
      cond, [&]() -> std::vector<Tile> { return {b.intConst(1)}; },
      [&]() -> std::vector<Tile> { return {b.arg(3)}; });
  EXPECT_EQ(r[0].dtype, DType::int8());
  EXPECT_TRUE(contains(finish(), "arith.constant 1 : i8"));
}

TEST_F(BuilderTest, ScalarStoreRejectsTileValue) {
  Tile v = tile(DType::fp32(), {16});
  expectError(19, 7, "expected a scalar value for a store through a scalar pointer, found fp32[16]",
              [&] { b.store(x(), v); });
}

TEST_F(BuilderTest, IfBranchTypeMismatchIsAnError) {
  Tile cond = b.gt(n(), b.intConst(0));
  expectError(27, 3, "value 'v' has type fp32 in the then branch but fp16 in the else branch", [&] {
    b.ifThenElse(
        cond, [&]() -> std::vector<Tile> { return {b.load(x())}; },
        [&]() -> std::vector<Tile> { return {b.load(h())}; }, {"v"});
  });
}

TEST_F(BuilderTest, IfNeedsAScalarConditionAndAnElse) {
  Tile tileCond = b.lt(b.arange(0, 16), n());
  expectError(28, 1, "expected a scalar condition for if, found int1[16]",
              [&] { b.ifThenElse(tileCond, [&]() -> std::vector<Tile> { return {}; }); });
  Tile cond = b.gt(n(), b.intConst(0));
  expectError(28, 2, "expected an else branch for an if whose then branch yields 1 values",
              [&] { b.ifThenElse(cond, [&]() -> std::vector<Tile> { return {n()}; }); });
}

TEST_F(BuilderTest, WhileLoopBuildsScfWhile) {
  std::vector<Tile> r = b.whileLoop(
      {b.intConst(0)}, [&](llvm::ArrayRef<Tile> v) { return b.lt(v[0], n()); },
      [&](llvm::ArrayRef<Tile> v) -> std::vector<Tile> { return {b.add(v[0], b.intConst(1))}; },
      {"i"});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].dtype, DType::int32());
  std::string ir = finish();
  EXPECT_TRUE(contains(ir, "scf.while")) << ir;
  EXPECT_TRUE(contains(ir, "scf.condition")) << ir;
}

TEST_F(BuilderTest, WhileLoopTypeChangeIsAnError) {
  expectError(29, 4, "loop-carried value 'i' changes type from int32 to int64", [&] {
    b.whileLoop(
        {n()}, [&](llvm::ArrayRef<Tile> v) { return b.lt(v[0], b.intConst(10)); },
        [&](llvm::ArrayRef<Tile> v) -> std::vector<Tile> { return {b.cast(v[0], DType::int64())}; },
        {"i"});
  });
}

} // namespace
