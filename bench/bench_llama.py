"""Llama end to end (issue #24): kiln_models beside HF transformers' LlamaForCausalLM (eager,
SDPA) and torch.compile of it, in one process on one GPU, with the same weights (HF's random
init saved by save_pretrained and loaded by kiln_models).

    PYTHONPATH=build/python:kernels/python:bench python3 bench/bench_llama.py [--config 1b]
        [--no-compile] [--png FILE] [--quick]

Measures (ANCHORS.md's LLM rows): prefill of 4 x 2048 tokens (logits of the last position),
decode of 128 new tokens after 512-token prompts at batch 1 and 16 (HF: generate with a
static cache, the time of the whole call as ANCHORS.md; Kiln: the same total, and its decode
steps alone), int4 and int8 weight-only decode at batch 1 (in this process after torch ran,
and in a subprocess where only Kiln runs); the last-position logits of a prompt against HF's
(bf16) as a sanity line; then the checkpoint in fp32 against HF (logits and 128 greedy
tokens), 64 requests served in flight (`kiln_models.llama serve`, each checked against its
solo run) and, on a host of two GPUs or more, tensor parallelism (bench_llama_tp.py); each
skipped with --no-fp32 / --no-serve / --no-tp. Prints a markdown table last and writes a PNG
of tokens/s when matplotlib is there.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "kernels", "python"))

SHAPES = {  # Llama-3.2-1B (ANCHORS.md) and a small one for trying the script
    "1b": dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
               num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
               tie_word_embeddings=True, rope_theta=500000.0, max_position_embeddings=131072,
               rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                             "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192}, rms_norm_eps=1e-5),
    "small": dict(hidden_size=512, intermediate_size=1536, num_hidden_layers=4,
                  num_attention_heads=8, num_key_value_heads=2, vocab_size=32000,
                  tie_word_embeddings=True, rope_theta=500000.0, max_position_embeddings=8192,
                  rms_norm_eps=1e-5),
}


def gpu_state():
    """The GPU's SM clock and temperature now (nvidia-smi), or "" without it: int4's CUDA-core
    kernels are issue-bound, so their speed follows the clock, which a warm GPU lowers."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,temperature.gpu",
                              "--format=csv,noheader,nounits"], capture_output=True,
                             text=True, timeout=10).stdout.split("\n")[0].split(",")
        return f" [SM {int(out[0])} MHz, {int(out[1])} C]"
    except (OSError, ValueError, IndexError, subprocess.SubprocessError):
        return ""


def timed(fn, reps, sync):
    """Median seconds of `reps` calls (after one warm-up call)."""
    fn()
    sync()
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        sync()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def b1_steps(generate, m, ps, reps):
    """Batch-1 decode steps of `m` (a LlamaModel) after prompts `ps`: the best of max(3,
    reps) generate calls of 128 tokens (64-130 ms each), after a warm-up that captures the
    step graph; the same for bf16 and quantized models."""
    generate(m, ps, 4)
    return min((generate(m, ps, 128) for _ in range(max(3, reps))),
               key=lambda x: x.decode_seconds)


def kiln_only_quant(model_dir, reps):
    """The batch-1 decode comparison of bf16, int8 and int4 weights in a process where only
    Kiln has run (what a kiln_models user, who needs no torch, gets): the models of
    `model_dir` built as main()'s, timed bf16, int8, int4, then bf16 again; prints one JSON
    line of decode tokens/s. (In main()'s process, after torch's kernels, CUDA graphs and
    allocations, the same int4 steps measured 1.3-2.3% slower on the H100 and bf16's did not
    move: a driver/GPU state of the process, see docs/models.md.)"""
    import json
    from kiln_models.generate import generate
    from kiln_models.model import LlamaModel
    kw = dict(device="gpu", dtype="bf16", max_batch=16, max_tokens=4 * 2048, max_seq_len=2048)
    out = {"bf16": []}
    bf16 = LlamaModel.from_pretrained(model_dir, **kw)
    ps = [np.random.default_rng(1).integers(0, bf16.config.vocab_size, 512)]
    out["bf16"].append(b1_steps(generate, bf16, ps, reps).decode_tokens_per_s)
    for q in ("int8", "int4"):
        qm = LlamaModel.from_pretrained(model_dir, quant=q, **kw)
        out[q] = b1_steps(generate, qm, ps, reps).decode_tokens_per_s
        out["bf16"].append(b1_steps(generate, bf16, ps, reps).decode_tokens_per_s)
        del qm
    print(json.dumps(out))


