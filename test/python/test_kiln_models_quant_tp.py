"""kiln_models (issue #24), continued from test_kiln_models.py (whose helpers, fixtures and tiny
model this file imports): weight-only quantization (the model, checkpoints quantized at load,
the CLI) and tensor parallelism (ranks in threads of this process against the whole model).
"""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from test_kiln_models import (REF, TINY, WEIGHTS, LlamaConfig, LlamaModel, backend, cfg,  # noqa: F401
                              checkpoint, gen, hf_model, hf_or_skip, kiln_ops_or_skip, kv_cache,
                              models_numpy_ops, prompt, reference, rel_err, tiny_model)

# ----------------------------------------------------------------------------- quantization

QCONFIG = TINY.replace(hidden_size=128, intermediate_size=256, head_dim=32)  # K: 128, 256
QWEIGHTS = checkpoint.random_weights(QCONFIG, seed=9, norm_noise=0.1)


def dequantized(weights, quant, group):
    from kiln_models.ops import quant as q
    out = dict(weights)
    for name, w in weights.items():
        if name.startswith("model.layers.") and name.endswith("_proj.weight"):
            out[name] = q.dequantize_int8(*q.quantize_int8(w)) if quant == "int8" else \
                q.dequantize_int4(*q.quantize_int4(w, group), group)
    return out


@pytest.mark.parametrize("quant", ["int8", "int4"])
def test_model_weight_only_quantization(backend, quant):
    ids = prompt(20, 70)
    exact = reference.ReferenceLlama(QCONFIG, dequantized(QWEIGHTS, quant, 128)).forward(ids)
    dense = reference.ReferenceLlama(QCONFIG, QWEIGHTS).forward(ids)
    model = LlamaModel(QCONFIG, QWEIGHTS, device=backend[1], ops=backend[0], quant=quant,
                       quant_head=False, max_batch=2, max_tokens=32, max_seq_len=32)
    got = [model.logits_numpy(model.prefill([("a", ids[:14])]))[0]]
    got += [model.logits_numpy(model.decode(["a"], ids[t:t + 1]))[0] for t in range(14, 20)]
    for t, g in zip(range(13, 20), got):
        # the kernels compute the dequantized model ...
        assert rel_err(g, exact[t]) <= 1e-4, t
        # ... which is near the dense one (random N(0, 0.02) weights: int4's rounding shows)
        assert rel_err(g, dense[t]) <= (2e-2 if quant == "int8" else 0.4), t
    dense_model = LlamaModel(QCONFIG, QWEIGHTS, device=backend[1], ops=backend[0],
                             max_batch=2, max_tokens=32, max_seq_len=32)
    assert model.arrays.peak < dense_model.arrays.peak


def test_model_quantization_errors():
    with pytest.raises(ValueError, match="quant must be None, 'int8' or 'int4', got 'int3'"):
        LlamaModel(QCONFIG, QWEIGHTS, ops=models_numpy_ops, quant="int3")
    with pytest.raises(ValueError, match="int4 quant_group=96 does not divide the 128 input "
                                         "features of model.layers.0.self_attn.qkv_proj"):
        LlamaModel(QCONFIG, QWEIGHTS, ops=models_numpy_ops, quant="int4", quant_group=96)


@pytest.mark.parametrize("quant, tied, head", [("int4", True, True), ("int8", False, True),
                                               ("int4", False, False)])
