#!/usr/bin/env bash
# Sets up and builds Kiln (scripts/setup.sh), then runs every test: lit (dialects, passes,
# kilnc, ptxas for sm_80/sm_90, malformed input, ldd) and gtest. GPU tests skip without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
ctest --test-dir build --output-on-failure -j2
