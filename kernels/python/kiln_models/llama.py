"""kiln_models.llama: the command line.

    python -m kiln_models.llama generate (--model DIR | --config tiny|1b --random-weights)
        [--batch N] [--prompt-len P] [--new-tokens T] [--dtype fp32|bf16|fp16]
        [--device cpu|gpu] [--seed S] [--temperature X --top-k K --top-p P] [--no-warmup]
        [--stop-token ID]
    python -m kiln_models.llama serve (--model DIR | --config ... --random-weights)
        [--requests R] [--prompt-lens LO HI] [--new-tokens-range LO HI] [--max-batch B]
        [--kv-tokens N] [--check-solo] [--batch-invariant] ...
    python -m kiln_models.llama quant-error (--model DIR | --config ...) --quant int8|int4
        [--batch N] [--prompt-len P] [--new-tokens T] ...
    python -m kiln_models.llama quantize --model DIR --out DIR2 --quant int8|int4
        [--quant-group G] [--no-quant-head]

generate: random prompt ids from the seed; prints the prefill and decode tokens/s, the model's
peak device memory (weights, KV cache and buffers it allocated) and the generated ids. The
first (warm-up) run compiles the kernels and is not timed.
serve: R requests of random lengths through the in-flight batching scheduler with a fixed KV
budget; prints the throughput and p50/p99 time to first token and per-token latency, and with
--check-solo whether every request's tokens equal its run alone (exactly so only with
--batch-invariant: otherwise a batch takes other kernel plans than a single request, and a
near-tie among the top logits can round the other way).
quant-error: the logits of the --quant model against the unquantized one (same dtype) on
random prompts and decode steps: max and mean relative error, top-1 agreement, memory.
--quant int8|int4 quantizes the decoder projections at load in every command.
quantize: writes DIR's projections (and LM head) quantized to DIR2, which the other commands
(and LlamaModel.from_pretrained) then load as saved, without quantizing.
"""

import argparse
import os
import sys
import time

import numpy as np

from .checkpoint import load_weights, random_weights, read_quantization, save_quantized
from .config import LlamaConfig, preset
from .generate import SamplingParams, generate
from .kv_cache import KVCacheFull
from .model import LlamaModel
from .scheduler import Scheduler, latency_stats

__all__ = ["main", "build_parser"]


def _common(g):
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="DIR", help="HF checkpoint directory (config.json, "
                     "model.safetensors or its index)")
    src.add_argument("--config", choices=["tiny", "1b"], help="a preset config")
    g.add_argument("--random-weights", action="store_true",
                   help="seeded random weights (HF's init) instead of the checkpoint's")
    g.add_argument("--dtype", choices=["fp32", "bf16", "fp16"],
                   help="activation and weight dtype (default: fp32 on the CPU; on the "
                        "GPU fp16 for an fp16 checkpoint, else bf16)")
    g.add_argument("--device", choices=["cpu", "gpu"],
                   help="default: the GPU when there is one")
    g.add_argument("--seed", type=int, default=0, help="seeds the prompts, weights, sampling")
    g.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--block-size", type=int, default=16, help="KV cache block size")
    g.add_argument("--quant", choices=["int8", "int4"],
                   help="weight-only quantization of the decoder projections")
    g.add_argument("--quant-group", type=int, default=128, help="int4 scale group (K)")
    g.add_argument("--no-graphs", action="store_true",
                   help="launch every decode step's kernels (GPU default: replay a CUDA graph)")
    g.add_argument("--batch-invariant", action="store_true",
                   help="kernel plans fixed per row, so a request's tokens do not depend on "
                        "its batch (slower decode at batches above 4)")


