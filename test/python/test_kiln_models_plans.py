"""kiln_models (issue #24): kernel plans of the model's steps that must not change its
results, or change them only by rounding: batch invariance (a request's logits bitwise those it
gets alone), programmatic dependent launch and the two-step prefetch (bitwise), SwiGLU fused
into gate_up (bitwise), RMSNorms and residual adds fused into the decode linears (rounding).
CPU backend; GPU twins marked `gpu`.
"""
import numpy as np
import pytest

from kiln_models import checkpoint

from test_kiln_models import (NUMPY, TINY, WEIGHTS, LlamaModel, gen, kiln_ops_or_skip,  # noqa: F401
                              prompt, tiny_model)


@pytest.mark.parametrize("device, dtype, quant", [
    ("cpu", "fp32", None), ("cpu", "fp32", "int4"),
    pytest.param("gpu", "bf16", None, marks=pytest.mark.gpu),
    pytest.param("gpu", "bf16", "int4", marks=pytest.mark.gpu)])
def test_batch_invariant_logits_equal_alone(device, dtype, quant):
    """batch_invariant: a request's prefill and decode logits are bitwise those it gets alone
    (batches of 6 take the row-block CUDA-core linears and batch 1's attention splits; int4:
    a lone row not its one-row kernels)."""
    ops = kiln_ops_or_skip()
    kw = dict(max_batch=6, max_tokens=96, max_seq_len=64, block_size=4, device=device,
              dtype=dtype, batch_invariant=True, cuda_graphs=False, ops=ops, quant=quant,
              quant_group=32 if device == "cpu" else 128)
    config, weights = TINY, WEIGHTS
    if quant and device == "gpu":  # K 2048 and a 16k head: where int4 has one-row kernels
        config = TINY.replace(hidden_size=2048, intermediate_size=8192, num_hidden_layers=1,
                              num_attention_heads=32, num_key_value_heads=8, head_dim=64,
                              vocab_size=16384)
        weights = checkpoint.random_weights(config, seed=5)
    prompts = [prompt(n, 80 + i) for i, n in enumerate((3, 17, 9, 12, 5, 20))]
    ids = [f"r{i}" for i in range(len(prompts))]
    batched = LlamaModel(config, weights, **kw)
    logits = [batched.logits_numpy(batched.prefill(list(zip(ids, prompts))))]
    fed = [logits[0].argmax(1)]
    for _ in range(3):
        logits.append(batched.logits_numpy(batched.decode(ids, fed[-1])))
        fed.append(logits[-1].argmax(1))
    alone = LlamaModel(config, weights, **kw)
    for i, (seq, p) in enumerate(zip(ids, prompts)):
        got = [alone.logits_numpy(alone.prefill([(seq, p)]))[0]]
        for step in range(3):
            got.append(alone.logits_numpy(alone.decode([seq], fed[step][i:i + 1]))[0])
        for step, g in enumerate(got):
            assert np.array_equal(g, logits[step][i]), (seq, step,
                                                        float(np.abs(g - logits[step][i]).max()))
        alone.release(seq)


def test_batch_invariant_rejects_batches_past_the_cuda_core_rows():
    with pytest.raises(ValueError, match="batch_invariant takes max_batch <= 64"):
        tiny_model(NUMPY, max_batch=65, batch_invariant=True)


def test_dependent_launches_only_inside_a_model_step(monkeypatch):
    # launch_pdl is asked for only inside dependent_launches() (a model step), never on the
    # CPU backend, and KILN_MODELS_PDL=0 turns it off.
    from kiln_models.ops import _common
    assert "launch_pdl" not in _common.launch_opts(None, None, pdl=True)
    with _common.dependent_launches():
        assert "launch_pdl" not in _common.launch_opts("cpu", None, pdl=True)
        assert "launch_pdl" not in _common.launch_opts(None, None, pdl=False)
        monkeypatch.setenv(_common.PDL_ENV, "0")
        assert not _common.pdl_supported()
    assert not getattr(_common._pdl_scope, "on", False)


@pytest.mark.gpu
def test_dependent_launches_change_no_result(monkeypatch):
    # The decode steps' logits and tokens with programmatic dependent launch (the GPU default
    # inside a step) are bitwise those without it; the gemv's two-step prefetch likewise.
    import importlib
    from kiln_models.ops import _common
    lin_ops = importlib.import_module("kiln_models.ops.linear")  # the module, not linear()
    ops = kiln_ops_or_skip()
    prompts = [prompt(n, 90 + i) for i, n in enumerate((7, 19))]
    runs = []
    for pdl, two in (("1", "1"), ("0", "0")):
        monkeypatch.setenv(_common.PDL_ENV, pdl)
        monkeypatch.setenv(lin_ops.GEMV_TWO_ENV, two)
        m = LlamaModel(TINY, WEIGHTS, ops=ops, device="gpu", dtype="bf16", max_batch=2,
                       max_tokens=64, max_seq_len=64, block_size=4, cuda_graphs=True)
        logits = [m.logits_numpy(m.prefill([("a", prompts[0]), ("b", prompts[1])]))]
        tokens = logits[0].argmax(1)
        for _ in range(3):
            logits.append(m.logits_numpy(m.decode(["a", "b"], tokens)))
            tokens = logits[-1].argmax(1)
        m.release("a")
        m.release("b")
        runs.append((logits, gen.generate(m, prompts, 8).tokens))
    assert all(np.array_equal(a, b) for a, b in zip(runs[0][0], runs[1][0]))
    assert runs[0][1] == runs[1][1]


