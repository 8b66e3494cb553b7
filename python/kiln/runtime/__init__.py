"""kiln.runtime: the Python side of Kiln's runtime, laid out as triton.runtime.

- ``jit``: @kiln.jit (JITFunction, the launcher's compile-on-miss), kiln.compile and
  CompiledKernel
- ``autotuner``: @kiln.autotune, kiln.Config, Autotuner
- ``driver``: the device array (kiln.DeviceArray, kiln.empty, kiln.zeros, kiln.from_numpy)
  and the devices (kiln.has_gpu, kiln.device_count, kiln.current_device, kiln.synchronize)
- ``cache``: the front end's disk cache of kernel IR and the version its keys carry

The public names are also on ``kiln`` itself (kiln.jit, kiln.autotune, kiln.Config, ...).
``kiln.runtime.jit`` is the module, as in Triton; the decorator is ``kiln.jit``.
"""

from . import cache, driver
from .autotuner import AutotuneError, Autotuner, Config, autotune
from .driver import DeviceArray
from .jit import CompiledKernel, JITFunction

__all__ = ["Autotuner", "AutotuneError", "CompiledKernel", "Config", "DeviceArray",
           "JITFunction", "autotune", "cache", "driver"]
