#!/usr/bin/env bash
# Kiln's main job: set up and build, then compile every example kernel in kernels/ for sm_90
# and print a summary of each (registers, spills, shared memory from ptxas; PTX instruction
# counts), then run the C++ DSL examples, which launch the kernels and check them against a
# host reference: on the GPU, or on the CPU backend without one (KILN_BACKEND=cpu forces it).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
python3 scripts/summarize_kernels.py --kilnc build/tools/kilnc --kernels kernels --arch "${KILN_ARCH:-sm_90}"
echo
echo "C++ DSL examples (kernels/cpp/examples):"
for example in build/kernels/cpp/kiln-example-*; do
  "$example"
done
