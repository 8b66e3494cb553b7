//===- BuilderShapeOpsTest.cpp - Tests of join, split, sort, gather, ... ---===//
//
// This file tests the Builder's tl.join, tl.split, tl.interleave, tl.cat, tl.flip, tl.sort,
// tl.topk, tl.histogram and tl.gather: result shapes and dtypes, that they are composed of
// existing ops (no new dialect op: the finished module verifies), and their errors. Their
// numerics are checked on the CPU backend by test/python/test_shape_ops.py.
//
//===----------------------------------------------------------------------===//

#include "BuilderFixture.h"

#include "mlir/IR/BuiltinOps.h"

using kiln::DType;
using kiln::Tile;

namespace {

class BuilderShapeOpsTest : public kiln::test::BuilderFixture {
protected:
  void SetUp() override {
    begin("shapes.py", 11, 5, "shapes",
          {{"f", DType::pointerTo(DType::fp32()), 16},
           {"h", DType::pointerTo(DType::fp16()), 16},
           {"i", DType::pointerTo(DType::int32()), 16}});
  }
  /// The 1-D tile of 64 elements at argument `arg`.
  Tile load(int arg) { return b.load(b.add(b.arg(arg), b.arange(0, 64))); }
  /// The [4, 16] tile at argument `arg`.
  Tile load2d(int arg) {
    Tile rows = b.mul(b.expandDims(b.arange(0, 4), 1), b.intConst(16));
    return b.load(b.add(b.arg(arg), b.add(rows, b.expandDims(b.arange(0, 16), 0))));
  }
  static std::vector<int64_t> shape(const Tile &t) { return t.getShape().vec(); }
  /// The ops of the finished (verified) kernel whose name starts with "kiln.".
  std::string kilnOps() {
    mlir::OwningOpRef<mlir::ModuleOp> m = b.finishKernel();
    std::string names;
    m->walk([&](mlir::Operation *op) {
      if (op->getName().getStringRef().starts_with("kiln."))
        names += op->getName().getStringRef().str() + " ";
    });
    return names;
  }
};

TEST_F(BuilderShapeOpsTest, JoinStacksAlongANewMinorDimension) {
  Tile j = b.join(load(0), load(0));
  EXPECT_EQ(shape(j), (std::vector<int64_t>{64, 2}));
  EXPECT_EQ(j.dtype, DType::fp32());
  // Broadcast operands, scalars, and a weak literal that takes the other's dtype.
  EXPECT_EQ(shape(b.join(load2d(0), b.floatConst(1.0))), (std::vector<int64_t>{4, 16, 2}));
  Tile s = b.join(b.floatConst(1.0), b.floatConst(2.0));
  EXPECT_EQ(shape(s), (std::vector<int64_t>{2}));
  EXPECT_EQ(b.join(load(1), b.intConst(3)).dtype, DType::fp16());
  b.store(b.add(b.arg(0), b.arange(0, 2)), s);
  EXPECT_EQ(kilnOps().find("kiln.join"), std::string::npos);
}

TEST_F(BuilderShapeOpsTest, SplitUndoesJoinAndInterleaveMergesTheLastDimensions) {
  auto [lo, hi] = b.split(b.join(load2d(1), load2d(1)));
  EXPECT_EQ(shape(lo), (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(hi.dtype, DType::fp16());
  auto [x, y] = b.split(b.join(b.floatConst(1.0), b.floatConst(2.0)));
  EXPECT_FALSE(x.isTile());
  EXPECT_EQ(shape(b.interleave(load2d(2), load2d(2))), (std::vector<int64_t>{4, 32}));
  EXPECT_EQ(shape(b.cat(load(2), load(2), true)), (std::vector<int64_t>{128}));
  b.store(b.add(b.arg(1), b.arange(0, 64)), b.reshape(lo, {64}));
  EXPECT_NE(kilnOps().find("kiln.reduce"), std::string::npos);
}

TEST_F(BuilderShapeOpsTest, FlipSortTopkGatherAndHistogramShapes) {
  EXPECT_EQ(shape(b.flip(load2d(0), 0)), (std::vector<int64_t>{4, 16}));
  Tile s = b.sort(load2d(2), std::nullopt, /*descending=*/true);
  EXPECT_EQ(shape(s), (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(s.dtype, DType::int32());
  Tile t = b.topk(load2d(1), 4);
  EXPECT_EQ(shape(t), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(t.dtype, DType::fp16());
  Tile h = b.histogram(load(2), 32, b.boolConst(true));
  EXPECT_EQ(shape(h), (std::vector<int64_t>{32}));
  EXPECT_EQ(h.dtype, DType::int32());
  Tile idx = b.expandDims(b.arange(0, 8), 0);
  Tile g = b.gather(load2d(0), b.broadcastTo(idx, {4, 8}), 1);
  EXPECT_EQ(shape(g), (std::vector<int64_t>{4, 8}));
  EXPECT_EQ(g.dtype, DType::fp32());
  b.store(b.add(b.arg(2), b.arange(0, 32)), h);
  EXPECT_FALSE(kilnOps().empty());
}

TEST_F(BuilderShapeOpsTest, ErrorsSayWhatWasExpected) {
  auto has = [](const std::string &s, const char *part) {
    return s.find(part) != std::string::npos;
  };
  EXPECT_TRUE(has(errorOf([&] { b.split(load(0)); }),
                  "expected a tile whose last dimension is 2 for split, found fp32[64]"));
  EXPECT_TRUE(has(errorOf([&] { b.join(load(0), load(2)); }),
                  "expected join operands of one dtype, found fp32[64] and int32[64]"));
  EXPECT_TRUE(
      has(errorOf([&] { b.cat(load(0), load(0), false); }), "expected can_reorder=True for cat"));
  EXPECT_TRUE(has(errorOf([&] { b.sort(load2d(0), 0); }),
                  "expected sort along the last dimension of fp32[4, 16]"));
  EXPECT_TRUE(has(errorOf([&] { b.topk(load(0), 3); }),
                  "expected topk's k to be a power of two in [1, 64] for fp32[64], found 3"));
  EXPECT_TRUE(has(errorOf([&] { b.histogram(load(0), 16); }),
                  "expected a 1-D integer tile for histogram (as Triton), found fp32[64]"));
  EXPECT_TRUE(has(errorOf([&] { b.gather(load2d(0), b.arange(0, 4), 0); }),
                  "expected gather's index to have the rank of src fp32[4, 16], found "
                  "int32[4]"));
  EXPECT_TRUE(has(errorOf([&] { b.flip(load(0), 1); }), "shapes.py:11:5"));
}

} // namespace