def test_quantized_checkpoint_loads_as_quantizing_at_load(backend, tmp_path, quant, tied, head):
    # checkpoint.save_quantized writes the projections (and the LM head, a tied one as its
    # own copy) quantized; from_pretrained loads them as saved: the same model, bitwise, as
    # quantizing the dense checkpoint at load
    config = QCONFIG.replace(tie_word_embeddings=tied)
    weights = checkpoint.random_weights(config, seed=9, norm_noise=0.1)
    dense, qdir = str(tmp_path / "dense"), str(tmp_path / "q")
    checkpoint.save_checkpoint(dense, config, weights)
    q = checkpoint.save_quantized(dense, qdir, quant, 128, head)
    assert checkpoint.read_quantization(qdir) == q == dict(
        method=quant, group_size=128 if quant == "int4" else None, head=head)
    names = set(checkpoint.read_safetensors(os.path.join(qdir, "model.safetensors")))
    assert "model.layers.1.mlp.down_proj.qweight" in names and \
        "model.layers.1.mlp.down_proj.weight" not in names
    assert ("lm_head.qweight" in names) == head and ("lm_head.weight" in names) == (
        not tied and not head)
    kw = dict(device=backend[1], ops=backend[0], max_batch=2, max_tokens=32, max_seq_len=32)
    saved = LlamaModel.from_pretrained(qdir, **kw)
    fresh = LlamaModel(config, weights, quant=quant, quant_head=head, **kw)
    assert (saved.quant, saved.quant_head) == (quant, head)
    ids = prompt(20, 71)
    for t, m in enumerate((saved, fresh)):
        got = [m.logits_numpy(m.prefill([("a", ids[:14])]))[0]]
        got += [m.logits_numpy(m.decode(["a"], ids[14:15]))[0]]
        if t == 0:
            want = got
    assert all(np.array_equal(a, b) for a, b in zip(want, got))


def test_quantized_checkpoint_errors(tmp_path, capsys):
    from kiln_models import llama
    dense, qdir = str(tmp_path / "dense"), str(tmp_path / "q")
    checkpoint.save_checkpoint(dense, QCONFIG, QWEIGHTS)
    checkpoint.save_quantized(dense, qdir, "int4", 128)
    with pytest.raises(ValueError, match="is saved with quant='int4', got quant='int8'"):
        LlamaModel.from_pretrained(qdir, ops=models_numpy_ops, quant="int8")
    with pytest.raises(ValueError, match="tensor parallelism shards a dense one"):
        LlamaModel.from_pretrained_shard(qdir, 0, 2, lambda x: None, ops=models_numpy_ops)
    w = checkpoint.load_weights(qdir, QCONFIG, checkpoint.read_quantization(qdir))
    with pytest.raises(ValueError, match="the weights are quantized"):
        LlamaModel(QCONFIG, w, ops=models_numpy_ops)
    name = "model.layers.0.mlp.up_proj.qweight"
    with pytest.raises(ValueError, match=f"'{name}' has dtype int8, int4 weights are uint8"):
        LlamaModel(QCONFIG, dict(w, **{name: w[name].astype(np.int8)}), ops=models_numpy_ops,
                   quant="int4")
    with pytest.raises(ValueError, match="scales' has shape"):
        LlamaModel(QCONFIG, w, ops=models_numpy_ops, quant="int4", quant_group=64)
    assert llama.main(["quantize", "--model", qdir, "--out", str(tmp_path / "again"),
                       "--quant", "int8"]) == 2
    assert "is saved quantized already" in capsys.readouterr().err
    assert llama.main(["quantize", "--model", dense, "--out", str(tmp_path / "g48"),
                       "--quant", "int4", "--quant-group", "48"]) == 2
    assert "tensor 'model.layers.0.self_attn.q_proj': quantize_int4: expected an even group " \
        "dividing K = 128, found 48" in capsys.readouterr().err
    with open(os.path.join(qdir, "config.json")) as f:
        cfg = json.load(f)
    cfg["kiln_quantization"]["method"] = "int3"
    with open(os.path.join(qdir, "config.json"), "w") as f:
        json.dump(cfg, f)
    with pytest.raises(ValueError, match="kiln_quantization=.* is not supported: expected "
                                         "method 'int8' or 'int4'"):
        LlamaModel.from_pretrained(qdir, ops=models_numpy_ops)


def test_cli_generate_stop_token():
    import io
    from kiln_models import llama
    kiln_ops_or_skip()
    args = ["generate", "--config", "tiny", "--random-weights", "--device", "cpu", "--dtype",
            "fp32", "--batch", "2", "--prompt-len", "5", "--new-tokens", "6", "--seed", "2"]
    outs = []
    for extra in ([], None):
        if extra is None:  # stop at the first request's third id
            extra = ["--stop-token", outs[0][0].split()[3]]
        out = io.StringIO()
        assert llama.main([*args, *extra], out=out) == 0
        outs.append([ln for ln in out.getvalue().splitlines() if ln.startswith("ids[")])
    stop = outs[1][0].split()[-1]
    full = outs[0][0].split()[1:]
    assert outs[1][0].split()[1:] == full[:full.index(stop) + 1]
    assert llama.main([*args, "--stop-token", "-1"]) == 2


