#!/usr/bin/env bash
# Packs the prebuilt GPU-side binaries (stripped libkiln.so, kiln-bench, runtime and C++ DSL
# tests, the C++ DSL kernels' library) and the headers the Python extension builds against into
# .carry/kiln-gpu.tar.xz so that they fit the device tool's transfer limit.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
mkdir -p "$stage/lib" "$stage/bench" "$stage/test/runtime" .carry
strip --strip-unneeded -o "$stage/lib/libkiln.so" build/lib/libkiln.so
cp build/bench/kiln-bench "$stage/bench/"
cp build/test/runtime/kiln-runtime-tests build/test/runtime/kiln-cache-worker "$stage/test/runtime/"
# The C++ DSL's tests linked against libkiln.so (not built by default; about 1 MB).
ninja -C build kiln-lang-tests-shared >/dev/null
mkdir -p "$stage/test/unit"
strip --strip-unneeded -o "$stage/test/unit/kiln-lang-tests" build/test/unit/kiln-lang-tests-shared
# The C++ DSL's matmul and attention behind C functions (bench_matmul.py cpp,
# bench_cpp_attention.py).
ninja -C build kiln-cpp-kernels >/dev/null
strip --strip-unneeded -o "$stage/bench/libkiln-cpp-kernels.so" build/bench/libkiln-cpp-kernels.so
# What building only the Python extension there needs (scripts/gpu.sh python): the MLIR-free
# headers (facade, runtime, the compile door, dtypes, specialization, the C++ DSL); the
# extension links lib/libkiln.so above.
mkdir -p "$stage/include/kiln/Facade" "$stage/include/kiln/lang"
cp include/kiln/Facade/Session.h "$stage/include/kiln/Facade/"
cp include/kiln/lang/*.h "$stage/include/kiln/lang/"
cp include/kiln/Runtime.h include/kiln/kiln_c.h include/kiln/Compile.h include/kiln/CompileError.h \
  include/kiln/DType.h include/kiln/Specialization.h include/kiln/kiln.h "$stage/include/kiln/"
mkdir -p "$stage/include/kiln/Target/NVIDIA"
cp include/kiln/Target/NVIDIA/TensorMap.h "$stage/include/kiln/Target/NVIDIA/"
tar -cJf .carry/kiln-gpu.tar.xz -C "$stage" .
rm -rf "$stage"
ls -la .carry/kiln-gpu.tar.xz
