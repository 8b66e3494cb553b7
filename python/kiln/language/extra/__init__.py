"""kiln.language.extra: target-specific extensions, laid out as Triton's triton.language.extra.

``extra.cuda`` holds the NVIDIA ones (libdevice, globaltimer, smid, num_threads, num_warps,
gdc_wait, gdc_launch_dependents); ``extra.libdevice`` is the same libdevice module, as Triton
makes ``triton.language.extra.libdevice`` the libdevice of the target compiled for."""

from . import cuda  # noqa: F401
from .cuda import libdevice  # noqa: F401

__all__ = ["cuda", "libdevice"]