def test_cli_quantize_then_generate(tmp_path):
    import io
    from kiln_models import llama
    kiln_ops_or_skip()
    dense, qdir = str(tmp_path / "dense"), str(tmp_path / "q")
    checkpoint.save_checkpoint(dense, TINY, checkpoint.random_weights(TINY, 4))
    out = io.StringIO()
    assert llama.main(["quantize", "--model", dense, "--out", qdir, "--quant", "int4",
                       "--quant-group", "64"], out=out) == 0
    assert f"as int4 (group 64), LM head quantized, to {qdir}" in out.getvalue()
    args = ["--device", "cpu", "--dtype", "fp32", "--batch", "2", "--prompt-len", "6",
            "--new-tokens", "4", "--seed", "3"]
    texts = []
    for extra in (["--model", qdir], ["--model", dense, "--quant", "int4", "--quant-group",
                                      "64"]):
        out = io.StringIO()
        assert llama.main(["generate", *extra, *args], out=out) == 0
        texts.append([ln for ln in out.getvalue().splitlines() if ln.startswith("ids[")])
        assert "(int4 weights)" in out.getvalue()
    assert len(texts[0]) == 2 and texts[0] == texts[1]
    assert llama.main(["generate", "--model", qdir, "--quant", "int8", *args]) == 2


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu)])
def test_cli_quant_error_and_quantized_generate(device, capsys):
    import io
    import re
    from kiln_models import llama
    kiln_ops_or_skip()
    out = io.StringIO()
    assert llama.main(["quant-error", "--config", "tiny", "--random-weights", "--device",
                       device, "--dtype", "fp32", "--quant", "int8", "--batch", "2",
                       "--prompt-len", "8", "--new-tokens", "3"], out=out) == 0
    m = re.search(r"int8 against fp32 logits at 8 positions: max rel err (\S+), mean \S+; "
                  r"same top-1 token at (\S+)%", out.getvalue())
    assert m and float(m.group(1)) < 2e-2 and float(m.group(2)) >= 75, out.getvalue()
    # int4 groups are a multiple of the kernel's K tile: 32 on the CPU, 128 on the GPU, where
    # tiny's 64 features take int8
    quant = "int4" if device == "cpu" else "int8"
    out = io.StringIO()
    assert llama.main(["generate", "--config", "tiny", "--random-weights", "--device", device,
                       "--dtype", "fp32", "--quant", quant, "--quant-group", "64", "--batch",
                       "2", "--prompt-len", "6", "--new-tokens", "3", "--seed", "4"],
                      out=out) == 0
    config = TINY
    ref = reference.ReferenceLlama(config, dequantized(checkpoint.random_weights(config, 4),
                                                       quant, 64))
    rng = np.random.default_rng(4)
    for i in range(2):
        want = ref.greedy(rng.integers(0, config.vocab_size, 6), 3)
        assert f"ids[{i}]: {' '.join(map(str, want))}" in out.getvalue()
    assert llama.main(["quant-error", "--config", "tiny", "--random-weights",
                       "--device", "cpu"]) == 2
    assert "quant-error needs --quant int8 or --quant int4" in capsys.readouterr().err


# ----------------------------------------------------------------------------- tensor parallel


class ThreadAllReduce:
    """All-reduce between ranks running in threads of this process: each rank's array
    summed (in rank order, float64) and written back to every rank's array."""

    def __init__(self, n):
        import threading
        self.barrier, self.parts = threading.Barrier(n, timeout=120), [None] * n

    def rank(self, r):
        def all_reduce(x):
            self.parts[r] = np.array(x, dtype=np.float64)
            self.barrier.wait()
            total = sum(self.parts)
            self.barrier.wait()
            x[...] = total.astype(x.dtype)
        return all_reduce


