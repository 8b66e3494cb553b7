"""kiln.language.extra.libdevice: the libdevice functions (kiln.language.extra.cuda.libdevice;
Kiln's one set of them serves both of its backends)."""

import sys

from .cuda import libdevice as _libdevice

# The same module under both names, so `from kiln.language.extra import libdevice` and
# `import kiln.language.extra.libdevice` give one object.
sys.modules[__name__] = _libdevice
