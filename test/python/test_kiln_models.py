"""kiln_models (issue #24): the Llama config, the safetensors checkpoint reader and its errors,
the float64 reference, and the Kiln model on the CPU backend against the reference (GPU twins
marked `gpu`; the HF transformers comparison runs where torch and transformers are installed).
Quantization and tensor parallelism: test_kiln_models_quant_tp.py.
"""

import json
import os
import struct
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "kernels", "python"))

from kiln_models import checkpoint, config as cfg, reference  # noqa: E402
from kiln_models.config import LlamaConfig  # noqa: E402

TINY = cfg.preset("tiny")


def hf_dict(**changes):
    d = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 64,
         "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "vocab_size": 256, "rms_norm_eps": 1e-6,
         "rope_theta": 500000.0, "hidden_act": "silu", "attention_bias": False,
         "mlp_bias": False, "max_position_embeddings": 1024, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16",
         "rope_scaling": {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
    d.update(changes)
    return {k: v for k, v in d.items() if v is not _DROP}


_DROP = object()


# ----------------------------------------------------------------------------- config


def test_config_from_hf_dict_reads_every_field():
    c = LlamaConfig.from_dict(hf_dict())
    assert (c.hidden_size, c.intermediate_size, c.num_hidden_layers) == (64, 128, 2)
    assert (c.num_attention_heads, c.num_key_value_heads, c.head_dim) == (4, 2, 16)
    assert c.vocab_size == 256 and c.rms_norm_eps == 1e-6 and c.rope_theta == 500000.0
    assert c.rope_scaling == {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 8192}
    assert not c.tie_word_embeddings and c.torch_dtype == "bfloat16"
    assert c.qkv_size == (4 + 2 * 2) * 16


def test_config_defaults_and_alternate_spellings():
    c = LlamaConfig.from_dict(hf_dict(num_key_value_heads=_DROP, rope_scaling=None,
                                      torch_dtype=_DROP, dtype="float16", head_dim=32))
    assert c.num_key_value_heads == 4 and c.rope_scaling is None
    assert c.torch_dtype == "float16" and c.head_dim == 32
    c = LlamaConfig.from_dict(hf_dict(rope_scaling={"type": "default"}))
    assert c.rope_scaling is None
    # transformers 5 writes rope_parameters and dtype, with rope_theta, rope_scaling and
    # torch_dtype null
    c = LlamaConfig.from_dict(hf_dict(rope_theta=None, rope_scaling=None, torch_dtype=None,
                                      dtype="bfloat16", rope_parameters={
                                          "rope_type": "llama3", "rope_theta": 1234.0,
                                          "factor": 8.0, "low_freq_factor": 1.0,
                                          "high_freq_factor": 4.0,
                                          "original_max_position_embeddings": 64}))
    assert c.rope_theta == 1234.0 and c.rope_scaling["factor"] == 8.0
    assert c.torch_dtype == "bfloat16"


def test_config_round_trips_through_to_dict():
    for name in ("tiny", "1b"):
        c = cfg.preset(name)
        assert LlamaConfig.from_dict(json.loads(json.dumps(c.to_dict()))) == c


def test_config_presets():
    b = cfg.preset("1b")
    assert (b.hidden_size, b.num_hidden_layers, b.num_attention_heads,
            b.num_key_value_heads, b.head_dim, b.intermediate_size, b.vocab_size) == \
        (2048, 16, 32, 8, 64, 8192, 128256)
    assert b.tie_word_embeddings and b.rope_theta == 500000.0 and b.rms_norm_eps == 1e-5
    assert b.rope_scaling == {"factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                              "original_max_position_embeddings": 8192}
    with pytest.raises(ValueError, match="unknown config preset 'huge'"):
        cfg.preset("huge")


@pytest.mark.parametrize("changes, match", [
    (dict(rope_scaling={"rope_type": "yarn", "factor": 4.0}),
     r"rope_scaling type 'yarn' is not supported"),
    (dict(rope_scaling={"rope_type": "llama3", "factor": 4.0}),
     r"llama3 scaling needs low_freq_factor"),
    (dict(attention_bias=True), r"attention_bias=True is not supported"),
    (dict(mlp_bias=True), r"mlp_bias=True is not supported"),
    (dict(hidden_act="gelu"), r"hidden_act='gelu' is not supported"),
    (dict(model_type="gpt2"), r"model_type='gpt2' is not supported"),
    (dict(sliding_window=4096), r"sliding_window=4096 is not supported"),
    (dict(torch_dtype="int8"), r"torch_dtype='int8' is not supported"),
    (dict(hidden_size=_DROP), r"missing field 'hidden_size'"),
    (dict(num_key_value_heads=3), r"num_key_value_heads=3: expected a divisor"),
    (dict(hidden_size=-64, head_dim=16), r"hidden_size=-64: expected a positive integer"),
    (dict(hidden_size=62, head_dim=_DROP), r"not a multiple of num_attention_heads"),
    (dict(rms_norm_eps=0), r"rms_norm_eps=0: expected a positive number"),
])
def test_config_errors_name_the_file_and_field(tmp_path, changes, match):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(hf_dict(**changes)))
    with pytest.raises(ValueError, match=match) as info:
        LlamaConfig.from_json(str(tmp_path))
    assert str(path) in str(info.value)


def test_config_file_errors(tmp_path):
    with pytest.raises(ValueError, match="cannot read the model config"):
        LlamaConfig.from_json(str(tmp_path / "nowhere.json"))
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="config.json: broken JSON"):
        LlamaConfig.from_json(str(tmp_path))
    with pytest.raises(ValueError, match="head_dim=15: expected an even"):
        TINY.replace(head_dim=15)


