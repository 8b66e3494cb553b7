//===- HostFaultGuard.cpp - Memory faults of host kernels become errors ---===//
//
// This file implements how the host backend survives a kernel that touches memory it does not
// own: while a thread runs a kernel's programs it is registered in a fixed table; a SIGSEGV,
// SIGBUS or SIGFPE handler that finds the faulting thread there, running kernel code, jumps back to
// the launch (siglongjmp), which reports the fault as kiln::rt::Error. Any other fault (Kiln's own
// callbacks, Python, another library, a thread that is not running a kernel) goes to the
// handler installed before Kiln's, or to the default action: it is never swallowed.
//
// The handler touches no thread-local storage and allocates nothing: it finds its thread by
// pthread_self() in the table (a thread-local variable of a dlopen'ed library may be allocated
// on first use, with malloc, which a signal handler must not call). The thread's kernel code
// holds no locks and no C++ objects with destructors, so leaving it by siglongjmp is safe.
//
//===----------------------------------------------------------------------===//

#include "HostRuntime.h"

#include <atomic>
#include <csetjmp>
#include <csignal>
#include <memory>
#include <mutex>
#include <pthread.h>

using namespace kiln::rt;

namespace {

/// One thread running kernel code: where to jump back to and what the fault was.
struct Scope {
  sigjmp_buf jump;
  volatile sig_atomic_t active = 0; ///< 1 while the thread runs the kernel's own code
  HostFault fault;
};

/// Threads that may be running kernel code, found by the handler without thread-local storage.
/// More threads than slots (never on today's machines) run unguarded.
constexpr size_t kSlots = 1024;
struct Slot {
  std::atomic<pthread_t> owner{0};
  std::atomic<Scope *> scope{nullptr};
};
Slot slots[kSlots];

/// The signals a kernel's code may raise: memory faults and arithmetic traps (an integer
/// division the compiler did not guard), and the handlers installed before Kiln's, which get
/// the faults that are not a kernel's.
constexpr int kSignals[3] = {SIGSEGV, SIGBUS, SIGFPE};
struct sigaction previous[3];
int signalIndex(int sig) { return sig == SIGBUS ? 1 : sig == SIGFPE ? 2 : 0; }
std::mutex installMutex;

/// The scope of the calling thread, for the runtime's callbacks (ordinary code, not the
/// handler, may use thread-local storage).
thread_local Scope *currentScope = nullptr;

Scope *findScope(pthread_t self) {
  for (Slot &s : slots)
    if (s.owner.load(std::memory_order_acquire) == self)
      return s.scope.load(std::memory_order_acquire);
  return nullptr;
}

void faultHandler(int sig, siginfo_t *info, void *uctx) {
  Scope *scope = findScope(pthread_self());
  if (scope && scope->active) {
    scope->active = 0;
    scope->fault.signal = sig;
    scope->fault.address = uint64_t(reinterpret_cast<uintptr_t>(info->si_addr));
    siglongjmp(scope->jump, 1);
  }
  // Not a kernel's fault: whoever handled it before Kiln (Python's faulthandler, a debugger's
  // runtime, ...), else the default action when the faulting instruction runs again.
  const struct sigaction &prev = previous[signalIndex(sig)];
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(sig, info, uctx);
    return;
  }
  if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL && prev.sa_handler != SIG_IGN) {
    prev.sa_handler(sig);
    return;
  }
  signal(sig, SIG_DFL);
}

/// Installs Kiln's handler for SIGSEGV, SIGBUS and SIGFPE unless it is the one installed now
/// (someone may have installed theirs since: it becomes the one faults are passed on to).
void installHandlers() {
  std::lock_guard<std::mutex> lock(installMutex);
  for (int i = 0; i < 3; ++i) {
    struct sigaction now;
    if (sigaction(kSignals[i], nullptr, &now) != 0)
      continue;
    if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == faultHandler)
      continue;
    struct sigaction ours = {};
    ours.sa_sigaction = faultHandler;
    ours.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&ours.sa_mask);
    struct sigaction old;
    if (sigaction(kSignals[i], &ours, &old) == 0)
      previous[i] = old;
  }
}

/// The size of the alternate signal stack a kernel thread gets: the handler runs there, so a
/// kernel that overflows its stack is reported too.
constexpr size_t kAltStackBytes = 64 * 1024;

} // namespace

HostFaultScope::HostFaultScope() {
  installHandlers();
  scope = new Scope();
  pthread_t self = pthread_self();
  for (size_t i = 0; i < kSlots; ++i) {
    pthread_t expected = 0;
    if (slots[i].owner.compare_exchange_strong(expected, self, std::memory_order_acq_rel)) {
      slots[i].scope.store(static_cast<Scope *>(scope), std::memory_order_release);
      slot = int(i);
      break;
    }
  }
  currentScope = slot >= 0 ? static_cast<Scope *>(scope) : nullptr;
  stack_t old;
  if (sigaltstack(nullptr, &old) == 0 && (old.ss_flags & SS_DISABLE)) {
    altStack = new char[kAltStackBytes];
    stack_t s = {};
    s.ss_sp = altStack;
    s.ss_size = kAltStackBytes;
    if (sigaltstack(&s, nullptr) != 0) {
      delete[] static_cast<char *>(altStack);
      altStack = nullptr;
    }
  }
}

HostFaultScope::~HostFaultScope() {
  currentScope = nullptr;
  if (slot >= 0) {
    slots[slot].scope.store(nullptr, std::memory_order_release);
    slots[slot].owner.store(0, std::memory_order_release);
  }
  if (altStack) {
    stack_t off = {};
    off.ss_flags = SS_DISABLE;
    sigaltstack(&off, nullptr);
    delete[] static_cast<char *>(altStack);
  }
  delete static_cast<Scope *>(scope);
}

bool HostFaultScope::run(HostEntry entry, void **params, const int32_t *grid, int64_t begin,
                         int64_t end, void *ctx, HostFault &fault) {
  auto *s = static_cast<Scope *>(scope);
  if (slot < 0) { // no slot: unguarded, as before
    entry(params, grid, begin, end, ctx);
    return true;
  }
  if (sigsetjmp(s->jump, /*savemask=*/1)) {
    fault = s->fault;
    return false;
  }
  s->active = 1;
  entry(params, grid, begin, end, ctx);
  s->active = 0;
  return true;
}

void kiln::rt::hostAbortProgram() {
  Scope *s = currentScope;
  if (!s)
    return;
  s->active = 0;
  s->fault.signal = kHostAborted;
  s->fault.address = 0;
  siglongjmp(s->jump, 1);
}

HostFaultPause::HostFaultPause() {
  if (Scope *s = currentScope) {
    wasActive = s->active;
    s->active = 0;
  }
}

HostFaultPause::~HostFaultPause() {
  if (Scope *s = currentScope)
    s->active = wasActive;
}
