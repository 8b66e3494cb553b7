//===- HostRuntime.h - The host backend's loader --------------*- C++ -*-===//
//
// This file declares how the JIT turns a cached host object into runnable code.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_RUNTIME_HOSTRUNTIME_H
#define KILN_LIB_RUNTIME_HOSTRUNTIME_H

#include "kiln/Runtime.h"

#include <cstdint>
#include <memory>
#include <string>

namespace kiln::rt {

/// A host kernel's entry: runs programs [begin, end) of `grid` (the ABI in
/// kiln/Conversion/KilnToHost.h).
/// void entry(void **params, const int32_t *grid, int64_t begin, int64_t end, void *ctx)
using HostEntry = void (*)(void **, const int32_t *, int64_t, int64_t, void *);

/// A memory fault raised by a kernel's code: the signal and the address it touched.
struct HostFault {
  int signal = 0; ///< the signal, or kHostAborted
  uint64_t address = 0;
};

/// HostFault::signal of a program that the runtime stopped (hostAbortProgram) after it had
/// reported the program's error: an out-of-bounds access or a failed device_assert.
constexpr int kHostAborted = -1;

/// Leaves the calling thread's kernel code at once, as a fault would (HostFaultScope::run
/// returns false with signal kHostAborted), so that a program whose error is reported does not
/// go on (a loop over an unmasked range may run for hours). Returns only on a thread that runs
/// no guarded kernel. Called from the runtime's callbacks once no C++ object of theirs is
/// alive.
void hostAbortProgram();

/// While alive, the calling thread runs kernel code under a fault guard (HostFaultGuard.cpp):
/// a SIGSEGV, SIGBUS or SIGFPE raised by the kernel's own code ends run() with `fault` set instead
/// of killing the process; faults anywhere else still go to the handler installed before Kiln's.
/// The thread also gets an alternate signal stack if it has none (a stack overflow is a fault
/// too). One per thread at a time.
class HostFaultScope {
public:
  HostFaultScope();
  ~HostFaultScope();
  HostFaultScope(const HostFaultScope &) = delete;
  HostFaultScope &operator=(const HostFaultScope &) = delete;
  /// entry(params, grid, begin, end, ctx); false (and `fault`) when the kernel faulted.
  bool run(HostEntry entry, void **params, const int32_t *grid, int64_t begin, int64_t end,
           void *ctx, HostFault &fault);

private:
  void *scope = nullptr;
  void *altStack = nullptr;
  int slot = -1;
};

/// While alive (inside the runtime's callbacks from kernel code: bounds checks, prints,
/// asserts), a fault on this thread is Kiln's own, not the kernel's: it is not caught.
class HostFaultPause {
public:
  HostFaultPause();
  ~HostFaultPause();

private:
  int wasActive = 0;
};

/// Links `object` (an ELF object from the host backend) in process and finds `entryName`.
/// Throws Error naming `kernelName` when it cannot.
std::shared_ptr<HostCode> loadHostCode(const std::string &object, const std::string &kernelName,
                                       const std::string &entryName);

} // namespace kiln::rt

#endif // KILN_LIB_RUNTIME_HOSTRUNTIME_H
