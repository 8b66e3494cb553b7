"""kiln.testing: Triton's triton.testing: do_bench, do_bench_cudagraph, assert_close, and the
perf_report / Benchmark tables (and plots where matplotlib is installed) of the tutorials."""

import os
import statistics

from . import _C

__all__ = ["do_bench", "do_bench_cudagraph", "assert_close", "Benchmark", "Mark", "perf_report"]

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
    return _summarize(times, quantiles, return_mode)


def _summarize(times, quantiles, return_mode):
    if quantiles is not None:
        s = sorted(times)
        out = [s[min(len(s) - 1, int(q * len(s)))] for q in quantiles]
        return out[0] if len(out) == 1 else out
    if return_mode == "all":
        return times
    return {"min": min, "max": max, "mean": statistics.fmean,
            "median": statistics.median}[return_mode](times)


def do_bench_cudagraph(fn, rep=20, grad_to_none=None, quantiles=None, return_mode="mean"):
    """Times `fn` replayed from a CUDA graph, as triton.testing.do_bench_cudagraph: runs it
    once outside capture (so compiles happen there), estimates its time, captures about `rep`
    ms worth of calls in one torch.cuda.CUDAGraph on a side stream (Kiln launches go to
    torch's current stream, so they are captured), then times 10 replays with CUDA events.
    Returns milliseconds per call: the `quantiles`, or the `return_mode` of the replays.
    Needs torch and a GPU."""
    import torch
    assert return_mode in ("min", "max", "mean", "median", "all")
    with torch.cuda.stream(torch.cuda.Stream()):
        fn()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(5):
            fn()
        end.record()
        torch.cuda.synchronize()
        estimate = start.elapsed_time(end) / 5
        n_repeat = 1000 if estimate == 0 else max(1, int(rep / estimate))
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(n_repeat):
                if grad_to_none is not None:
                    for x in grad_to_none:
                        x.grad = None
                fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(10):
            start.record()
            graph.replay()
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end) / n_repeat)
    return _summarize(times, quantiles, return_mode)


def _as_numpy(x):
    import numpy as np
    if hasattr(x, "detach") and hasattr(x, "cpu"):  # torch
        x = x.detach().cpu()
        if not x.dtype.is_floating_point and not x.dtype.is_complex:
            return x.numpy()
        return x.float().numpy() if x.dtype.itemsize < 4 or "float8" in str(x.dtype) \
            else x.numpy()
    if isinstance(x, _C.DeviceArray):
        return x.numpy()
    return np.asarray(x)


def assert_close(x, y, atol=None, rtol=None, err_msg=""):
    """Asserts that `x` and `y` (torch tensors, numpy arrays, kiln arrays or scalars) agree
    elementwise within `atol` + `rtol` * |y| (triton.testing.assert_close: atol 1e-2 and
    rtol 0 by default, callables of the dtype allowed; NaNs agree with NaNs)."""
    import numpy as np
    a, b = _as_numpy(x), _as_numpy(y)
    atol = 1e-2 if atol is None else atol(a.dtype) if callable(atol) else atol
    rtol = 0.0 if rtol is None else rtol(a.dtype) if callable(rtol) else rtol
    if a.dtype == np.bool_ or b.dtype == np.bool_:
        np.testing.assert_array_equal(a, b, err_msg=err_msg)
        return
    np.testing.assert_allclose(a, b, atol=atol, rtol=rtol, equal_nan=True, err_msg=err_msg)


class Benchmark:
    """One table (and plot) of perf_report, as triton.testing.Benchmark: the function is called
    for every x of `x_vals` (given to every name of `x_names`; a tuple x gives one value per
    name) and every value of `line_arg` in `line_vals`, with the fixed `args`."""

    def __init__(self, x_names, x_vals, line_arg, line_vals, line_names, plot_name, args,
                 xlabel="", ylabel="", x_log=False, y_log=False, styles=None):
        self.x_names = list(x_names)
        self.x_vals = list(x_vals)
        self.line_arg = line_arg
        self.line_vals = list(line_vals)
        self.line_names = list(line_names)
        if len(self.line_names) != len(self.line_vals):
            raise ValueError(f"Benchmark '{plot_name}': {len(self.line_vals)} line_vals but "
                             f"{len(self.line_names)} line_names")
        self.plot_name = plot_name
        self.args = dict(args)
        self.xlabel, self.ylabel = xlabel, ylabel
        self.x_log, self.y_log = x_log, y_log
        self.styles = styles