# ----------------------------------------------------------------------------- checkpoint


def test_safetensors_round_trip_every_dtype(tmp_path):
    import ml_dtypes
    rng = np.random.default_rng(0)
    tensors = {"a": rng.standard_normal((3, 5)).astype(np.float32),
               "b": rng.standard_normal((7,)).astype(np.float16),
               "c": rng.standard_normal((2, 3, 4)).astype(ml_dtypes.bfloat16),
               "i": np.arange(6, dtype=np.int64).reshape(2, 3), "q": np.arange(5, dtype=np.int8),
               "empty": np.zeros((0, 4), np.float32)}
    path = str(tmp_path / "t.safetensors")
    checkpoint.save_safetensors(tensors, path, {"format": "pt"})
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    assert (8 + n) % 8 == 0 and header["c"]["dtype"] == "BF16"
    assert header["__metadata__"] == {"format": "pt"}
    back = checkpoint.read_safetensors(path)
    assert set(back) == set(tensors)
    for k, v in tensors.items():
        assert back[k].dtype == v.dtype and back[k].shape == v.shape
        np.testing.assert_array_equal(back[k].astype(np.float32), v.astype(np.float32))
    bits = checkpoint.read_safetensors(path, bf16_bits=True)["c"]
    assert bits.dtype == np.uint16
    np.testing.assert_array_equal(bits, tensors["c"].view(np.uint16))


def test_checkpoint_round_trip_single_and_sharded(tmp_path):
    weights = checkpoint.random_weights(TINY, seed=1, norm_noise=0.1)
    config = TINY.replace(tie_word_embeddings=False)
    weights["lm_head.weight"] = checkpoint.random_weights(config, seed=2)["lm_head.weight"]
    for shard in (None, 40_000):
        d = str(tmp_path / f"m{shard}")
        checkpoint.save_checkpoint(d, config, weights, max_shard_bytes=shard)
        if shard:
            assert len(json.load(open(os.path.join(d, "model.safetensors.index.json")))
                       ["weight_map"]) == len(weights)
            assert len([f for f in os.listdir(d) if f.endswith(".safetensors")]) > 1
        assert LlamaConfig.from_json(d) == config
        back = checkpoint.load_weights(d, config)
        assert set(back) == set(weights)
        for k in weights:
            np.testing.assert_array_equal(back[k], weights[k])


def test_random_weights_are_seeded_and_scaled_like_hf():
    a = checkpoint.random_weights(TINY, seed=3)
    b = checkpoint.random_weights(TINY, seed=3)
    c = checkpoint.random_weights(TINY, seed=4, dtype="bf16")
    np.testing.assert_array_equal(a["model.layers.1.mlp.up_proj.weight"],
                                  b["model.layers.1.mlp.up_proj.weight"])
    assert not np.array_equal(a["model.embed_tokens.weight"],
                              c["model.embed_tokens.weight"].astype(np.float32))
    assert str(c["model.norm.weight"].dtype) == "bfloat16"
    assert abs(a["model.embed_tokens.weight"].std() - 0.02) < 0.002
    np.testing.assert_array_equal(a["model.norm.weight"], 1)
    assert set(a) == set(checkpoint.llama_tensor_shapes(TINY))
    assert "lm_head.weight" not in a


def _write_raw(path, header, data=b"", header_bytes=None):
    raw = header_bytes if header_bytes is not None else json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw + data)