@pytest.mark.parametrize("device, dtype, quant", [
    ("cpu", "fp32", None), ("cpu", "fp32", "int4"),
    pytest.param("gpu", "bf16", None, marks=pytest.mark.gpu),
    pytest.param("gpu", "bf16", "int4", marks=pytest.mark.gpu)])
def test_fused_swiglu_changes_no_result(device, dtype, quant, monkeypatch):
    # Decode steps fold silu_mul into gate_up's CUDA-core kernel (KILN_MODELS_FUSE_SWIGLU,
    # on by default): logits bitwise those of the two ops, batches of 1 and 3.
    from kiln_models import model as model_mod
    ops = kiln_ops_or_skip()
    prompts = [prompt(n, 120 + i) for i, n in enumerate((6, 13, 4))]
    runs = []
    for fuse in ("1", "0"):
        monkeypatch.setenv(model_mod.FUSE_SWIGLU_ENV, fuse)
        m = LlamaModel(TINY, WEIGHTS, ops=ops, device=device, dtype=dtype, max_batch=3,
                       max_tokens=64, max_seq_len=64, block_size=4, cuda_graphs=False,
                       quant=quant, quant_group=32)
        assert m._fuses_swiglu(1, True) == (fuse == "1")
        logits = []
        for ids, ps in ((["a"], prompts[:1]), (["b", "c", "d"], prompts)):
            out = m.logits_numpy(m.prefill(list(zip(ids, ps))))
            for _ in range(2):
                out = m.logits_numpy(m.decode(ids, out.argmax(1)))
                logits.append(out)
        runs.append(logits)
    assert all(np.array_equal(a, b) for a, b in zip(*runs))


@pytest.mark.parametrize("device, dtype, quant", [
    ("cpu", "fp32", None), ("cpu", "fp32", "int8"), ("cpu", "fp32", "int4"),
    pytest.param("gpu", "bf16", None, marks=pytest.mark.gpu),
    pytest.param("gpu", "bf16", "int4", marks=pytest.mark.gpu)])
def test_fused_norm_decode_matches_separate_ops(device, dtype, quant, monkeypatch):
    # Decode steps with the RMSNorms inside the linears and the residual adds in their
    # stores (KILN_MODELS_FUSE_NORM, on by default) against add_rmsnorm kernels between
    # them: the normalized x is not rounded to the activation dtype, so logits agree to
    # rounding (fp32: 1e-5 of their scale; bf16: 2e-2). One row only: batches of 3 take the
    # separate ops either way.
    from kiln_models import model as model_mod
    ops = kiln_ops_or_skip()
    prompts = [prompt(n, 130 + i) for i, n in enumerate((6, 13, 4))]
    runs, fed = [], []  # the unfused run decodes the tokens the fused one was fed
    for fuse in ("1", "0"):
        monkeypatch.setenv(model_mod.FUSE_NORM_ENV, fuse)
        m = LlamaModel(TINY, WEIGHTS, ops=ops, device=device, dtype=dtype, max_batch=3,
                       max_tokens=64, max_seq_len=64, block_size=4, cuda_graphs=False,
                       quant=quant, quant_group=32)
        assert m._fuses_norm(1, True) == (fuse == "1") and not m._fuses_norm(1, False)
        assert not m._fuses_norm(3, True)
        logits, k = [], 0
        for ids, ps in ((["a"], prompts[:1]), (["b", "c", "d"], prompts)):
            out = m.logits_numpy(m.prefill(list(zip(ids, ps))))
            for _ in range(2):
                if fuse == "1":
                    fed.append(out.argmax(1))
                out = m.logits_numpy(m.decode(ids, fed[k]))
                k += 1
                logits.append(out)
        runs.append(logits)
    assert not LlamaModel(TINY, WEIGHTS, ops=ops, device=device, dtype=dtype, max_batch=3,
                          batch_invariant=True)._fuses_norm(1, True)
    tol = 1e-5 if dtype == "fp32" else 2e-2
    for a, b in zip(*runs):
        assert np.abs(a - b).max() <= tol * np.abs(b).max(), float(np.abs(a - b).max())