def fp32_check(model_dir, rng, V, bf16):
    """Must-show 1 on this GPU: the checkpoint in fp32, Kiln against HF eager in one process:
    the last-position logits of a 64-token prompt (max relative error, expected <= 1e-4) and
    128 greedy tokens (expected equal). `bf16` = (prompt, Kiln's bf16 logits, HF's bf16
    logits): both measured against HF in fp32 on that prompt, what bf16 rounding costs each."""
    import torch
    import transformers
    from kiln_models.generate import generate
    from kiln_models.model import LlamaModel
    hf = transformers.LlamaForCausalLM.from_pretrained(model_dir, attn_implementation="sdpa")
    hf = hf.to(device="cuda", dtype=torch.float32).eval()  # (bf16 weights: exact in fp32)
    m = LlamaModel.from_pretrained(model_dir, device="gpu", dtype="fp32", max_batch=1,
                                   max_tokens=256, max_seq_len=256)
    prompt = rng.integers(0, V, 64)
    ids = torch.tensor(prompt[None], device="cuda")
    with torch.no_grad():
        ref = hf(ids, logits_to_keep=1).logits[0, -1].double().cpu().numpy()
        want = hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=128,
                           min_new_tokens=128, do_sample=False,
                           pad_token_id=0)[0, 64:].tolist()
        b_prompt, b_kiln, b_hf = bf16
        exact = hf(torch.tensor(b_prompt[None], device="cuda"),
                   logits_to_keep=1).logits[0, -1].double().cpu().numpy()
    got = m.logits_numpy(m.prefill([("fp32", prompt)]))[0].astype(np.float64)
    m.release("fp32")
    rel = np.abs(got - ref).max() / np.abs(ref).max()

    def err(x):
        return np.abs(np.asarray(x, np.float64) - exact).max() / np.abs(exact).max()
    print(f"bf16 models against HF in fp32 (the bf16 check's prompt): kiln bf16 "
          f"{err(b_kiln):.2e}, HF bf16 {err(b_hf):.2e} (<= 2e-2: kiln "
          f"{'yes' if err(b_kiln) <= 2e-2 else 'NO'}, HF {'yes' if err(b_hf) <= 2e-2 else 'NO'})")
    tokens = generate(m, [prompt], 128).tokens[0]
    same = next((i for i, (a, b) in enumerate(zip(tokens, want)) if a != b), len(want))
    print(f"fp32 vs HF eager: logits max rel err {rel:.2e} (<= 1e-4: "
          f"{'yes' if rel <= 1e-4 else 'NO'}); greedy tokens equal for {same} of 128")
    del hf, m
    torch.cuda.empty_cache()


