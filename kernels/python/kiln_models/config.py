"""kiln_models.config: the Llama architecture's hyperparameters (LlamaConfig), read from a
HuggingFace `config.json` or taken from a preset ("tiny" for CPU CI, "1b" for Llama-3.2-1B's
shapes). Anything the model does not implement (another rope type, biases, another
activation, sliding windows) is a ValueError naming the file and the field, never a model that
silently computes something else."""

import dataclasses
import json
import os

__all__ = ["LlamaConfig", "PRESETS", "preset", "load_config"]

#: The model_type values whose architecture is the Llama decoder this package implements
#: (Mistral without a sliding window is the same network).
_MODEL_TYPES = ("llama", "mistral")
_DTYPES = ("float32", "bfloat16", "float16")
_LLAMA3_KEYS = ("factor", "low_freq_factor", "high_freq_factor",
                "original_max_position_embeddings")


@dataclasses.dataclass(frozen=True)
class LlamaConfig:
    """A Llama decoder's shape and numerics. rope_scaling is None or the Llama-3 frequency
    scaling as a dict with the keys of HF's "llama3" rope_scaling (factor, low_freq_factor,
    high_freq_factor, original_max_position_embeddings). torch_dtype is the checkpoint's
    dtype name ("float32", "bfloat16", "float16")."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    rope_scaling: dict = None
    max_position_embeddings: int = 2048
    tie_word_embeddings: bool = False
    torch_dtype: str = "float32"

    def __post_init__(self):
        self.validate()

    def validate(self, source="LlamaConfig"):
        """Raises ValueError naming `source` and the field when the values do not make a
        model."""
        def bad(field, why):
            raise ValueError(f"{source}: {field}={getattr(self, field)!r}: {why}")

        for field in ("hidden_size", "intermediate_size", "num_hidden_layers",
                      "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
                      "max_position_embeddings"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                bad(field, "expected a positive integer")
        if self.num_attention_heads % self.num_key_value_heads:
            bad("num_key_value_heads", f"expected a divisor of num_attention_heads "
                f"({self.num_attention_heads})")
        if self.head_dim % 2:
            bad("head_dim", "expected an even head dimension (RoPE rotates pairs)")
        if not (isinstance(self.rms_norm_eps, (int, float)) and self.rms_norm_eps > 0):
            bad("rms_norm_eps", "expected a positive number")
        if not (isinstance(self.rope_theta, (int, float)) and self.rope_theta > 0):
            bad("rope_theta", "expected a positive number")
        if self.torch_dtype not in _DTYPES:
            bad("torch_dtype", f"expected one of {', '.join(_DTYPES)}")
        if self.rope_scaling is not None:
            missing = [k for k in _LLAMA3_KEYS if k not in self.rope_scaling]
            if missing:
                bad("rope_scaling", f"llama3 scaling needs {', '.join(missing)}")
            for k in _LLAMA3_KEYS:
                v = self.rope_scaling[k]
                if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
                    bad("rope_scaling", f"{k} must be a positive number, got {v!r}")
            if self.rope_scaling["high_freq_factor"] <= self.rope_scaling["low_freq_factor"]:
                bad("rope_scaling", "high_freq_factor must be greater than low_freq_factor")

    @property
    def qkv_size(self):
        """Rows of the fused q/k/v weight: (Hq + 2 Hkv) D."""
        return (self.num_attention_heads + 2 * self.num_key_value_heads) * self.head_dim

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

    def to_dict(self):
        """The config as HF's config.json writes it (model_type llama)."""
        d = dataclasses.asdict(self)
        d.update(model_type="llama", architectures=["LlamaForCausalLM"], hidden_act="silu",
                 attention_bias=False, mlp_bias=False)
        if self.rope_scaling is not None:
            d["rope_scaling"] = dict(self.rope_scaling, rope_type="llama3")
        return d

    @classmethod
    def from_dict(cls, d, source="config.json"):
        """A config from HF's config.json dict; `source` names the file in errors."""
        if not isinstance(d, dict):
            raise ValueError(f"{source}: expected a JSON object, got {type(d).__name__}")

        def need(field):
            if field not in d:
                raise ValueError(f"{source}: missing field '{field}'")
            return d[field]

        def unsupported(field, why):
            raise ValueError(f"{source}: {field}={d.get(field)!r} is not supported: {why}")

        model_type = d.get("model_type", "llama")
        if model_type not in _MODEL_TYPES:
            unsupported("model_type", f"kiln_models implements {', '.join(_MODEL_TYPES)}")
        if d.get("hidden_act", "silu") != "silu":
            unsupported("hidden_act", "the Llama MLP is SwiGLU (silu)")
        for field in ("attention_bias", "mlp_bias"):
            if d.get(field, False):
                unsupported(field, "Llama's projections have no bias")
        if d.get("sliding_window") is not None:
            unsupported("sliding_window", "attention is over the whole context")
        if d.get("attention_dropout", 0.0) not in (0, 0.0):
            unsupported("attention_dropout", "inference only")
        if d.get("tie_word_embeddings") is None and "tie_word_embeddings" in d:
            unsupported("tie_word_embeddings", "expected true or false")

        theta, scaling = _rope(d, source)
        heads = need("num_attention_heads")
        hidden = need("hidden_size")
        head_dim = d.get("head_dim")
        if head_dim is None:
            if not isinstance(hidden, int) or not isinstance(heads, int) or heads <= 0 or \
                    hidden % heads:
                raise ValueError(f"{source}: no head_dim and hidden_size={hidden!r} is not a "
                                 f"multiple of num_attention_heads={heads!r}")
            head_dim = hidden // heads
        # transformers 5 writes "dtype" and leaves "torch_dtype" null
        dtype = d.get("torch_dtype") or d.get("dtype") or "float32"
        if dtype not in _DTYPES:
            unsupported("torch_dtype", f"expected one of {', '.join(_DTYPES)}")
        config = cls.__new__(cls)
        values = dict(
            hidden_size=hidden, intermediate_size=need("intermediate_size"),
            num_hidden_layers=need("num_hidden_layers"), num_attention_heads=heads,
            num_key_value_heads=d.get("num_key_value_heads") or heads, head_dim=head_dim,
            vocab_size=need("vocab_size"), rms_norm_eps=d.get("rms_norm_eps", 1e-6),
            rope_theta=theta, rope_scaling=scaling,
            max_position_embeddings=d.get("max_position_embeddings", 2048),
            tie_word_embeddings=bool(d.get("tie_word_embeddings", False)), torch_dtype=dtype)
        for k, v in values.items():
            object.__setattr__(config, k, v)
        config.validate(source)
        return config

    @classmethod
    def from_json(cls, path):
        """A config from a config.json file, or from the config.json of a model directory."""
        if os.path.isdir(path):
            path = os.path.join(path, "config.json")
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except OSError as e:
            raise ValueError(f"{path}: cannot read the model config ({e.strerror})") from None
        try:
            d = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: broken JSON: {e}") from None
        return cls.from_dict(d, source=path)


