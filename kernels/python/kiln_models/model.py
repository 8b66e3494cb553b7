"""kiln_models.model: the Llama decoder on Kiln kernels.

Memory is planned once, at construction: the weights are uploaded in the activation dtype
(q/k/v fused into one [(Hq + 2 Hkv) D, H] weight, gate/up into one [2I, H], a tied LM head
shares the embedding), the paged KV cache is allocated, and every activation buffer is sized
for the largest step (max_tokens rows for prefill, max_batch rows for the last positions and
logits). A forward pass then only fills the fixed input buffers (token ids, positions, cache
slots, block tables, context lengths: host arrays copied in) and launches kiln_models.ops on
row views of those buffers:

    embedding -> per layer [add_rmsnorm -> linear(qkv) -> rope_cache -> prefill/decode
    attention -> linear(o) -> add_rmsnorm -> linear(gate_up) -> silu_mul -> linear(down)]
    -> final add_rmsnorm on the rows whose logits are needed -> linear(lm_head)

Decode steps of one row whose linears run on the CUDA-core plan (one GPU) fuse the rest into
them:

    embedding -> per layer [linear(qkv, norm) -> decode attention -> linear(o, residual)
    -> linear(gate_up, norm, swiglu) -> linear(down, residual)] -> linear(lm_head, norm)

(`norm`: the RMSNorm of the residual stream inside the linear that reads it; `residual`: the
linear adds its output into the residual stream; `swiglu`: silu_mul in gate_up's store, the
same bits as the two ops). KILN_MODELS_FUSE_NORM=0 / KILN_MODELS_FUSE_SWIGLU=0 keep the
separate ops.

On the GPU the model launches on a kiln.Stream (shared_stream() unless given one), and with
cuda_graphs (the GPU's default) a decode step of each batch size and sampling is captured once
as a kiln.CUDAGraph after its first (eager) run and replayed from then on: every buffer it
reads or writes keeps its address, every per-step input (tokens, positions, slots, block
tables, context lengths, the sampling step) is copied into a fixed buffer before the replay,
and the chosen tokens land in the fixed next_tokens buffer. On the CPU, cuda_graphs=True
replays a recorded list of the step's launches with the arguments they were captured with
(what a graph does), which tests that nothing of a step is baked in from the host.

The residual stream follows HF: `residual` holds the sum of the embedding and every block's
output, add_rmsnorm adds the latest output into it in the activation dtype and normalizes.
prefill() and decode() return a [B, V] view of the logits buffer (the last position of each
request); generate.py picks tokens from it.
"""

import functools
import math
import os
import threading

import numpy as np

from .arrays import Arrays, dtype_name
from .checkpoint import (llama_tensor_shapes, load_weights, quantized_tensor_shapes,
                         random_weights, read_quantization)
from .config import LlamaConfig
from .kv_cache import KVCacheFull, PagedKVCache
from .ops._common import dependent_launches
from .reference import rope_tables

#: KILN_MODELS_FUSE_SWIGLU=0: decode steps run gate_up and silu_mul as two kernels.
FUSE_SWIGLU_ENV = "KILN_MODELS_FUSE_SWIGLU"
#: KILN_MODELS_FUSE_NORM=0: decode steps run add_rmsnorm kernels between the linears.
FUSE_NORM_ENV = "KILN_MODELS_FUSE_NORM"

__all__ = ["LlamaModel", "KVCacheFull", "shared_stream"]

_INVARIANT_MAX_BATCH = 64  # the CUDA-core linears' row limit (ops.linear.DECODE_MAX_M)


_streams = {}
_streams_lock = threading.Lock()


def shared_stream():
    """The kiln.Stream of the current device that models built without a `stream` share (made
    at first use). One stream, not one per model: once CUDA graphs have been launched on a
    second stream, every graph's kernels launch slower for the rest of the process (H100,
    driver 580: ~2.5% of an int4 decode step, ~5% without PDL; a second model's graph on the
    first one's stream costs nothing; bench/results/2026-11-26-h100-llama-session19.md).
    Models on one stream run one after another, as one thread drives them anyway; give each
    its own stream to overlap them."""
    import kiln
    dev = kiln.runtime.driver.current_device()
    with _streams_lock:
        if dev not in _streams:
            _streams[dev] = kiln.Stream(dev)
        return _streams[dev]


def _dependent_launches(method):
    """Runs a step method with programmatic dependent launch of the ops that have it
    (ops/_common.PDL_ENV): within a step no kernel's early loads read what the kernel just
    before it writes."""
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with dependent_launches():
            return method(*args, **kwargs)
    return wrapper


class _Layer:
    """One decoder layer's device weights."""
    __slots__ = ("in_norm", "qkv", "o", "post_norm", "gate_up", "down")


