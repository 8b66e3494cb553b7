//===- kiln/lang/Kernel.h - Kernels, launches and compilation ---*- C++ -*-===//
//
// kiln::lang's kernels: Launch/grid, Target, the specialization key of a launch
// (kiln/Specialization.h), the variant cache, kernel(name, lambda), launching and compiling.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_LANG_KERNEL_H
#define KILN_LANG_KERNEL_H

#include "kiln/lang/ControlFlow.h"
#include "kiln/lang/Value.h"

#pragma GCC visibility push(default)

namespace kiln::lang {
//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// How to launch: the grid (programs along x, y, z), the warps per program, the software
/// pipeline depth, an optional cap on registers per thread and the device.
struct Launch {
  rt::Grid grid;
  unsigned warps = 4;
  unsigned stages = 3; ///< Triton's num_stages (kiln::CompileOptions::numStages)
  unsigned regs = 0;   ///< 0: no cap
  int dev = -1;        ///< -1: the device of the DeviceBuffer arguments, else the current one
  bool dbg = false;    ///< device_assert checked (Launch::debug)
  /// Triton's `num_warps=`: 1, 2, 4, 8, 16 or 32.
  Launch &num_warps(unsigned n) {
    warps = n;
    return *this;
  }
  /// Triton's `num_stages=`: slots of the shared rings that feed a loop's dots (2..16; 0 or
  /// 1: none), as CompileOptions::numStages; default 3, as Triton's.
  Launch &num_stages(unsigned n) {
    stages = n;
    return *this;
  }
  /// Triton's `maxnreg=`: at most n registers per thread (16..255; ptxas's .maxnreg), on the
  /// GPU; the host backend ignores it.
  Launch &maxnreg(unsigned n) {
    regs = n;
    return *this;
  }
  /// Triton's debug mode: device_assert is checked (else compiled out), and on the GPU int32
  /// address arithmetic is checked for wraps (CompileOptions::debug). A variant of its own.
  Launch &debug(bool on = true) {
    dbg = on;
    return *this;
  }
  /// The GPU to run on (its ordinal). Without it, a launch runs on the device of its
  /// rt::DeviceBuffer arguments, else on rt::currentDevice(); the stream must belong to that
  /// device. The kernel is loaded once per device; the current device is left as it was.
  Launch &device(int ordinal) {
    dev = ordinal;
    return *this;
  }
};
/// grid(x, y, z): a launch of x * y * z programs with 4 warps each. A zero dimension launches
/// nothing; a negative one, or one above 2^31 - 1, throws rt::Error.
Launch grid(int64_t x, int64_t y = 1, int64_t z = 1);

/// What compile() targets (no GPU needed).
struct Target {
  std::string arch = "sm_90";
  unsigned num_warps = 4;
  unsigned num_stages = 3; ///< Triton's num_stages (CompileOptions::numStages)
  unsigned maxnreg = 0;    ///< a cap on registers per thread (16..255), 0: none
  /// On sm_90a: the loads of matmul loops' dot operands through pointer tiles (and their C
  /// stores) become TMA copies of tensor maps the compiler appends to the parameters, as a
  /// launch on an sm_90a GPU runs them (Compiled::tensor_maps).
  bool tma_pointer_tiles = false;
  bool debug = false; ///< device_assert checked (Launch::debug)
};
/// One specialization compiled ahead of time: the traced MLIR (with the C++ locations) and PTX.
struct Compiled {
  std::string name;
  std::string mlir;
  std::string ptx;
  /// The recipes of the tensor maps appended to the kernel's parameters (Target::
  /// tma_pointer_tiles; kiln::PointerTileMaps), for rt::encodeRecipeTensorMap.
  std::vector<std::vector<int64_t>> tensor_maps;
};

/// The process-wide JIT that launches use, created on first use: the host backend when
/// rt::useHostBackend() ($KILN_BACKEND=cpu, or no GPU), else every GPU, each kernel compiled
/// for each device's architecture and loaded per device. Pointer arguments are
/// then host addresses (rt::Buffer gives memory for either). Its caches are the runtime's:
/// memory, then $KILN_CACHE_DIR.
rt::JIT &jit();

namespace detail {
class KernelState;
/// A runtime argument of one specialization: its dtype and what its value specializes.
struct ArgSpec {
  DType dtype;
  Specialization spec;
};
std::shared_ptr<KernelState> newKernelState(std::string name, const Loc &loc);
const std::string &kernelName(const KernelState &state);
/// A loaded kernel, and the recipes of the tensor maps the compiler appended to its
/// parameters (on sm_90a, pointer tiles copied by the TMA; kiln::addPointerTileMaps), which
/// each launch encodes from its arguments; null: none.
struct LoadedKernel {
  const rt::Kernel *kernel = nullptr;
  const std::vector<std::vector<int64_t>> *maps = nullptr;
};
/// The loaded kernel of the variant `key` launched as `launch` (its device -1: the current
/// one); on the first sight of `key`, `traceVariant` returns its module. The hot path: a
/// lock, a key compare, a pointer read.
LoadedKernel getKernel(KernelState &state, const uint64_t *key, size_t keySize,
                       const Launch &launch, int device, size_t numRuntimeArgs,
                       FunctionRef<KernelSource()> traceVariant);
/// Launches `k`, whose maps are not null: its `numRuntimeArgs` argument words, then each
/// tensor map encoded from them.
void launchWithMaps(const KernelState &state, const LoadedKernel &k, rt::Grid grid,
                    rt::CUstream stream, const uint64_t *words, size_t numRuntimeArgs);
/// The MLIR text of the variant `key`, traced on first sight.
const std::string &getMLIR(KernelState &state, const uint64_t *key, size_t keySize,
                           FunctionRef<KernelSource()> traceVariant);
/// Traces `body` (called with the runtime arguments' values) into a kernel module.
KernelSource traceKernel(const KernelState &state, const std::vector<ArgSpec> &args,
                         FunctionRef<void(const Values &)> body);
/// PTX of the variant `key` for `target`, compiled in process, and its tensor maps' recipes.
std::pair<std::string, std::vector<std::vector<int64_t>>>
compilePTX(KernelState &state, const uint64_t *key, size_t keySize, const Target &target,
           FunctionRef<KernelSource()> traceVariant);
/// Throws rt::Error: "kernel 'k' argument 3: <message>".
[[noreturn]] void badArgument(const KernelState &state, size_t index, const std::string &message);
/// Throws rt::Error: the launch's .device() differs from its buffers' device.
[[noreturn]] void badDevice(const KernelState &state, int launchDevice, int bufferDevice);

/// True when the host integer `v` is representable as `To`.
template <class To, class From> constexpr bool fits(From v) {
  if constexpr (std::is_signed_v<From>) {
    if (v < 0) {
      if constexpr (std::is_unsigned_v<To>)
        return false;
      else
        return int64_t(v) >= int64_t(std::numeric_limits<To>::min());
    }
  }
  return uint64_t(v) <= uint64_t(std::numeric_limits<To>::max());
}

template <class T> struct ParamTraits {
  static_assert(alwaysFalse<T>, "a kernel parameter must be Ptr<E>, a scalar (I32, I64, U32, "
                                "U64, F32, F64, Scalar<E>) or Const<T>");
};
template <class E> struct ParamTraits<Ptr<E>> {
  static constexpr bool runtime = true;
  static constexpr DType dtype() { return DType::pointerTo(E::dtype); }
  template <class A>
  static uint64_t toBits(const A &a, Specialization &spec, const KernelState &, size_t) {
    uint64_t bits;
    if constexpr (std::is_same_v<A, rt::DeviceBuffer>) {
      bits = a.get();
    } else if constexpr (std::is_same_v<A, rt::CUdeviceptr> || std::is_same_v<A, std::nullptr_t>) {
      bits = uint64_t(a);
    } else if constexpr (std::is_pointer_v<A>) {
      using Pointee = std::remove_cv_t<std::remove_pointer_t<A>>;
      static_assert(std::is_void_v<Pointee> || std::is_same_v<Pointee, typename E::host>,
                    "a typed device pointer passed to Ptr<E> must point to E's element type");
      bits = uint64_t(reinterpret_cast<uintptr_t>(a));
    } else {
      static_assert(alwaysFalse<A>, "a Ptr<E> parameter takes a rt::DeviceBuffer, a "
                                    "rt::CUdeviceptr or a device pointer");
    }
    spec = specializePointer(bits);
    return bits;
  }
  static Ptr<E> make(const Value &v) { return Ptr<E>(v); }
};
template <class E> struct ParamTraits<Scalar<E>> {
  using Host = typename E::host;
  static constexpr bool runtime = true;
  static constexpr DType dtype() { return E::dtype; }
  template <class A>
  static uint64_t toBits(const A &a, Specialization &spec, const KernelState &state, size_t index) {
    if constexpr (std::is_integral_v<Host>) {
      static_assert(std::is_integral_v<A> && !std::is_same_v<A, bool>,
                    "an integer kernel parameter takes a C++ integer");
      if (!fits<Host>(a))
        badArgument(state, index, std::to_string(a) + " does not fit " + E::dtype.str());
      Host v = Host(a);
      if constexpr (std::is_signed_v<Host>)
        spec = specializeInt(int64_t(v));
      else
        spec = specializeUInt(uint64_t(v), /*wide=*/uint64_t(v) > uint64_t(INT64_MAX));
      return uint64_t(std::make_unsigned_t<Host>(v));
    } else {
      static_assert(std::is_arithmetic_v<A>, "a float kernel parameter takes a C++ number");
      Host v = Host(a);
      spec = Specialization::None;
      uint64_t bits = 0;
      std::memcpy(&bits, &v, sizeof(v));
      return bits;
    }
  }
  static Scalar<E> make(const Value &v) { return Scalar<E>(v); }
};
template <class T> struct ParamTraits<Const<T>> {
  static constexpr bool runtime = false;
  template <class A> static uint64_t toWord(const A &a, const KernelState &state, size_t index) {
    static_assert(std::is_convertible_v<A, T>, "a Const<T> parameter takes a value of type T");
    T v = T(a);
    if constexpr (std::is_same_v<T, DType>) {
      return uint64_t(v.getKind()) | uint64_t(v.isPointer()) << 8;
    } else if constexpr (std::is_floating_point_v<T>) {
      double d = double(v);
      uint64_t bits;
      std::memcpy(&bits, &d, sizeof(d));
      return bits;
    } else {
      if constexpr (std::is_integral_v<A> && !std::is_same_v<T, bool>) {
        if (!fits<T>(a))
          badArgument(state, index, std::to_string(a) + " does not fit the Const parameter");
      }
      return uint64_t(int64_t(v));
    }
  }
  static Const<T> fromWord(uint64_t w) {
    if constexpr (std::is_same_v<T, DType>) {
      DType d(ScalarKind(w & 0xff));
      return (w >> 8) ? DType::pointerTo(d) : d;
    } else if constexpr (std::is_floating_point_v<T>) {
      double d;
      std::memcpy(&d, &w, sizeof(d));
      return T(d);
    } else {
      return T(int64_t(w));
    }
  }
};

/// The parameter types of a lambda or function, as `void(P...)` with P decayed.
template <class F> struct Signature : Signature<decltype(&F::operator())> {};
template <class R, class... P> struct Signature<R (*)(P...)> {
  static_assert(std::is_void_v<R>, "a kernel body returns void");
  using type = void(std::decay_t<P>...);
};
template <class R, class... P> struct Signature<R(P...)> : Signature<R (*)(P...)> {};
template <class C, class R, class... P>
struct Signature<R (C::*)(P...) const> : Signature<R (*)(P...)> {};
template <class C, class R, class... P>
struct Signature<R (C::*)(P...)> : Signature<R (*)(P...)> {};
} // namespace detail

template <class Sig> class Kernel;

/// A kernel: its body and the cache of its specializations. Calling it launches:
/// `kernel(grid(n).num_warps(8), stream, args...)` with one host argument per parameter
/// (Const parameters take their value). Copies share the cache. Thread-safe.
template <class... P> class Kernel<void(P...)> {
  static constexpr size_t N = sizeof...(P);
  static constexpr std::array<bool, N + 1> runtimeMask = {detail::ParamTraits<P>::runtime...,
                                                          false};
  /// The position among runtime (or Const) parameters of parameter `i`.
  static constexpr size_t slot(size_t i) {
    size_t n = 0;
    for (size_t j = 0; j < i; ++j)
      n += runtimeMask[j] == runtimeMask[i];
    return n;
  }
  static constexpr size_t countRuntime() {
    size_t n = 0;
    for (size_t j = 0; j < N; ++j)
      n += runtimeMask[j];
    return n;
  }
  static constexpr size_t NR = countRuntime();
  static_assert(NR <= 64, "a kernel takes at most 64 runtime parameters");
  template <size_t I> using Param = std::tuple_element_t<I, std::tuple<P...>>;

  /// key[0]: divisibility bits of the runtime arguments, key[1]: their `== 1` bits;
  /// key[2 + k]: Const value k.
  /// device: of the rt::DeviceBuffer arguments (-1: none).
  struct Packed {
    std::array<uint64_t, N - NR + 2> key{};
    std::array<uint64_t, NR + 1> bits{};
    int device = -1;
  };

public:
  Kernel(std::string name, std::function<void(P...)> body, Loc loc = {})
      : state(detail::newKernelState(std::move(name), loc)), body(std::move(body)) {}

  /// Launches on `stream` (nullptr: the default stream). The first launch of a specialization
  /// traces and compiles it; later ones only pack arguments and call cuLaunchKernel.
  template <class... A>
  void operator()(const Launch &launch, rt::CUstream stream, const A &...args) const {
    static_assert(sizeof...(A) == N, "a kernel launch takes one argument per parameter");
    Packed p = pack(std::index_sequence_for<P...>{}, args...);
    if (launch.dev >= 0 && p.device >= 0 && launch.dev != p.device)
      detail::badDevice(*state, launch.dev, p.device);
    detail::LoadedKernel k =
        detail::getKernel(*state, p.key.data(), p.key.size(), launch,
                          launch.dev >= 0 ? launch.dev : p.device, NR, [&] { return trace(p); });
    if (launch.grid.x == 0 || launch.grid.y == 0 || launch.grid.z == 0)
      return;
    if (k.maps)
      return detail::launchWithMaps(*state, k, launch.grid, stream, p.bits.data(), NR);
    std::array<void *, NR + 1> params;
    for (size_t i = 0; i < NR; ++i)
      params[i] = &p.bits[i];
    k.kernel->launchRaw(launch.grid, stream, params.data());
  }

  /// The traced MLIR of the specialization these arguments select (no GPU needed; device
  /// pointers may be any numbers, only their alignment matters).
  template <class... A> std::string mlir(const A &...args) const {
    static_assert(sizeof...(A) == N, "mlir() takes one argument per parameter");
    Packed p = pack(std::index_sequence_for<P...>{}, args...);
    return detail::getMLIR(*state, p.key.data(), p.key.size(), [&] { return trace(p); });
  }
  /// MLIR and PTX of that specialization for `target`, compiled in process (no GPU needed).
  template <class... A> Compiled compile(const Target &target, const A &...args) const {
    Packed p = pack(std::index_sequence_for<P...>{}, args...);
    std::string text = mlir(args...);
    auto [ptx, maps] =
        detail::compilePTX(*state, p.key.data(), p.key.size(), target, [&] { return trace(p); });
    return Compiled{name(), std::move(text), std::move(ptx), std::move(maps)};
  }
  template <class... A> Compiled compile(const A &...args) const {
    return compile(Target{}, args...);
  }

  const std::string &name() const { return detail::kernelName(*state); }

private:
  template <size_t... I, class... A>
  Packed pack(std::index_sequence<I...>, const A &...args) const {
    Packed p;
    (packOne<I>(p, args), ...);
    return p;
  }
  template <size_t I, class A> void packOne(Packed &p, const A &a) const {
    using T = detail::ParamTraits<Param<I>>;
    if constexpr (T::runtime) {
      Specialization spec = Specialization::None;
      p.bits[slot(I)] = T::toBits(a, spec, *state, I);
      if (spec == Specialization::DivisibleBy16)
        p.key[0] |= uint64_t(1) << slot(I);
      else if (spec == Specialization::EqualsOne)
        p.key[1] |= uint64_t(1) << slot(I);
      if constexpr (std::is_same_v<A, rt::DeviceBuffer>) {
        if (p.device >= 0 && a.getDevice() != p.device)
          detail::badArgument(
              *state, I,
              "is on cuda:" + std::to_string(a.getDevice()) +
                  " but an earlier argument is on cuda:" + std::to_string(p.device) +
                  "; the buffers of a launch must be on one device");
        p.device = a.getDevice();
      }
    } else {
      p.key[2 + slot(I)] = T::toWord(a, *state, I);
    }
  }
  template <size_t I> static Param<I> makeParam(const Values &args, const Packed &p) {
    using T = detail::ParamTraits<Param<I>>;
    if constexpr (T::runtime)
      return T::make(args[slot(I)]);
    else
      return T::fromWord(p.key[2 + slot(I)]);
  }
  template <size_t... I>
  void invoke(std::index_sequence<I...>, const Values &args, const Packed &p) const {
    std::tuple<P...> params{makeParam<I>(args, p)...};
    std::apply(body, params);
  }
  template <class T>
  static void addSpec(std::vector<detail::ArgSpec> &specs, uint64_t divisible, uint64_t one) {
    if constexpr (detail::ParamTraits<T>::runtime) {
      size_t i = specs.size();
      specs.push_back({detail::ParamTraits<T>::dtype(), (one >> i & 1) ? Specialization::EqualsOne
                                                        : (divisible >> i & 1)
                                                            ? Specialization::DivisibleBy16
                                                            : Specialization::None});
    }
  }
  KernelSource trace(const Packed &p) const {
    std::vector<detail::ArgSpec> specs;
    (addSpec<P>(specs, p.key[0], p.key[1]), ...);
    return detail::traceKernel(*state, specs, [&](const Values &args) {
      invoke(std::index_sequence_for<P...>{}, args, p);
    });
  }

  std::shared_ptr<detail::KernelState> state;
  std::function<void(P...)> body;
};

/// Defines a kernel from a lambda (or function) whose parameters are Ptr<E>, scalars and
/// Const<T>: `auto add = kiln::kernel("add", [](Ptr<f32> x, ..., Const<int> BLOCK) {...});`.
template <class F> auto kernel(std::string name, F body, Loc loc = {}) {
  using Sig = typename detail::Signature<std::remove_pointer_t<std::decay_t<F>>>::type;
  return Kernel<Sig>(std::move(name), std::move(body), loc);
}

} // namespace kiln::lang

#pragma GCC visibility pop

#endif // KILN_LANG_KERNEL_H
