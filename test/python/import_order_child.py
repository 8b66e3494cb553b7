"""One process of test_import_order.py: imports the modules named in argv[1] (comma-separated,
in that order), then launches a vector add with Kiln and checks its answer. argv[2] is the
backend: "cpu" (numpy arrays on the host backend) or "gpu" (torch CUDA tensors when torch is
among the imports, else Kiln's own device arrays). Prints "ok <order>" on success."""
import importlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def main():
    order, backend = sys.argv[1].split(","), sys.argv[2]
    for name in order:
        importlib.import_module(name)
    import numpy as np

    import kiln
    from import_order_kernel import add

    n = 10_000
    rng = np.random.default_rng(7)
    x, y = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    grid = (kiln.cdiv(n, 1024),)
    if backend == "cpu":
        out = np.full(n, np.nan, np.float32)
        add[grid](x, y, out, n, BLOCK=1024, device="cpu")
    elif "torch" in order and sys.modules["torch"].cuda.is_available():
        import torch
        tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        tout = torch.full_like(tx, float("nan"))
        add[grid](tx, ty, tout, n, BLOCK=1024)
        out = tout.cpu().numpy()
    else:
        dx, dy = kiln.from_numpy(x), kiln.from_numpy(y)
        dout = kiln.empty(n, "float32")
        dout.fill32(0x7FC00000)
        add[grid](dx, dy, dout, n, BLOCK=1024)
        out = dout.numpy()
    np.testing.assert_array_equal(out, x + y)
    print("ok", ",".join(order), flush=True)


if __name__ == "__main__":
    main()
