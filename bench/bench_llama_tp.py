"""Tensor-parallel kiln_models (issue #24, must-show 4): Llama-3.2-1B shapes with seeded random
weights split over the GPUs of one host (kiln_models.parallel: heads and MLP features per
rank, o_proj/down_proj partial sums all-reduced by torch.distributed / NCCL on the kernels'
stream), against the same model on one GPU: last-position logits of a prompt (bf16), greedy
tokens, and decode tokens/s at batch 1 and 16 (prompts of 512, 128 new tokens); then both in
fp32, where the split must give the one-GPU logits (<= 1e-4) and the same 128 greedy tokens.

    python -m torch.distributed.run --standalone --nproc_per_node=2 bench/bench_llama_tp.py

Written for any number of ranks (heads and KV heads must divide by it). Rank 0 prints.
"""
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "kernels", "python"))


def first_difference(a, b):
    """How many leading tokens of `a` and `b` are equal."""
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def main():
    import torch
    import torch.distributed as dist
    from kiln_models.checkpoint import random_weights
    from kiln_models.config import preset
    from kiln_models.generate import generate
    from kiln_models.model import LlamaModel
    from kiln_models.parallel import shard_weights, torch_all_reduce

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    # Kernels and NCCL ordered on one stream: a side stream of torch's (the legacy default
    # stream, torch's default, cannot be captured into a CUDA graph).
    torch.cuda.set_stream(torch.cuda.Stream())
    stream = torch.cuda.current_stream().cuda_stream
    config = preset(os.environ.get("CONFIG", "1b"))
    weights = random_weights(config, 0, "bf16")
    lc, lw = shard_weights(config, weights, rank, world)
    kw = dict(device="gpu", dtype="bf16", max_batch=16, max_tokens=16 * 512, max_seq_len=1024)
    graphs = os.environ.get("GRAPHS", "0") == "1"  # NCCL inside the captured decode step
    model = LlamaModel(lc, lw, all_reduce=torch_all_reduce(), stream=stream, cuda_graphs=graphs,
                       **kw)
    del lw
    rng = np.random.default_rng(0)
    ids = rng.integers(0, config.vocab_size, 64)
    tp_logits = model.logits_numpy(model.prefill([("check", ids)]))[0]
    model.release("check")
    out = {}
    for B in (1, 16):
        prompts = [rng.integers(0, config.vocab_size, 512) for _ in range(B)]
        generate(model, prompts, 4)
        dist.barrier()
        r = generate(model, prompts, 128)
        out[B] = (r, prompts)
    # fp32: the split changes only the order of the o_proj/down_proj sums.
    f32kw = dict(kw, dtype="fp32", max_batch=1, max_tokens=64, max_seq_len=256)
    tp32 = LlamaModel(lc, shard_weights(config, weights, rank, world)[1],  # converted at load
                      all_reduce=torch_all_reduce(), stream=stream, cuda_graphs=graphs, **f32kw)
    tp32_logits = tp32.logits_numpy(tp32.prefill([("check", ids)]))[0]
    tp32.release("check")
    tp32_tokens = generate(tp32, [ids], 128).tokens[0]
    del tp32
    if rank == 0:
        one = LlamaModel(config, weights, **kw)
        ref = one.logits_numpy(one.prefill([("check", ids)]))[0]
        one.release("check")
        rel = float(np.abs(tp_logits - ref).max() / np.abs(ref).max())
        print(f"device: {torch.cuda.get_device_name()} x {world}; decode graphs: {graphs}",
              flush=True)
        print(f"logits, {world}-way TP vs one GPU (bf16, 64-token prompt): max rel err "
              f"{rel:.3e}, argmax {int(tp_logits.argmax())} vs {int(ref.argmax())}")
        # Both bf16 runs against the one-GPU model in fp32: what bf16 rounding alone costs.
        f32 = LlamaModel(config, weights, **f32kw)
        exact = f32.logits_numpy(f32.prefill([("check", ids)]))[0]
        f32.release("check")
        f32_tokens = generate(f32, [ids], 128).tokens[0]
        del f32

        def err(x):
            return float(np.abs(x - exact).max() / np.abs(exact).max())
        print(f"against one GPU in fp32: TP bf16 {err(tp_logits):.3e}, one GPU bf16 "
              f"{err(ref):.3e}")
        print(f"fp32, {world}-way TP vs one GPU: logits max rel err {err(tp32_logits):.2e} "
              f"(<= 1e-4: {'yes' if err(tp32_logits) <= 1e-4 else 'NO'}); greedy tokens "
              f"equal for {first_difference(tp32_tokens, f32_tokens)} of 128", flush=True)
        print("| batch | TP decode tok/s (steps) | TP whole call tok/s | 1 GPU decode tok/s "
              "(graphs) | bf16 greedy tokens equal to 1 GPU's before the first difference |")
        print("|---|---|---|---|---|")
        for B, (r, prompts) in out.items():
            generate(one, prompts, 4)
            solo = generate(one, prompts, 128)
            same = sorted(first_difference(a, b) for a, b in zip(r.tokens, solo.tokens))
            total = r.prefill_seconds + r.decode_seconds
            print(f"| {B} | {r.decode_tokens_per_s:.0f} | {B * 128 / total:.0f} | "
                  f"{solo.decode_tokens_per_s:.0f} | {same[0]}-{same[-1]} of 128 (median "
                  f"{same[len(same) // 2]}) |", flush=True)
    if graphs:
        # torch.distributed's teardown hangs after NCCL collectives were captured into a CUDA
        # graph (pytorch/pytorch#115388); the results are printed, nothing else is pending.
        sys.stdout.flush()
        os._exit(0)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
