"""kiln_models.checkpoint: HuggingFace-format Llama checkpoints with numpy only.

A safetensors file is an 8-byte little-endian header length N, N bytes of JSON naming each
tensor's dtype, shape and [begin, end) byte range in the data that follows, then the data.
read_safetensors maps the file and returns numpy views (bf16 as ml_dtypes.bfloat16, or uint16
bits when ml_dtypes is missing); save_safetensors writes one (tests, the quantizer).
load_weights reads `model.safetensors` or the shards named by `model.safetensors.index.json`
and checks every tensor the config needs against the HF Llama names and shapes. Every bad input
is a ValueError naming the file and the tensor: missing tensor, wrong shape, truncated file,
broken header JSON, unknown dtype.
"""

import json
import os
import struct

import numpy as np

__all__ = ["SafetensorsFile", "read_safetensors", "save_safetensors", "llama_tensor_shapes",
           "read_quantization", "quantized_tensor_shapes", "save_quantized",
           "load_weights", "save_checkpoint", "random_weights", "np_dtype"]

try:
    import ml_dtypes
    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # bf16 stays uint16 bits
    _BF16 = None

#: safetensors dtype codes with their item sizes (every code of the format: a file holding
#: other tensors, such as int64 position ids, still opens) and the numpy dtypes they read as
#: (F8 codes have none: reading one is an error naming it).
_CODES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1,
          "U64": 8, "U32": 4, "U16": 2, "U8": 1, "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}
_NUMPY = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "I16": "<i2",
          "I8": "i1", "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}
#: the codes a model weight may have
_FLOAT_CODES = ("F32", "F16", "BF16")
_MAX_HEADER = 100 << 20  # safetensors' own limit on the header's size


def np_dtype(name):
    """The numpy dtype of "float32"/"fp32", "float16"/"fp16", "bfloat16"/"bf16" (ml_dtypes)."""
    key = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}.get(name, name)
    if key == "float32":
        return np.dtype(np.float32)
    if key == "float16":
        return np.dtype(np.float16)
    if key == "bfloat16":
        if _BF16 is None:
            raise ValueError("bfloat16 needs the ml_dtypes package (pip install ml_dtypes)")
        return _BF16
    raise ValueError(f"unsupported dtype '{name}': expected fp32, bf16 or fp16")


def _code_of(array, name, path):
    dt = array.dtype
    if _BF16 is not None and dt == _BF16:
        return "BF16"
    for code, np_name in _NUMPY.items():
        if dt == np.dtype(np_name):
            return code
    raise ValueError(f"{path}: tensor '{name}' has dtype {dt}, which safetensors has no code "
                     f"for")


