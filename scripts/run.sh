#!/usr/bin/env bash
# Kiln's main job: set up and build, then compile every example kernel in kernels/ for sm_90
# and print a summary of each (registers, spills, shared memory from ptxas; PTX instruction
# counts), then run the C++ DSL examples, which launch the kernels and check them against a
# host reference: on the GPU, or on the CPU backend without one (KILN_BACKEND=cpu forces it);
# then generate tokens with kiln_models (Llama-3.2-1B shapes on a GPU, a tiny model without).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
python3 scripts/summarize_kernels.py --kilnc build/tools/kilnc --kernels kernels --arch "${KILN_ARCH:-sm_90}"
echo
echo "C++ DSL examples (kernels/cpp/examples):"
for example in build/kernels/cpp/kiln-example-*; do
  "$example"
done
echo
# kiln_models (docs/models.md): a Llama decoder whose hot path is Kiln kernels. On a GPU the
# Llama-3.2-1B shapes with random weights in bf16 (prefill and decode tokens/s, peak memory);
# without one the tiny configuration on the CPU backend.
if .venv/bin/python -c "import sys; sys.path.insert(0, 'build/python'); import kiln; sys.exit(0 if kiln.has_gpu() else 1)" 2>/dev/null; then
  MODEL_ARGS=(--config 1b --batch 1 --prompt-len 512 --new-tokens 128 --device gpu)
else
  MODEL_ARGS=(--config tiny --batch 2 --prompt-len 32 --new-tokens 16 --device cpu)
fi
echo "kiln_models: python -m kiln_models.llama generate ${MODEL_ARGS[*]} --random-weights"
PYTHONPATH=build/python:kernels/python .venv/bin/python -m kiln_models.llama generate \
  "${MODEL_ARGS[@]}" --random-weights
