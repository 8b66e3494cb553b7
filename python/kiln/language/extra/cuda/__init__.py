"""kiln.language.extra.cuda: NVIDIA extensions of kiln.language (Triton's
triton.language.extra.cuda): libdevice, the special registers globaltimer and smid,
num_threads/num_warps, programmatic dependent launch control (gdc_wait,
gdc_launch_dependents), and the float8e4b15 conversions convert_custom_float8_sm70/_sm80 (errors:
Kiln has no float8e4b15 format)."""

from . import libdevice  # noqa: F401
from .utils import (  # noqa: F401
    convert_custom_float8_sm70, convert_custom_float8_sm80, gdc_launch_dependents, gdc_wait,
    globaltimer, num_threads, num_warps, smid)

__all__ = ["libdevice", "globaltimer", "num_threads", "num_warps", "smid",
           "gdc_launch_dependents", "gdc_wait", "convert_custom_float8_sm70",
           "convert_custom_float8_sm80"]
