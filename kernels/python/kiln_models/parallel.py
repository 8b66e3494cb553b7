"""kiln_models.parallel: tensor parallelism (Megatron-style) for the Llama decoder.

Rank r of n holds the attention heads r*Hq/n .. (r+1)*Hq/n (and the matching KV heads: q, k, v
projection rows, o_proj columns), and MLP features r*I/n .. (r+1)*I/n (gate and up rows,
down_proj columns); norms, the embedding and the LM head are replicated. Each rank is then an
ordinary LlamaModel of the local config (Hq/n heads, Hkv/n KV heads, I/n features) whose
o_proj and down_proj outputs are partial sums, added across ranks in place by an all-reduce
the caller supplies (LlamaModel(all_reduce=...)): every rank ends each block with the full
residual stream and computes the same logits. Kiln runs no collectives itself: torch.distributed
(NCCL on GPUs, gloo on CPUs) does, through torch_all_reduce.
"""

import numpy as np

__all__ = ["shard_weights", "torch_all_reduce"]


def shard_weights(config, weights, rank, size):
    """(local config, local weights) of rank `rank` of `size` for a model of `config` with
    `weights` ({HF name: array}, the whole model). ValueError when heads, KV heads or MLP
    features do not split evenly."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"shard_weights: size must be a positive int, got {size!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < size:
        raise ValueError(f"shard_weights: rank must be in [0, {size}), got {rank!r}")
    for field in ("num_attention_heads", "num_key_value_heads", "intermediate_size"):
        if getattr(config, field) % size:
            raise ValueError(f"shard_weights: {field}={getattr(config, field)} does not split "
                             f"over {size} ranks")
    D = config.head_dim
    hq, hkv, inter = (config.num_attention_heads // size, config.num_key_value_heads // size,
                      config.intermediate_size // size)
    q = slice(rank * hq * D, (rank + 1) * hq * D)
    kv = slice(rank * hkv * D, (rank + 1) * hkv * D)
    mlp = slice(rank * inter, (rank + 1) * inter)
    local = {}
    for name, w in weights.items():
        w = np.asarray(w)
        if name.endswith("self_attn.q_proj.weight"):
            w = w[q]
        elif name.endswith(("self_attn.k_proj.weight", "self_attn.v_proj.weight")):
            w = w[kv]
        elif name.endswith("self_attn.o_proj.weight"):
            w = w[:, q]
        elif name.endswith(("mlp.gate_proj.weight", "mlp.up_proj.weight")):
            w = w[mlp]
        elif name.endswith("mlp.down_proj.weight"):
            w = w[:, mlp]
        local[name] = w
    return config.replace(num_attention_heads=hq, num_key_value_heads=hkv,
                          intermediate_size=inter), local


def torch_all_reduce(group=None):
    """An all_reduce for LlamaModel over torch.distributed (initialized by the caller): sums
    a model array in place across the group's ranks. numpy arrays (the CPU backend, gloo) are
    shared with torch through torch.from_numpy, kiln.DeviceArrays (NCCL) through
    __cuda_array_interface__; bf16 arrays travel as their 16-bit words reinterpreted as
    torch.bfloat16. On the GPU build the model with stream= torch's current stream handle so
    that the collective and the kernels are ordered on one stream."""
    import torch
    import torch.distributed as dist

    def as_torch(a):
        if isinstance(a, np.ndarray):
            if a.dtype.name == "bfloat16":
                return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
            return torch.from_numpy(a)
        if a.dtype_name == "bfloat16":
            return torch.as_tensor(a.view("int16"), device="cuda").view(torch.bfloat16)
        return torch.as_tensor(a, device="cuda")

    def all_reduce(a):
        dist.all_reduce(as_torch(a), group=group)

    return all_reduce
