"""kiln.tools: laid out as triton.tools (``kiln.tools.tensor_descriptor.TensorDescriptor`` is
``kiln.TensorDescriptor``)."""

from . import tensor_descriptor

__all__ = ["tensor_descriptor"]
