//===- BuilderDescriptorTest.cpp - Builder::derivedTensorMap ---------------===//
//
// Which tensor descriptors made in a kernel get a tensor map the launcher encodes from the
// launch's arguments (2-D to 5-D): the one decision both front ends take from the Builder,
// with its recipe on the appended parameter.
//
//===----------------------------------------------------------------------===//

#include "BuilderFixture.h"

#include "kiln/Dialect/Kiln/IR/Dialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace {
using kiln::DType;
using kiln::KernelArg;
using kiln::Tile;

class BuilderDescriptorTest : public kiln::test::BuilderFixture {
protected:
  /// kernel(a: *fp16 div 16, M: i32, K: i32 div 16, U: u32, P: *fp32 div 16, B: *bf16 div 8,
  /// K8: i32 div 8, D: i32 (a host descriptor's extent))
  void SetUp() override {
    begin("desc.py", 3, 1, "k",
          {KernelArg{"a", DType::pointerTo(DType::fp16()), 16},
           KernelArg{"M", DType::int32(), std::nullopt}, KernelArg{"K", DType::int32(), 16},
           KernelArg{"U", DType::uint32(), 16}, KernelArg{"P", DType::pointerTo(DType::fp32()), 16},
           KernelArg{"B", DType::pointerTo(DType::bf16()), 8}, KernelArg{"K8", DType::int32(), 8},
           KernelArg{"D", DType::int32(), 16, false, /*recipeField=*/false}});
  }
  /// The recipe on parameter `i`, or an empty vector.
  std::vector<int64_t> recipeOn(unsigned i) {
    auto fn = *b.getModule().getOps<mlir::func::FuncOp>().begin();
    auto r = fn.getArgAttrOfType<mlir::DenseI64ArrayAttr>(i, kiln::kTensorMapRecipeAttr);
    return r ? std::vector<int64_t>(r.asArrayRef().begin(), r.asArrayRef().end())
             : std::vector<int64_t>();
  }
  unsigned numArgs() {
    return (*b.getModule().getOps<mlir::func::FuncOp>().begin()).getNumArguments();
  }
  std::optional<Tile> map(unsigned base, Tile m, Tile k, Tile stride,
                          std::vector<int64_t> block = {64, 32}) {
    return b.derivedTensorMap(b.arg(base), {m, k}, {stride}, block);
  }
};

TEST_F(BuilderDescriptorTest, AlignedArgumentsGetOneMapPerRecipe) {
  std::optional<Tile> m = map(0, b.arg(1), b.arg(2), b.arg(2));
  ASSERT_TRUE(m);
  EXPECT_EQ(numArgs(), 9u);
  // base 0, 'h', rank 2, block 64x32, extents M (1) and K (2), row stride K (2), unguarded.
  EXPECT_EQ(recipeOn(8), (std::vector<int64_t>{0, 'h', 2, 64, 32, 1, 2, 2, 0}));
  // The same descriptor again: the same parameter.
  std::optional<Tile> again = map(0, b.arg(1), b.arg(2), b.arg(2));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->value, m->value);
  EXPECT_EQ(numArgs(), 9u);
  // Constants: -1 - value; another block is another map.
  std::optional<Tile> c = map(0, b.intConst(100), b.intConst(64), b.intConst(64), {32, 32});
  ASSERT_TRUE(c);
  EXPECT_EQ(recipeOn(9), (std::vector<int64_t>{0, 'h', 2, 32, 32, -101, -65, -65, 0}));
}

TEST_F(BuilderDescriptorTest, BfloatBaseNeeds16ByteAlignment) {
  EXPECT_FALSE(map(5, b.arg(1), b.arg(2), b.arg(2))); // B: divisibility 8
  EXPECT_EQ(numArgs(), 8u);
}

TEST_F(BuilderDescriptorTest, NoMapWhereTheLauncherCannotEncodeOne) {
  EXPECT_FALSE(map(4, b.arg(1), b.arg(2), b.arg(2)));          // fp32 elements
  EXPECT_FALSE(map(0, b.arg(3), b.arg(2), b.arg(2)));          // an unsigned extent
  EXPECT_FALSE(map(0, b.arg(1), b.arg(2), b.arg(1)));          // a stride not 16-byte aligned
  EXPECT_FALSE(map(0, b.arg(1), b.arg(2), b.intConst(12)));    // 24 bytes
  EXPECT_FALSE(map(0, b.intConst(0), b.arg(2), b.arg(2)));     // an empty extent
  EXPECT_FALSE(map(0, b.boolConst(true), b.arg(2), b.arg(2))); // a bool
  EXPECT_FALSE(map(0, b.arg(7), b.arg(2), b.arg(2)));          // a host descriptor's field
  EXPECT_FALSE(map(0, b.add(b.arg(1), b.intConst(1)), b.arg(2), b.arg(2))); // computed
  std::vector<Tile> six(6, b.arg(2)), five(5, b.arg(2));
  EXPECT_FALSE(b.derivedTensorMap(b.arg(0), six, five, {1, 1, 1, 1, 8, 8})); // 6-D
  EXPECT_FALSE(b.derivedTensorMap(b.arg(0), {b.arg(1), b.arg(2)}, {b.arg(2), b.arg(2)},
                                  {8, 8})); // a stride too many
  EXPECT_EQ(numArgs(), 8u);
}

TEST_F(BuilderDescriptorTest, AnExtentMayBeAnArgumentTimesAConstant) {
  // An MoE layer's token rows, NUM_TOKENS * TOPK: M's number plus 2 << 32 (the launcher
  // multiplies in int32); a product of two arguments, or a stride so computed, has no map.
  std::optional<Tile> m = map(0, b.mul(b.arg(1), b.intConst(2)), b.arg(2), b.arg(2));
  ASSERT_TRUE(m);
  EXPECT_EQ(recipeOn(8),
            (std::vector<int64_t>{0, 'h', 2, 64, 32, 1 + (int64_t(2) << 32), 2, 2, 0}));
  EXPECT_FALSE(map(0, b.mul(b.arg(1), b.arg(2)), b.arg(2), b.arg(2)));
  EXPECT_FALSE(map(0, b.arg(1), b.arg(2), b.mul(b.arg(2), b.intConst(2))));
}

TEST_F(BuilderDescriptorTest, ExpertWeightsGetA3DMap) {
  // An MoE layer's weights [E, N, K] (E = M, N = 64, K) with strides [4096, K], read in
  // blocks [1, 64, 32]: rank 3, the block, the extents, both strides.
  std::optional<Tile> m = b.derivedTensorMap(b.arg(0), {b.arg(1), b.intConst(64), b.arg(2)},
                                             {b.intConst(4096), b.arg(2)}, {1, 64, 32});
  ASSERT_TRUE(m);
  EXPECT_EQ(recipeOn(8), (std::vector<int64_t>{0, 'h', 3, 1, 64, 32, 1, -65, 2, -4097, 2, 0}));
}

TEST_F(BuilderDescriptorTest, StrideSpecializedToEightElementsIsAligned) {
  EXPECT_TRUE(map(0, b.arg(1), b.arg(6), b.arg(6))); // K8: 8 fp16 = 16 bytes
}
} // namespace
