"""kiln.tools.tensor_descriptor: where Triton code imports the host tensor descriptor from
(``from triton.tools.tensor_descriptor import TensorDescriptor``); the class is
kiln.TensorDescriptor."""

from ..tensor_descriptor import TensorDescriptor

__all__ = ["TensorDescriptor"]