def test_broken_safetensors_files_name_file_and_tensor(tmp_path):
    p = str(tmp_path / "bad.safetensors")
    with open(p, "wb") as f:
        f.write(b"\x01\x02")
    with pytest.raises(ValueError, match="bad.safetensors: truncated safetensors file: 2 bytes"):
        checkpoint.SafetensorsFile(p)
    with open(p, "wb") as f:
        f.write(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(ValueError, match="the header is 1000 bytes but the file has 10"):
        checkpoint.SafetensorsFile(p)
    _write_raw(p, None, header_bytes=b'{"w": {"dtype": ')
    with pytest.raises(ValueError, match="bad.safetensors: safetensors header JSON is broken"):
        checkpoint.SafetensorsFile(p)
    _write_raw(p, {"w": {"dtype": "Q4", "shape": [2], "data_offsets": [0, 2]}}, b"\0\0")
    with pytest.raises(ValueError, match="tensor 'w': unknown dtype 'Q4'"):
        checkpoint.SafetensorsFile(p)
    _write_raw(p, {"w": {"dtype": "F8_E4M3", "shape": [2], "data_offsets": [0, 2]}}, b"\0\0")
    with pytest.raises(ValueError, match="tensor 'w' has dtype F8_E4M3, which numpy cannot"):
        checkpoint.SafetensorsFile(p).get("w")
    _write_raw(p, {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8)
    with pytest.raises(ValueError, match="tensor 'w': truncated file: the tensor ends at byte 16"):
        checkpoint.SafetensorsFile(p)
    _write_raw(p, {"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 12]}}, b"\0" * 16)
    with pytest.raises(ValueError, match=r"tensor 'w': data_offsets \[0, 12\] hold 12 bytes"):
        checkpoint.SafetensorsFile(p)
    _write_raw(p, {"w": {"dtype": "F32", "shape": "4", "data_offsets": [0, 16]}}, b"\0" * 16)
    with pytest.raises(ValueError, match="tensor 'w': bad shape '4'"):
        checkpoint.SafetensorsFile(p)
    _write_raw(p, {"w": {"shape": [4]}}, b"")
    with pytest.raises(ValueError, match="tensor 'w': header entry needs dtype"):
        checkpoint.SafetensorsFile(p)
    with pytest.raises(ValueError, match="cannot read the checkpoint"):
        checkpoint.SafetensorsFile(str(tmp_path / "missing.safetensors"))


def test_broken_checkpoints_name_file_and_tensor(tmp_path):
    weights = checkpoint.random_weights(TINY, seed=0)
    d = str(tmp_path / "m")
    with pytest.raises(ValueError, match="no model.safetensors or model.safetensors.index"):
        checkpoint.load_weights(str(tmp_path), TINY)
    missing = dict(weights)
    del missing["model.layers.1.mlp.down_proj.weight"]
    checkpoint.save_checkpoint(d, TINY, missing)
    with pytest.raises(ValueError, match="no tensor 'model.layers.1.mlp.down_proj.weight'"):
        checkpoint.load_weights(d, TINY)
    checkpoint.save_checkpoint(d, TINY, weights)
    with pytest.raises(ValueError, match="no tensor 'lm_head.weight' .*tie_word_embeddings"):
        checkpoint.load_weights(d, TINY.replace(tie_word_embeddings=False))
    ints = dict(weights, **{"model.norm.weight": np.ones(64, np.int32),
                            "model.position_ids": np.arange(8, dtype=np.int64)})
    checkpoint.save_checkpoint(d, TINY, ints)  # an int64 extra tensor does not matter ...
    with pytest.raises(ValueError, match="tensor 'model.norm.weight' has dtype I32, a weight "
                                         "must be one of F32, F16, BF16"):
        checkpoint.load_weights(d, TINY)  # ... an int weight does
    wrong = dict(weights, **{"model.norm.weight": np.ones(63, np.float32)})
    checkpoint.save_checkpoint(d, TINY, wrong)
    with pytest.raises(ValueError, match=r"model.safetensors: tensor 'model.norm.weight' has "
                                         r"shape \[63\], the config needs \[64\]"):
        checkpoint.load_weights(d, TINY)
    # sharded: a shard that is not there, an index that points at the wrong shard
    s = str(tmp_path / "s")
    checkpoint.save_checkpoint(s, TINY, weights, max_shard_bytes=40_000)
    index_path = os.path.join(s, "model.safetensors.index.json")
    index = json.load(open(index_path))
    shards = sorted(set(index["weight_map"].values()))
    os.rename(os.path.join(s, shards[-1]), os.path.join(s, "gone"))
    with pytest.raises(ValueError, match=f"shard '{shards[-1]}' of tensor '.*' does not exist"):
        checkpoint.load_weights(s, TINY)
    os.rename(os.path.join(s, "gone"), os.path.join(s, shards[-1]))
    index["weight_map"]["model.norm.weight"] = shards[0]
    json.dump(index, open(index_path, "w"))
    assert "model.norm.weight" not in checkpoint.SafetensorsFile(os.path.join(s, shards[0])).keys()
    with pytest.raises(ValueError, match="no tensor 'model.norm.weight' .the index puts it"):
        checkpoint.load_weights(s, TINY)
    open(index_path, "w").write("{")
    with pytest.raises(ValueError, match="model.safetensors.index.json: broken JSON"):
        checkpoint.load_weights(s, TINY)


# ----------------------------------------------------------------------------- reference


def test_reference_rope_llama3_frequencies_by_hand():
    c = TINY
    inv = reference.rope_frequencies(c)
    base = 1.0 / 10000.0 ** (np.arange(0, 16, 2) / 16)
    wl = 2 * np.pi / base
    s = c.rope_scaling
    low_wl = s["original_max_position_embeddings"] / s["low_freq_factor"]
    high_wl = s["original_max_position_embeddings"] / s["high_freq_factor"]
    assert (wl < high_wl).any() and (wl > low_wl).any() and \
        ((wl >= high_wl) & (wl <= low_wl)).any()  # the tiny preset covers all three regimes
    for i in range(8):
        if wl[i] < high_wl:
            assert inv[i] == base[i]
        elif wl[i] > low_wl:
            assert np.isclose(inv[i], base[i] / s["factor"])
        else:
            t = (s["original_max_position_embeddings"] / wl[i] - 1) / (4 - 1)
            assert np.isclose(inv[i], (1 - t) * base[i] / 8 + t * base[i])
    assert np.allclose(reference.rope_frequencies(c.replace(rope_scaling=None)), base)


def test_reference_cached_decode_equals_full_forward():
    ref = reference.ReferenceLlama(TINY, checkpoint.random_weights(TINY, 0, norm_noise=0.1))
    ids = np.random.default_rng(0).integers(0, 256, 11)
    full = ref.forward(ids)
    cache = ref.new_cache()
    parts = [ref.forward(ids[:6], cache)] + [ref.forward(ids[i:i + 1], cache)
                                             for i in range(6, 11)]
    np.testing.assert_allclose(np.concatenate(parts), full, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"token ids must be in \[0, 256\)"):
        ref.forward([3, 256])


# ----------------------------------------------------------------------------- model

import models_numpy_ops  # noqa: E402
from kiln_models import generate as gen, kv_cache  # noqa: E402
from kiln_models.model import LlamaModel  # noqa: E402

_KILN_OPS = ("embedding", "rmsnorm", "add_rmsnorm", "linear", "silu_mul", "gather_rows",
             "argmax", "sample", "rope_cache", "prefill_attention", "decode_attention")


def kiln_ops_or_skip():
    from kiln_models import ops
    missing = [n for n in _KILN_OPS if not hasattr(ops, n)]
    if missing:
        pytest.skip(f"kiln_models.ops has no {', '.join(missing)} yet")
    return ops


# "numpy": the model's plumbing with numpy stand-ins of the ops; "kiln": the real kernels on
# the CPU backend; "gpu": the real kernels on the GPU (kiln.DeviceArray)
@pytest.fixture(params=["numpy", "kiln", pytest.param("gpu", marks=pytest.mark.gpu)])
def backend(request):
    if request.param == "numpy":
        return models_numpy_ops, "cpu"
    return kiln_ops_or_skip(), "cpu" if request.param == "kiln" else "gpu"


NUMPY = (models_numpy_ops, "cpu")


WEIGHTS = checkpoint.random_weights(TINY, seed=7, norm_noise=0.1)
REF = reference.ReferenceLlama(TINY, WEIGHTS)


def rel_err(got, want):
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def tiny_model(backend, **kw):
    kw = dict(dict(max_batch=4, max_tokens=64, max_seq_len=64, block_size=4,
                   device=backend[1]), **kw)
    return LlamaModel(TINY, WEIGHTS, ops=backend[0], **kw)


def prompt(n, seed):
    return np.random.default_rng(seed).integers(0, TINY.vocab_size, n)


def check_prefill_then_decode(model, tol):
    ids = prompt(13, 1)
    want = REF.forward(ids)
    got = model.logits_numpy(model.prefill([("a", ids[:9])]))
    assert got.shape == (1, TINY.vocab_size)
    assert rel_err(got[0], want[8]) <= tol
    for t in range(9, 13):
        got = model.logits_numpy(model.decode(["a"], np.array([ids[t]])))
        assert rel_err(got[0], want[t]) <= tol, t
    model.release("a")


def test_model_prefill_then_decode_equals_reference(backend):
    check_prefill_then_decode(tiny_model(backend), 1e-4)


def test_model_batches_requests_of_different_lengths(backend):
    model = tiny_model(backend)
    ids = {"x": prompt(11, 2), "y": prompt(3, 3), "z": prompt(6, 4)}
    want = {k: REF.forward(v) for k, v in ids.items()}
    got = model.logits_numpy(model.prefill([("x", ids["x"][:7]), ("y", ids["y"][:2]),
                                            ("z", ids["z"][:5])]))
    for row, (k, n) in enumerate([("x", 7), ("y", 2), ("z", 5)]):
        assert rel_err(got[row], want[k][n - 1]) <= 1e-4, k
    # decode the three together, then two of them with the third's continuation prefilled
    got = model.logits_numpy(model.decode(["x", "y", "z"], np.array(
        [ids["x"][7], ids["y"][2], ids["z"][5]])))
    for row, (k, n) in enumerate([("x", 8), ("y", 3), ("z", 6)]):
        assert rel_err(got[row], want[k][n - 1]) <= 1e-4, k
    # a continued request beside a fresh one (attention through the block tables)
    w = prompt(5, 5)
    got = model.logits_numpy(model.prefill([("x", ids["x"][8:11]), ("w", w)]))
    assert rel_err(got[0], want["x"][10]) <= 1e-4
    assert rel_err(got[1], REF.forward(w)[-1]) <= 1e-4
    for k in list(ids) + ["w"]:
        model.release(k)
    assert model.kv.allocator.num_free == model.kv.allocator.num_blocks


@pytest.mark.parametrize("graphs", [False, True])
def test_model_greedy_generation_equals_reference(backend, graphs):
    # graphs: decode steps replayed from a capture (GPU: CUDA graphs; CPU: the recorded
    # launches with their captured arguments), after one eager step per batch size
    model = tiny_model(backend, cuda_graphs=graphs)
    prompts = [prompt(5, 10), prompt(12, 11), prompt(2, 12), prompt(7, 13)]
    result = gen.generate(model, prompts, 6)
    assert result.tokens == [REF.greedy(p, 6) for p in prompts]
    assert result.prefill_tokens == 26 and result.decode_tokens == 20
    assert len(model._graphs) == (1 if graphs else 0)
    assert model.kv.allocator.num_free == model.kv.allocator.num_blocks
    # a stop token ends its request (others go on, the batch shrinks)
    stop = result.tokens[1][2]
    stopped = gen.generate(model, prompts, 6, stop_token=stop).tokens
    for full, got in zip(result.tokens, stopped):
        assert got == (full[:full.index(stop) + 1] if stop in full else full)
    with pytest.raises(ValueError, match=r"stop_token must be an id in \[0, 256\)"):
        gen.generate(model, prompts, 2, stop_token=256)
    # prompts beyond one prefill's max_tokens go in several prefills, a prompt longer than
    # max_tokens in pieces
    small = tiny_model(backend, max_tokens=12, cuda_graphs=graphs)
    assert gen.generate(small, prompts, 3).tokens == [t[:3] for t in result.tokens]
    smaller = tiny_model(backend, max_tokens=3, max_batch=4,  # decode rows > max_tokens
                         cuda_graphs=graphs)
    assert gen.generate(smaller, prompts, 3).tokens == [t[:3] for t in result.tokens]


def test_model_sampling_is_seeded(backend):
    model = tiny_model(backend)
    prompts = [prompt(4, 20), prompt(7, 21)]
    s = gen.SamplingParams(temperature=1.5, top_k=20, top_p=0.9, seed=5)
    a = gen.generate(model, prompts, 5, s).tokens
    assert a == gen.generate(model, prompts, 5, s).tokens
    others = [gen.generate(model, prompts, 5, dataclasses_replace(s, seed=k)).tokens
              for k in range(6, 9)]
    assert any(o != a for o in others)
    # top_k=1 is greedy whatever the temperature
    one = gen.SamplingParams(temperature=2.0, top_k=1, seed=3)
    assert gen.generate(model, prompts, 4, one).tokens == gen.generate(model, prompts, 4).tokens
    # replayed steps sample as eager ones: the step is read from its buffer at each replay
    replayed = tiny_model(backend, cuda_graphs=True)
    assert gen.generate(replayed, prompts, 5, s).tokens == a


def dataclasses_replace(obj, **kw):
    import dataclasses
    return dataclasses.replace(obj, **kw)


def test_model_bf16_and_fp16_close_to_reference(backend):
    ids = prompt(10, 30)
    want = REF.forward(ids)
    for dtype in ("bf16", "fp16"):
        model = tiny_model(backend, dtype=dtype)
        got = model.logits_numpy(model.prefill([("a", ids)]))
        assert rel_err(got[0], want[-1]) <= (5e-2 if dtype == "bf16" else 1e-2), dtype


def test_model_untied_head_from_checkpoint(backend, tmp_path):
    config = TINY.replace(tie_word_embeddings=False)
    weights = dict(WEIGHTS, **{"lm_head.weight": checkpoint.random_weights(
        config, seed=8)["lm_head.weight"]})
    checkpoint.save_checkpoint(str(tmp_path), config, weights, max_shard_bytes=50_000)
    model = LlamaModel.from_pretrained(str(tmp_path), ops=backend[0], device=backend[1],
                                       max_batch=2, max_seq_len=32, max_tokens=32)
    ids = prompt(9, 31)
    got = model.logits_numpy(model.prefill([("a", ids)]))
    want = reference.ReferenceLlama(config, weights).forward(ids)
    assert rel_err(got[0], want[-1]) <= 1e-4


def test_model_request_id_reused_after_release(backend):
    # the same id, the same number of blocks, other blocks: its decode reads its new table
    model = tiny_model(backend)
    first, second = prompt(5, 90), prompt(6, 91)
    model.prefill([("a", first)])
    model.decode(["a"], np.array([7]))
    model.release("a")
    model.prefill([("b", prompt(9, 92))])  # takes the blocks "a" had
    model.prefill([("a", second)])
    want = REF.forward(np.concatenate([second, [11]]))[-1]
    assert rel_err(model.logits_numpy(model.decode(["a"], np.array([11])))[0], want) <= 1e-4


def test_kv_cache_blocks_freed_and_reused():
    alloc = kv_cache.BlockAllocator(4)
    a = alloc.allocate(3)
    with pytest.raises(kv_cache.KVCacheFull, match="2 blocks needed, 1 of 4 free"):
        alloc.allocate(2)
    alloc.free(a[:2])
    assert sorted(alloc.allocate(3)) == sorted(a[:2] + [3])
    with pytest.raises(ValueError, match="block 3 is not allocated"):
        alloc.free([3, 3])
    with pytest.raises(ValueError, match="block_size must be a power of two"):
        kv_cache.PagedKVCache(None, 1, 1, 4, "fp32", 4, block_size=6)


def test_model_kv_cache_full_and_bad_inputs():
    model = tiny_model(NUMPY, num_blocks=5)  # 20 tokens of cache
    model.prefill([("a", prompt(12, 40))])
    with pytest.raises(kv_cache.KVCacheFull, match="needs 3 more blocks, 2 of 5 free"):
        model.prefill([("b", prompt(9, 41))])
    assert "b" not in model.kv.tables and model.kv.allocator.num_free == 2
    model.prefill([("b", prompt(8, 41))])
    model.release("a")
    model.prefill([("c", prompt(12, 42))])  # a's blocks reused
    with pytest.raises(ValueError, match=r"request 'd': token ids must be in \[0, 256\)"):
        model.prefill([("d", np.array([1, 256]))])
    with pytest.raises(ValueError, match="token ids must be a non-empty 1-D integer array"):
        model.prefill([("d", np.array([], np.int64))])
    with pytest.raises(ValueError, match="decode: request 'zz' was not prefilled"):
        model.decode(["zz"], np.array([1]))
    with pytest.raises(ValueError, match=r"one integer id per request \(2\)"):
        model.decode(["b", "c"], np.array([1]))
    with pytest.raises(ValueError, match="batch of 5 requests; the model takes 1 to max_batch=4"):
        model.prefill([(str(i), [1]) for i in range(5)])
    with pytest.raises(ValueError, match="70 tokens in the batch, .* max_tokens=64"):
        model.prefill([("e", prompt(35, 1)), ("f", prompt(35, 2))])
    with pytest.raises(ValueError, match="beyond max_seq_len=64"):
        model.prefill([("e", prompt(65, 1))])
    with pytest.raises(ValueError, match="a request appears twice"):
        model.decode(["b", "b"], np.array([1, 2]))
    with pytest.raises(ValueError, match="max_seq_len=600 is beyond the config's"):
        tiny_model(NUMPY, max_seq_len=600)
    with pytest.raises(ValueError, match="weights have no tensor 'model.norm.weight'"):
        LlamaModel(TINY, {k: v for k, v in WEIGHTS.items() if k != "model.norm.weight"},
                   ops=models_numpy_ops)
    with pytest.raises(ValueError, match="dtype must be fp32, bf16 or fp16"):
        tiny_model(NUMPY, dtype="int32")
    with pytest.raises(ValueError, match="block_size must be a power of two, got 12"):
        tiny_model(NUMPY, block_size=12)
    with pytest.raises(ValueError, match="num_blocks must be a positive integer, got 0"):
        tiny_model(NUMPY, num_blocks=0)
    with pytest.raises(ValueError, match="max_batch must be a positive integer"):
        tiny_model(NUMPY, max_batch=0)
    with pytest.raises(ValueError, match="device must be 'cpu' or 'gpu', got 'tpu'"):
        tiny_model(NUMPY, device="tpu")
    import kiln
    if not kiln.has_gpu():
        with pytest.raises(RuntimeError, match="device='gpu' but no GPU is available"):
            tiny_model(NUMPY, device="gpu")
    with pytest.raises(ValueError, match="new tokens exceed the model's max_seq_len=64"):
        gen.generate(model, [prompt(60, 1)], 10)
    with pytest.raises(ValueError, match="top_p must be in"):
        gen.SamplingParams(temperature=1.0, top_p=0)


# ----------------------------------------------------------------------------- CLI


def run_cli(*args):
    import kiln  # the package this test imported (build/python here, elsewhere on the GPU)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__))),
         os.path.join(ROOT, "kernels", "python")]))
    return subprocess.run([sys.executable, "-m", "kiln_models.llama", *args], env=env,
                          capture_output=True, text=True, timeout=300)


def test_cli_generate_tiny_on_cpu_equals_reference():
    kiln_ops_or_skip()
    r = run_cli("generate", "--config", "tiny", "--random-weights", "--batch", "2",
                "--prompt-len", "5", "--new-tokens", "4", "--device", "cpu", "--seed", "3")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "fp32 on cpu, batch 2, prompt 5, new tokens 4" in lines[0]
    assert any(line.startswith("prefill: 10 tokens in") and "tokens/s" in line
               for line in lines)
    assert any(line.startswith("decode: 6 tokens in") for line in lines)
    assert any(line.startswith("peak device memory: ") for line in lines)
    ref = reference.ReferenceLlama(TINY, checkpoint.random_weights(TINY, 3))
    rng = np.random.default_rng(3)
    for i in range(2):
        want = ref.greedy(rng.integers(0, TINY.vocab_size, 5), 4)
        assert f"ids[{i}]: {' '.join(map(str, want))}" in lines


@pytest.mark.parametrize("args, match", [
    (["--config", "tiny"], "--config has no checkpoint: add --random-weights"),
    (["--config", "tiny", "--random-weights", "--batch", "0"], "--batch must be at least 1"),
    (["--config", "tiny", "--random-weights", "--prompt-len", "500", "--new-tokens", "13"],
     "prompt + new tokens = 513 is beyond the model's max_position_embeddings=512"),
    (["--model", "/nonexistent/dir"], "cannot read the model config"),
])
def test_cli_errors(args, match, capsys):
    from kiln_models import llama
    assert llama.main(["generate", "--device", "cpu", *args]) == 2
    assert match in capsys.readouterr().err


@pytest.mark.parametrize("args, match", [
    (["--prompt-lens", "9", "4"], "take LO <= HI"),
    (["--requests", "0"], "--requests must be at least 1"),
    (["--kv-tokens", "20"], "--kv-tokens 20 cannot hold the longest request (96 tokens)"),
    (["--check-solo", "--temperature", "1"], "--check-solo compares greedy runs"),
    (["--max-tokens", "0"], "--max-tokens must be at least 1"),
])
def test_cli_serve_errors(args, match, capsys):
    from kiln_models import llama
    assert llama.main(["serve", "--config", "tiny", "--random-weights", "--device", "cpu",
                       *args]) == 2
    assert match in capsys.readouterr().err


@pytest.mark.parametrize("device, extra", [
    ("cpu", []), pytest.param("gpu", [], marks=pytest.mark.gpu),
    # prompts up to 20 tokens prefilled 8 a step: the longer ones in pieces
    ("cpu", ["--max-tokens", "8"]),
    # bf16 batches of up to 6: equal to alone only with plans fixed per row
    pytest.param("gpu", ["--dtype", "bf16", "--batch-invariant", "--max-batch", "6"],
                 marks=pytest.mark.gpu)])
def test_cli_serve_in_flight_batching_equals_solo(device, extra):
    import io
    from kiln_models import llama
    kiln_ops_or_skip()
    out = io.StringIO()
    assert llama.main(["serve", "--config", "tiny", "--random-weights", "--device", device,
                       "--dtype", "fp32", "--requests", "7", "--prompt-lens", "2", "20",
                       "--new-tokens-range", "1", "9", "--max-batch", "3", "--kv-tokens",
                       "64", "--block-size", "4", "--check-solo", *extra], out=out) == 0
    text = out.getvalue()
    batch = extra[-1] if "--max-batch" in extra else "3"
    assert f"7 requests, prompts 2-20, outputs 1-9, max batch {batch}, KV cache 64 tokens" \
        in text
    assert "time to first token: p50 " in text and "per-token latency: p50 " in text
    assert "solo check: 7 of 7 requests give their tokens decoded alone" in text


def test_cli_model_dir_with_a_broken_checkpoint(tmp_path, capsys):
    from kiln_models import llama
    weights = dict(WEIGHTS)
    del weights["model.layers.0.self_attn.k_proj.weight"]
    checkpoint.save_checkpoint(str(tmp_path), TINY, weights)
    assert llama.main(["generate", "--model", str(tmp_path), "--device", "cpu"]) == 2
    assert "checkpoint has no tensor 'model.layers.0.self_attn.k_proj.weight'" in \
        capsys.readouterr().err


@pytest.mark.gpu
def test_gpu_models_share_one_stream_unless_given_one():
    # graphs launched on a second stream slow every graph's kernels for the rest of the
    # process (docs/models.md): models built without a stream share the device's one
    import kiln
    from kiln_models.model import shared_stream
    ops = kiln_ops_or_skip()
    a, b = (tiny_model((ops, "gpu")) for _ in range(2))
    assert a.stream is b.stream is shared_stream()
    own = kiln.Stream()
    c = tiny_model((ops, "gpu"), stream=own, cuda_graphs=True)
    assert c.stream is own and c.launch["stream"] == own.handle
    assert gen.generate(c, [prompt(5, 2)], 6).tokens == [REF.greedy(prompt(5, 2), 6)]


@pytest.mark.gpu
def test_cli_generate_tiny_on_gpu_equals_cpu():
    kiln_ops_or_skip()
    args = ["generate", "--config", "tiny", "--random-weights", "--batch", "3",
            "--prompt-len", "7", "--new-tokens", "6", "--dtype", "fp32", "--seed", "5"]
    cpu, gpu = run_cli(*args, "--device", "cpu"), run_cli(*args, "--device", "gpu")
    assert cpu.returncode == 0 and gpu.returncode == 0, cpu.stderr + gpu.stderr
    ids = [[line for line in r.stdout.splitlines() if line.startswith("ids[")]
           for r in (cpu, gpu)]
    assert len(ids[0]) == 3 and ids[0] == ids[1]


# ----------------------------------------------------------------------------- HF transformers
# A checkpoint saved by transformers' LlamaForCausalLM.save_pretrained from random weights,
# loaded by kiln_models; logits and greedy decoding compared in the same process. Runs where
# torch and transformers are installed (the GPU machine); skipped elsewhere.


def hf_or_skip():
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    return torch, transformers


def hf_model(tmp_path, tied, dtype):
    torch, transformers = hf_or_skip()
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=512, hidden_size=128, intermediate_size=320, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=32, max_position_embeddings=512,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=tied,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        bos_token_id=None, eos_token_id=None, pad_token_id=None)
    model = transformers.LlamaForCausalLM(config).to(dtype).eval()
    with torch.no_grad():  # norms away from ones, so that their weights are seen
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(str(tmp_path), safe_serialization=True)
    return model


