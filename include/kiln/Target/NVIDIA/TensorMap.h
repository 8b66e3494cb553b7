//===- TensorMap.h - TMA tensor-map geometry, without MLIR ------*- C++ -*-===//
//
// This file declares the geometry of NVIDIA's tensor memory accelerator (TMA) that the
// compiler and the runtime must agree on: the size and alignment of a CUtensorMap and the
// boxes a 2-D block of a tensor descriptor is copied in (the layout wgmma reads). The
// compiler's passes (-kiln-pipeline-dot-operands, -kiln-lower-descriptors, the TMA lowering)
// choose boxes with it; the runtime encodes the maps with the same boxes (rt::encodeTensorMap).
// It includes no LLVM, MLIR or driver header.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_NVIDIA_TENSORMAP_H
#define KILN_TARGET_NVIDIA_TENSORMAP_H

#include "kiln/kiln_c.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::nvidia {

/// Size and alignment of a CUtensorMap.
constexpr unsigned kTensorMapBytes = 128, kTensorMapAlign = 64;

/// How the tensor memory accelerator copies one 2-D block of a tensor descriptor into shared
/// memory in the layout wgmma reads (the compiler and the host encoding agree through this):
/// `copies` boxes of `dims` (innermost first: a strip of `swizzleBytes` = 32, 64 or 128 bytes
/// per row, by `dims[1]` rows), swizzled in that mode.
struct TensorMapBox {
  unsigned rank = 0;
  uint32_t dims[5] = {};
  unsigned swizzleBytes = 0;
  unsigned copies = 0;
};

/// The box of a block (outermost dimension first) of `elemBytes` elements, or nullopt when
/// TMA does not copy it: not 2-D (or of up to 5 dimensions, all but the last two 1: the box is
/// 1 along those), a row narrower than 32 bytes, or `boxRows` not a power of two dividing the
/// block's rows.
/// `boxRows` (0: as many as the block has, at most 256) is the outer extent of a box, which
/// the compiler chooses per kernel parameter (rt::Kernel::getTensorMapBoxRows).
KILN_EXPORT std::optional<TensorMapBox> getTensorMapBox(const std::vector<int64_t> &block,
                                                        unsigned elemBytes, unsigned boxRows = 0);

} // namespace kiln::nvidia

#endif // KILN_TARGET_NVIDIA_TENSORMAP_H