def build_parser():
    p = argparse.ArgumentParser(prog="python -m kiln_models.llama",
                                description="Llama inference on Kiln kernels")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="generate tokens from random prompts and time it")
    _common(g)
    g.add_argument("--batch", type=int, default=1, help="requests decoded together")
    g.add_argument("--prompt-len", type=int, default=16, help="tokens per prompt")
    g.add_argument("--new-tokens", type=int, default=16, help="tokens generated per request")
    g.add_argument("--no-warmup", action="store_true", help="time the first run too")
    g.add_argument("--stop-token", type=int, metavar="ID",
                   help="a request that produces this id ends there (an end-of-text id)")
    s = sub.add_parser("serve", help="in-flight batching of random requests")
    _common(s)
    s.add_argument("--requests", type=int, default=16)
    s.add_argument("--prompt-lens", type=int, nargs=2, default=(8, 64), metavar=("LO", "HI"),
                   help="prompt lengths drawn uniformly in [LO, HI]")
    s.add_argument("--new-tokens-range", type=int, nargs=2, default=(4, 32),
                   metavar=("LO", "HI"), help="output lengths drawn uniformly in [LO, HI]")
    s.add_argument("--max-batch", type=int, default=8, help="requests running at once")
    s.add_argument("--kv-tokens", type=int,
                   help="KV cache size in tokens (default: max-batch requests of the longest)")
    s.add_argument("--max-tokens", type=int,
                   help="tokens a prefill step takes (default: max-batch prompts of the "
                        "longest, at most 8192, at least the longest); a longer prompt is "
                        "prefilled in pieces")
    s.add_argument("--check-solo", action="store_true",
                   help="also run each request alone and compare its tokens")
    z = sub.add_parser("quantize", help="save a dense checkpoint's projections quantized")
    z.add_argument("--model", required=True, metavar="DIR", help="the dense HF checkpoint")
    z.add_argument("--out", required=True, metavar="DIR", help="where to write it")
    z.add_argument("--quant", required=True, choices=["int8", "int4"])
    z.add_argument("--quant-group", type=int, default=128, help="int4 scale group (K)")
    z.add_argument("--no-quant-head", action="store_true", help="keep the LM head dense")
    q = sub.add_parser("quant-error", help="logits of the --quant model against the "
                       "unquantized one on random prompts")
    _common(q)
    q.add_argument("--batch", type=int, default=4)
    q.add_argument("--prompt-len", type=int, default=64)
    q.add_argument("--new-tokens", type=int, default=16,
                   help="decode steps compared after the prefill (the dense model's greedy "
                        "tokens fed to both)")
    return p


def _mib(n):
    return f"{n / (1 << 20):.1f} MiB"


def _positive(args, *names):
    for name in names:
        values = getattr(args, name)
        for v in (values if isinstance(values, (list, tuple)) else [values]):
            if v < 1:
                raise ValueError(f"--{name.replace('_', '-')} must be at least 1")


def _load(args, seq_len):
    """(config, weights, device, dtype) of the command's model source."""
    if args.config and not args.random_weights:
        raise ValueError("--config has no checkpoint: add --random-weights")
    config = preset(args.config) if args.config else LlamaConfig.from_json(args.model)
    if seq_len > config.max_position_embeddings:
        raise ValueError(f"prompt + new tokens = {seq_len} is beyond the model's "
                         f"max_position_embeddings={config.max_position_embeddings}")
    device = args.device
    if device is None:
        import kiln
        device = "gpu" if kiln.has_gpu() else "cpu"
    # default: fp32 on the CPU; on the GPU the checkpoint's 16-bit dtype, else bf16
    dtype = args.dtype or ("fp32" if device == "cpu" else
                           {"float16": "fp16"}.get(config.torch_dtype, "bf16"))
    saved = None if args.random_weights else read_quantization(args.model)
    args.quant_head = True
    if saved is not None:  # saved by `quantize`: loads as saved
        if args.command == "quant-error":
            raise ValueError(f"quant-error compares with the dense model: {args.model} is "
                             f"saved quantized ({saved['method']})")
        if args.quant not in (None, saved["method"]):
            raise ValueError(f"--quant {args.quant}: {args.model} is saved as "
                             f"{saved['method']}")
        args.quant, args.quant_head = saved["method"], saved["head"]
        args.quant_group = saved["group_size"] or args.quant_group
    weights = random_weights(config, args.seed, dtype) if args.random_weights else \
        load_weights(args.model, config, saved)
    return config, weights, device, dtype


def _banner(args, config, dtype, device, what, out):
    quant = f" ({args.quant} weights)" if args.quant else ""
    print(f"kiln_models: Llama {args.config or args.model} ({config.num_hidden_layers} layers, "
          f"hidden {config.hidden_size}, vocab {config.vocab_size}), {dtype}{quant} on "
          f"{device}, {what}", file=out)


def _graphs(args, device):
    return device == "gpu" and not args.no_graphs


