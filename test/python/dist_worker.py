"""One rank of test_devices.py's torch.distributed test (started by torch.distributed.run):
each rank sets its own GPU, launches Kiln kernels on tensors there, all-reduces the results
through NCCL and checks the sum against what every rank computed. Prints "rank ok" on success.
"""
import os

import torch
import torch.distributed as dist

import kiln
import kiln.language as tl


@kiln.jit
def affine(x_ptr, out_ptr, n, a, b, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, a * tl.load(x_ptr + offs, mask=mask) + b, mask=mask)


def main():
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local = int(os.environ["LOCAL_RANK"])
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", device_id=torch.device("cuda", local))
    n = 1 << 20
    x = torch.arange(n, device="cuda", dtype=torch.float32) / n
    for step in range(3):
        out = torch.full_like(x, float("nan"))
        affine[(kiln.cdiv(n, 1024),)](x, out, n, float(rank + 1), float(step), BLOCK=1024)
        assert out.device.index == local
        dist.all_reduce(out)
        # sum over ranks r of ((r + 1) x + step)
        ref = sum(r + 1 for r in range(world)) * x + world * step
        err = (out - ref).abs().max().item()
        assert err <= 1e-5, f"rank {rank} step {step}: max error {err}"
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} ok", flush=True)


if __name__ == "__main__":
    main()
