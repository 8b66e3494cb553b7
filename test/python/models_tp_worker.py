"""One rank of test_kiln_models_quant_tp.py's tensor-parallel test (started by torch.distributed.run):
loads its shard of the checkpoint in argv[1] (kiln_models.parallel), all-reduces through
torch.distributed (gloo on the CPU, NCCL on GPUs), and writes the last-position logits of a
prompt and the greedy ids of two prompts to argv[2]/rank<r>.npz."""
import os
import sys

import numpy as np
import torch
import torch.distributed as dist

from kiln_models.generate import generate
from kiln_models.model import LlamaModel
from kiln_models.parallel import torch_all_reduce


def main():
    model_dir, out_dir, device, dtype = sys.argv[1:5]
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if device == "gpu":
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        dist.init_process_group("nccl", device_id=torch.device("cuda", local))
        stream = torch.cuda.current_stream().cuda_stream  # kernels and NCCL on one stream
    else:
        dist.init_process_group("gloo")
        stream = None
    model = LlamaModel.from_pretrained_shard(model_dir, rank, world, torch_all_reduce(),
                                             device=device, dtype=dtype, stream=stream,
                                             max_batch=2, max_tokens=64, max_seq_len=64)
    rng = np.random.default_rng(0)
    ids = rng.integers(0, model.config.vocab_size, 12)
    logits = model.logits_numpy(model.prefill([("a", ids)]))[0]
    model.release("a")
    prompts = [rng.integers(0, model.config.vocab_size, n) for n in (5, 9)]
    tokens = generate(model, prompts, 8).tokens
    np.savez(os.path.join(out_dir, f"rank{rank}.npz"), ids=ids, logits=logits,
             prompts=np.concatenate(prompts), tokens=np.array(tokens))
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} ok", flush=True)


if __name__ == "__main__":
    main()
