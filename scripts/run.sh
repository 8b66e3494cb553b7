#!/usr/bin/env bash
# Kiln's main job: set up and build, then compile every example kernel in kernels/ for sm_90
# and print a summary of each (registers, spills, shared memory from ptxas; PTX instruction
# counts). When a GPU is present the examples also run (runtime issue).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
python3 scripts/summarize_kernels.py --kilnc build/tools/kilnc --kernels kernels --arch "${KILN_ARCH:-sm_90}"
