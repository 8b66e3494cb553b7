"""torch_or_skip(): torch with a CUDA device for a GPU test, or the test skipped (no torch,
or torch without CUDA). One helper for the GPU tests that take their tensors from torch."""
import pytest


def torch_or_skip():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    return torch
