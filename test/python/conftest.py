"""pytest set-up for Kiln's Python tests: an isolated cache directory, the `gpu` marker
(skipped without a GPU), and KILN_ARCH=sm_90 so that variants compile without one."""
import os
import sys
import tempfile

import pytest

os.environ.setdefault("KILN_CACHE_DIR", tempfile.mkdtemp(prefix="kiln-pytest-"))
sys.path.insert(0, os.path.dirname(__file__))

import kiln  # noqa: E402

HAS_GPU = kiln.has_gpu()
if not HAS_GPU:
    os.environ.setdefault("KILN_ARCH", "sm_90")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs an NVIDIA GPU (skipped without one)")


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no GPU (libcuda or device missing)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
