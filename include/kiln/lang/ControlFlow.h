//===- kiln/lang/ControlFlow.h - Loops and branches -------------*- C++ -*-===//
//
// kiln::lang's structured control flow: for_range, if_, while_ (traced once; loop-carried
// values keep their dtypes).
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LANG_CONTROLFLOW_H
#define KILN_LANG_CONTROLFLOW_H

#include "kiln/lang/Value.h"

#pragma GCC visibility push(default)

namespace kiln::lang {
//===----------------------------------------------------------------------===//
// Control flow
//===----------------------------------------------------------------------===//

namespace detail {
/// A non-owning reference to a callable (no allocation), valid while the callable lives.
template <class Sig> class FunctionRef;
template <class R, class... A> class FunctionRef<R(A...)> {
public:
  template <class F, std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef>, int> = 0>
  FunctionRef(F &&f)
      : object(const_cast<void *>(static_cast<const void *>(std::addressof(f)))),
        callback([](void *o, A... a) -> R {
          return (*static_cast<std::remove_reference_t<F> *>(o))(std::forward<A>(a)...);
        }) {}
  R operator()(A... a) const { return callback(object, std::forward<A>(a)...); }

private:
  void *object;
  R (*callback)(void *, A...);
};

using Yield = std::vector<Operand>;
Values forRange(const Operand &lo, const Operand &hi, const Operand &step,
                const std::vector<Operand> &inits,
                FunctionRef<Yield(const Value &, const Values &)> body, const Loc &loc,
                bool flatten = false, bool warpSpecialize = false);
Values ifThenElse(const Operand &cond, FunctionRef<Yield()> thenFn,
                  const FunctionRef<Yield()> *elseFn, const Loc &loc);
Values whileLoop(const std::vector<Operand> &inits, FunctionRef<Operand(const Values &)> cond,
                 FunctionRef<Yield(const Values &)> body, const Loc &loc);

/// What a region body returned, as yielded operands: nothing, one value, or several.
template <class R> Yield toYield(R &&r) {
  using T = std::decay_t<R>;
  if constexpr (std::is_same_v<T, Values> || std::is_same_v<T, std::vector<Operand>>)
    return Yield(r.begin(), r.end());
  else
    return Yield{Operand(std::forward<R>(r))};
}
template <class F, class... A> Yield invokeToYield(F &f, A &&...a) {
  if constexpr (std::is_void_v<std::invoke_result_t<F &, A...>>) {
    f(std::forward<A>(a)...);
    return {};
  } else {
    return toYield(f(std::forward<A>(a)...));
  }
}
template <class R> constexpr bool isMulti() {
  return std::is_same_v<std::decay_t<R>, Values> ||
         std::is_same_v<std::decay_t<R>, std::vector<Operand>>;
}
} // namespace detail

/// `for i in range(lo, hi, step): body(i)`, as scf.for; no loop-carried values.
template <class Body, std::enable_if_t<std::is_invocable_v<Body &, Value>, int> = 0>
void for_range(const Operand &lo, const Operand &hi, const Operand &step, Body &&body,
               Loc loc = {}) {
  detail::forRange(
      lo, hi, step, {},
      [&](const Value &iv, const Values &) { return detail::invokeToYield(body, iv); }, loc);
}
/// for_range(lo, hi, body): step 1.
template <class Body, std::enable_if_t<std::is_invocable_v<Body &, Value>, int> = 0>
void for_range(const Operand &lo, const Operand &hi, Body &&body, Loc loc = {}) {
  for_range(lo, hi, 1, std::forward<Body>(body), loc);
}
/// `for i in tl.range(lo, hi, step, flatten=True): body(i)`: on the GPU the loop is fused with
/// the one for_range in its body (a persistent kernel's tile loop and K loop), so the
/// operand copies of the next outer iteration overlap this one's end (see docs/language.md).
template <class Body, std::enable_if_t<std::is_invocable_v<Body &, Value>, int> = 0>
void for_range_flat(const Operand &lo, const Operand &hi, const Operand &step, Body &&body,
                    Loc loc = {}) {
  detail::forRange(
      lo, hi, step, {},
      [&](const Value &iv, const Values &) { return detail::invokeToYield(body, iv); }, loc,
      /*flatten=*/true);
}
/// `for i in tl.range(lo, hi, step, warp_specialize=True)` with loop-carried values: on
/// sm_90a a loop whose dots the TMA feeds through rings with empty barriers gets a producer
/// warpgroup that issues the copies while the others compute (see docs/language.md);
/// elsewhere, a plain loop. Returns the final values.
template <class Body, std::enable_if_t<std::is_invocable_v<Body &, Value, Values>, int> = 0>
Values for_range_ws(const Operand &lo, const Operand &hi, const Operand &step, const Values &inits,
                    Body &&body, Loc loc = {}) {
  return detail::forRange(
      lo, hi, step, std::vector<Operand>(inits.begin(), inits.end()),
      [&](const Value &iv, const Values &c) { return detail::invokeToYield(body, iv, c); }, loc,
      /*flatten=*/false, /*warpSpecialize=*/true);
}
/// One loop-carried value: `acc = init; for i in range(lo, hi, step): acc = body(i, acc)`;
/// returns the final acc. The body must keep acc's dtype and shape.
template <class Body, std::enable_if_t<std::is_invocable_v<Body &, Value, Value>, int> = 0>
Value for_range(const Operand &lo, const Operand &hi, const Operand &step, const Operand &init,
                Body &&body, Loc loc = {}) {
  return detail::forRange(
      lo, hi, step, {init},
      [&](const Value &iv, const Values &c) { return detail::invokeToYield(body, iv, c[0]); },
      loc)[0];
}
/// Several loop-carried values: body(i, values) returns the next values.
template <class Body, std::enable_if_t<std::is_invocable_v<Body &, Value, Values>, int> = 0>
Values for_range(const Operand &lo, const Operand &hi, const Operand &step, const Values &inits,
                 Body &&body, Loc loc = {}) {
  return detail::forRange(
      lo, hi, step, std::vector<Operand>(inits.begin(), inits.end()),
      [&](const Value &iv, const Values &c) { return detail::invokeToYield(body, iv, c); }, loc);
}

/// `if cond: then()`, as scf.if with no results.
template <class Then, std::enable_if_t<std::is_invocable_v<Then &>, int> = 0>
void if_(const Operand &cond, Then &&thenFn, Loc loc = {}) {
  static_assert(std::is_void_v<std::invoke_result_t<Then &>>,
                "an if_ without an else branch yields nothing: give it an else branch");
  detail::ifThenElse(
      cond, [&] { return detail::invokeToYield(thenFn); }, nullptr, loc);
}
/// `x = then() if cond else else_()`: both branches return nothing, a Value (or number), or
/// Values, of the same dtypes and shapes; returns void, a Value or Values accordingly.
template <class Then, class Else,
          std::enable_if_t<std::is_invocable_v<Then &> && std::is_invocable_v<Else &>, int> = 0>
auto if_(const Operand &cond, Then &&thenFn, Else &&elseFn, Loc loc = {}) {
  using R = std::invoke_result_t<Then &>;
  static_assert(std::is_void_v<R> == std::is_void_v<std::invoke_result_t<Else &>> &&
                    detail::isMulti<R>() == detail::isMulti<std::invoke_result_t<Else &>>(),
                "both branches of if_ must return nothing, one value, or Values");
  auto thenYield = [&] { return detail::invokeToYield(thenFn); };
  auto elseYield = [&] { return detail::invokeToYield(elseFn); };
  detail::FunctionRef<detail::Yield()> elseRef(elseYield);
  Values results = detail::ifThenElse(cond, thenYield, &elseRef, loc);
  if constexpr (std::is_void_v<R>)
    return;
  else if constexpr (detail::isMulti<R>())
    return results;
  else
    return results[0];
}

/// `while cond(v): v = body(v)` with one value; returns the final value.
template <class Cond, class Body,
          std::enable_if_t<std::is_invocable_v<Cond &, Value> && std::is_invocable_v<Body &, Value>,
                           int> = 0>
Value while_(const Operand &init, Cond &&cond, Body &&body, Loc loc = {}) {
  return detail::whileLoop(
      {init}, [&](const Values &v) { return Operand(cond(v[0])); },
      [&](const Values &v) { return detail::invokeToYield(body, v[0]); }, loc)[0];
}
/// `while cond(values): values = body(values)`; returns the final values.
template <class Cond, class Body,
          std::enable_if_t<
              std::is_invocable_v<Cond &, Values> && std::is_invocable_v<Body &, Values>, int> = 0>
Values while_(const Values &inits, Cond &&cond, Body &&body, Loc loc = {}) {
  return detail::whileLoop(
      std::vector<Operand>(inits.begin(), inits.end()),
      [&](const Values &v) { return Operand(cond(v)); },
      [&](const Values &v) { return detail::invokeToYield(body, v); }, loc);
}

} // namespace kiln::lang

#pragma GCC visibility pop

#endif // KILN_LANG_CONTROLFLOW_H
