//===- LangTrace.h - What the C++ DSL's sources share about traces -*- C++ -*-===//
//
// Internal to lib/Lang: the shared MLIR context, the kernel being traced (its Builder, the
// tiles its Values point to, its make_tensor_descriptor maps), the conversions between
// Values/Operands and Builder tiles (detail::Access, Value's friend), and enter(), which
// every DSL call starts with.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_LANG_LANGTRACE_H
#define KILN_LIB_LANG_LANGTRACE_H

#include "kiln/Compiler.h"
#include "kiln/Frontend/Builder.h"
#include "kiln/kiln.h"

#include "mlir/IR/MLIRContext.h"

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln::lang::internal {
using kiln::Builder;
using kiln::Tile;

/// What tracing and in-process compilation share: one MLIR context, used under one lock.
/// Never destroyed, so kernels in static objects may be traced or compiled at any time.
struct Shared {
  std::recursive_mutex mutex;
  /// Traced modules live in it (their KernelSources share it); used only under `mutex`.
  std::shared_ptr<mlir::MLIRContext> ctx =
      std::make_shared<mlir::MLIRContext>(mlir::MLIRContext::Threading::DISABLED);
  Shared() { kiln::initializeContext(*ctx); }
};
/// The one Shared (never destroyed).
Shared &shared();

/// One kernel being traced: its Builder and the tiles its Values point to.
struct Trace {
  Trace(uint64_t id, std::string kernel, Trace *outer)
      : id(id), kernel(std::move(kernel)), builder(*shared().ctx), outer(outer) {}
  uint64_t id;
  std::string kernel;
  Builder builder;
  /// A deque: Values keep pointers into it while it grows.
  std::deque<Tile> tiles;
  Trace *outer;
};

/// The kernel being traced on this thread (null outside a kernel body).
extern thread_local Trace *currentTrace;
/// Whether the variant being traced is for debug launches (device_assert kept), as the
/// Python front end traces with its debug flag.
extern thread_local bool tracingDebug;

/// The trace a DSL call at `loc` builds into, with the Builder's location set to `loc`.
Trace &enter(const Loc &loc, const char *what);
} // namespace kiln::lang::internal

namespace kiln::lang::detail {
using internal::currentTrace;
using internal::Trace;
using kiln::Builder;
using kiln::Tile;

/// Converts between Values/Operands and Builder tiles of the current trace.
struct Access {
  static Value wrap(Trace &t, const Tile &tile) {
    t.tiles.push_back(tile);
    Value v;
    v.tile = &t.tiles.back();
    v.trace = t.id;
    return v;
  }
  static const Tile &unwrap(Trace &t, const Value &v) {
    if (!v.tile)
      t.builder.error("expected a value, found an empty kiln::lang::Value (assign it first)");
    if (v.trace != t.id)
      t.builder.error("expected a value of this kernel, found one from another trace (a "
                      "Value lives only while its kernel is traced)");
    return *v.tile;
  }
  /// The Builder tile of an operand; a number becomes a weak literal.
  static Tile tile(Trace &t, const Operand &o) {
    Builder &b = t.builder;
    switch (o.kind) {
    case Operand::Kind::Value:
      return unwrap(t, o.value);
    case Operand::Kind::Int:
      return b.intConst(o.i);
    case Operand::Kind::UInt:
      return o.u <= uint64_t(INT64_MAX) ? b.intConst(int64_t(o.u)) : b.uintConst(o.u);
    case Operand::Kind::Float:
      return b.floatConst(o.f);
    case Operand::Kind::Bool:
      return b.boolConst(o.b);
    case Operand::Kind::None:
      break;
    }
    b.error("expected a value, found None_");
  }
  /// An optional operand (None_ leaves it out).
  static std::optional<Tile> optional(Trace &t, const Operand &o) {
    if (o.isNone())
      return std::nullopt;
    return tile(t, o);
  }
  /// The tile of a scalar on the current trace (for Value's own methods).
  static const Tile &self(const Value &v, const char *what) {
    if (!currentTrace)
      throw CompileError("", "<unknown>", 0, 0,
                         std::string("kiln::lang::Value::") + what +
                             " called outside a kernel body");
    return unwrap(*currentTrace, v);
  }
  /// The dtype of an operand without building anything (numbers: their literal's kind).
  static std::optional<kiln::DType> dtypeOf(Trace &t, const Operand &o) {
    switch (o.kind) {
    case Operand::Kind::Value:
      return unwrap(t, o.value).dtype;
    case Operand::Kind::Int:
    case Operand::Kind::UInt:
      return kiln::DType::int32();
    case Operand::Kind::Bool:
      return kiln::DType::int1();
    case Operand::Kind::Float:
      return kiln::DType::fp32();
    case Operand::Kind::None:
      break;
    }
    return std::nullopt;
  }
};
} // namespace kiln::lang::detail

namespace kiln::lang::internal {
using detail::Access;

/// The Builder tiles of values or operands (numbers become weak literals).
template <class Range> std::vector<Tile> tilesOf(Trace &t, const Range &operands) {
  std::vector<Tile> tiles;
  for (const auto &o : operands)
    tiles.push_back(Access::tile(t, o));
  return tiles;
}

/// Values of `tiles` on trace `t`.
Values wrapAll(Trace &t, llvm::ArrayRef<Tile> tiles);
} // namespace kiln::lang::internal

#endif // KILN_LIB_LANG_LANGTRACE_H
