//===- WgmmaLayout.h - wgmma operand layouts in shared memory ---*- C++ -*-===//
//
// Internal to the GPU lowering: where an element of a wgmma operand lives in shared memory
// (one of wgmma's canonical swizzled layouts, see WgmmaDotToLLVM.cpp), its matrix descriptors,
// and the row permutation of operand A. Shared by the dot lowerings and async_copy.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_CONVERSION_KILNTOLLVM_WGMMALAYOUT_H
#define KILN_LIB_CONVERSION_KILNTOLLVM_WGMMALAYOUT_H

#include "kiln/Target/NVIDIA/KilnToLLVM.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "llvm/Support/MathExtras.h"

#include <optional>

namespace kiln {

/// Where an operand lives in shared memory (see the file comment).
struct OperandLayout {
  int64_t mn, k;   ///< extents
  bool kMajor;     ///< contiguous along K (else along M or N)
  int64_t swizzle; ///< S: 32, 64 or 128 bytes
  int64_t elemBytes;
  int64_t offset; ///< of the operand inside the dot's buffer

  int64_t contiguousExtent() const { return kMajor ? k : mn; }
  int64_t blockElems() const { return swizzle / elemBytes; }

  /// Unswizzled byte offset of (mn, k) as i32 arithmetic.
  mlir::Value emitOffset(mlir::OpBuilder &b, mlir::Location loc, mlir::Value mnPos,
                         mlir::Value kPos) const {
    using namespace mlir;
    Value major = kMajor ? kPos : mnPos, minor = kMajor ? mnPos : kPos;
    int64_t minorExtent = kMajor ? mn : k;
    unsigned blockShift = llvm::Log2_64(blockElems());
    Value block = LLVM::LShrOp::create(b, loc, major, i32Const(b, loc, blockShift));
    Value inBlock = LLVM::AndOp::create(b, loc, major, i32Const(b, loc, blockElems() - 1));
    Value o = LLVM::MulOp::create(b, loc, block, i32Const(b, loc, minorExtent * swizzle));
    o = LLVM::AddOp::create(b, loc, o,
                            LLVM::MulOp::create(b, loc, minor, i32Const(b, loc, swizzle)));
    o = LLVM::AddOp::create(b, loc, o,
                            LLVM::MulOp::create(b, loc, inBlock, i32Const(b, loc, elemBytes)));
    // The swizzle: 16-byte chunk bits [4, 4 + s) ^= row bits [7, 7 + s).
    int64_t mask = swizzle / 16 - 1;
    Value row = LLVM::AndOp::create(b, loc, LLVM::LShrOp::create(b, loc, o, i32Const(b, loc, 7)),
                                    i32Const(b, loc, mask));
    o = LLVM::XOrOp::create(b, loc, o, LLVM::ShlOp::create(b, loc, row, i32Const(b, loc, 4)));
    return LLVM::AddOp::create(b, loc, o, i32Const(b, loc, offset));
  }

  /// The bytes emitOffset(mn + dMn, k + dK) adds to emitOffset(mn, k) for every (mn, k), when
  /// that is a constant: the step leaves an element's place in its swizzle block and its
  /// swizzle row phase alone (the major step whole blocks, the minor one whole 8-row groups).
  /// Then a thread's copies into a slot take immediate offsets from one swizzled address.
  std::optional<int64_t> getConstantStep(int64_t dMn, int64_t dK) const {
    int64_t dMajor = kMajor ? dK : dMn, dMinor = kMajor ? dMn : dK;
    int64_t minorExtent = kMajor ? mn : k;
    if (dMajor % blockElems() != 0 || dMinor % 8 != 0 || minorExtent % 8 != 0)
      return std::nullopt;
    return (dMajor / blockElems()) * minorExtent * swizzle + dMinor * swizzle;
  }

  /// Byte offset, from the operand's first byte, of the sub-matrix whose first element is
  /// (mn0, k0) (both static, multiples of the wgmma tile): a multiple of 16.
  int64_t subMatrixOffset(int64_t mn0, int64_t k0) const {
    if (kMajor)
      return offset + (k0 / blockElems()) * mn * swizzle + mn0 * swizzle +
             (k0 % blockElems()) * elemBytes;
    return offset + (mn0 / blockElems()) * k * swizzle + k0 * swizzle;
  }

  /// The 64-bit matrix descriptor of the operand's first element, given the buffer's shared
  /// address `base` (i32) and an optional extra byte offset `mnRowOffset`: start address
  /// (bits 0-13, in 16-byte units), LBO, SBO and the swizzle mode. The start address is added
  /// to the fixed fields unmasked (shared addresses stay below 2^18 bytes, so it fits 14 bits):
  /// masked, LLVM proves the fields disjoint and turns this add and descriptorAt's into `or`s,
  /// which ptxas makes two uniform logic ops and a move each, where an add is one UIADD3.64
  /// (5 SASS instructions an iteration of a 128x256x64 wgmma loop).
  mlir::Value emitBaseDescriptor(mlir::OpBuilder &b, mlir::Location loc, mlir::Value base,
                                 mlir::Value mnRowOffset) const {
    using namespace mlir;
    int64_t lbo = kMajor ? 1 : k * swizzle, sbo = 8 * swizzle;
    // Layout type (bits 62-63): 1 = 128B swizzle, 2 = 64B, 3 = 32B.
    uint64_t mode = swizzle == 128 ? 1 : swizzle == 64 ? 2 : 3;
    uint64_t fixed =
        (uint64_t(lbo >> 4) & 0x3FFF) << 16 | (uint64_t(sbo >> 4) & 0x3FFF) << 32 | mode << 62;
    Type i64 = b.getI64Type();
    Value addr = base;
    if (mnRowOffset)
      addr = LLVM::AddOp::create(b, loc, addr, mnRowOffset);
    Value field = LLVM::LShrOp::create(b, loc, addr, i32Const(b, loc, 4));
    Value wide = LLVM::ZExtOp::create(b, loc, i64, field);
    return LLVM::AddOp::create(
        b, loc, wide, LLVM::ConstantOp::create(b, loc, i64, b.getI64IntegerAttr(int64_t(fixed))));
  }