HF_DEVICES = ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)]


@pytest.mark.parametrize("device", HF_DEVICES)
@pytest.mark.parametrize("dtype, tied, tol", [("fp32", False, 1e-4), ("fp32", True, 1e-4),
                                              ("bf16", True, 2e-2)])
def test_hf_checkpoint_logits_match_transformers(tmp_path, device, dtype, tied, tol):
    torch, _ = hf_or_skip()
    ops = kiln_ops_or_skip()
    tdtype = torch.float32 if dtype == "fp32" else torch.bfloat16
    hf = hf_model(tmp_path, tied, tdtype)
    hf_device = "cuda" if device == "gpu" else "cpu"
    hf = hf.to(hf_device)
    model = LlamaModel.from_pretrained(str(tmp_path), device=device, dtype=dtype, ops=ops,
                                       max_batch=2, max_tokens=64, max_seq_len=64)
    assert model.config.tie_word_embeddings == tied
    ids = np.random.default_rng(0).integers(0, 512, 24)
    with torch.no_grad():
        want = hf(torch.tensor(ids[None], device=hf_device)).logits[0].float().cpu().numpy()
    got = [model.logits_numpy(model.prefill([("a", ids[:16])]))[0]]
    got += [model.logits_numpy(model.decode(["a"], ids[t:t + 1]))[0] for t in range(16, 24)]
    for t, g in zip(range(15, 24), got):
        assert rel_err(g, want[t]) <= tol, (t, rel_err(g, want[t]))


