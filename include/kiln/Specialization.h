//===- Specialization.h - What a launch specializes a kernel on -*- C++ -*-===//
//
// This file holds the one copy of Triton's specialization rule, which both launchers (the
// Python extension's and the C++ DSL's, kiln.h) apply to every runtime argument: an integer
// equal to 1 becomes the constant 1 in the kernel; an integer divisible by 16 and a pointer
// aligned to 16 bytes are marked so (`kiln.divisibility = 16`), which lets the axis analysis
// prove vector accesses; a parameter named in do_not_specialize is never specialized (and
// do_not_specialize_on_alignment keeps only the == 1 rule for it). Each distinct outcome is a
// distinct compiled variant. Header-only and MLIR-free.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_SPECIALIZATION_H
#define KILN_SPECIALIZATION_H

#include <cstdint>

namespace kiln {

/// What one runtime argument specializes its kernel variant on.
enum class Specialization : uint8_t {
  None,          ///< nothing known
  DivisibleBy16, ///< an integer multiple of 16, or a pointer aligned to 16 bytes
  EqualsOne,     ///< the integer 1: a constant in the kernel, no longer a parameter's value
};

/// The divisor (integers) and alignment in bytes (pointers) the rule marks.
inline constexpr uint64_t kSpecializationDivisor = 16;

/// How a launcher may specialize one parameter (Triton's do_not_specialize and
/// do_not_specialize_on_alignment).
struct SpecializationPolicy {
  bool specialize = true;  ///< false: do_not_specialize
  bool onAlignment = true; ///< false: do_not_specialize_on_alignment (== 1 still applies)
};

/// A signed integer argument (any width up to 64 bits).
constexpr Specialization specializeInt(int64_t value, SpecializationPolicy policy = {}) {
  if (!policy.specialize)
    return Specialization::None;
  if (value == 1)
    return Specialization::EqualsOne;
  if (policy.onAlignment && uint64_t(value) % kSpecializationDivisor == 0)
    return Specialization::DivisibleBy16;
  return Specialization::None;
}

/// An unsigned integer argument; `wide`: it does not fit int64 (Triton passes those as u64,
/// and never specializes them on == 1).
constexpr Specialization specializeUInt(uint64_t value, bool wide,
                                        SpecializationPolicy policy = {}) {
  if (!policy.specialize)
    return Specialization::None;
  if (!wide && value == 1)
    return Specialization::EqualsOne;
  if (policy.onAlignment && value % kSpecializationDivisor == 0)
    return Specialization::DivisibleBy16;
  return Specialization::None;
}

/// A pointer argument (a device or host address; never specialized on == 1).
constexpr Specialization specializePointer(uint64_t address, SpecializationPolicy policy = {}) {
  return policy.specialize && policy.onAlignment && address % kSpecializationDivisor == 0
             ? Specialization::DivisibleBy16
             : Specialization::None;
}

/// Triton's spelling of the outcome after a type ("*fp32:16", "i32:1", "i64").
constexpr const char *getSpecializationSuffix(Specialization s) {
  return s == Specialization::DivisibleBy16 ? ":16" : s == Specialization::EqualsOne ? ":1" : "";
}

} // namespace kiln

#endif // KILN_SPECIALIZATION_H
