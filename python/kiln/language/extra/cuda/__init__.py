"""kiln.language.extra.cuda: NVIDIA extensions of kiln.language (Triton's
triton.language.extra.cuda): libdevice, the special registers globaltimer and smid,
num_threads/num_warps, and programmatic dependent launch control (gdc_wait,
gdc_launch_dependents)."""

from . import libdevice  # noqa: F401
from .utils import (  # noqa: F401
    gdc_launch_dependents, gdc_wait, globaltimer, num_threads, num_warps, smid)

__all__ = ["libdevice", "globaltimer", "num_threads", "num_warps", "smid",
           "gdc_launch_dependents", "gdc_wait"]