class LlamaModel:
    """A Llama decoder of `config` with `weights` ({HF name: numpy array or torch tensor,
    e.g. an HF LlamaForCausalLM's state_dict()}) on `device`
    ("cpu": numpy arrays and the CPU backend; "gpu": kiln.DeviceArray) in activation `dtype`
    ("fp32", "bf16", "fp16").

    max_batch: requests per step; max_tokens: tokens per prefill (default max_batch *
    min(max_seq_len, 512)); max_seq_len: tokens per request, prompt and output (default
    min(config.max_position_embeddings, 2048)); block_size, num_blocks: the paged KV cache
    (default: enough blocks for max_batch requests of max_seq_len). quant: None, "int8"
    (per-channel scales) or "int4" (two per byte, scales per group of quant_group K, fp32 or
    bf16 as ops.int4_scale_dtype picks): the
    decoder layers' projections and the LM head quantized from `weights` at load (weight-only;
    activations and the embedding stay in `dtype`; a tied head gets its own quantized copy
    of the embedding, whose lookups keep the dense table; `quant_head=False` keeps the head
    dense). `ops` is the module of kernels
    (default kiln_models.ops); `stream` the kiln.Stream (or CUstream handle) of every launch
    and copy (GPU default: shared_stream(), one per device for every model that takes no
    stream); cuda_graphs: replay captured decode steps
    (default: on the GPU, without all_reduce). all_reduce: for tensor parallelism
    (parallel.py), a callable summing an activation array in place across the ranks, called
    after o_proj and down_proj; `config` and `weights` are then the rank's shard
    (parallel.shard_weights). batch_invariant: a request's logits do not depend on the
    other requests of its batch (the plans of the linears and of decode attention are fixed
    per row, not chosen by the batch size), so serving a request with others gives the tokens
    it gets alone; costs decode throughput at batches above 4 (CUDA-core linears)."""

    def __init__(self, config, weights, device="cpu", dtype="fp32", max_batch=8,
                 max_tokens=None, max_seq_len=None, block_size=16, num_blocks=None, ops=None,
                 stream=None, quant=None, quant_group=128, cuda_graphs=None, all_reduce=None,
                 quant_head=True, batch_invariant=False):
        if not isinstance(config, LlamaConfig):
            raise TypeError(f"LlamaModel: config must be a LlamaConfig, got "
                            f"{type(config).__name__}")
        self.config = c = config
        self.dtype = dtype_name(dtype)
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ValueError(f"LlamaModel: dtype must be fp32, bf16 or fp16, got {dtype!r}")
        if ops is None:
            from . import ops
        self.ops = ops
        a = Arrays(device)  # checks the device
        if device == "gpu" and stream is None:
            stream = shared_stream()
        self.arrays = a = Arrays(device, stream)
        self.stream = stream
        self.launch = {"device": a.launch_device,
                       "stream": None if stream is None else int(getattr(stream, "handle",
                                                                         stream))}
        self.all_reduce = all_reduce
        # a collective inside a captured step is the caller's business: off by default
        self.cuda_graphs = (device == "gpu" and all_reduce is None) if cuda_graphs is None \
            else bool(cuda_graphs)
        self._graphs = {}  # (batch, SamplingParams) -> captured decode step
        self.max_seq_len = _positive("max_seq_len", max_seq_len or
                                     min(c.max_position_embeddings, 2048))
        if self.max_seq_len > c.max_position_embeddings:
            raise ValueError(f"LlamaModel: max_seq_len={self.max_seq_len} is beyond the "
                             f"config's max_position_embeddings={c.max_position_embeddings}")
        self.max_batch = _positive("max_batch", max_batch)
        self.batch_invariant = bool(batch_invariant)
        if self.batch_invariant and self.max_batch > _INVARIANT_MAX_BATCH:
            raise ValueError(f"LlamaModel: batch_invariant takes max_batch <= "
                             f"{_INVARIANT_MAX_BATCH} (its decode linears run on CUDA cores), "
                             f"got {self.max_batch}")
        self.max_tokens = _positive("max_tokens", max_tokens or
                                    max_batch * min(self.max_seq_len, 512))
        self.sm_scale = 1.0 / math.sqrt(c.head_dim)
        if quant not in (None, "int8", "int4"):
            raise ValueError(f"LlamaModel: quant must be None, 'int8' or 'int4', got {quant!r}")
        self.quant, self.quant_group = quant, quant_group
        self.quant_head = bool(quant_head) and quant is not None
        block_size = _positive("block_size", block_size)
        if block_size & (block_size - 1):
            raise ValueError(f"LlamaModel: block_size must be a power of two, got {block_size}")
        if num_blocks is not None:
            num_blocks = _positive("num_blocks", num_blocks)
        self._upload_weights(weights)

        max_blocks = -(-self.max_seq_len // block_size)
        self.kv = PagedKVCache(a, c.num_hidden_layers, c.num_key_value_heads, c.head_dim,
                               self.dtype, num_blocks or max_batch * max_blocks, block_size,
                               max_blocks)
        cos, sin = rope_tables(c, self.max_seq_len, np.float32)
        self.cos, self.sin = a.upload(cos), a.upload(sin)

        # rows: a prefill's max_tokens, a decode step's max_batch
        T, B, H, act = max(self.max_tokens, self.max_batch), self.max_batch, c.hidden_size, \
            self.dtype
        self.residual = a.empty((T, H), act)
        self.hidden = a.empty((T, H), act)
        self.normed = a.empty((T, H), act)
        self.qkv = a.empty((T, c.qkv_size), act)
        self.attn = a.empty((T, c.num_attention_heads * c.head_dim), act)
        self.gate_up = a.empty((T, 2 * c.intermediate_size), act)
        self.mlp = a.empty((T, c.intermediate_size), act)
        self.last_hidden = a.empty((B, H), act)
        self.last_residual = a.empty((B, H), act)
        self.last_normed = a.empty((B, H), act)
        self.logits = a.empty((B, c.vocab_size), act)
        # the step's inputs: host mirrors, copied into fixed device buffers
        self.h_ids, self.ids = np.zeros(T, np.int32), a.zeros((T,), "int32")
        self.h_positions, self.positions = np.zeros(T, np.int32), a.zeros((T,), "int32")
        self.h_slots, self.slots = np.zeros(T, np.int32), a.zeros((T,), "int32")
        self.h_cu_seqlens, self.cu_seqlens = np.zeros(B + 1, np.int32), \
            a.zeros((B + 1,), "int32")
        self.h_rows, self.rows = np.zeros(B, np.int32), a.zeros((B,), "int32")
        self.h_tables = np.zeros((B, max_blocks), np.int32)
        self.block_tables = a.zeros((B, max_blocks), "int32")
        self.h_context_lens, self.context_lens = np.zeros(B, np.int32), a.zeros((B,), "int32")
        # a decode step's inputs packed in one buffer, copied in one piece: token ids,
        # positions, slots, context lengths, the sampler's keys ([B] each), the sampler's
        # step, block tables
        n = 5 * B + 1 + B * max_blocks
        self.h_dec, self.dec = np.zeros(n, np.int32), a.zeros((n,), "int32")
        (self.h_dec_ids, self.dec_ids), (self.h_dec_positions, self.dec_positions), \
            (self.h_dec_slots, self.dec_slots), (self.h_dec_context_lens,
                                                 self.dec_context_lens) = \
            [(self.h_dec[i * B:(i + 1) * B], a.rows(self.dec, (i + 1) * B, i * B))
             for i in range(4)]
        # the chosen tokens land in the ids row: a queued step reads its predecessor's choices
        self.next_tokens = self.dec_ids
        # the sampler's draw key of each row: a request's own (generate: its prompt index)
        self.h_dec_keys, self.dec_keys = self.h_dec[4 * B:5 * B], a.rows(self.dec, 5 * B, 4 * B)
        self.h_step, self.step = self.h_dec[5 * B:5 * B + 1], a.rows(self.dec, 5 * B + 1, 5 * B)
        # keys and step, adjacent: select() copies them in one piece
        self._h_keys_step, self._keys_step = self.h_dec[4 * B:5 * B + 1], \
            a.rows(self.dec, 5 * B + 1, 4 * B)
        # queued steps' inputs after the ids row, and their choices (decode_steps_async)
        self._staged = self._history = None
        self.h_dec_tables = self.h_dec[5 * B + 1:].reshape(B, max_blocks)
        self._dec_rows = [None] * B  # (request, blocks) each host table row holds
        self.dec_tables = a.reshape(a.rows(self.dec, n, 5 * B + 1), (B, max_blocks))
        self._plan_scratch()
        if a.device == "gpu":
            # the weights went up on the legacy stream, which a non-blocking stream does not
            # wait for: make them complete before the first launch
            import kiln
            kiln.synchronize()

    # ------------------------------------------------------------------------- building

    @classmethod
    def from_pretrained(cls, model_dir, **kwargs):
        """The model of the HF checkpoint in `model_dir` (config.json + safetensors); a
        checkpoint saved by checkpoint.save_quantized loads quantized as it was saved (quant=,
        quant_group= and quant_head= may repeat its settings, not change them)."""
        config = LlamaConfig.from_json(model_dir)
        q = read_quantization(model_dir)
        if q is not None:
            have = dict(quant=q["method"], quant_group=q["group_size"] or 128,
                        quant_head=q["head"])
            for key, value in have.items():
                if kwargs.get(key, value) != value:
                    raise ValueError(f"LlamaModel.from_pretrained: {model_dir} is saved with "
                                     f"{key}={value!r}, got {key}={kwargs[key]!r} (quantize "
                                     f"the dense checkpoint at load for other settings)")
            kwargs.update(have)
        return cls(config, load_weights(model_dir, config, q), **kwargs)

    @classmethod
    def from_pretrained_shard(cls, model_dir, rank, size, all_reduce, **kwargs):
        """Rank `rank` of a `size`-way tensor-parallel model of the checkpoint in `model_dir`
        (see parallel.py); `all_reduce` sums across the ranks."""
        from .parallel import shard_weights
        config = LlamaConfig.from_json(model_dir)
        if read_quantization(model_dir) is not None:
            raise ValueError(f"LlamaModel.from_pretrained_shard: {model_dir} is a quantized "
                             f"checkpoint; tensor parallelism shards a dense one (quant= "
                             f"quantizes each rank's shard at load)")
        local, weights = shard_weights(config, load_weights(model_dir, config), rank, size)
        return cls(local, weights, all_reduce=all_reduce, **kwargs)

    @classmethod
    def random(cls, config, seed=0, **kwargs):
        """A model of `config` with seeded random weights (HF's init)."""
        return cls(config, random_weights(config, seed), **kwargs)

    def _upload_weights(self, weights):
        c, a, act = self.config, self.arrays, self.dtype
        # weights saved quantized (checkpoint.save_quantized): <projection>.qweight / .scales
        pre = any(str(k).endswith(".qweight") for k in weights)
        if pre and self.quant is None:
            raise ValueError("LlamaModel: the weights are quantized (<projection>.qweight): "
                             "pass quant='int8' or 'int4' as they were saved")
        shapes = {n: sh for n, (sh, _) in quantized_tensor_shapes(c, dict(
            method=self.quant, group_size=self.quant_group, head=self.quant_head)).items()} \
            if pre else llama_tensor_shapes(c)
        for name, shape in shapes.items():
            if name not in weights:
                raise ValueError(f"LlamaModel: weights have no tensor '{name}'")
            w = weights[name]
            got = tuple(int(d) for d in (w.shape if hasattr(w, "shape") else np.shape(w)))
            if got != shape:
                raise ValueError(f"LlamaModel: tensor '{name}' has shape {list(got)}, the "
                                 f"config needs {list(shape)}")
            want = {"int8": "int8", "int4": "uint8"}.get(self.quant)
            if name.endswith(".qweight") and _host_array(w).dtype != np.dtype(want):
                raise ValueError(f"LlamaModel: tensor '{name}' has dtype "
                                 f"{_host_array(w).dtype}, {self.quant} weights are {want}")

        def host(name):
            return _host_array(weights[name])

        def proj(name, parts):
            """Projection `name` of the HF projections `parts` (rows concatenated: the
            quantization is per row, so saved parts concatenate to the fused one's)."""
            if pre:
                return self._projection(name, None, tuple(np.concatenate(
                    [host(f"{p}.{kind}") for p in parts]) for kind in ("qweight", "scales")))
            return self._projection(name, np.concatenate([host(p + ".weight") for p in parts]))

        self.embed = a.upload(host("model.embed_tokens.weight"), act)
        self.layers = []
        for i in range(c.num_hidden_layers):
            p, w = f"model.layers.{i}.", _Layer()
            w.in_norm = a.upload(host(p + "input_layernorm.weight"), act)
            w.qkv = proj(p + "self_attn.qkv_proj", [p + f"self_attn.{n}_proj" for n in "qkv"])
            w.o = proj(p + "self_attn.o_proj", [p + "self_attn.o_proj"])
            w.post_norm = a.upload(host(p + "post_attention_layernorm.weight"), act)
            w.gate_up = proj(p + "mlp.gate_up_proj", [p + "mlp.gate_proj", p + "mlp.up_proj"])
            w.down = proj(p + "mlp.down_proj", [p + "mlp.down_proj"])
            self.layers.append(w)
        self.norm = a.upload(host("model.norm.weight"), act)
        head = "model.embed_tokens.weight" if c.tie_word_embeddings else "lm_head.weight"
        if self.quant_head:  # the head is the largest projection of a decode step
            self.lm_head = proj("lm_head", ["lm_head"]) if pre else \
                self._projection("lm_head", host(head))
        else:
            self.lm_head = self.embed if c.tie_word_embeddings else a.upload(host(head), act)

    def _plan_scratch(self):
        """The ops' fp32 scratch, allocated once for the largest step: split-K partial sums
        of the small-M linears (one array shared by all, as they run in order), the split
        decode attention's partial outputs, and the sampler's, where the ops take them."""
        c, a, ops, B = self.config, self.arrays, self.ops, self.max_batch
        self.linear_scratch = self.decode_scratch = self.sample_scratch = None
        self._decode_splits = None
        if hasattr(ops, "linear_scratch_numel"):
            H, D = c.hidden_size, c.head_dim
            shapes = [(c.qkv_size, H), (H, c.num_attention_heads * D),
                      (2 * c.intermediate_size, H), (H, c.intermediate_size),
                      (c.vocab_size, H)]
            itemsize = 4 if self.dtype == "float32" else 2
            cpu = a.device == "cpu"
            sms = 132  # the split count grows with the SMs: size for this GPU's
            if not cpu:
                import kiln
                sms = kiln.runtime.driver.active.utils.get_device_properties(None)[
                    "multiprocessor_count"]
            # only small M (decode, short prefills) splits K: 128 rows cover it with room
            ms = range(1, min(max(self.max_tokens, B), 128) + 1)
            numel = max(ops.linear_scratch_numel(m, n, k, itemsize, cpu, sms)
                        for m in ms for n, k in shapes)
            if self.quant and hasattr(ops, "quant_scratch_numel"):  # projections, head
                group = self.quant_group if self.quant == "int4" else None
                numel = max([numel] + [ops.quant_scratch_numel(m, n, k, group, cpu, sms)
                                       for m in ms for n, k in shapes])
            if numel:
                self.linear_scratch = a.empty((numel,), "fp32")
        if hasattr(ops, "decode_attention_scratch"):
            # partial outputs, their log-sum-exps, and zeroed counters: the splits of decode
            # attention are combined inside its kernel (which leaves the counters zero)
            out, lse, cnt = ops.decode_attention_scratch(B, c.num_attention_heads, c.head_dim,
                                                         self.max_seq_len,
                                                         n_kv_heads=c.num_key_value_heads,
                                                         counters=True)
            self.decode_scratch = (a.empty(out, "fp32"), a.empty(lse, "fp32"),
                                   a.zeros(cnt, "int32"))
            # batch_invariant: every batch takes batch 1's splits (the scratch holds them)
            self._decode_splits = int(lse[-1]) if self.batch_invariant else None
        # sample(): the probabilities of the rows, B * V fp32
        self.sample_scratch = a.empty((B * c.vocab_size,), "fp32")

    def _projection(self, name, w, saved=None):
        """A decoder projection's device weight: the array in the activation dtype, or
        ("int8", q, scales) / ("int4", packed, scales) quantized on the host (or `saved`, the
        (q, scales) of a quantized checkpoint)."""
        a = self.arrays
        if self.quant is None:
            return a.upload(w, self.dtype)
        if saved is not None:
            q, scales = saved
            N, K = q.shape[0], q.shape[1] * (2 if self.quant == "int4" else 1)
        elif self.quant == "int8":
            q, scales = self.ops.quantize_int8(w)
        else:
            K, g = w.shape[1], self.quant_group
            if isinstance(g, bool) or not isinstance(g, int) or g <= 0 or K % g:
                raise ValueError(f"LlamaModel: int4 quant_group={g!r} does not divide the "
                                 f"{K} input features of {name}")
            q, scales = self.ops.quantize_int4(w, g)
        if saved is None:
            N, K = w.shape
        sd = "float32"
        if self.quant == "int4" and hasattr(self.ops, "int4_scale_dtype"):
            sd = self.ops.int4_scale_dtype(N, K, self.quant_group, self.dtype)
        return self.quant, a.upload(q, q.dtype), a.upload(scales, sd)

    def _takes_gemv(self, T, w, K):
        """Whether a decode linear of T rows with weight w (see _projection) runs on the
        CUDA-core plan, where the ops fuse norms, residual adds and SwiGLU."""
        ops, gemv = self.ops, (True if self.batch_invariant else None)
        if not isinstance(w, tuple):
            return hasattr(ops, "uses_gemv") and ops.uses_gemv(T, gemv)
        group = self.quant_group if w[0] == "int4" else None
        return hasattr(ops, "quant_takes_gemv") and ops.quant_takes_gemv(T, K, group, gemv,
                                                                          w[1])

    def _fuses_swiglu(self, T, decode):
        """Whether gate_up of T decode rows runs with silu_mul in its kernel (the CUDA-core
        plan; the same bits as the two ops). KILN_MODELS_FUSE_SWIGLU=0: never."""
        if not decode or not self.layers or os.environ.get(FUSE_SWIGLU_ENV, "1") == "0":
            return False
        return self._takes_gemv(T, self.layers[0].gate_up, self.config.hidden_size)

    def _fuses_norm(self, T, decode):
        """Whether the RMSNorms of T decode rows run inside the linears that read them and
        the residual adds inside the linears that write them: at one row (every projection
        and the head on the CUDA-core plan, one GPU: tensor parallel adds partial sums
        first). Not at more rows: each block of rows of x multiplies it by the norm weight
        again (serving 64 requests in batches of up to 16, batch-invariant, H100: 2430-2460
        tok/s fused against 2810-2930 not), and so not with batch_invariant (a row's result
        may not depend on its batch). KILN_MODELS_FUSE_NORM=0: never."""
        if (not decode or T != 1 or self.batch_invariant or not self.layers
                or self.all_reduce is not None or os.environ.get(FUSE_NORM_ENV, "1") == "0"):
            return False
        c, w = self.config, self.layers[0]
        return all(self._takes_gemv(T, wt, k) for wt, k in (
            (w.qkv, c.hidden_size), (w.o, c.num_attention_heads * c.head_dim),
            (w.gate_up, c.hidden_size), (w.down, c.intermediate_size),
            (self.lm_head, c.hidden_size)))

    def _linear(self, x, w, out, launch, decode=True, swiglu=False, norm=None,
                residual=False):
        """out = x @ w.T for a dense or quantized weight (see _projection). batch_invariant:
        the plan does not depend on the rows, so a row's result is the same in any batch:
        decode steps and the head on CUDA cores (one K order per row), a prefill's rows on
        tensor cores without K splits (one K order per tile row)."""
        kw = dict(launch, scratch=self.linear_scratch)
        if swiglu:
            kw["swiglu"] = True
        if norm is not None:
            kw.update(norm=norm, eps=self.config.rms_norm_eps)
        if residual:
            kw["residual"] = True
        if self.batch_invariant:
            kw.update(gemv=bool(decode), scratch=None)
        if not isinstance(w, tuple):
            self.ops.linear(x, w, out, **kw)
        elif w[0] == "int8":
            self.ops.linear_int8(x, w[1], w[2], out, **kw)
        else:
            if self.batch_invariant:
                kw["invariant"] = True
            self.ops.linear_int4(x, w[1], w[2], out, group=self.quant_group, **kw)

    # ------------------------------------------------------------------------- steps

    @_dependent_launches
    def prefill(self, batch):
        """Runs the new tokens of each request of `batch` (a list of (request id, token ids));
        a request not yet in the KV cache is added, one already there continues after its
        cached tokens. Returns the [B, V] logits of each request's last new token (a view of
        the model's logits buffer, valid until the next step)."""
        B = len(batch)
        self._check_batch("prefill", B)
        counts = [self._check_ids("prefill", seq, ids) for seq, ids in batch]
        T = sum(counts)
        if T > self.max_tokens:
            raise ValueError(f"prefill: {T} tokens in the batch, the model's buffers hold "
                             f"max_tokens={self.max_tokens}")
        if len({seq for seq, _ in batch}) != B:
            raise ValueError("prefill: a request appears twice in the batch")
        # fresh prompts only: attention reads K and V from qkv's rows (the fast path)
        fresh = all(self.kv.lengths.get(seq, 0) == 0 for seq, _ in batch)
        self._reserve(batch, counts)
        t = 0
        self.h_cu_seqlens[0] = 0
        for b, ((seq, ids), n) in enumerate(zip(batch, counts)):
            self.h_ids[t:t + n] = ids
            self.h_positions[t:t + n], self.h_slots[t:t + n] = self.kv.append(seq, n)
            self.kv.table_row(seq, self.h_tables[b])
            self.h_context_lens[b] = self.kv.lengths[seq]
            t += n
            self.h_cu_seqlens[b + 1] = t
            self.h_rows[b] = t - 1
        self._copy_inputs(T, B)
        self._copy(self.cu_seqlens, self.h_cu_seqlens, B + 1)
        self._copy(self.rows, self.h_rows, B)
        max_new = max(counts)
        r, ops = self.arrays.rows, self.ops

        def attend(layer, qkv, out):
            c = self.config
            ops.prefill_attention(qkv, self.kv.k[layer], self.kv.v[layer],
                                  r(self.cu_seqlens, B + 1), r(self.block_tables, B),
                                  r(self.context_lens, B), out, max_new,
                                  c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                                  self.sm_scale, kv_from_qkv=fresh, **self.launch)

        x, res = self._layers(T, attend, r(self.ids, T), r(self.positions, T),
                              r(self.slots, T))
        lx, lres = r(self.last_hidden, B), r(self.last_residual, B)
        ops.gather_rows(x, r(self.rows, B), lx, **self.launch)
        ops.gather_rows(res, r(self.rows, B), lres, **self.launch)
        return self._head(lx, lres, B)

    def decode(self, seq_ids, tokens):
        """One decode step: token tokens[b] appended to request seq_ids[b] (each already
        prefilled). Returns the [B, V] logits view."""
        return self._decode_kernels(self._decode_inputs(seq_ids, tokens))

    def decode_tokens(self, seq_ids, tokens, sampling, step, keys=None):
        """One decode step that also picks the next token of each request (`sampling`, a
        SamplingParams; `step` seeds the sampler, `keys` (ints, one a request; default the
        rows) key each request's draws, so that a request samples the same whatever its row);
        returns them as a host int array. With cuda_graphs, the step's kernels are replayed
        from a graph captured after the first step of this batch size and sampling."""
        B = self._decode_inputs(seq_ids, tokens, step, keys)
        graph = self._graphs.get((B, sampling))
        if graph is not None:
            graph.replay()
        else:
            self._pick(self._decode_kernels(B), sampling)
        out = self.arrays.download(self.arrays.rows(self.next_tokens, B)).astype(np.int64)
        if graph is None and self.cuda_graphs:
            self._graphs[(B, sampling)] = self._capture(B, sampling)
        return out

    def decode_steps_async(self, seq_ids, sampling, first_step, steps, keys=None):
        """Queues `steps` decode steps of these requests, in this order, and waits for none of
        them. Each step's input tokens are the ones the device chose last (what the previous
        decode_tokens, decode_steps_async or select left in next_tokens); step s samples with
        step first_step + s and the requests' `keys` (decode_tokens). Returns a device int32
        [steps, max_batch] view of the model's history buffer whose row s holds step s's
        choices in its first len(seq_ids) entries (valid until the next call). The requests'
        cache grows by `steps` tokens at once (KVCacheFull before anything is queued when the
        blocks are short).

        The host makes every step's other inputs (positions, slots, context lengths, block
        tables) at once, with no per-step Python, and uploads them in one copy: a step costs
        the device a copy of its inputs, the graph, and a copy of its choices, and nothing
        allocates (the device would otherwise wait while the host prepares each step or
        while the driver allocates). Needs the captured step of this batch size and sampling
        (one decode_tokens call first)."""
        B = len(seq_ids)
        graph = self._graphs.get((B, sampling))
        if graph is None:
            raise ValueError(f"decode_steps_async: no captured decode step for batch {B} "
                             f"and {sampling}; run decode_tokens once first (cuda_graphs=True)")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"decode_steps_async: steps must be a positive int, got {steps!r}")
        host = self._stage_steps(seq_ids, first_step, steps, keys)
        a, r, Bm, S = self.arrays, self.arrays.rows, self.max_batch, steps
        if self._staged is None or self._staged.shape[0] < S:
            a.synchronize()  # the steps queued by an earlier call may still read the old ones
            rows = min(max(S, 128), self.max_seq_len)
            self._staged = a.empty((rows, host.shape[1]), "int32")
            self._history = a.empty((rows, Bm), "int32")
        staged = r(self._staged, S)
        a.copy_in(staged, host)
        inputs, chosen = r(self.dec, self.h_dec.size, Bm), r(self.next_tokens, B)
        for s in range(S):
            a.copy(inputs, a.reshape(r(staged, s + 1, s), (host.shape[1],)))
            graph.replay()
            a.copy(r(a.reshape(r(self._history, s + 1, s), (Bm,)), B), chosen)
        return r(self._history, S)

    def _stage_steps(self, seq_ids, first_step, S, keys=None):
        """The inputs after the ids row of S decode steps of these requests, as host rows of
        the packed input buffer ([S, size - max_batch]); reserves their cache blocks."""
        B, kv, Bm = len(seq_ids), self.kv, self.max_batch
        self._check_batch("decode", B)
        if len(set(seq_ids)) != B:
            raise ValueError("decode: a request appears twice in the batch")
        bs = kv.block_size
        start = np.empty(B, np.int64)
        for b, seq in enumerate(seq_ids):
            n = kv.lengths.get(seq)
            if n is None:
                raise ValueError(f"decode: request {seq!r} was not prefilled")
            if n + S > self.max_seq_len:
                raise ValueError(f"decode: request {seq!r} would hold {n + S} tokens, beyond "
                                 f"max_seq_len={self.max_seq_len}")
            start[b] = n
        need = [max(0, (n + S - 1) // bs + 1 - len(kv.tables[seq]))
                for seq, n in zip(seq_ids, start)]
        if sum(need) > kv.allocator.num_free:
            raise KVCacheFull(f"KV cache full: the batch needs {sum(need)} more blocks, "
                              f"{kv.allocator.num_free} of {kv.allocator.num_blocks} free")
        host = np.zeros((S, self.h_dec.size - Bm), np.int32)
        tables = host[0, 4 * Bm + 1:].reshape(Bm, -1)
        for b, (seq, k) in enumerate(zip(seq_ids, need)):
            if k:
                kv.tables[seq].extend(kv.allocator.allocate(k))
            kv.table_row(seq, tables[b])
            kv.lengths[seq] = int(start[b]) + S
        pos = start[None, :] + np.arange(S)[:, None]  # [S, B]
        host[:, :B] = pos
        host[:, Bm:Bm + B] = tables[np.arange(B)[None, :], pos // bs] * bs + pos % bs
        host[:, 2 * Bm:2 * Bm + B] = pos + 1
        host[:, 3 * Bm:3 * Bm + B] = _keys(keys, B)
        host[:, 4 * Bm] = first_step + np.arange(S)
        host[1:, 4 * Bm + 1:] = host[0, 4 * Bm + 1:]
        return host

    def select(self, logits, sampling, step, keys=None):
        """The next token of each row of `logits` (a [B, V] view from prefill or decode), on
        the device (argmax, or sample() seeded by `step` and the rows' `keys`, as
        decode_tokens); a host int array."""
        B = logits.shape[0]
        self.h_dec_keys[:B] = _keys(keys, B)
        self.h_step[0] = step
        self.arrays.copy_in(self._keys_step, self._h_keys_step)
        self._pick(logits, sampling)
        return self.arrays.download(self.arrays.rows(self.next_tokens, B)).astype(np.int64)

    def _decode_inputs(self, seq_ids, tokens, step=0, keys=None):
        """Checks a decode step's requests and copies its inputs into the fixed buffers;
        returns the batch size."""
        B = len(seq_ids)
        self._check_batch("decode", B)
        tokens = np.asarray(tokens)
        if tokens.shape != (B,) or not np.issubdtype(tokens.dtype, np.integer):
            raise ValueError(f"decode: tokens must be one integer id per request ({B}), got "
                             f"{tokens.dtype} {tokens.shape}")
        V, kv = self.config.vocab_size, self.kv
        bad = np.nonzero((tokens < 0) | (tokens >= V))[0]
        if bad.size:
            raise ValueError(f"decode: request {seq_ids[bad[0]]!r}: token ids must be in "
                             f"[0, {V}), got {tokens[bad[0]]}")
        if len(set(seq_ids)) != B:
            raise ValueError("decode: a request appears twice in the batch")
        bs, need = kv.block_size, 0
        for seq in seq_ids:
            n = kv.lengths.get(seq)
            if n is None:
                raise ValueError(f"decode: request {seq!r} was not prefilled")
            if n + 1 > self.max_seq_len:
                raise ValueError(f"decode: request {seq!r} would hold {n + 1} tokens, beyond "
                                 f"max_seq_len={self.max_seq_len}")
            need += n // bs >= len(kv.tables[seq])
        if need > kv.allocator.num_free:
            raise KVCacheFull(f"KV cache full: the batch needs {need} more blocks, "
                              f"{kv.allocator.num_free} of {kv.allocator.num_blocks} free")
        # host work per request kept to a few integer operations: this runs every token
        self.h_dec_ids[:B] = tokens
        rows = self._dec_rows
        for b, seq in enumerate(seq_ids):
            pos, table = kv.lengths[seq], kv.tables[seq]
            if pos // bs >= len(table):
                table.extend(kv.allocator.allocate(1))
            kv.lengths[seq] = pos + 1
            self.h_dec_positions[b] = pos
            self.h_dec_slots[b] = table[pos // bs] * bs + pos % bs
            self.h_dec_context_lens[b] = pos + 1
            if rows[b] != (seq, len(table)):  # the row holds another table: rewrite it
                kv.table_row(seq, self.h_dec_tables[b])
                rows[b] = (seq, len(table))
        self.h_dec_keys[:B] = _keys(keys, B)
        self.h_step[0] = step
        self.arrays.copy_in(self.dec, self.h_dec)
        return B

    @_dependent_launches
    def _decode_kernels(self, B):
        """The launches of a decode step of B requests (inputs already in the buffers)."""
        r, c = self.arrays.rows, self.config

        def attend(layer, qkv, out):
            # RoPE and the cache write of the new token happen inside decode attention
            extra = {} if self.decode_scratch is None else {"scratch": self.decode_scratch}
            if self._decode_splits:
                extra["num_splits"] = self._decode_splits
            self.ops.decode_attention(qkv, self.kv.k[layer], self.kv.v[layer],
                                      r(self.dec_tables, B), r(self.dec_context_lens, B), out,
                                      c.num_attention_heads, c.num_key_value_heads,
                                      c.head_dim, self.sm_scale,
                                      positions=r(self.dec_positions, B), cos=self.cos,
                                      sin=self.sin, slot_mapping=r(self.dec_slots, B),
                                      **extra, **self.launch)

        x, res = self._layers(B, attend, r(self.dec_ids, B), r(self.dec_positions, B),
                              r(self.dec_slots, B), decode=True)
        return self._head(x, res, B)

    @_dependent_launches
    def _pick(self, logits, sampling):
        """next_tokens[:B] = argmax or a sample of each row; the sampler reads its step from
        the step buffer (so a captured step samples anew at each replay)."""
        out = self.arrays.rows(self.next_tokens, logits.shape[0])
        if sampling.greedy:  # the sampler's scratch holds argmax's per-split partials
            extra = {} if self.sample_scratch is None else {"scratch": self.sample_scratch}
            self.ops.argmax(logits, out, **extra, **self.launch)
        else:
            self.ops.sample(logits, out, float(sampling.temperature), sampling.top_k,
                            float(sampling.top_p), sampling.seed, self.step,
                            keys=self.arrays.rows(self.dec_keys, logits.shape[0]),
                            scratch=self.sample_scratch, **self.launch)

    def _capture(self, B, sampling):
        """The decode step of B requests with `sampling`, captured (its kernels ran once
        already, so none compiles during the capture)."""
        if self.arrays.device == "gpu":
            import kiln
            g = kiln.CUDAGraph()
            with kiln.graph(g, stream=self.stream):
                self._pick(self._decode_kernels(B), sampling)
            return g
        step, ops, reduce = _RecordedStep(), self.ops, self.all_reduce
        self.ops = _Recorder(ops, step.calls)
        if reduce is not None:
            self.all_reduce = lambda x: step.calls.append((reduce, (x,), {}))
        try:
            self._pick(self._decode_kernels(B), sampling)
        finally:
            self.ops, self.all_reduce = ops, reduce
        return step

    def release(self, seq_id):
        """Frees request `seq_id`'s KV cache blocks (for reuse by later requests)."""
        self.kv.free(seq_id)
        self._dec_rows = [None if r and r[0] == seq_id else r for r in self._dec_rows]

    def logits_numpy(self, logits):
        """A float32 numpy copy of a logits view."""
        return self.arrays.download(logits).astype(np.float32)

    # ------------------------------------------------------------------------- internals

    def _layers(self, T, attend, ids, pos, slots, decode=False):
        """The decoder layers on T rows; a prefill applies RoPE and writes the cache itself
        (decode's attend() does both)."""
        c, r, ops, ld, eps = self.config, self.arrays.rows, self.ops, self.launch, \
            self.config.rms_norm_eps
        res, x, normed = r(self.residual, T), r(self.hidden, T), r(self.normed, T)
        qkv, attn, gu, mlp = r(self.qkv, T), r(self.attn, T), r(self.gate_up, T), \
            r(self.mlp, T)
        ops.embedding(ids, self.embed, res, **ld)
        fuse_swiglu = self._fuses_swiglu(T, decode)
        if self._fuses_norm(T, decode):
            for i, w in enumerate(self.layers):
                self._linear(res, w.qkv, qkv, ld, decode, norm=w.in_norm)
                attend(i, qkv, attn)
                self._linear(attn, w.o, res, ld, decode, residual=True)
                self._linear(res, w.gate_up, mlp if fuse_swiglu else gu, ld, decode,
                             swiglu=fuse_swiglu, norm=w.post_norm)
                if not fuse_swiglu:
                    ops.silu_mul(gu, mlp, **ld)
                self._linear(mlp, w.down, res, ld, decode, residual=True)
            return None, res  # every block's output is in res already
        for i, w in enumerate(self.layers):
            if i == 0:
                ops.rmsnorm(res, w.in_norm, normed, eps, **ld)
            else:
                ops.add_rmsnorm(x, res, w.in_norm, normed, eps, **ld)
            self._linear(normed, w.qkv, qkv, ld, decode)
            if not decode:
                ops.rope_cache(qkv, pos, self.cos, self.sin, self.kv.k[i], self.kv.v[i],
                               slots, c.num_attention_heads, c.num_key_value_heads,
                               c.head_dim, **ld)
            attend(i, qkv, attn)
            self._linear(attn, w.o, x, ld, decode)
            if self.all_reduce is not None:  # tensor parallel: partial sums of o_proj
                self.all_reduce(x)
            ops.add_rmsnorm(x, res, w.post_norm, normed, eps, **ld)
            if fuse_swiglu:
                self._linear(normed, w.gate_up, mlp, ld, decode, swiglu=True)
            else:
                self._linear(normed, w.gate_up, gu, ld, decode)
                ops.silu_mul(gu, mlp, **ld)
            self._linear(mlp, w.down, x, ld, decode)
            if self.all_reduce is not None:
                self.all_reduce(x)
        return x, res

    def _head(self, x, res, B):
        """The final norm and the LM head on B rows (x, res: [B, H]; x None: the layers added
        every output into res and the head's linear normalizes it)."""
        r, ld = self.arrays.rows, self.launch
        normed, logits = r(self.last_normed, B), r(self.logits, B)
        if x is None:
            self._linear(res, self.lm_head, logits, ld, norm=self.norm)
            return logits
        self.ops.add_rmsnorm(x, res, self.norm, normed, self.config.rms_norm_eps, **ld)
        self._linear(normed, self.lm_head, logits, ld)
        return logits

    def _copy(self, dst, host, n):
        self.arrays.copy_in(self.arrays.rows(dst, n), host[:n])

    def _copy_inputs(self, T, B):
        self._copy(self.ids, self.h_ids, T)
        self._copy(self.positions, self.h_positions, T)
        self._copy(self.slots, self.h_slots, T)
        self._copy(self.block_tables, self.h_tables, B)
        self._copy(self.context_lens, self.h_context_lens, B)

    def _check_batch(self, op, B):
        if not 0 < B <= self.max_batch:
            raise ValueError(f"{op}: batch of {B} requests; the model takes 1 to "
                             f"max_batch={self.max_batch}")

    def _check_ids(self, op, seq, ids):
        ids = np.asarray(ids)
        if ids.ndim != 1 or ids.size == 0 or not np.issubdtype(ids.dtype, np.integer):
            raise ValueError(f"{op}: request {seq!r}: token ids must be a non-empty 1-D "
                             f"integer array, got {ids.dtype} {ids.shape}")
        if ids.min() < 0 or ids.max() >= self.config.vocab_size:
            raise ValueError(f"{op}: request {seq!r}: token ids must be in [0, "
                             f"{self.config.vocab_size}), got {ids.min()}..{ids.max()}")
        have = self.kv.lengths.get(seq, 0)
        if have + ids.size > self.max_seq_len:
            raise ValueError(f"{op}: request {seq!r} would hold {have + ids.size} tokens, "
                             f"beyond max_seq_len={self.max_seq_len}")
        return int(ids.size)

    def _reserve(self, batch, counts):
        """Adds new requests and reserves every block the batch needs, or raises KVCacheFull
        having changed nothing."""
        kv = self.kv
        need = sum(max(0, kv.blocks_for(kv.lengths.get(seq, 0) + n) -
                       len(kv.tables.get(seq, ())))
                   for (seq, _), n in zip(batch, counts))
        if need > kv.allocator.num_free:
            raise KVCacheFull(f"KV cache full: the batch needs {need} more blocks, "
                              f"{kv.allocator.num_free} of {kv.allocator.num_blocks} free")
        for (seq, _), n in zip(batch, counts):
            if seq not in kv.tables:
                kv.add(seq)
            kv.reserve(seq, kv.lengths[seq] + n)


def _keys(keys, B):
    """The sampler's draw keys of B rows: `keys` (one int a request) or the rows."""
    if keys is None:
        return np.arange(B, dtype=np.int32)
    keys = np.asarray(keys)
    if keys.shape != (B,) or not np.issubdtype(keys.dtype, np.integer) or \
            (keys.size and (keys.min() < 0 or keys.max() >= 2**31)):
        raise ValueError(f"sampling keys must be {B} ints in [0, 2^31), got {keys!r}")
    return keys.astype(np.int32)


def _host_array(w):
    """A numpy array of a weight: numpy, or a torch tensor (any device; bf16 through its
    16-bit words, as ml_dtypes.bfloat16) such as an HF model's state_dict() holds."""
    if type(w).__module__.startswith("torch"):
        import torch
        w = w.detach().cpu().contiguous()
        if w.dtype == torch.bfloat16:
            from .checkpoint import np_dtype
            return w.view(torch.int16).numpy().view(np_dtype("bf16"))
        return w.numpy()
    return np.asarray(w)


class _RecordedStep:
    """The CPU's stand-in of a CUDA graph: the step's launches with the arguments (the same
    array views, the same scalars) they had at capture, replayed in order."""

    def __init__(self):
        self.calls = []

    def replay(self):
        for fn, args, kwargs in self.calls:
            fn(*args, **kwargs)


class _Recorder:
    """Stands for the ops module during a CPU capture: each op call is recorded, not run."""

    def __init__(self, ops, calls):
        self._ops, self._calls = ops, calls

    def __getattr__(self, name):
        fn = getattr(self._ops, name)
        return lambda *args, **kwargs: self._calls.append((fn, args, kwargs))


def _positive(name, value):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0:
        raise ValueError(f"LlamaModel: {name} must be a positive integer, got {value!r}")
    return int(value)