  /// The offset of the sub-matrix at (mn0, k0) in 16-byte units: what descriptorAt adds.
  int64_t unitsAt(int64_t mn0, int64_t k0) const { return subMatrixOffset(mn0, k0) >> 4; }

  /// The descriptor of the sub-matrix at (mn0, k0) from the base descriptor: one 64-bit add
  /// of its offset in 16-byte units to the start address field. Shared addresses stay below
  /// 2^18 bytes (228 KiB per block on sm_90), so the 14-bit field never carries into LBO.
  mlir::Value descriptorAt(mlir::OpBuilder &b, mlir::Location loc, mlir::Value baseDesc,
                           int64_t mn0, int64_t k0) const {
    using namespace mlir;
    int64_t units = unitsAt(mn0, k0);
    if (!units)
      return baseDesc;
    return LLVM::AddOp::create(
        b, loc, baseDesc,
        LLVM::ConstantOp::create(b, loc, b.getI64Type(), b.getI64IntegerAttr(units)));
  }
};

/// S for a contiguous extent of `elems` elements of `elemBytes`; 0 when below 32 bytes.
inline int64_t swizzleFor(int64_t elems, int64_t elemBytes) {
  int64_t bytes = std::min<int64_t>(128, elems * elemBytes);
  return bytes >= 32 ? bytes : 0;
}

/// The layout of one slot of a shared ring allocated for operand A (slots M x K) or B (K x N):
/// contiguous along K unless the allocation says otherwise (k_major = false), which a B
/// narrower than 16 elements cannot be.
inline OperandLayout getRingOperandLayout(gpu::LocalAllocOp alloc) {
  gpu::SharedBufferType type = alloc.getResult().getType();
  llvm::ArrayRef<int64_t> tile = type.getTileShape();
  bool isA = alloc.getOperand() == 0;
  int64_t eb = type.getElementType().getIntOrFloatBitWidth() / 8;
  OperandLayout layout{
      isA ? tile[0] : tile[1], isA ? tile[1] : tile[0], alloc.getKMajor().value_or(true), 0, eb, 0};
  layout.swizzle = swizzleFor(layout.contiguousExtent(), eb);
  if (!layout.kMajor && layout.swizzle == 0) {
    layout.kMajor = true;
    layout.swizzle = swizzleFor(layout.k, eb);
  }
  return layout;
}

/// The layout of a B operand that is the transpose of a ring's slot (shared_dot's
/// b_transposed): the same bytes, K and N exchanged and read with the other major-ness. The
/// offset of (n, k) here is that of (k, n) in `slot` (emitOffset takes the major coordinate
/// along the contiguous dimension either way), so the two views agree element for element.
inline OperandLayout transposedOperand(OperandLayout slot) {
  std::swap(slot.mn, slot.k);
  slot.kMajor = !slot.kMajor;
  return slot;
}

/// The row of blocked row `L` under the wgmma accumulator layout of `numWarps` warps
/// (BlockedEncodingAttr with wgmma = true): blocked row r * 8W + 8w + i (w = 4g + v) is row
/// 64 * ((r / 2) * W / 4 + g) + 16v + 8 * (r % 2) + i, where wgmma puts it. In bits: the
/// repetition's lowest bit, log2(8W), moves to bit 3; the warp's bits move up by one.
inline mlir::Value emitWgmmaAccumulatorRow(mlir::OpBuilder &b, mlir::Location loc, mlir::Value L,
                                           unsigned numWarps) {
  using namespace mlir;
  auto c = [&](int64_t v) { return i32Const(b, loc, v); };
  unsigned repBit = 3 + llvm::Log2_32(numWarps);
  Value lane = LLVM::AndOp::create(b, loc, L, c(7));
  Value warp = LLVM::AndOp::create(b, loc, L, c((int64_t(1) << repBit) - 8));
  Value rep0 = LLVM::AndOp::create(b, loc, LLVM::LShrOp::create(b, loc, L, c(repBit)), c(1));
  Value high = LLVM::AndOp::create(b, loc, L, c(~((int64_t(1) << (repBit + 1)) - 1)));
  Value r = LLVM::OrOp::create(b, loc, high, LLVM::ShlOp::create(b, loc, warp, c(1)));
  r = LLVM::OrOp::create(b, loc, r, LLVM::ShlOp::create(b, loc, rep0, c(3)));
  return LLVM::OrOp::create(b, loc, r, lane);
}

} // namespace kiln

#endif // KILN_LIB_CONVERSION_KILNTOLLVM_WGMMALAYOUT_H
