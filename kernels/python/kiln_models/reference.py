"""kiln_models.reference: a float64 numpy Llama forward written from the HF architecture, the
yardstick of the Kiln model's CPU tests.

RMSNorm (x / sqrt(mean(x^2) + eps) * w), RoPE in the rotate-half convention with the Llama-3
frequency scaling, grouped-query causal attention, the SwiGLU MLP (down(silu(gate(x)) *
up(x))), a tied or untied LM head. forward(ids) runs a whole sequence; with a cache it runs new
tokens after the cached ones (prefill then decode, one token at a time). rope_frequencies and
rope_tables are also what the model uses to make its cos/sin tables.
"""

import math

import numpy as np

__all__ = ["rope_frequencies", "rope_tables", "ReferenceLlama"]


def rope_frequencies(config):
    """The D/2 inverse frequencies theta^(-2i/D) in float64, with HF's llama3 scaling when the
    config has one: wavelengths longer than original/low_freq_factor are divided by factor,
    shorter than original/high_freq_factor kept, and those between interpolated smoothly."""
    D = config.head_dim
    inv = 1.0 / (float(config.rope_theta) ** (np.arange(0, D, 2, dtype=np.float64) / D))
    s = config.rope_scaling
    if s is None:
        return inv
    factor, low, high = float(s["factor"]), float(s["low_freq_factor"]), \
        float(s["high_freq_factor"])
    old = float(s["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    scaled = np.where(wavelen > old / low, inv / factor, inv)
    smooth = (old / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return np.where(medium, smoothed, scaled)


def rope_tables(config, positions, dtype=np.float64):
    """cos, sin [positions, D/2] of angle p * inv_freq[i] for p in 0..positions-1."""
    angles = np.arange(positions, dtype=np.float64)[:, None] * rope_frequencies(config)[None]
    return np.cos(angles).astype(dtype), np.sin(angles).astype(dtype)


def _rmsnorm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def _rope(x, cos, sin):
    """Rotate-half RoPE of x [T, heads, D] with cos/sin [T, D/2]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


class ReferenceLlama:
    """The HF Llama forward in float64 over `weights` ({HF name: array})."""

    def __init__(self, config, weights):
        self.config = config
        self.w = {k: np.asarray(v).astype(np.float64) for k, v in weights.items()}
        self.inv_freq = rope_frequencies(config)

    def new_cache(self):
        """An empty cache: per layer, the keys and values seen so far ([S, Hkv, D])."""
        c = self.config
        empty = np.zeros((0, c.num_key_value_heads, c.head_dim))
        return [[empty, empty] for _ in range(c.num_hidden_layers)]

    def forward(self, ids, cache=None):
        """Logits [T, V] (float64) of tokens `ids` placed after the cache's tokens (at
        positions 0.. without a cache); the cache, when given, gets their keys and values."""
        c, w = self.config, self.w
        ids = np.asarray(ids, dtype=np.int64)
        if ids.ndim != 1 or ids.size == 0:
            raise ValueError(f"ReferenceLlama.forward: ids must be a non-empty 1-D array, got "
                             f"shape {ids.shape}")
        if ids.min() < 0 or ids.max() >= c.vocab_size:
            raise ValueError(f"ReferenceLlama.forward: token ids must be in [0, "
                             f"{c.vocab_size}), got {ids.min()}..{ids.max()}")
        if cache is None:
            cache = self.new_cache()
        start = cache[0][0].shape[0]
        T, Hq, Hkv, D = ids.size, c.num_attention_heads, c.num_key_value_heads, c.head_dim
        angles = np.arange(start, start + T, dtype=np.float64)[:, None] * self.inv_freq[None]
        cos, sin = np.cos(angles), np.sin(angles)
        S = start + T
        # query t (position start + t) sees keys 0 .. start + t
        causal = np.arange(S)[None, :] <= (start + np.arange(T))[:, None]
        h = w["model.embed_tokens.weight"][ids]
        for i in range(c.num_hidden_layers):
            p = f"model.layers.{i}."
            x = _rmsnorm(h, w[p + "input_layernorm.weight"], c.rms_norm_eps)
            q = (x @ w[p + "self_attn.q_proj.weight"].T).reshape(T, Hq, D)
            k = (x @ w[p + "self_attn.k_proj.weight"].T).reshape(T, Hkv, D)
            v = (x @ w[p + "self_attn.v_proj.weight"].T).reshape(T, Hkv, D)
            q, k = _rope(q, cos, sin), _rope(k, cos, sin)
            cache[i][0] = np.concatenate([cache[i][0], k])
            cache[i][1] = np.concatenate([cache[i][1], v])
            keys = np.repeat(cache[i][0], Hq // Hkv, axis=1)  # [S, Hq, D]
            values = np.repeat(cache[i][1], Hq // Hkv, axis=1)
            scores = np.einsum("thd,shd->hts", q, keys) / math.sqrt(D)
            scores = np.where(causal[None], scores, -np.inf)
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            probs = scores / scores.sum(axis=-1, keepdims=True)
            attn = np.einsum("hts,shd->thd", probs, values).reshape(T, Hq * D)
            h = h + attn @ w[p + "self_attn.o_proj.weight"].T
            x = _rmsnorm(h, w[p + "post_attention_layernorm.weight"], c.rms_norm_eps)
            gate = x @ w[p + "mlp.gate_proj.weight"].T
            up = x @ w[p + "mlp.up_proj.weight"].T
            h = h + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
        h = _rmsnorm(h, w["model.norm.weight"], c.rms_norm_eps)
        head = w["model.embed_tokens.weight"] if c.tie_word_embeddings else w["lm_head.weight"]
        return h @ head.T

    def greedy(self, prompt, new_tokens):
        """The `new_tokens` ids greedy decoding appends to `prompt` (prefill, then one token at
        a time through the cache)."""
        cache = self.new_cache()
        logits = self.forward(prompt, cache)
        out = []
        for _ in range(new_tokens):
            out.append(int(np.argmax(logits[-1])))
            logits = self.forward([out[-1]], cache)
        return out
