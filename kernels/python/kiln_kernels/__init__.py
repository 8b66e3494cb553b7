"""Kiln LLM kernels (softmax, log-softmax, RMSNorm, LayerNorm, fused cross-entropy, KL
divergence, SwiGLU, RoPE) with torch.autograd.Function wrappers, flash attention
(forward and backward) and a matmul with a fused bias and activation.

Each module holds its @kiln.jit kernels (importable without torch: kiln.compile works on
them anywhere) and, where torch is installed, the host functions and autograd wrappers:
`from kiln_kernels.softmax import softmax, log_softmax`, `kiln_kernels.rmsnorm.rms_norm`,
`kiln_kernels.layernorm.layer_norm`, `kiln_kernels.cross_entropy.cross_entropy`,
`kiln_kernels.kl_div.kl_div`, `kiln_kernels.swiglu.swiglu`, `kiln_kernels.rope.rope`,
`kiln_kernels.flash_attention.attention` (differentiable), `kiln_kernels.matmul.matmul`.
"""
from . import (cross_entropy, flash_attention, flash_attention_bwd, kl_div,  # noqa: F401
               layernorm, matmul, rmsnorm, rope, softmax, swiglu)