def _memory(model, out):
    kv = sum(k.nbytes + v.nbytes for k, v in zip(model.kv.k, model.kv.v))
    line = f"peak device memory: {_mib(model.arrays.peak)} (KV cache {_mib(kv)})"
    if model.arrays.device == "gpu":
        import kiln
        line += f"; every Kiln array of the process: {_mib(kiln.max_memory_allocated())}"
    print(line, file=out)


def _generate(args, out):
    _positive(args, "batch", "prompt_len", "new_tokens")
    seq_len = args.prompt_len + args.new_tokens
    config, weights, device, dtype = _load(args, seq_len)
    model = LlamaModel(config, weights, device=device, dtype=dtype, max_batch=args.batch,
                       max_tokens=args.batch * args.prompt_len, max_seq_len=seq_len,
                       block_size=args.block_size, quant=args.quant,
                       quant_group=args.quant_group, quant_head=args.quant_head,
                       cuda_graphs=_graphs(args, device), batch_invariant=args.batch_invariant)
    del weights
    sampling = SamplingParams(args.temperature, args.top_k, args.top_p, args.seed)
    rng = np.random.default_rng(args.seed)
    prompts = [rng.integers(0, config.vocab_size, args.prompt_len) for _ in range(args.batch)]
    _banner(args, config, dtype, device, f"batch {args.batch}, prompt {args.prompt_len}, "
            f"new tokens {args.new_tokens}", out)
    if not args.no_warmup:  # 3 tokens: the first step, its capture and a queued one (the
        # queued steps' buffers, of 128 steps, exist before the timed run; longer runs grow them)
        generate(model, prompts, min(3, args.new_tokens), sampling)
    result = generate(model, prompts, args.new_tokens, sampling, args.stop_token)
    print(f"prefill: {result.prefill_tokens} tokens in {result.prefill_seconds * 1e3:.2f} "
          f"ms: {result.prefill_tokens_per_s:.1f} tokens/s", file=out)
    print(f"decode: {result.decode_tokens} tokens in {result.decode_seconds * 1e3:.2f} ms: "
          f"{result.decode_tokens_per_s:.1f} tokens/s", file=out)
    _memory(model, out)
    for i, toks in enumerate(result.tokens):
        print(f"ids[{i}]: {' '.join(map(str, toks))}", file=out)
    return result


def _serve(args, out):
    _positive(args, "requests", "prompt_lens", "new_tokens_range", "max_batch")
    if args.max_tokens is not None:
        _positive(args, "max_tokens")
    (plo, phi), (nlo, nhi) = args.prompt_lens, args.new_tokens_range
    if args.check_solo and args.temperature:
        raise ValueError("--check-solo compares greedy runs: drop --temperature")
    if plo > phi or nlo > nhi:
        raise ValueError("--prompt-lens and --new-tokens-range take LO <= HI")
    seq_len = phi + nhi
    config, weights, device, dtype = _load(args, seq_len)
    blocks = None
    if args.kv_tokens is not None:
        if args.kv_tokens < seq_len:
            raise ValueError(f"--kv-tokens {args.kv_tokens} cannot hold the longest request "
                             f"({seq_len} tokens)")
        blocks = args.kv_tokens // args.block_size
    model = LlamaModel(config, weights, device=device, dtype=dtype, max_batch=args.max_batch,
                       max_tokens=args.max_tokens or max(phi, min(args.max_batch * phi, 8192)),
                       max_seq_len=seq_len, block_size=args.block_size, num_blocks=blocks,
                       quant=args.quant, quant_group=args.quant_group,
                       quant_head=args.quant_head, cuda_graphs=_graphs(args, device),
                       batch_invariant=args.batch_invariant)
    del weights
    sampling = SamplingParams(args.temperature, args.top_k, args.top_p, args.seed)
    rng = np.random.default_rng(args.seed)
    work = [(rng.integers(0, config.vocab_size, rng.integers(plo, phi + 1)),
             int(rng.integers(nlo, nhi + 1))) for _ in range(args.requests)]
    _banner(args, config, dtype, device, f"{args.requests} requests, prompts {plo}-{phi}, "
            f"outputs {nlo}-{nhi}, max batch {args.max_batch}, KV cache "
            f"{model.kv.allocator.num_blocks * args.block_size} tokens", out)
    generate(model, [work[0][0]], 2, sampling)  # warm-up: compiles the kernels
    sched = Scheduler(model, sampling)
    start = time.perf_counter()
    reqs = [sched.add(p, n) for p, n in work]
    sched.run()
    stats = latency_stats(reqs, time.perf_counter() - start)
    print(f"served {stats['requests']} requests, {stats['tokens']} tokens in "
          f"{stats['tokens'] / stats['tokens_per_s']:.2f} s: {stats['tokens_per_s']:.1f} "
          f"tokens/s in {sched.steps} steps", file=out)
    print(f"time to first token: p50 {stats['ttft_ms_p50']:.2f} ms, p99 "
          f"{stats['ttft_ms_p99']:.2f} ms", file=out)
    if "tpot_ms_p50" in stats:
        print(f"per-token latency: p50 {stats['tpot_ms_p50']:.2f} ms, p99 "
              f"{stats['tpot_ms_p99']:.2f} ms", file=out)
    _memory(model, out)
    if args.check_solo:
        same = sum(generate(model, [r.prompt], r.max_new_tokens, sampling).tokens[0] == r.tokens
                   for r in reqs)
        print(f"solo check: {same} of {len(reqs)} requests give their tokens decoded alone",
              file=out)
        if same != len(reqs):
            return 1
    return 0