@pytest.mark.parametrize("device", HF_DEVICES)
def test_hf_greedy_128_tokens_equal_transformers_generate(tmp_path, device):
    torch, _ = hf_or_skip()
    ops = kiln_ops_or_skip()
    hf_device = "cuda" if device == "gpu" else "cpu"
    hf = hf_model(tmp_path, False, torch.float32).to(hf_device)
    prompts = [np.random.default_rng(s).integers(0, 512, n) for s, n in ((1, 9), (2, 20))]
    model = LlamaModel.from_pretrained(str(tmp_path), device=device, dtype="fp32", ops=ops,
                                       max_batch=2, max_tokens=64, max_seq_len=160)
    got = gen.generate(model, prompts, 128).tokens
    for p, tokens in zip(prompts, got):
        with torch.no_grad():
            out = hf.generate(torch.tensor(p[None], device=hf_device), max_new_tokens=128,
                              min_new_tokens=128, do_sample=False, pad_token_id=0)
        assert tokens == out[0, len(p):].tolist()


# ----------------------------------------------------------------------------- scheduler


@pytest.mark.parametrize("graphs", [False, True])
def test_scheduler_in_flight_batching_equals_solo_runs(backend, graphs):
    from kiln_models.scheduler import Scheduler, latency_stats
    # 3 requests at a time, 12 blocks of 4 tokens: requests wait for others' blocks
    model = tiny_model(backend, max_batch=3, max_tokens=24, num_blocks=12, cuda_graphs=graphs)
    sched = Scheduler(model)
    lengths = [(5, 7), (17, 3), (3, 9), (11, 1), (20, 6), (4, 4), (9, 8), (2, 5)]
    reqs = [sched.add(prompt(p, 50 + i), n) for i, (p, n) in enumerate(lengths)]
    start = time.perf_counter()
    done = sched.run()
    stats = latency_stats(done, time.perf_counter() - start)
    assert sorted(r.id for r in done) == sorted(r.id for r in reqs)
    for r in reqs:
        assert r.tokens == REF.greedy(r.prompt, r.max_new_tokens), r.id
    # some request was admitted while another was decoding, after one had finished
    first, last = {r.id: r.token_times[0] for r in reqs}, {r.id: r.token_times[-1]
                                                          for r in reqs}
    assert any(first[a.id] > first[b.id] and first[a.id] < last[b.id] and
               any(last[c.id] < first[a.id] for c in reqs) for a in reqs for b in reqs)
    assert model.kv.allocator.num_free == 12 and not model.kv.tables
    assert stats["requests"] == 8 and stats["tokens"] == sum(n for _, n in lengths)
    assert stats["ttft_ms_p50"] <= stats["ttft_ms_p99"]


