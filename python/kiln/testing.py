"""kiln.testing: benchmarking like triton.testing.do_bench."""

import statistics

from . import _C

__all__ = ["do_bench"]

_cache = {}


def _flush_buffer():
    """256 MB of the current device's memory, cleared before each timed run, so every run
    starts with a cold L2 (as Triton does)."""
    device = _C.current_device()
    if device not in _cache:
        _cache[device] = _C.DeviceArray.empty([256 * 1024 * 1024 // 4], "int32", device)
    return _cache[device]


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Times `fn` on the current GPU like triton.testing.do_bench: estimates its run time,
    warms up for about `warmup` ms, then times runs for about `rep` ms with CUDA events,
    clearing L2 before each. Returns the `return_mode` ("min", "max", "mean", "median", "all") in
    milliseconds, or the `quantiles` when given."""
    assert return_mode in ("min", "max", "mean", "median", "all")
    cache = _flush_buffer()
    fn()
    _C.synchronize()
    timer = _C.EventTimer()
    timer.start()
    for _ in range(5):
        cache.fill32(0)
        fn()
    estimate = timer.stop() / 5
    n_warmup = max(1, int(warmup / max(estimate, 1e-3)))
    n_repeat = max(1, int(rep / max(estimate, 1e-3)))
    for _ in range(n_warmup):
        fn()
    times = []
    for _ in range(n_repeat):
        if grad_to_none is not None:
            for x in grad_to_none:
                x.grad = None
        cache.fill32(0)
        timer.start()
        fn()
        times.append(timer.stop())
    if quantiles is not None:
        s = sorted(times)
        out = [s[min(len(s) - 1, int(q * len(s)))] for q in quantiles]
        return out[0] if len(out) == 1 else out
    if return_mode == "all":
        return times
    return {"min": min, "max": max, "mean": statistics.fmean,
            "median": statistics.median}[return_mode](times)
