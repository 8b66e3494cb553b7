//===- TensorMap.cpp - TMA tensor-map geometry ----------------------------===//
//
// This file implements kiln::nvidia::getTensorMapBox: the boxes a 2-D block is copied in.
//
//===----------------------------------------------------------------------===//

#include "kiln/Target/NVIDIA/TensorMap.h"

#include <algorithm>

using namespace kiln::nvidia;

std::optional<TensorMapBox> kiln::nvidia::getTensorMapBox(const std::vector<int64_t> &block,
                                                          unsigned elemBytes, unsigned boxRows) {
  // 2-D blocks (the operands of dots), or blocks of up to 5 dimensions whose outer ones are
  // 1 (an expert's [1, N, K] of a [E, N, K] weight tensor): the box is 1 along those.
  const size_t rank = block.size();
  if (rank < 2 || rank > 5 || !elemBytes ||
      std::any_of(block.begin(), block.end() - 2, [](int64_t d) { return d != 1; }))
    return std::nullopt;
  TensorMapBox box;
  box.rank = unsigned(rank);
  for (size_t i = 2; i < rank; ++i)
    box.dims[i] = 1;
  int64_t rows = block[rank - 2], inner = block[rank - 1], innerBytes = inner * elemBytes;
  // Shared memory in wgmma's canonical layout: the block in column strips of S bytes (the
  // swizzle), a strip narrower than 32 bytes is not swizzled. A box is `boxRows` rows of one
  // strip (the compiler copies dot operands in whole blocks, up to the TMA's 256 rows).
  box.swizzleBytes = unsigned(std::min<int64_t>(128, innerBytes));
  if (box.swizzleBytes < 32)
    return std::nullopt;
  int64_t r = boxRows ? int64_t(boxRows) : std::min<int64_t>(256, rows);
  if (r > 256 || r > rows || rows % r || (r & (r - 1)))
    return std::nullopt;
  box.dims[0] = uint32_t(box.swizzleBytes / elemBytes);
  box.dims[1] = uint32_t(r);
  box.copies = unsigned((inner / box.dims[0]) * (rows / box.dims[1]));
  return box;
}
