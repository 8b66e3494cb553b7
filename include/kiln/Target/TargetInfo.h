//===- TargetInfo.h - Target hooks of the GPU lowering ----------*- C++ -*-===//
//
// This file declares the hooks that keep the target-neutral tile lowering apart from NVIDIA
// specifics: thread and program ids and predicated global memory access.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TARGET_TARGETINFO_H
#define KILN_TARGET_TARGETINFO_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"

namespace kiln {

/// Modifiers of one global access, as PTX spells them (empty when absent).
struct AccessModifiers {
  llvm::StringRef cache;    ///< "ca", "cg", "cs", "cv", "wb", "wt" or ""
  llvm::StringRef eviction; ///< "evict_first", "evict_last" or ""
  bool isVolatile = false;
};

/// What the tile lowering needs from a GPU target.
class TargetInfo {
public:
  virtual ~TargetInfo() = default;
  /// Program id / number of programs along grid axis 0..2, as i32.
  virtual mlir::Value getProgramId(mlir::OpBuilder &b, mlir::Location loc, unsigned axis) const = 0;
  virtual mlir::Value getNumPrograms(mlir::OpBuilder &b, mlir::Location loc,
                                     unsigned axis) const = 0;
  /// Index of the thread inside its program, as i32.
  virtual mlir::Value getThreadId(mlir::OpBuilder &b, mlir::Location loc) const = 0;
  /// Loads `numWords` words of `wordBits` from `ptr` where `pred` (may be null) holds; lanes
  /// where it does not keep `other` (words, may be empty: undefined). Returns the words.
  virtual llvm::SmallVector<mlir::Value> emitLoad(mlir::OpBuilder &b, mlir::Location loc,
                                                  mlir::Value ptr, mlir::Value pred,
                                                  unsigned wordBits, unsigned numWords,
                                                  mlir::ValueRange other,
                                                  const AccessModifiers &mods) const = 0;
  /// Stores `words` (each of `wordBits`) to `ptr` where `pred` (may be null) holds.
  virtual void emitStore(mlir::OpBuilder &b, mlir::Location loc, mlir::Value ptr, mlir::Value pred,
                         unsigned wordBits, mlir::ValueRange words,
                         const AccessModifiers &mods) const = 0;
  /// The value `v` (32 bits or fewer, or 64 bits in two halves) of the lane whose id is this
  /// lane's xor `laneMask`, within the warp (all lanes take part).
  virtual mlir::Value shuffleXor(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                                 unsigned laneMask) const = 0;
  /// Barrier across all threads of the program.
  virtual void barrier(mlir::OpBuilder &b, mlir::Location loc) const = 0;
  /// Fast 2^x for f32 (the `exp`/`exp2` fast path).
  virtual mlir::Value emitExp2Approx(mlir::OpBuilder &b, mlir::Location loc,
                                     mlir::Value x) const = 0;
};

/// The NVIDIA (PTX) implementation.
const TargetInfo &getNVIDIATargetInfo();

} // namespace kiln

#endif // KILN_TARGET_TARGETINFO_H
