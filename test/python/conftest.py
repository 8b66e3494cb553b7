"""pytest set-up for Kiln's Python tests: an isolated cache directory, the `gpu` marker
(skipped without a GPU), the `gpu2` marker (skipped with fewer than two GPUs), and
KILN_ARCH=sm_90 so that variants compile without one."""
import os
import sys
import tempfile

import pytest

os.environ.setdefault("KILN_CACHE_DIR", tempfile.mkdtemp(prefix="kiln-pytest-"))
sys.path.insert(0, os.path.dirname(__file__))

import kiln  # noqa: E402

HAS_GPU = kiln.has_gpu()
NUM_GPUS = kiln.device_count()
if not HAS_GPU:
    os.environ.setdefault("KILN_ARCH", "sm_90")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU (skipped without one)")
    config.addinivalue_line("markers", "gpu2: needs two NVIDIA GPUs (skipped with fewer)")


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason="no GPU (libcuda or device missing)")
    skip2 = pytest.mark.skip(reason=f"fewer than two GPUs ({NUM_GPUS})")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip)
        elif "gpu2" in item.keywords and NUM_GPUS < 2:
            item.add_marker(skip2)