@pytest.mark.parametrize("size", [2])
@pytest.mark.parametrize("graphs", [False, True])
def test_tensor_parallel_ranks_equal_the_whole_model(backend, size, graphs):
    from concurrent.futures import ThreadPoolExecutor
    from kiln_models.parallel import shard_weights
    if backend[1] != "cpu":
        pytest.skip("threads share one host; the GPU ranks are test_tensor_parallel_torch")
    reduce = ThreadAllReduce(size)
    ids = prompt(11, 80)
    prompts = [prompt(5, 81), prompt(9, 82)]

    def run(r, all_reduce):
        local, weights = shard_weights(TINY, WEIGHTS, r, size)
        assert local.num_attention_heads == 4 // size and local.intermediate_size == 128 // size
        model = LlamaModel(local, weights, ops=backend[0], device="cpu", all_reduce=all_reduce,
                           cuda_graphs=graphs, max_batch=2, max_tokens=32, max_seq_len=32)
        logits = model.logits_numpy(model.prefill([("a", ids)]))[0]
        model.release("a")
        return logits, gen.generate(model, prompts, 6).tokens

    # Kiln's JIT crashes when two threads compile their first kernels at once (reported):
    # each rank's kernels are compiled first, one rank at a time, without a reduction
    for r in range(size):
        run(r, lambda x: None)
    with ThreadPoolExecutor(size) as pool:
        results = list(pool.map(lambda r: run(r, reduce.rank(r)), range(size)))
    want = REF.forward(ids)[-1]
    for logits, tokens in results:
        assert rel_err(logits, want) <= 1e-4
        assert tokens == [REF.greedy(p, 6) for p in prompts]


def test_shard_weights_errors():
    from kiln_models.parallel import shard_weights
    with pytest.raises(ValueError, match="num_key_value_heads=2 does not split over 4 ranks"):
        shard_weights(TINY, WEIGHTS, 0, 4)
    with pytest.raises(ValueError, match=r"rank must be in \[0, 2\), got 2"):
        shard_weights(TINY, WEIGHTS, 2, 2)
    with pytest.raises(ValueError, match="size must be a positive int"):
        shard_weights(TINY, WEIGHTS, 0, 0)


@pytest.mark.parametrize("device", ["cpu", pytest.param("gpu", marks=pytest.mark.gpu2)])
def test_tensor_parallel_torch_distributed_two_ranks(tmp_path, device):
    pytest.importorskip("torch")
    kiln_ops_or_skip()
    d = str(tmp_path / "model")
    checkpoint.save_checkpoint(d, TINY, WEIGHTS)
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1",
               NVSHMEM_DISABLE_NVLS="1", PYTHONPATH=os.pathsep.join(sys.path))
    dtype = "fp32"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           os.path.join(os.path.dirname(__file__), "models_tp_worker.py"), d, str(tmp_path),
           device, dtype]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for rank in range(2):
        out = np.load(tmp_path / f"rank{rank}.npz")
        assert rel_err(out["logits"], REF.forward(out["ids"])[-1]) <= 1e-4
        prompts = np.split(out["prompts"], [5])
        assert out["tokens"].tolist() == [REF.greedy(p, 8) for p in prompts]


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_hf_state_dict_and_config_taken_directly(tmp_path, dtype):
    torch, _ = hf_or_skip()
    ops = kiln_ops_or_skip()
    hf = hf_model(tmp_path, True, torch.float32 if dtype == "fp32" else torch.bfloat16)
    config = LlamaConfig.from_dict(hf.config.to_dict())
    model = LlamaModel(config, hf.state_dict(), dtype=dtype, ops=ops, max_batch=1,
                       max_tokens=32, max_seq_len=32)
    ids = np.random.default_rng(3).integers(0, 512, 20)
    with torch.no_grad():
        want = hf(torch.tensor(ids[None])).logits[0, -1].float().numpy()
    got = model.logits_numpy(model.prefill([("a", ids)]))[0]
    assert rel_err(got, want) <= (1e-4 if dtype == "fp32" else 2e-2)


