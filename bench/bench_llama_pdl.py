"""A/B of programmatic dependent launch in kiln_models decode (KILN_MODELS_PDL=1 against 0), or
of another on/off setting read when a step is captured (`--env KILN_MODELS_FUSE_SWIGLU`).

One process, one model per case (Llama-3.2-1B shapes, random bf16 weights), the two settings
alternated three times with the decode graph re-captured each time; prints the median decode
tokens/s (steps alone, 512-token prompts, 128 new tokens, best of 2 calls per setting).

    python3 bench/bench_llama_pdl.py [--env NAME] [b1] [int4] [int8] [b16]
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "kernels", "python"))

from kiln_models.config import preset  # noqa: E402
from kiln_models.generate import generate  # noqa: E402
from kiln_models.model import LlamaModel  # noqa: E402


def main(cases, env="KILN_MODELS_PDL"):
    cfg = preset("1b")
    rng = np.random.default_rng(0)
    for case in cases:
        B = 16 if case == "b16" else 1
        quant = case if case in ("int4", "int8") else None
        m = LlamaModel.random(cfg, device="gpu", dtype="bf16", max_batch=max(B, 4),
                              max_tokens=512 * B, max_seq_len=1024, quant=quant)
        ps = [rng.integers(0, cfg.vocab_size, 512) for _ in range(B)]
        res = {"1": [], "0": []}
        for _ in range(3):
            for pdl in ("1", "0"):
                os.environ[env] = pdl
                m._graphs = {}  # re-captured with this setting's launches
                generate(m, ps, 4)
                r = max((generate(m, ps, 128) for _ in range(2)),
                        key=lambda x: x.decode_tokens_per_s)
                res[pdl].append(r.decode_tokens_per_s)
        on, off = np.median(res["1"]), np.median(res["0"])
        print(f"pdl_ab {case}: {env} on {on:.0f} tok/s {[round(v) for v in res['1']]}, off "
              f"{off:.0f} {[round(v) for v in res['0']]}: {on / off:.3f}x", flush=True)
        del m


if __name__ == "__main__":
    args = sys.argv[1:]
    env = "KILN_MODELS_PDL"
    if args[:1] == ["--env"]:
        env, args = args[1], args[2:]
    main(args or ["b1", "int4", "b16"], env)
