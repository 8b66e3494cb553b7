"""kiln_models.llama: the command line.

    python -m kiln_models.llama generate (--model DIR | --config tiny|1b --random-weights)
        [--batch N] [--prompt-len P] [--new-tokens T] [--dtype fp32|bf16|fp16]
        [--device cpu|gpu] [--seed S] [--temperature X --top-k K --top-p P] [--no-warmup]

Random prompt ids from the seed; prints the prefill and decode tokens/s, the model's peak
device memory (weights, KV cache and buffers it allocated) and the generated ids. The first
(warm-up) run compiles the kernels and is not timed.
"""

import argparse
import sys

import numpy as np

from .checkpoint import load_weights, random_weights
from .config import LlamaConfig, preset
from .generate import SamplingParams, generate
from .kv_cache import KVCacheFull
from .model import LlamaModel

__all__ = ["main", "build_parser"]


def build_parser():
    p = argparse.ArgumentParser(prog="python -m kiln_models.llama",
                                description="Llama inference on Kiln kernels")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="generate tokens from random prompts and time it")
    src = g.add_mutually_exclusive_group(required=True)
    src.add_argument("--model", metavar="DIR", help="HF checkpoint directory (config.json, "
                     "model.safetensors or its index)")
    src.add_argument("--config", choices=["tiny", "1b"], help="a preset config")
    g.add_argument("--random-weights", action="store_true",
                   help="seeded random weights (HF's init) instead of the checkpoint's")
    g.add_argument("--batch", type=int, default=1, help="requests decoded together")
    g.add_argument("--prompt-len", type=int, default=16, help="tokens per prompt")
    g.add_argument("--new-tokens", type=int, default=16, help="tokens generated per request")
    g.add_argument("--dtype", choices=["fp32", "bf16", "fp16"],
                   help="activation and weight dtype (default: fp32 on the CPU, bf16 on "
                        "the GPU)")
    g.add_argument("--device", choices=["cpu", "gpu"],
                   help="default: the GPU when there is one")
    g.add_argument("--seed", type=int, default=0, help="seeds the prompts, weights, sampling")
    g.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--block-size", type=int, default=16, help="KV cache block size")
    g.add_argument("--no-warmup", action="store_true", help="time the first run too")
    return p


def _mib(n):
    return f"{n / (1 << 20):.1f} MiB"


def _run(args, out):
    for name in ("batch", "prompt_len", "new_tokens"):
        if getattr(args, name) < 1:
            raise ValueError(f"--{name.replace('_', '-')} must be at least 1")
    if args.config and not args.random_weights:
        raise ValueError("--config has no checkpoint: add --random-weights")
    config = preset(args.config) if args.config else LlamaConfig.from_json(args.model)
    device = args.device
    if device is None:
        import kiln
        device = "gpu" if kiln.has_gpu() else "cpu"
    dtype = args.dtype or ("fp32" if device == "cpu" else "bf16")
    weights = random_weights(config, args.seed, dtype) if args.random_weights else \
        load_weights(args.model, config)
    seq_len = args.prompt_len + args.new_tokens
    if seq_len > config.max_position_embeddings:
        raise ValueError(f"--prompt-len + --new-tokens = {seq_len} is beyond the model's "
                         f"max_position_embeddings={config.max_position_embeddings}")
    model = LlamaModel(config, weights, device=device, dtype=dtype, max_batch=args.batch,
                       max_tokens=args.batch * args.prompt_len, max_seq_len=seq_len,
                       block_size=args.block_size)
    del weights
    sampling = SamplingParams(args.temperature, args.top_k, args.top_p, args.seed)
    rng = np.random.default_rng(args.seed)
    prompts = [rng.integers(0, config.vocab_size, args.prompt_len) for _ in range(args.batch)]
    name = args.config or args.model
    print(f"kiln_models: Llama {name} ({config.num_hidden_layers} layers, hidden "
          f"{config.hidden_size}, vocab {config.vocab_size}), {dtype} on {device}, batch "
          f"{args.batch}, prompt {args.prompt_len}, new tokens {args.new_tokens}", file=out)
    if not args.no_warmup:
        generate(model, prompts, min(2, args.new_tokens), sampling)
    result = generate(model, prompts, args.new_tokens, sampling)
    print(f"prefill: {result.prefill_tokens} tokens in {result.prefill_seconds * 1e3:.2f} "
          f"ms: {result.prefill_tokens_per_s:.1f} tokens/s", file=out)
    print(f"decode: {result.decode_tokens} tokens in {result.decode_seconds * 1e3:.2f} ms: "
          f"{result.decode_tokens_per_s:.1f} tokens/s", file=out)
    kv = sum(k.nbytes + v.nbytes for k, v in zip(model.kv.k, model.kv.v))
    print(f"peak device memory: {_mib(model.arrays.peak)} (KV cache {_mib(kv)})", file=out)
    for i, toks in enumerate(result.tokens):
        print(f"ids[{i}]: {' '.join(map(str, toks))}", file=out)
    return result


def main(argv=None, out=None):
    """Runs the command line; returns the exit status (2 on a bad argument or input)."""
    out = out or sys.stdout
    args = build_parser().parse_args(argv)
    try:
        _run(args, out)
    except (ValueError, KVCacheFull) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