def test_queued_decode_steps_equal_the_reference(backend):
    # cuda_graphs=True: after the first decode step, generate() queues the others without
    # waiting (decode_steps_async: the steps' inputs uploaded at once, each step's tokens the
    # device's choices of the step before, the ids read back once at the end).
    model = tiny_model(backend, cuda_graphs=True)
    prompts = [prompt(n, 40 + n) for n in (3, 9, 5)]
    got = gen.generate(model, prompts, 8).tokens
    assert got == [REF.greedy(p, 8) for p in prompts]
    assert gen.generate(model, prompts[:2], 3).tokens == [REF.greedy(p, 3) for p in prompts[:2]]
    with pytest.raises(ValueError, match="no captured decode step"):
        model.decode_steps_async(["nope"], gen.SamplingParams(top_k=3, temperature=1.0), 1, 2)


def test_queued_steps_with_a_stop_token(backend, monkeypatch):
    # greedy with a stop token: generate() queues QUEUE_STEPS (3 here) at a time; a request
    # that stopped leaves the batch after them (a host step of the smaller batch follows, its
    # graph captured once), its later tokens dropped. (Weights of std 0.3: greedy tokens
    # that vary, so that the stop falls inside the queued steps.)
    monkeypatch.setattr(gen, "QUEUE_STEPS", 3)
    weights = checkpoint.random_weights(TINY, seed=5, std=0.3, norm_noise=0.1)
    ref = reference.ReferenceLlama(TINY, weights)
    prompts = [prompt(n, 80 + n) for n in (4, 9, 6)]
    full = [ref.greedy(p, 14) for p in prompts]
    stop = full[1][2]
    assert all(stop not in f for f in (full[0], full[2], full[1][:2]))
    want = [full[0], full[1][:3], full[2]]
    model = LlamaModel(TINY, weights, ops=backend[0], device=backend[1], max_batch=4,
                       max_tokens=64, max_seq_len=64, block_size=4, cuda_graphs=True)
    got = gen.generate(model, prompts, 14, stop_token=stop)
    assert got.tokens == want and got.decode_tokens == 13 + 2 + 13
    assert sorted(b for b, _ in model._graphs) == [2, 3]
    assert model.kv.allocator.num_free == model.kv.allocator.num_blocks


def test_sampled_requests_keep_their_draws_when_others_stop(backend, monkeypatch):
    # a request's draws are keyed by its prompt index, not its row: when request 1 stops
    # (inside queued steps or not), requests 0 and 2 sample what they sample without it
    monkeypatch.setattr(gen, "QUEUE_STEPS", 3)
    sp = gen.SamplingParams(temperature=1.0, top_k=8, seed=3)
    prompts = [prompt(n, 80 + n) for n in (4, 9, 6)]
    free = gen.generate(tiny_model(backend), prompts, 14, sp).tokens
    stop = next(t for t in free[1][2:6] if all(t not in f for f in (free[0], free[2])))
    want = [free[0], free[1][:free[1].index(stop) + 1], free[2]]
    for graphs in (False, True):
        model = tiny_model(backend, cuda_graphs=graphs)
        assert gen.generate(model, prompts, 14, sp, stop).tokens == want, graphs
    alone = gen.generate(tiny_model(backend, cuda_graphs=True), prompts[:1], 14, sp).tokens
    assert alone[0] == free[0]  # prompt index 0 alone: the same draws


def test_queued_steps_sample_as_single_steps_and_check_the_cache_first(backend):
    # The queued steps' inputs are made at once on the host (positions, slots across block
    # boundaries, the sampler's step): sampling equals the step-by-step run, and a cache too
    # small fails before anything is queued, the requests' lengths unchanged.
    sp = gen.SamplingParams(temperature=0.8, top_k=5, seed=11)
    prompts = [prompt(n, 60 + n) for n in (6, 2)]
    queued = gen.generate(tiny_model(backend, cuda_graphs=True), prompts, 11, sp).tokens
    single = gen.generate(tiny_model(backend, cuda_graphs=False), prompts, 11, sp).tokens
    assert queued == single
    model = tiny_model(backend, cuda_graphs=True, num_blocks=4)
    model.prefill([("a", prompt(5, 1))])
    model.decode_tokens(["a"], np.array([1]), gen.SamplingParams(), 1)
    with pytest.raises(kv_cache.KVCacheFull, match="needs 3 more blocks, 2 of 4 free"):
        model.decode_steps_async(["a"], gen.SamplingParams(), 2, 12)
    assert model.kv.lengths["a"] == 6 and len(model.kv.tables["a"]) == 2
