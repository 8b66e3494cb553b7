//===- HostRuntime.h - The host backend's loader --------------*- C++ -*-===//
//
// This file declares how the JIT turns a cached host object into runnable code.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LIB_RUNTIME_HOSTRUNTIME_H
#define KILN_LIB_RUNTIME_HOSTRUNTIME_H

#include "kiln/Runtime.h"

#include <memory>
#include <string>

namespace kiln::rt {

/// Links `object` (an ELF object from the host backend) in process and finds `entryName`.
/// Throws Error naming `kernelName` when it cannot.
std::shared_ptr<HostCode> loadHostCode(const std::string &object, const std::string &kernelName,
                                       const std::string &entryName);

} // namespace kiln::rt

#endif // KILN_LIB_RUNTIME_HOSTRUNTIME_H