@pytest.mark.parametrize("graphs", [False, True])
def test_scheduler_prefills_long_prompts_in_pieces(backend, graphs):
    # prompts longer than max_tokens (8) are prefilled alone, a piece of 8 a step, while the
    # running requests keep decoding; every request's tokens are still its solo run's
    from kiln_models.scheduler import Scheduler
    model = tiny_model(backend, max_batch=3, max_tokens=8, num_blocks=16, cuda_graphs=graphs)
    sched = Scheduler(model)
    lengths = [(5, 9), (20, 4), (3, 6), (13, 1), (8, 5), (17, 3)]
    reqs = [sched.add(prompt(p, 70 + i), n) for i, (p, n) in enumerate(lengths)]
    first_step = {}
    while sched.step():
        for r in reqs:
            if r.tokens and r.id not in first_step:
                first_step[r.id] = sched.steps
    for r in reqs:
        assert r.tokens == REF.greedy(r.prompt, r.max_new_tokens), r.id
        assert r.prefilled == r.prompt.size
    # the 20-token prompt took 3 steps (8 + 8 + 4), during which request 0 kept decoding
    assert first_step[reqs[1].id] - first_step[reqs[0].id] == 3
    assert len(reqs[0].tokens) == 9 and model.kv.allocator.num_free == 16
    assert not model.kv.tables and sched.prefilling is None


def test_scheduler_stop_token_and_errors():
    from kiln_models.scheduler import Scheduler
    model = tiny_model(NUMPY, max_batch=2, max_tokens=16, num_blocks=6)
    sched = Scheduler(model)
    p = prompt(6, 60)
    want = REF.greedy(p, 8)
    r = sched.add(p, 8, stop_token=want[2])
    sched.run()
    assert r.tokens == want[:want.index(want[2]) + 1]
    with pytest.raises(ValueError, match="exceed the model's max_seq_len=64"):
        sched.add(prompt(10, 1), 60)
    with pytest.raises(ValueError, match="needs 7 KV blocks, the cache has 6"):
        sched.add(prompt(16, 1), 13)
    with pytest.raises(ValueError, match="max_new_tokens must be a positive int"):
        sched.add(prompt(3, 1), 0)
    with pytest.raises(ValueError, match="non-empty 1-D integer array"):
        sched.add(np.zeros((2, 2), np.int32), 2)