def tail(what, cmd, env, lines):
    """Runs `cmd` (a command that prints its own figures) and prints its last `lines`."""
    try:
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        out = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()
               and "warn" not in ln.lower()]
        print(f"{what} ({' '.join(os.path.basename(c) for c in cmd[1:4])} ..., exit "
              f"{r.returncode}):")
        for ln in out[-lines:]:
            print(f"  {ln}")
    except (OSError, subprocess.SubprocessError) as e:
        print(f"{what}: failed ({type(e).__name__}: {e})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default="1b", choices=sorted(SHAPES))
    ap.add_argument("--no-compile", action="store_true", help="skip torch.compile")
    ap.add_argument("--png", default=os.environ.get("OUT", ".") + "/llama_tokens_per_s.png")
    ap.add_argument("--quick", action="store_true", help="fewer repetitions")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-fp32", action="store_true", help="skip the fp32 check against HF")
    ap.add_argument("--no-serve", action="store_true", help="skip in-flight batching")
    ap.add_argument("--no-tp", action="store_true", help="skip tensor parallelism")
    ap.add_argument("--kiln-only-quant", metavar="DIR", help=argparse.SUPPRESS)
    args = ap.parse_args()
    reps = 2 if args.quick else args.reps
    if args.kiln_only_quant:
        return kiln_only_quant(args.kiln_only_quant, reps)

    import torch
    import transformers
    import kiln
    from kiln_models.generate import SamplingParams, generate
    from kiln_models.model import LlamaModel

    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; torch {torch.__version__}, transformers {transformers.__version__}")
    torch.manual_seed(0)
    hf_config = transformers.LlamaConfig(**SHAPES[args.config], torch_dtype="bfloat16",
                                         attn_implementation="sdpa")
    hf = transformers.LlamaForCausalLM(hf_config).to(device="cuda", dtype=torch.bfloat16).eval()
    tmp = tempfile.mkdtemp(prefix="kiln-llama-")
    hf.save_pretrained(tmp)
    sync = torch.cuda.synchronize
    rows = []  # (work, peer, ms, tok/s)

    model = LlamaModel.from_pretrained(tmp, device="gpu", dtype="bf16", max_batch=16,
                                       max_tokens=4 * 2048, max_seq_len=2048)
    ksync = model.stream.synchronize
    V = hf_config.vocab_size
    rng = np.random.default_rng(0)

    # sanity: last-position logits of one prompt (bf16)
    prompt = rng.integers(0, V, 64)
    with torch.no_grad():
        ref = hf(torch.tensor(prompt[None], device="cuda"), logits_to_keep=1).logits[0, -1]
    logits = model.prefill([("check", prompt)])
    ours_np = np.asarray(model.logits_numpy(logits), np.float32)[0]
    ours = torch.from_numpy(ours_np).cuda()
    model.release("check")
    rel = ((ours - ref.float()).abs().max() / ref.float().abs().max()).item()
    print(f"logits vs HF (bf16, 64-token prompt): max rel err {rel:.3e}; argmax "
          f"{int(ours.argmax())} vs {int(ref.argmax())}")

    # prefill 4 x 2048
    prompts = [rng.integers(0, V, 2048) for _ in range(4)]
    ids = torch.tensor(np.stack(prompts), device="cuda")

    def kiln_prefill():
        seqs = [f"p{i}" for i in range(4)]
        model.select(model.prefill(list(zip(seqs, prompts))), SamplingParams(), 0)
        for s in seqs:
            model.release(s)

    def hf_prefill(m):
        with torch.no_grad():
            m(ids, logits_to_keep=1)

    t_k = timed(kiln_prefill, reps, ksync)
    t_h = timed(lambda: hf_prefill(hf), reps, sync)
    rows += [("prefill 4x2048", "kiln", t_k), ("prefill 4x2048", "HF eager", t_h)]
    if not args.no_compile:
        compiled = torch.compile(hf)
        for _ in range(2):
            hf_prefill(compiled)
        t_c = timed(lambda: hf_prefill(compiled), reps, sync)
        rows.append(("prefill 4x2048", "torch.compile", t_c))
    print(f"prefill 4x2048: kiln {t_k * 1e3:.2f} ms, HF eager {t_h * 1e3:.2f} ms "
          f"({t_h / t_k:.2f}x)" + ("" if args.no_compile else
                                    f", torch.compile {t_c * 1e3:.2f} ms ({t_c / t_k:.2f}x)"))

    # decode 512 + 128 at batch 1 and 16
    decode = {}
    for B in (1, 16):
        ps = [rng.integers(0, V, 512) for _ in range(B)]
        generate(model, ps, 4)  # warm-up: compiles, captures the step graph
        res = [generate(model, ps, 128) for _ in range(max(1, reps // 2))]
        r = min(res, key=lambda x: x.prefill_seconds + x.decode_seconds)
        total = r.prefill_seconds + r.decode_seconds
        pids = torch.tensor(np.stack(ps), device="cuda")

        def hf_generate():
            with torch.no_grad():
                hf.generate(pids, attention_mask=torch.ones_like(pids), max_new_tokens=128,
                            min_new_tokens=128, do_sample=False, cache_implementation="static",
                            pad_token_id=0)
        t_g = timed(hf_generate, max(1, reps // 2), sync)
        decode[B] = (total, r.decode_tokens_per_s, t_g)
        rows += [(f"decode 512+128 b{B}", "kiln (whole call)", total),
                 (f"decode 512+128 b{B}", "HF eager generate", t_g)]
        print(f"decode b{B}{gpu_state()}: kiln {total * 1e3:.1f} ms total "
              f"({B * 128 / total:.0f} tok/s; "
              f"decode steps alone {r.decode_tokens_per_s:.0f} tok/s), HF generate "
              f"{t_g * 1e3:.1f} ms ({B * 128 / t_g:.0f} tok/s): {t_g / total:.2f}x")

    # Quantized weights: models built as the bf16 one (same batch, token and context sizes,
    # so the same attention and memory plans), each timed beside a new timing of the bf16
    # model's batch-1 steps; the ratio is to the faster bf16 figure (conservative).
    quant = {}
    bf16_b1 = [decode[1][1]]

    for q in ("int8", "int4"):
        try:
            qm = LlamaModel.from_pretrained(tmp, device="gpu", dtype="bf16", max_batch=16,
                                            max_tokens=4 * 2048, max_seq_len=2048, quant=q)
        except Exception as e:  # noqa: BLE001 - reported, the rest of the bench goes on
            print(f"{q}: {type(e).__name__}: {e}")
            continue
        ps = [rng.integers(0, V, 512)]
        r = b1_steps(generate, qm, ps, reps // 2)
        bf16_b1.append(b1_steps(generate, model, ps, reps // 2).decode_tokens_per_s)
        quant[q] = r.decode_tokens_per_s
        rows.append((f"decode b1 {q}", "kiln", (r.prefill_seconds + r.decode_seconds)))
        print(f"decode b1 {q}: decode steps {r.decode_tokens_per_s:.0f} tok/s; bf16 steps "
              f"again {bf16_b1[-1]:.0f}: {r.decode_tokens_per_s / max(bf16_b1):.2f}x the "
              f"fastest bf16 figure ({max(bf16_b1):.0f}){gpu_state()}")
        del qm

    # The same comparison in a process where only Kiln ran (kiln_only_quant)
    only = r = None
    try:
        import json
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--kiln-only-quant", tmp,
                            "--reps", str(reps // 2)], capture_output=True, text=True,
                           timeout=600)
        only = json.loads(r.stdout.strip().splitlines()[-1])
        print(f"kiln-only process{gpu_state()}: decode b1 bf16 " +
              "/".join(f"{x:.0f}" for x in only["bf16"]) + "; " +
              "; ".join(f"{q} {only[q]:.0f} ({only[q] / max(only['bf16']):.2f}x the fastest "
                        f"bf16)" for q in ("int8", "int4")))
    except (OSError, ValueError, IndexError, KeyError, subprocess.SubprocessError) as e:
        print(f"kiln-only process: failed ({type(e).__name__}: {e}) "
              f"{r.stderr[-400:] if r is not None else ''}")

    if not args.no_fp32:
        fp32_check(tmp, rng, V, (prompt, ours_np, ref.float().cpu().numpy()))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.path.join(HERE, "..", "kernels", "python")] +
        [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    if not args.no_serve:  # must-show 3, the served requests against their solo runs
        tail("in-flight batching", [sys.executable, "-m", "kiln_models.llama", "serve",
                                    "--model", tmp, "--requests", "64", "--prompt-lens", "32", "2048",
                                    "--new-tokens-range", "16", "512", "--max-batch", "16",
                                    "--kv-tokens", "32768", "--device", "gpu", "--dtype",
                                    "bf16", "--check-solo", "--batch-invariant"], env, 6)
    if not args.no_tp:  # must-show 4, on a host of two GPUs or more
        n = torch.cuda.device_count()
        if n >= 2:
            tail(f"tensor parallelism over {n} GPUs", [
                sys.executable, "-m", "torch.distributed.run", "--standalone",
                f"--nproc_per_node={n}", os.path.join(HERE, "bench_llama_tp.py")],
                dict(env, GRAPHS="1"), 12)
        else:
            print("tensor parallelism: one GPU here (run bench/bench_llama_tp.py with "
                  "torch.distributed.run on a host of two or more)")

    print(f"\n### Llama {args.config} on {dev}, bf16 ({time.strftime('%Y-%m-%d')})\n")
    print("| work | kiln | HF eager | torch.compile | kiln vs HF eager |")
    print("|---|---|---|---|---|")
    comp = f"{t_c * 1e3:.1f} ms" if not args.no_compile else "-"
    print(f"| prefill 4 x 2048 (last logits) | {t_k * 1e3:.1f} ms, {8192 / t_k / 1e3:.0f}k tok/s "
          f"| {t_h * 1e3:.1f} ms | {comp} | {t_h / t_k:.2f}x |")
    for B, (total, steps, t_g) in decode.items():
        print(f"| decode 512 + 128, batch {B} | {B * 128 / total:.0f} tok/s "
              f"(steps alone {steps:.0f}) | {B * 128 / t_g:.0f} tok/s | - | {t_g / total:.2f}x |")
    for q, tps in quant.items():
        print(f"| decode batch 1, {q} weights (steps, after torch ran) | {tps:.0f} tok/s | - | "
              f"- | {tps / max(bf16_b1):.2f}x bf16 ({max(bf16_b1):.0f}) |")
    for q in ("int8", "int4") if only else ():
        print(f"| decode batch 1, {q} weights (steps, kiln-only process) | {only[q]:.0f} tok/s "
              f"| - | - | {only[q] / max(only['bf16']):.2f}x bf16 ({max(only['bf16']):.0f}) |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        names, kilns, hfs = [], [], []
        names.append("prefill 4x2048")
        kilns.append(8192 / t_k)
        hfs.append(8192 / t_h)
        for B, (total, steps, t_g) in decode.items():
            names.append(f"decode b{B}")
            kilns.append(B * 128 / total)
            hfs.append(B * 128 / t_g)
        x = np.arange(len(names))
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.bar(x - 0.2, kilns, 0.4, label="kiln_models")
        ax.bar(x + 0.2, hfs, 0.4, label="HF eager (SDPA)")
        ax.set_xticks(x, names)
        ax.set_yscale("log")
        ax.set_ylabel("tokens/s")
        ax.set_title(f"Llama {args.config} bf16 on {dev}")
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.png)
        print(f"plot: {args.png}")
    except ImportError:
        print("plot: matplotlib not installed")


if __name__ == "__main__":
    main()