def _rope(d, source):
    """(rope_theta, llama3 scaling dict or None) from HF's rope_theta/rope_scaling (or the
    rope_parameters dict of newer transformers)."""
    params = d.get("rope_parameters")
    if isinstance(params, dict) and "rope_theta" in params:
        theta, scaling, field = params["rope_theta"], params, "rope_parameters"
    else:
        theta, scaling, field = d.get("rope_theta", 10000.0), d.get("rope_scaling"), \
            "rope_scaling"
    if scaling is None:
        return theta, None
    if not isinstance(scaling, dict):
        raise ValueError(f"{source}: {field}={scaling!r} is not supported: expected null or "
                         f"an object")
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return theta, None
    if kind != "llama3":
        raise ValueError(f"{source}: {field} type '{kind}' is not supported: kiln_models "
                         f"implements 'default' and 'llama3'")
    missing = [k for k in _LLAMA3_KEYS if k not in scaling]
    if missing:
        raise ValueError(f"{source}: {field}: llama3 scaling needs {', '.join(missing)}")
    return theta, {k: scaling[k] for k in _LLAMA3_KEYS}


PRESETS = {
    "tiny": LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                        vocab_size=256, rms_norm_eps=1e-5, rope_theta=10000.0,
                        # all three llama3 regimes at head_dim 16: wavelengths 6 .. 2e4
                        rope_scaling={"factor": 8.0, "low_freq_factor": 1.0,
                                      "high_freq_factor": 4.0,
                                      "original_max_position_embeddings": 64},
                        max_position_embeddings=512,
                        tie_word_embeddings=True, torch_dtype="float32"),
    "1b": LlamaConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                      num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                      vocab_size=128256, rms_norm_eps=1e-5, rope_theta=500000.0,
                      rope_scaling={"factor": 32.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8192},
                      max_position_embeddings=131072, tie_word_embeddings=True,
                      torch_dtype="bfloat16"),
}


def preset(name):
    """The preset config called `name` ("tiny" or "1b")."""
    if name not in PRESETS:
        raise ValueError(f"unknown config preset '{name}': expected one of "
                         f"{', '.join(PRESETS)}")
    return PRESETS[name]


def load_config(model_dir):
    """LlamaConfig.from_json(model_dir/config.json)."""
    return LlamaConfig.from_json(model_dir)
