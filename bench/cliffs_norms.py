"""A section of issue #23's regression benchmark (bench/bench_cliffs.py imports it):
memory-bound backward kernels written the way a Triton LLM-kernel library writes them
(bench/cliff_sources_norms.py: LayerNorm, RMSNorm and GroupNorm backward with per-program
partial sums for the weight gradients, fused cross-entropy with the gradient written in
place), each run under Kiln as written and under Triton on the same source (common.twin),
launched by the same host code (`launch`) and autotuned over the same few configurations.

The host code is the library's: the partials are added up by torch (`partial.sum(0)`) and
the per-row losses by `loss_1d.sum()`, inside the timed call. GB/s counts each tensor the
operation reads or writes once (inputs, dx / the in-place gradient, the final dW, dB in
the weight's dtype; not the fp32 partials). Errors are the largest ||out - ref|| / ||ref||
over the outputs, the references computed by torch in fp32 from the same stored (bf16)
inputs and statistics.

    rows(ctx) -> [{case, dtype, shape, kiln, kiln_cfg, triton, triton_cfg, triton_again,
                   kiln_err, triton_err}]

ctx: torch, kiln, triton (None without it), common, timer, sms, quick; optional `device`
("cpu": Kiln's CPU backend, a dry run of the host code with torch CPU tensors — timer and
torch.cuda.synchronize must then be the caller's) and rows(ctx, shapes=...) to replace
SHAPES (the test's tiny shapes: TINY_SHAPES).
"""
import math
import os
import sys

TITLE = "Row kernels: backward with partial-sum weight gradients, cross-entropy"
UNIT = "GB/s"

CASES = ("layer_norm_bwd", "rms_norm_bwd", "group_norm_bwd", "cross_entropy")
# layer / RMS norm: (n_rows, n_cols); group norm: (batch, channels, groups, H*W);
# cross-entropy: (n_rows, vocabulary)
SHAPES = {
    "layer_norm_bwd": [(16384, 4096), (8192, 8192), (4096, 2048)],
    "rms_norm_bwd": [(16384, 4096), (8192, 8192), (4096, 2048)],
    "group_norm_bwd": [(16, 512, 32, 64 * 64), (8, 1280, 32, 32 * 32)],
    "cross_entropy": [(8192, 32000), (4096, 128256)],
}
TINY_SHAPES = {
    "layer_norm_bwd": [(67, 200)],
    "rms_norm_bwd": [(67, 200)],
    "group_norm_bwd": [(3, 8, 2, 100)],
    "cross_entropy": [(9, 1000)],
}
IGNORE_INDEX = -100
CE_IGNORED_EVERY = 16  # every 16th row's target is IGNORE_INDEX (padding)
MAX_FUSED_SIZE = 65536 // 2  # the library's cap on a cross-entropy block (bf16)


def next_power_of_2(n):
    return 1 << max(0, int(n) - 1).bit_length()


def library_warps(block):
    """The warps the library picks for a row block of `block` elements."""
    if block >= 32768:
        return 32
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