class SafetensorsFile:
    """One safetensors file, header parsed and checked on open; tensors read on demand as
    read-only numpy views of a memory map."""

    def __init__(self, path, bf16_bits=False):
        self.path, self.bf16_bits = path, bf16_bits
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                head = f.read(8)
                if len(head) < 8:
                    raise ValueError(f"{path}: truncated safetensors file: {size} bytes, "
                                     f"expected an 8-byte header length")
                (n,) = struct.unpack("<Q", head)
                if n > _MAX_HEADER or 8 + n > size:
                    raise ValueError(f"{path}: truncated safetensors file: the header is {n} "
                                     f"bytes but the file has {size}")
                raw = f.read(n)
        except OSError as e:
            raise ValueError(f"{path}: cannot read the checkpoint ({e.strerror})") from None
        try:
            header = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"{path}: safetensors header JSON is broken: {e}") from None
        if not isinstance(header, dict):
            raise ValueError(f"{path}: safetensors header JSON is broken: expected an object")
        self.metadata = header.pop("__metadata__", None) or {}
        self.data_start, self.data_size = 8 + n, size - 8 - n
        self.entries = {}
        for name, e in header.items():
            self.entries[name] = self._check_entry(name, e)
        self._map = None

    def _check_entry(self, name, e):
        where = f"{self.path}: tensor '{name}'"
        if not isinstance(e, dict) or not {"dtype", "shape", "data_offsets"} <= e.keys():
            raise ValueError(f"{where}: header entry needs dtype, shape and data_offsets")
        code, shape, offsets = e["dtype"], e["shape"], e["data_offsets"]
        if code not in _CODES:
            raise ValueError(f"{where}: unknown dtype '{code}': expected one of "
                             f"{', '.join(_CODES)}")
        if not isinstance(shape, list) or not all(
                isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
            raise ValueError(f"{where}: bad shape {shape!r}: expected a list of sizes")
        if not (isinstance(offsets, list) and len(offsets) == 2 and
                all(isinstance(o, int) and o >= 0 for o in offsets) and offsets[0] <= offsets[1]):
            raise ValueError(f"{where}: bad data_offsets {offsets!r}")
        nbytes = int(np.prod(shape, dtype=np.int64)) * _CODES[code]
        if offsets[1] - offsets[0] != nbytes:
            raise ValueError(f"{where}: data_offsets {offsets} hold {offsets[1] - offsets[0]} "
                             f"bytes, but {code} {shape} needs {nbytes}")
        if offsets[1] > self.data_size:
            raise ValueError(f"{where}: truncated file: the tensor ends at byte "
                             f"{offsets[1]} of the data, which has {self.data_size}")
        return code, tuple(shape), offsets[0]

    def keys(self):
        return list(self.entries)

    def shape(self, name):
        return self.entries[name][1]

    def get(self, name):
        """The tensor `name` as a read-only numpy array (a view of the mapped file)."""
        if name not in self.entries:
            raise ValueError(f"{self.path}: no tensor '{name}'")
        code, shape, begin = self.entries[name]
        count = int(np.prod(shape, dtype=np.int64))
        if count == 0:
            return np.zeros(shape, dtype=self._dtype(code, name))
        if self._map is None:
            self._map = np.memmap(self.path, dtype=np.uint8, mode="r")
        start = self.data_start + begin
        raw = self._map[start:start + count * _CODES[code]]
        return raw.view(self._dtype(code, name)).reshape(shape)

    def dtype_code(self, name):
        return self.entries[name][0]

    def _dtype(self, code, name):
        if code == "BF16":
            return _BF16 if _BF16 is not None and not self.bf16_bits else np.dtype("<u2")
        if code not in _NUMPY:
            raise ValueError(f"{self.path}: tensor '{name}' has dtype {code}, which numpy "
                             f"cannot read")
        return np.dtype(_NUMPY[code])


def read_safetensors(path, bf16_bits=False):
    """{name: numpy array} of every tensor in the file at `path`."""
    f = SafetensorsFile(path, bf16_bits)
    return {name: f.get(name) for name in f.keys()}


def save_safetensors(tensors, path, metadata=None):
    """Writes {name: numpy array} (floats, bfloat16, integers, bool) as a safetensors
    file."""
    header, offset, arrays = {}, 0, []
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        code = _code_of(a, name, path)
        header[name] = {"dtype": code, "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
        arrays.append(a)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # data 8-byte aligned, as safetensors pads
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for a in arrays:
            f.write(a.tobytes())


def llama_tensor_shapes(config):
    """{HF tensor name: shape} of every tensor a Llama checkpoint of `config` holds."""
    H, I, D = config.hidden_size, config.intermediate_size, config.head_dim
    q, kv = config.num_attention_heads * D, config.num_key_value_heads * D
    shapes = {"model.embed_tokens.weight": (config.vocab_size, H)}
    for i in range(config.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes.update({
            p + "input_layernorm.weight": (H,),
            p + "self_attn.q_proj.weight": (q, H),
            p + "self_attn.k_proj.weight": (kv, H),
            p + "self_attn.v_proj.weight": (kv, H),
            p + "self_attn.o_proj.weight": (H, q),
            p + "post_attention_layernorm.weight": (H,),
            p + "mlp.gate_proj.weight": (I, H),
            p + "mlp.up_proj.weight": (I, H),
            p + "mlp.down_proj.weight": (H, I)})
    shapes["model.norm.weight"] = (H,)
    if not config.tie_word_embeddings:
        shapes["lm_head.weight"] = (config.vocab_size, H)
    return shapes


#: config.json's entry of a checkpoint saved quantized (save_quantized):
#: {"method": "int8" | "int4", "group_size": int4's K group, "head": whether the LM head is}
QUANT_KEY = "kiln_quantization"
_PROJECTIONS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def read_quantization(model_dir):
    """The QUANT_KEY entry of `model_dir`'s config.json (checked), or None: a dense
    checkpoint."""
    path = os.path.join(model_dir, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            q = json.load(f).get(QUANT_KEY)
    except (OSError, json.JSONDecodeError, AttributeError):
        return None  # LlamaConfig.from_json reports what is wrong with the file
    if q is None:
        return None
    method = q.get("method") if isinstance(q, dict) else None
    group = q.get("group_size") if isinstance(q, dict) else None
    if method not in ("int8", "int4") or not isinstance(q.get("head"), bool) or (
            method == "int4" and (isinstance(group, bool) or not isinstance(group, int)
                                  or group < 2 or group % 2)):
        raise ValueError(f"{path}: {QUANT_KEY}={q!r} is not supported: expected method "
                         f"'int8' or 'int4', an even int4 group_size and a boolean head")
    return {"method": method, "group_size": group if method == "int4" else None,
            "head": q["head"]}


def quantized_tensor_shapes(config, quant):
    """{name: (shape, safetensors dtype codes)} of a checkpoint saved with `quant`
    (read_quantization's dict): each projection (and the LM head with quant["head"], a
    tied one too) as `<name>.qweight` (int8 [N, K] or int4 pairs uint8 [N, K / 2]) and
    `<name>.scales` (fp32 [N] or [N, K / group]), the rest as llama_tensor_shapes."""
    out, g = {}, quant["group_size"]
    shapes = dict(llama_tensor_shapes(config))
    if quant["head"] and config.tie_word_embeddings:
        shapes["lm_head.weight"] = (config.vocab_size, config.hidden_size)
    for name, shape in shapes.items():
        base = name[:-len(".weight")]
        if base.split(".", 3)[-1] in _PROJECTIONS or (base == "lm_head" and quant["head"]):
            N, K = shape
            if quant["method"] == "int8":
                out[base + ".qweight"], out[base + ".scales"] = ((N, K), ("I8",)), \
                    ((N,), ("F32",))
            else:
                out[base + ".qweight"], out[base + ".scales"] = ((N, K // 2), ("U8",)), \
                    ((N, K // g), ("F32",))
        elif not (base == "lm_head" and config.tie_word_embeddings):
            out[name] = (shape, _FLOAT_CODES)
    return out


def _open_files(model_dir):
    """{tensor name: SafetensorsFile} of the checkpoint in `model_dir`."""
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    single = os.path.join(model_dir, "model.safetensors")
    if os.path.exists(index_path):
        try:
            with open(index_path, encoding="utf-8") as f:
                index = json.load(f)
        except json.JSONDecodeError as e:
            raise ValueError(f"{index_path}: broken JSON: {e}") from None
        weight_map = index.get("weight_map") if isinstance(index, dict) else None
        if not isinstance(weight_map, dict):
            raise ValueError(f"{index_path}: expected a 'weight_map' object")
        files, where = {}, {}
        for name, shard in weight_map.items():
            path = os.path.join(model_dir, str(shard))
            if path not in files:
                if not os.path.exists(path):
                    raise ValueError(f"{index_path}: shard '{shard}' of tensor '{name}' "
                                     f"does not exist")
                files[path] = SafetensorsFile(path)
            if name not in files[path].entries:
                raise ValueError(f"{path}: no tensor '{name}' (the index puts it there)")
            where[name] = files[path]
        return where
    if os.path.exists(single):
        f = SafetensorsFile(single)
        return {name: f for name in f.keys()}
    raise ValueError(f"{model_dir}: no model.safetensors or model.safetensors.index.json")


def load_weights(model_dir, config, quant=None):
    """{HF name: numpy array} of every tensor `config` needs, read from the checkpoint in
    `model_dir` (tensors the model does not use, such as rotary inv_freq buffers, are
    skipped). A tied checkpoint that still holds lm_head.weight is fine (it is not read).
    quant (read_quantization's dict): the quantized checkpoint's tensors instead."""
    where = _open_files(model_dir)
    weights = {}
    wanted = quantized_tensor_shapes(config, quant) if quant else {
        name: (shape, _FLOAT_CODES) for name, shape in llama_tensor_shapes(config).items()}
    for name, (shape, codes) in wanted.items():
        if name not in where:
            raise ValueError(f"{model_dir}: checkpoint has no tensor '{name}'"
                             + (" (the config says tie_word_embeddings is false)"
                                if name == "lm_head.weight" else ""))
        f = where[name]
        if f.dtype_code(name) not in codes:
            raise ValueError(f"{f.path}: tensor '{name}' has dtype {f.dtype_code(name)}, "
                             f"a {'weight' if codes == _FLOAT_CODES else 'quantized one'} "
                             f"must be one of {', '.join(codes)}")
        if f.shape(name) != shape:
            raise ValueError(f"{f.path}: tensor '{name}' has shape {list(f.shape(name))}, "
                             f"the config needs {list(shape)}")
        weights[name] = f.get(name)
    return weights


def save_checkpoint(model_dir, config, weights, max_shard_bytes=None, quant=None):
    """Writes config.json and the weights (HF names) as model.safetensors, or as shards of at
    most `max_shard_bytes` with model.safetensors.index.json. quant: the QUANT_KEY entry of a
    quantized checkpoint's weights (save_quantized)."""
    os.makedirs(model_dir, exist_ok=True)
    with open(os.path.join(model_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(dict(config.to_dict(), **({QUANT_KEY: quant} if quant else {})), f,
                  indent=2)
    if max_shard_bytes is None:
        save_safetensors(weights, os.path.join(model_dir, "model.safetensors"),
                         {"format": "pt"})
        return
    shards, current, size = [], {}, 0
    for name, a in weights.items():
        if current and size + a.nbytes > max_shard_bytes:
            shards.append(current)
            current, size = {}, 0
        current[name] = a
        size += a.nbytes
    shards.append(current)
    weight_map = {}
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_safetensors(shard, os.path.join(model_dir, fname), {"format": "pt"})
        weight_map.update({name: fname for name in shard})
    total = sum(a.nbytes for a in weights.values())
    with open(os.path.join(model_dir, "model.safetensors.index.json"), "w",
              encoding="utf-8") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def save_quantized(src_dir, dst_dir, method, group_size=128, head=True,
                   max_shard_bytes=None):
    """Quantizes the dense checkpoint in `src_dir` (int8 per row or int4 per group of
    `group_size` K, as LlamaModel's quant= does at load; head: the LM head too, a tied one as
    its own copy) and writes it to `dst_dir` (quantized_tensor_shapes' names, QUANT_KEY in
    config.json): LlamaModel.from_pretrained(dst_dir) then loads it without quantizing.
    Returns the QUANT_KEY entry."""
    from .config import LlamaConfig
    from .ops.quant import quantize_int4, quantize_int8
    quant = {"method": method, "group_size": group_size if method == "int4" else None,
             "head": bool(head)}
    if method not in ("int8", "int4"):
        raise ValueError(f"save_quantized: method must be 'int8' or 'int4', got {method!r}")
    config = LlamaConfig.from_json(src_dir)
    weights = load_weights(src_dir, config)
    out = {}
    for name in quantized_tensor_shapes(config, quant):
        if name.endswith(".scales"):
            continue
        if not name.endswith(".qweight"):
            out[name] = weights[name]
            continue
        base = name[:-len(".qweight")]
        w = weights.get(base + ".weight", weights["model.embed_tokens.weight"])  # tied head
        try:
            q, scales = quantize_int8(w) if method == "int8" else quantize_int4(w, group_size)
        except (TypeError, ValueError) as e:
            raise ValueError(f"save_quantized: {src_dir}: tensor '{base}': {e}") from None
        out[name], out[base + ".scales"] = q, scales
    save_checkpoint(dst_dir, config, out, max_shard_bytes, quant)
    return quant


def random_weights(config, seed=0, dtype="float32", std=0.02, norm_noise=0.0):
    """{HF name: array} of random weights initialized as HF's Llama (normal, std 0.02, for
    every projection and the embedding; norms ones, plus N(0, norm_noise) when asked, so that
    tests see the norm weights), seeded, cast to `dtype`."""
    rng = np.random.default_rng(seed)
    out_dtype = np_dtype(dtype)
    weights = {}
    for name, shape in llama_tensor_shapes(config).items():
        if name.endswith("norm.weight"):
            w = np.ones(shape, np.float32)
            if norm_noise:
                w += rng.standard_normal(shape, dtype=np.float32) * np.float32(norm_noise)
        else:
            w = rng.standard_normal(shape, dtype=np.float32)
            w *= np.float32(std)
        weights[name] = w.astype(out_dtype, copy=False)
    return weights