def _quant_error(args, out):
    _positive(args, "batch", "prompt_len", "new_tokens")
    if not args.quant:
        raise ValueError("quant-error needs --quant int8 or --quant int4")
    seq_len = args.prompt_len + args.new_tokens
    config, weights, device, dtype = _load(args, seq_len)
    kw = dict(device=device, dtype=dtype, max_batch=args.batch,
              max_tokens=args.batch * args.prompt_len, max_seq_len=seq_len,
              block_size=args.block_size, cuda_graphs=_graphs(args, device),
              batch_invariant=args.batch_invariant)
    dense = LlamaModel(config, weights, **kw)
    quant = LlamaModel(config, weights, quant=args.quant, quant_group=args.quant_group, **kw)
    del weights
    rng = np.random.default_rng(args.seed)
    batch = [(f"q{i}", rng.integers(0, config.vocab_size, args.prompt_len))
             for i in range(args.batch)]
    _banner(args, config, dtype, device, f"batch {args.batch}, prompt {args.prompt_len}, "
            f"{args.new_tokens} decode steps", out)
    errs, same = [], []
    a, b = dense.prefill(batch), quant.prefill(batch)
    for step in range(args.new_tokens + 1):
        want, got = dense.logits_numpy(a), quant.logits_numpy(b)
        errs += list(np.abs(got - want).max(axis=1) / np.abs(want).max(axis=1))
        same += list(got.argmax(axis=1) == want.argmax(axis=1))
        if step < args.new_tokens:
            seqs, tokens = [s for s, _ in batch], want.argmax(axis=1)
            a, b = dense.decode(seqs, tokens), quant.decode(seqs, tokens)
    print(f"{args.quant} against {dtype} logits at {len(errs)} positions: max rel err "
          f"{max(errs):.4g}, mean {np.mean(errs):.4g}; same top-1 token at "
          f"{100 * np.mean(same):.1f}%", file=out)
    print(f"weights and buffers: {_mib(quant.arrays.peak)} quantized, "
          f"{_mib(dense.arrays.peak)} dense", file=out)
    return 0


def _quantize(args, out):
    if read_quantization(args.model) is not None:
        raise ValueError(f"{args.model} is saved quantized already")
    start = time.perf_counter()
    q = save_quantized(args.model, args.out, args.quant, args.quant_group,
                       not args.no_quant_head)
    size = sum(os.path.getsize(os.path.join(args.out, f)) for f in os.listdir(args.out))
    print(f"saved {args.model} as {q['method']}" + (f" (group {q['group_size']})"
                                                   if q["group_size"] else "") +
          f", LM head {'quantized' if q['head'] else 'dense'}, to {args.out}: {_mib(size)} "
          f"in {time.perf_counter() - start:.1f} s", file=out)
    return 0


def main(argv=None, out=None):
    """Runs the command line; returns the exit status (2 on a bad argument or input)."""
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        if args.command == "generate":
            _generate(args, out)
            return 0
        if args.command == "quant-error":
            return _quant_error(args, out)
        if args.command == "quantize":
            return _quantize(args, out)
        return _serve(args, out)
    except (ValueError, KVCacheFull) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