def configs(case, shape, quick):
    """(BLOCK_SIZE, num_warps) tried for both libraries: the library's block, its warps and
    a neighbour or two."""
    if case == "cross_entropy":
        block = min(MAX_FUSED_SIZE, next_power_of_2(shape[1]))
        cfgs = [(block, 32), (block, 16), (min(block, 4096), 8)]
    else:
        n = shape[3] if case == "group_norm_bwd" else shape[1]
        block = next_power_of_2(n) if case != "group_norm_bwd" else min(4096, next_power_of_2(n))
        pick = library_warps(block)
        cfgs = [(block, w) for w in (pick, pick * 2, pick // 2) if 4 <= w <= 32]
    return cfgs[:2] if quick else cfgs


def shape_text(shape):
    return "x".join(str(s) for s in shape)


# ================================================================ inputs and references

def make_inputs(torch, case, shape, device):
    """The case's inputs (bf16 as the library keeps them) and fp32 reference outputs."""
    g = torch.Generator(device=device).manual_seed(0)

    def randn(*size, scale=1.0, shift=0.0):
        return torch.randn(*size, generator=g, device=device) * scale + shift

    bf16 = torch.bfloat16
    if case in ("layer_norm_bwd", "rms_norm_bwd"):
        n_rows, n_cols = shape
        x = randn(n_rows, n_cols, shift=0.5 if case == "layer_norm_bwd" else 0.0).to(bf16)
        dy = randn(n_rows, n_cols).to(bf16)
        w = randn(n_cols, scale=0.1, shift=1.0).to(bf16)
        xf, gf, wf = x.float(), dy.float(), w.float()
        if case == "layer_norm_bwd":
            mu = xf.mean(1)
            mean = mu.to(bf16)
            rstd = torch.rsqrt(((xf - mu[:, None]) ** 2).mean(1) + 1e-5).to(bf16)
            r = rstd.float()[:, None]
            xhat = (xf - mean.float()[:, None]) * r
            wdy = gf * wf
            dx = (wdy - (xhat * (xhat * wdy).mean(1, keepdim=True)
                         + wdy.mean(1, keepdim=True))) * r
            ref = dict(dx=dx, dw=(gf * xhat).sum(0), db=gf.sum(0))
            t = dict(x=x, dy=dy, w=w, mean=mean, rstd=rstd)
        else:
            rstd = torch.rsqrt((xf * xf).mean(1) + 1e-6)  # fp32, as the library keeps it
            r = rstd[:, None]
            xhat = xf * r
            gw = gf * wf
            dx = r * (gw - xhat * (gw * xhat).mean(1, keepdim=True))
            ref = dict(dx=dx, dw=(gf * xhat).sum(0))
            t = dict(x=x, dy=dy, w=w, rstd=rstd)
        return t, ref
    if case == "group_norm_bwd":
        batch, channels, groups, hw = shape
        x = randn(batch, channels, hw, shift=0.3).to(bf16)
        dy = randn(batch, channels, hw).to(bf16)
        w = randn(channels, scale=0.1, shift=1.0).to(bf16)
        xg = x.float().view(batch, groups, -1)
        mu = xg.mean(-1)
        mean = mu.to(bf16)
        rstd = torch.rsqrt(((xg - mu[..., None]) ** 2).mean(-1) + 1e-5).to(bf16)
        r = rstd.float()[..., None]
        xhat = (xg - mean.float()[..., None]) * r
        wdy = (dy.float() * w.float()[None, :, None]).view(batch, groups, -1)
        dx = (wdy - (xhat * (xhat * wdy).mean(-1, keepdim=True)
                     + wdy.mean(-1, keepdim=True))) * r
        gf = dy.float()
        xhat = xhat.view(batch, channels, hw)
        ref = dict(dx=dx.view(batch, channels, hw), dw=(gf * xhat).sum((0, 2)),
                   db=gf.sum((0, 2)))
        return dict(x=x, dy=dy, w=w, mean=mean, rstd=rstd), ref
    n_rows, vocab = shape
    logits = randn(n_rows, vocab, scale=2.0).to(bf16)
    target = torch.randint(0, vocab, (n_rows,), generator=g, device=device)
    target[::CE_IGNORED_EVERY] = IGNORE_INDEX
    valid = target != IGNORE_INDEX
    n_valid = int(valid.sum().item())
    xf = logits.float()
    lse = torch.logsumexp(xf, 1)
    safe = torch.where(valid, target, 0)
    rows = torch.arange(n_rows, device=device)
    loss = ((lse - xf[rows, safe]) * valid).sum() / n_valid
    grad = torch.softmax(xf, 1)
    del xf
    grad[rows, safe] -= 1.0
    grad *= valid[:, None].float() / n_valid
    return dict(logits=logits, target=target, n_valid=n_valid), dict(grad=grad, loss=loss)


def nbytes(case, t):
    """Each tensor the operation reads or writes, once."""
    def size(a):
        return a.numel() * a.element_size()
    if case == "cross_entropy":  # logits read, gradient written over them, losses
        return 2 * size(t["logits"]) + size(t["target"]) + t["target"].numel() * 4
    inputs = sum(size(t[k]) for k in ("x", "dy", "w", "mean", "rstd") if k in t)
    weights = (1 if case == "rms_norm_bwd" else 2) * size(t["w"])  # dW (and dB)
    return inputs + size(t["x"]) + weights  # + dx


# ================================================================ the library's host code

def launch(mod, case, t, out, cfg, sms, kw=None):
    """A call of `case` from `mod` (the Kiln module or its Triton twin) at cfg = (BLOCK_SIZE,
    num_warps): the kernel, then the host's sums; outputs go to the dict `out`."""
    block, warps = cfg
    kw = dict(kw or {}, BLOCK_SIZE=block, num_warps=warps)
    if case in ("layer_norm_bwd", "rms_norm_bwd"):
        x, dy, w, rstd = t["x"], t["dy"], t["w"], t["rstd"]
        n_rows, n_cols = x.shape
        programs = sms
        rows_per_program = math.ceil(n_rows / programs)
        dx = out["dx"]
        dw_part = x.new_empty((programs, n_cols), dtype=out["fp32"])
        if case == "layer_norm_bwd":
            db_part = x.new_empty((programs, n_cols), dtype=out["fp32"])

            def fn():
                mod.layer_norm_bwd[(programs,)](
                    x, w, t["mean"], rstd, dy, dx, dw_part, db_part, x.stride(0),
                    dy.stride(0), dx.stride(0), dw_part.stride(0), db_part.stride(0),
                    n_rows, n_cols, rows_per_program, **kw)
                out["dw"] = dw_part.sum(0).to(w.dtype)
                out["db"] = db_part.sum(0).to(w.dtype)
            return fn

        def fn():
            mod.rms_norm_bwd[(programs,)](
                dy, x, w, rstd, dx, dw_part, dy.stride(0), x.stride(0), dx.stride(0),
                dw_part.stride(0), n_rows, n_cols, rows_per_program, 0.0, **kw)
            out["dw"] = dw_part.sum(0).to(w.dtype)
        return fn
    if case == "group_norm_bwd":
        x, dy, w = t["x"], t["dy"], t["w"]
        batch, channels, hw = x.shape
        groups = t["mean"].shape[1]
        dx = out["dx"]
        dw_part = x.new_empty((batch, channels), dtype=out["fp32"])
        db_part = x.new_empty((batch, channels), dtype=out["fp32"])

        def fn():
            mod.group_norm_bwd[(batch, groups)](
                x, w, t["mean"], t["rstd"], dy, dx, dw_part, db_part, x.stride(0),
                x.stride(1), t["mean"].stride(0), dw_part.stride(0), channels // groups, hw,
                **kw)
            out["dw"] = dw_part.sum(0).to(w.dtype)
            out["db"] = db_part.sum(0).to(w.dtype)
        return fn
    buf, target = out["grad"], t["target"]
    n_rows, vocab = buf.shape
    loss_1d = buf.new_empty((n_rows,), dtype=out["fp32"])

    def fn():
        mod.cross_entropy_fwd_bwd[(n_rows,)](buf, buf.stride(0), target, loss_1d, vocab,
                                             t["n_valid"], IGNORE_INDEX, **kw)
        out["loss"] = loss_1d.sum()
    return fn


def new_outputs(torch, case, t):
    out = {"fp32": torch.float32}
    if case == "cross_entropy":
        out["grad"] = t["logits"].clone()
    else:
        out["dx"] = torch.full_like(t["x"], float("nan"))
    return out


def error(common, out, ref):
    return max(common.relerr(out[k], ref[k]) for k in ref)


# ================================================================ the section

def _source():
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import cliff_sources_norms
    return cliff_sources_norms


def rows(ctx, shapes=None):
    torch, common, timer = ctx.torch, ctx.common, ctx.timer
    device = getattr(ctx, "device", "cuda")
    kw = {"device": "cpu"} if device == "cpu" else {}
    ks = _source()
    tw = common.twin(ks) if ctx.triton is not None else None
    shapes = shapes or SHAPES
    result = []
    for case in CASES:
        case_shapes = shapes[case][:2] if ctx.quick and shapes is SHAPES else shapes[case]
        for shape in case_shapes:
            t, ref = make_inputs(torch, case, shape, device)
            moved = nbytes(case, t)
            cfgs = configs(case, shape, ctx.quick)
            row = {"case": case, "dtype": "bf16", "shape": shape_text(shape)}
            libs = [("kiln", ks, kw)] + ([("triton", tw, {})] if tw is not None else [])
            finals = {}
            for name, mod, extra in libs:
                out = new_outputs(torch, case, t)
                ms, cfg, fn = common.best_of(
                    lambda c: launch(mod, case, t, out, c, ctx.sms, extra), cfgs, timer,
                    f"{name} {case} {row['shape']}")
                err = None
                if fn is not None:
                    if case == "cross_entropy":  # the timed calls overwrote the logits
                        out["grad"].copy_(t["logits"])
                        fn()
                        if device != "cpu":
                            torch.cuda.synchronize()
                    err = error(common, out, ref)
                row.update({name: common.gbps(moved, ms), f"{name}_cfg": cfg,
                            f"{name}_err": err})
                if name == "triton":
                    row["triton_again"] = (common.gbps(moved, timer(fn)) if fn is not None
                                           else math.nan)
                finals[name] = fn
                out = fn = None
            common.interleaved(row, finals, timer, lambda ms: common.gbps(moved, ms))
            finals = None  # (frees the outputs)
            if tw is None:
                row.update(triton=math.nan, triton_cfg=None, triton_again=math.nan,
                           triton_err=None)
            result.append(row)
            t = ref = None
            if device != "cpu":
                torch.cuda.empty_cache()
    return result
