"""kiln_models.ops: the kernels of the model's hot path and their host functions. Each
function launches kernels only (outputs and scratch preallocated, no host sync), on numpy
arrays (CPU backend) or kiln.DeviceArray / torch CUDA tensors (GPU)."""
from .attention import *  # noqa: F401,F403  (rope_cache, prefill_attention, decode_attention)
from .elementwise import *  # noqa: F401,F403  (embedding, gather_rows, silu_mul)
from .linear import *  # noqa: F401,F403  (linear, linear_scratch_numel, linear_config)
from .norm import *  # noqa: F401,F403  (rmsnorm, add_rmsnorm)
from .sampling import *  # noqa: F401,F403  (argmax, sample)
from .quant import *  # noqa: F401,F403  (quantize_int8/int4, linear_int8/int4)
