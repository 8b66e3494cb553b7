//===- BuilderAtomic.cpp - kiln::Builder: atomics -------------------------===//
//
// This file implements tl.atomic_add/max/min/and/or/xor/xchg and tl.atomic_cas as Triton's
// semantic layer defines them: the pointer, value (and mask) broadcast together, the value
// cast to the pointee dtype, memory semantics and scope by name, the old values returned.
//
//===----------------------------------------------------------------------===//

#include "kiln/Dialect/Kiln/IR/Dialect.h"
#include "kiln/Frontend/Builder.h"

using namespace mlir;
using namespace kiln;

namespace {

std::optional<MemSemantic> parseSem(StringRef s) {
  if (s.empty() || s == "acq_rel")
    return MemSemantic::acq_rel;
  if (s == "acquire")
    return MemSemantic::acquire;
  if (s == "release")
    return MemSemantic::release;
  if (s == "relaxed")
    return MemSemantic::relaxed;
  return std::nullopt;
}

std::optional<MemScope> parseScope(StringRef s) {
  if (s.empty() || s == "gpu")
    return MemScope::gpu;
  if (s == "cta")
    return MemScope::cta;
  if (s == "sys")
    return MemScope::sys;
  return std::nullopt;
}

} // namespace

Tile kiln::Builder::atomicRMW(StringRef op, const Tile &ptr, const Tile &val,
                              std::optional<Tile> mask, StringRef sem, StringRef scope) {
  std::string name = ("atomic_" + op).str();
  requireKernel(name);
  if (mask && !mask->value)
    mask.reset();
  if (!ptr.dtype.isPointer())
    error("expected a pointer or a tile of pointers for " + name + ", found " + describe(ptr));
  DType elem = ptr.dtype.getPointee();
  if (elem.isBool())
    error("expected a pointer to a numeric dtype for " + name + ", found " + describe(ptr));
  if (elem.isFp8())
    error("expected a pointer to a dtype atomics take (integers, fp16, bf16, fp32, fp64) for " +
          name + ", found " + describe(ptr) + " (no GPU has fp8 atomics)");
  bool isFloat = elem.isFloat();
  std::optional<RMWKind> kind;
  if (op == "add")
    kind = isFloat ? RMWKind::fadd : RMWKind::add;
  else if (op == "max")
    kind = elem.isUnsigned() ? RMWKind::umax : RMWKind::max;
  else if (op == "min")
    kind = elem.isUnsigned() ? RMWKind::umin : RMWKind::min;
  else if (op == "and" || op == "or" || op == "xor") {
    if (isFloat)
      error("expected a pointer to integers for " + name + ", found " + describe(ptr));
    kind = op == "and" ? RMWKind::and_ : op == "or" ? RMWKind::or_ : RMWKind::xor_;
  } else if (op == "xchg")
    kind = RMWKind::xchg;
  if (!kind)
    error("unknown atomic operation '" + op.str() +
          "' (expected add, max, min, and, or, xor or xchg)");
  auto s = parseSem(sem);
  if (!s)
    error("expected sem 'acq_rel', 'acquire', 'release' or 'relaxed' for " + name + ", found '" +
          sem.str() + "'");
  auto sc = parseScope(scope);
  if (!sc)
    error("expected scope 'gpu', 'cta' or 'sys' for " + name + ", found '" + scope.str() + "'");
  if (mask && !mask->dtype.isBool())
    error("expected a mask of dtype int1 for " + name + ", found " + describe(*mask));

  // Triton broadcasts the pointer, the value and the mask together.
  Tile p = materialize(ptr);
  Tile v = cast(val, elem);
  std::tie(p, v) = broadcast(p, v);
  std::optional<Tile> m;
  if (mask) {
    std::tie(p, m) = broadcast(p, materialize(*mask));
    if (v.getShape() != p.getShape())
      v = stretchTo(v, p.getShape());
  }
  Type result = getSameShape(p.value.getType(), toMLIR(elem, ctx));
  auto rmw = AtomicRMWOp::create(b, loc, result, RMWKindAttr::get(&ctx, *kind),
                                 MemSemanticAttr::get(&ctx, *s), MemScopeAttr::get(&ctx, *sc),
                                 p.value, v.value, m ? m->value : Value());
  return Tile{rmw.getResult(), elem, std::nullopt};
}

Tile kiln::Builder::atomicCAS(const Tile &ptr, const Tile &cmp, const Tile &val, StringRef sem,
                              StringRef scope) {
  requireKernel("atomic_cas");
  if (!ptr.dtype.isPointer())
    error("expected a pointer or a tile of pointers for atomic_cas, found " + describe(ptr));
  DType elem = ptr.dtype.getPointee();
  if (elem.isBool())
    error("expected a pointer to a numeric dtype for atomic_cas, found " + describe(ptr));
  if (elem.isFp8())
    error("expected a pointer to a dtype atomics take (integers, fp16, bf16, fp32, fp64) for "
          "atomic_cas, found " +
          describe(ptr) + " (no GPU has fp8 atomics)");
  if (elem.getBitWidth() < 16)
    error("expected a pointer to 16-, 32- or 64-bit elements for atomic_cas (as in Triton), "
          "found " +
          describe(ptr));
  auto s = parseSem(sem);
  if (!s)
    error("expected sem 'acq_rel', 'acquire', 'release' or 'relaxed' for atomic_cas, found '" +
          sem.str() + "'");
  auto sc = parseScope(scope);
  if (!sc)
    error("expected scope 'gpu', 'cta' or 'sys' for atomic_cas, found '" + scope.str() + "'");
  Tile p = materialize(ptr);
  Tile c = cast(cmp, elem), v = cast(val, elem);
  std::tie(p, c) = broadcast(p, c);
  std::tie(p, v) = broadcast(p, v);
  if (c.getShape() != p.getShape())
    c = stretchTo(c, p.getShape());
  Type result = getSameShape(p.value.getType(), toMLIR(elem, ctx));
  auto cas = AtomicCASOp::create(b, loc, result, MemSemanticAttr::get(&ctx, *s),
                                 MemScopeAttr::get(&ctx, *sc), p.value, c.value, v.value);
  return Tile{cas.getResult(), elem, std::nullopt};
}