class Mark:
    """What @perf_report returns: ``fn`` itself and ``run(...)``, which fills the tables."""

    def __init__(self, fn, benchmarks):
        self.fn = fn
        self.benchmarks = benchmarks

    def _table(self, bench, **kwargs):
        """(columns, rows): x values, then per line its value (and min/max when returned)."""
        columns = list(bench.x_names)
        for name in bench.line_names:
            columns += [name, f"{name}-min", f"{name}-max"]
        rows = []
        for x in bench.x_vals:
            xs = list(x) if isinstance(x, (list, tuple)) else [x] * len(bench.x_names)
            if len(xs) != len(bench.x_names):
                raise ValueError(f"Benchmark '{bench.plot_name}': x value {x!r} does not give "
                                 f"one value per name of {bench.x_names}")
            row = list(xs)
            for y in bench.line_vals:
                r = self.fn(**dict(zip(bench.x_names, xs)), **{bench.line_arg: y},
                            **bench.args, **kwargs)
                v, lo, hi = (tuple(r) + (None, None))[:3] if isinstance(r, (list, tuple)) \
                    else (r, None, None)
                row += [v, lo, hi]
            rows.append(row)
        # Drop the min/max columns no line filled.
        keep = [i for i, c in enumerate(columns)
                if i < len(bench.x_names) or any(r[i] is not None for r in rows)]
        return [columns[i] for i in keep], [[r[i] for i in keep] for r in rows]

    @staticmethod
    def _format(columns, rows):
        def cell(v):
            return f"{v:.6g}" if isinstance(v, float) else str(v)
        text = [columns] + [[cell(v) for v in r] for r in rows]
        widths = [max(len(t[i]) for t in text) for i in range(len(columns))]
        return "\n".join("  ".join(t[i].rjust(widths[i]) for i in range(len(columns)))
                         for t in text)

    def _plot(self, bench, columns, rows, save_path, show):
        try:
            import matplotlib
            if not show:
                matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            return
        fig, ax = plt.subplots()
        xs = [r[0] for r in rows]
        for i, name in enumerate(bench.line_names):
            col = columns.index(name)
            style = bench.styles[i] if bench.styles and i < len(bench.styles) else None
            kw = dict(color=style[0], linestyle=style[1]) if style else {}
            ax.plot(xs, [r[col] for r in rows], label=name, **kw)
        ax.legend()
        ax.set_xlabel(bench.xlabel or bench.x_names[0])
        ax.set_ylabel(bench.ylabel)
        if bench.x_log:
            ax.set_xscale("log")
        if bench.y_log:
            ax.set_yscale("log")
        if save_path:
            fig.savefig(os.path.join(save_path, f"{bench.plot_name}.png"))
        if show:
            plt.show()
        plt.close(fig)

    def run(self, show_plots=False, print_data=False, save_path="", return_df=False, **kwargs):
        """Runs every benchmark; prints the tables (print_data), writes
        <plot_name>.csv (and .png with matplotlib) under `save_path`, plots (show_plots, with
        matplotlib). With return_df, returns the tables (pandas DataFrames when pandas is
        installed, else (columns, rows)); one table when there is one benchmark."""
        benches = self.benchmarks if isinstance(self.benchmarks, (list, tuple)) \
            else [self.benchmarks]
        tables = []
        for bench in benches:
            columns, rows = self._table(bench, **kwargs)
            if print_data:
                print(bench.plot_name + ":")
                print(self._format(columns, rows))
            if save_path:
                os.makedirs(save_path, exist_ok=True)
                with open(os.path.join(save_path, f"{bench.plot_name}.csv"), "w") as f:
                    f.write(",".join(columns) + "\n")
                    for r in rows:
                        f.write(",".join("" if v is None else str(v) for v in r) + "\n")
            if show_plots or save_path:
                self._plot(bench, columns, rows, save_path, show_plots)
            if return_df:
                try:
                    import pandas
                    tables.append(pandas.DataFrame(rows, columns=columns))
                except ImportError:
                    tables.append((columns, rows))
        if return_df:
            return tables[0] if len(tables) == 1 else tables
        return None


def perf_report(benchmarks):
    """Decorator (triton.testing.perf_report): `benchmarks` is a Benchmark or a list of
    them; the decorated function's ``.run(...)`` fills their tables."""
    return lambda fn: Mark(fn, benchmarks)
