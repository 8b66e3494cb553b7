"""The harness every Python benchmark in bench/ uses.

Peers built from Kiln's own source
    A Kiln kernel is a Triton kernel with other imports, so its Triton peer is not a second
    copy: `twin(source)` executes the Kiln source (a module, a module name, a file, or source
    text) with `import kiln` and `import kiln.language as tl` rebound to `triton` and
    `triton.language` (`kiln.jit`, `kiln.autotune`, `kiln.Config`, `kiln.cdiv`,
    `kiln.TensorDescriptor`, `kiln.language.extra.libdevice`, ... follow), the text itself
    unchanged, and returns the module it makes: the same kernels under Triton, and the
    module's host code launching them with the same grids, tiles and warps. Relative imports
    of the source (`from ._utils import ...`) load their twins too. `twin_kernel(k)` is the
    twin of one @kiln.jit kernel; `load(source, "kiln", edits=...)` loads a source (or an
    edited copy of it) under Kiln.

Timing (CUDA events through torch; a Timing is a float of milliseconds, the median)
    time_calls(fn, reps, batch, warmup, drain, flush)   fixed number of timings, each of
                                `batch` back-to-back calls between two events
    do_bench(fn, warmup, rep, flush)                    time-based, triton.testing.do_bench's
                                method: warm up for `warmup` ms, time single calls for `rep`
                                ms, the L2 emptied before each ("zero": 256 MiB of zeros
                                written, "read": the same buffer read; None: not emptied)
    interleave({name: fn}, rounds, timer)               each function timed in turn, round
                                after round; medians of the rounds and per-round ratios
    best_of(make, configs, timer)                       the fastest configuration (how the
                                Triton peer is autotuned on the same source)
    host_us(launch)                                     host microseconds per launch

Rates, checks, output
    tflops, gbps, relerr, report (key=value lines), device_line, markdown_table

torch and triton are imported when first needed, so every benchmark's --help works
without them.
"""
import builtins
import importlib
import inspect
import math
import os
import statistics
import sys
import tempfile
import time
import traceback
import types

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
KERNELS_PY = os.path.join(REPO, "kernels", "python")


def setup_paths():
    """Puts bench/ and kernels/python (the kiln_kernels package) on sys.path."""
    for p in (KERNELS_PY, BENCH):
        if p not in sys.path:
            sys.path.insert(0, p)


# ============================================================================ twins

def _torch():
    import torch
    return torch


def triton_or_none():
    """(triton module, None), or (None, why) when Triton cannot be imported."""
    try:
        import triton
        import triton.language  # noqa: F401
        return triton, None
    except Exception as e:  # ImportError, or a broken install
        return None, f"{type(e).__name__}: {e}"


# Names of the kiln package whose Triton counterpart lives elsewhere or has another name.
_KILN_TO_TRITON = {
    "TensorDescriptor": ("triton.tools.tensor_descriptor", "TensorDescriptor"),
    "language": ("triton.language", None),
    "testing": ("triton.testing", None),
}
# Modules of the kiln package whose Triton counterpart has another path.
_MODULE_TO_TRITON = {"kiln.tensor_descriptor": "triton.tools.tensor_descriptor"}

_ALIAS = None


def _kiln_alias():
    """A plain module standing for `kiln` in a twin: every attribute is triton's (Triton lets
    a kernel read a global only if it is a module of exactly types.ModuleType, so this is
    one, its attributes resolved by a module __getattr__)."""
    global _ALIAS
    if _ALIAS is None:
        import triton
        alias = types.ModuleType("kiln", "kiln rebound to triton (bench/common.py)")

        def __getattr__(name):
            if name in _KILN_TO_TRITON:
                module, attr = _KILN_TO_TRITON[name]
                m = importlib.import_module(module)
                return getattr(m, attr) if attr else m
            if name == "has_gpu":
                return lambda: _torch().cuda.is_available()
            try:
                return getattr(triton, name)
            except AttributeError:
                raise AttributeError(f"kiln.{name} has no Triton counterpart: a Triton twin "
                                     f"cannot use it") from None
        alias.__getattr__ = __getattr__
        _ALIAS = alias
    return _ALIAS


def _triton_module_name(name):
    if name in _MODULE_TO_TRITON:
        return _MODULE_TO_TRITON[name]
    return "triton" + name[len("kiln"):]


_LOADED = {}  # (file, lib, edits) -> module
_TMPDIR = None


def _source_of(source):
    """(text, file, module name, package) of a module object, a @kiln.jit kernel's module, a
    dotted module name (found on sys.path without importing its package), a path, or source
    text (anything holding a newline)."""
    if isinstance(source, types.ModuleType):
        path = inspect.getsourcefile(source)
        name = source.__name__
        package = source.__package__ if source.__package__ is not None else \
            name.rpartition(".")[0]
    elif isinstance(source, str) and "\n" in source:
        return source, None, "bench_source", ""
    elif isinstance(source, str) and (source.endswith(".py") or os.sep in source):
        path = os.path.abspath(source)
        name = os.path.splitext(os.path.basename(path))[0]
        package = ""
    elif isinstance(source, str):
        name = source
        parts = name.split(".")
        path = None
        for entry in sys.path:
            base = os.path.join(entry or ".", *parts)
            for cand in (base + ".py", os.path.join(base, "__init__.py")):
                if os.path.isfile(cand):
                    path = os.path.abspath(cand)
                    break
            if path:
                break
        if path is None:
            raise ImportError(f"no source of module {name!r} on sys.path")
        package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    else:
        raise TypeError(f"expected a module, a module name, a path or source text, found "
                        f"{type(source).__name__}")
    with open(path) as f:
        return f.read(), path, name, package


def _apply_edits(text, edits):
    for old, new in edits:
        if old not in text:
            raise ValueError(f"edit {old!r} -> {new!r}: {old!r} is not in the source")
        text = text.replace(old, new)
    return text


def load(source, lib="kiln", edits=(), name=None):
    """The module that executing `source` makes with `lib`'s imports: lib "kiln" (the source
    as written) or "triton" (its twin: imports of kiln rebound to triton). `edits` are
    (old, new) text replacements applied first (a variant of a kernel, e.g.
    ("flatten=True", "flatten=False")). A module object with lib "kiln" and no edits is
    returned as it is. Both JITs read a kernel's source from its file: unedited text keeps
    the original file (tracebacks and line numbers point at it), edited text and text
    without a file are written to a temporary one. Loads are cached."""
    if lib not in ("kiln", "triton"):
        raise ValueError(f"lib must be 'kiln' or 'triton', found {lib!r}")
    edits = tuple(tuple(e) for e in edits)
    if isinstance(source, types.ModuleType) and lib == "kiln" and not edits:
        return source
    text, path, base, package = _source_of(source)
    return _load_text(text, path, base, package, lib, edits, name)


def _load_text(text, path, base, package, lib, edits, name=None):
    global _TMPDIR
    key = (path or text, lib, edits)
    if key in _LOADED:
        return _LOADED[key]
    if lib == "triton":
        _kiln_alias()  # fails here, with a clear ImportError, without Triton
    text = _apply_edits(text, edits)
    modname = name or f"{base}__{lib}" + (f"_{len(_LOADED)}" if edits or not path else "")
    if path is None or edits:
        if _TMPDIR is None:
            _TMPDIR = tempfile.mkdtemp(prefix="kiln-bench-src-")
        file = os.path.join(_TMPDIR, modname.replace(".", "_") + ".py")
        with open(file, "w") as f:
            f.write(text)
    else:
        file = path
    module = types.ModuleType(modname)
    module.__file__ = file
    module.__package__ = package
    if lib == "triton":
        module.__builtins__ = dict(builtins.__dict__,
                                   __import__=_make_import(path, package, lib))
    sys.modules[modname] = module
    _LOADED[key] = module
    try:
        exec(compile(text, file, "exec"), module.__dict__)
    except BaseException:
        del sys.modules[modname]
        del _LOADED[key]
        raise
    return module


def _load_file(path, dotted, lib):
    """The twin of the module at `path`, named `dotted` in its package."""
    key = (path, lib, ())
    if key not in _LOADED:
        with open(path) as f:
            text = f.read()
        package = dotted if path.endswith("__init__.py") else dotted.rpartition(".")[0]
        _load_text(text, path, dotted, package, lib, ())
    return _LOADED[key]


def _make_import(path, package, lib):
    """The __import__ of a twin: kiln and kiln.* resolve to triton's; relative imports load
    the twins of the modules beside the source; everything else imports as usual."""
    real_import = builtins.__import__

    def twin_import(name, globals=None, locals=None, fromlist=(), level=0):
        if level == 0 and (name == "kiln" or name.startswith("kiln.")):
            if not fromlist or name == "kiln":
                # `import kiln[.x] [as y]`: Python reads .x of what this returns
                return _kiln_alias()
            return importlib.import_module(_triton_module_name(name))
        if level > 0 and path is not None:
            here = os.path.dirname(path)
            pkg = package
            for _ in range(level - 1):
                here = os.path.dirname(here)
                pkg = pkg.rpartition(".")[0]
            items = [name] if name else list(fromlist or ())
            found = {}
            for item in items:
                target = os.path.join(here, *item.split("."))
                for cand in (target + ".py", os.path.join(target, "__init__.py")):
                    if os.path.isfile(cand):
                        found[item] = _load_file(cand, f"{pkg}.{item}" if pkg else item, lib)
                        break
            if name and name in found:
                return found[name]
            if not name and len(found) == len(items):
                ns = types.ModuleType(pkg or "package")  # `from . import a, b`
                for item, module in found.items():
                    setattr(ns, item, module)
                return ns
        return real_import(name, globals, locals, fromlist, level)
    return twin_import


def twin(source, edits=()):
    """The Triton twin of a Kiln source (see load)."""
    return load(source, "triton", edits)


def _unwrap(kernel):
    """The Python function under a @kiln.jit kernel (or an autotuned one)."""
    fn = kernel
    for _ in range(4):
        if isinstance(fn, types.FunctionType):
            return fn
        fn = getattr(fn, "fn", None)
    raise TypeError(f"not a @kiln.jit kernel: {kernel!r}")


def twin_kernel(kernel, edits=()):
    """The Triton twin of one @kiln.jit kernel: the kernel of the same name in its module's
    twin."""
    fn = _unwrap(kernel)
    module = sys.modules.get(fn.__module__)
    source = module if module is not None and getattr(module, "__file__", None) else \
        inspect.getsourcefile(fn)
    return getattr(twin(source, edits), fn.__name__)


# ============================================================================ timing

class Timing(float):
    """Milliseconds: the median of `samples` (per call); lo and hi are the 20th and 80th
    percentiles, spread (hi - lo) / median, the run-to-run noise of one measurement."""

    def __new__(cls, samples):
        samples = sorted(float(s) for s in samples)
        t = super().__new__(cls, statistics.median(samples) if samples else math.nan)
        t.samples = samples
        return t

    def quantile(self, q):
        s = self.samples
        return s[min(len(s) - 1, int(q * len(s)))] if s else math.nan

    @property
    def lo(self):
        return self.quantile(0.2)

    @property
    def hi(self):
        return self.quantile(0.8)

    @property
    def spread(self):
        return (self.hi - self.lo) / self if self else math.nan


_FLUSH_BUFFERS = {}


def _flusher(flush):
    """A function that empties the L2 (see do_bench), or None."""
    if flush in (None, "", "none"):
        return None
    torch = _torch()
    dev = torch.cuda.current_device()
    if dev not in _FLUSH_BUFFERS:
        _FLUSH_BUFFERS[dev] = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    buf = _FLUSH_BUFFERS[dev]
    if flush == "zero":  # the L2 full of dirty lines the timed call must write back
        return buf.zero_
    if flush == "read":  # a clean L2
        words = buf.view(torch.int64)
        return lambda: torch.sum(words, dtype=torch.int64)
    raise ValueError(f"flush must be 'zero', 'read' or None, found {flush!r}")


def _events(n):
    torch = _torch()
    return [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(n)]


def time_calls(fn, reps, batch=1, warmup=3, drain=True, flush=None):
    """Per-call milliseconds of `reps` timings, each of `batch` back-to-back calls between
    two CUDA events, after `warmup` calls. drain: the device is synchronized after each
    timing, so each starts with an empty queue (batch 1 then counts the host's launch work
    where it leaves the GPU idle; a batch of 10 lets it overlap the GPU's work); without it
    all timings are queued at once. flush empties the L2 before each timing (do_bench)."""
    torch = _torch()
    clear = _flusher(flush)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = _events(reps)
    times = []
    for s, e in events:
        if clear is not None:
            clear()
        s.record()
        for _ in range(batch):
            fn()
        e.record()
        if drain:
            e.synchronize()
            times.append(s.elapsed_time(e) / batch)
    if not drain:
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) / batch for s, e in events]
    return Timing(times)


def do_bench(fn, warmup=25, rep=100, flush="zero"):
    """triton.testing.do_bench's method (the implementation is this harness's): estimate
    the call's time over 5 calls, warm up for about `warmup` ms, then time single calls for
    about `rep` ms, each between two CUDA events with the L2 emptied before it ("zero":
    256 MiB of zeros written, as do_bench does, so the call starts with the L2 full of dirty
    lines; "read": the same buffer read, a clean L2; None: not emptied)."""
    torch = _torch()
    clear = _flusher(flush) or (lambda: None)
    fn()
    torch.cuda.synchronize()
    (s, e), = _events(1)
    s.record()
    for _ in range(5):
        clear()
        fn()
    e.record()
    torch.cuda.synchronize()
    estimate = max(s.elapsed_time(e) / 5, 1e-3)
    for _ in range(max(1, int(warmup / estimate))):
        fn()
    events = _events(max(1, int(rep / estimate)))
    for s, e in events:
        clear()
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    return Timing([s.elapsed_time(e) for s, e in events])


class Rounds(float):
    """The median over rounds of a function's per-round Timing (`rounds`)."""

    def __new__(cls, rounds):
        r = super().__new__(cls, statistics.median(float(t) for t in rounds))
        r.rounds = list(rounds)
        return r


def interleave(fns, rounds, timer):
    """{name: Rounds}: each of fns ({name: fn}) timed by timer(fn) in turn, round after round,
    so that all see the same clocks and neighbours."""
    runs = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            runs[name].append(timer(fn))
    return {name: Rounds(t) for name, t in runs.items()}


def ratio_range(base, other):
    """(smallest, largest) per-round speed of `other` over `base` (Rounds of interleave)."""
    r = [float(b) / float(o) for b, o in zip(base.rounds, other.rounds)]
    return (min(r), max(r)) if r else (math.nan, math.nan)


def best_of(make, configs, timer, label="", on_result=None):
    """(Timing, config, fn) of the fastest of `configs`: make(cfg) gives a call, run once,
    then timed; a configuration that fails (one library cannot compile it, it needs more
    shared memory than there is) is reported on stderr and skipped. (nan, None, None) if
    none runs. The best call is run again last, so its output is in place. on_result(cfg,
    Timing or exception) sees each configuration's outcome."""
    torch = _torch()
    best = (Timing([]), None, None)
    for cfg in configs:
        try:
            fn = make(cfg)
            fn()
            torch.cuda.synchronize()
            t = timer(fn)
        except Exception as e:
            cause = e.__cause__ or e
            tb = traceback.extract_tb(cause.__traceback__)
            where = f" at {tb[-1].filename}:{tb[-1].lineno}" if tb else ""
            print(f"  {label} {fmt_config(cfg)}: {type(cause).__name__} "
                  f"{str(cause).strip()[-300:]!r}{where}", file=sys.stderr, flush=True)
            if on_result is not None:
                on_result(cfg, cause)
            continue
        if on_result is not None:
            on_result(cfg, t)
        if best[1] is None or t < best[0]:
            best = (t, cfg, fn)
    if best[2] is not None:
        best[2]()
        torch.cuda.synchronize()
    return best


def interleaved_times(fns, timer, rounds, rotate=False):
    """{name: [timer(call) per round]} for the calls of `fns` ({name: call}), timed in `rounds`
    rounds, the order reversed from round to round (rotate: also rotated by one each round, so
    that with three or more calls each goes first in turn). An H100 at its power limit slows
    within seconds (1.9 -> 1.5 GHz): timed one after the other, what goes first runs on a
    cooler card."""
    names, times = list(fns), {name: [] for name in fns}
    for r in range(rounds):
        order = names[r % len(names):] + names[:r % len(names)] if rotate else names
        for name in order[::-1] if r % 2 else order:
            times[name].append(float(timer(fns[name])))
    return times


def interleaved(row, fns, timer, rate, rounds=6):
    """Times each call of `fns` ({"kiln": call, "triton": call}, a None call left out) again
    in `rounds` interleaved rounds (interleaved_times) and sets row[name] to rate(median).
    row[name + "_rounds"] keeps the rounds' rates."""
    fns = {name: fn for name, fn in fns.items() if fn is not None}
    if len(fns) < 2:
        return row
    times = interleaved_times(fns, timer, rounds)
    for name, ts in times.items():
        row[name] = rate(statistics.median(ts))
        row[f"{name}_rounds"] = [rate(t) for t in ts]
    return row


def fmt_config(cfg):
    if cfg is None:
        return "-"
    if isinstance(cfg, dict):
        return ",".join(f"{k}={v}" for k, v in cfg.items())
    if isinstance(cfg, list):  # a list of configurations
        return ",".join(fmt_config(c) for c in cfg)
    if isinstance(cfg, tuple):
        return "x".join(fmt_config(c) if isinstance(c, (tuple, list)) else str(c) for c in cfg)
    return str(cfg)


def parse_configs(text):
    """'128x256x64x8x3,128x128x64x4x4' -> [(128, 256, 64, 8, 3), (128, 128, 64, 4, 4)]."""
    return [tuple(int(x) for x in c.split("x")) for c in text.split(",") if c.strip()]


def parse_shapes(text):
    """'4096x4096x4096,8192x11008x4096' (or ';'/',' separated 'M,N,K') -> [(M, N, K), ...]."""
    if ";" in text:
        return [tuple(int(x) for x in s.split(",")) for s in text.split(";") if s.strip()]
    return [tuple(int(x) for x in s.split("x")) for s in text.split(",") if s.strip()]


def host_us(launch, batches=40, per_batch=500, warm=1000, sync=None):
    """Median host microseconds per launch over `batches` batches of `per_batch`
    back-to-back launches, with the device drained between batches (so the launch queue
    never fills)."""
    sync = sync or _torch().cuda.synchronize
    for _ in range(warm):
        launch()
    sync()
    samples = []
    for _ in range(batches):
        t0 = time.perf_counter()
        for _ in range(per_batch):
            launch()
        samples.append((time.perf_counter() - t0) / per_batch)
        sync()
    return statistics.median(samples) * 1e6


def host_ms(fns, reps, warmup=2):
    """Median host milliseconds of each of fns (CPU work, no device), runs interleaved (one
    of each per round) so that a noisy neighbour slows all of them alike."""
    for fn in fns:
        for _ in range(warmup):
            fn()
    times = [[] for _ in fns]
    for _ in range(reps):
        for fn, t in zip(fns, times):
            t0 = time.perf_counter()
            fn()
            t.append((time.perf_counter() - t0) * 1e3)
    return [Timing(t) for t in times]


# ============================================================================ rates, checks

def flash_forward_cases(torch, dims):
    """Issue #23's flash-attention forward shapes: for each head dimension of `dims`, fp16
    (B, H, S) = 4x32x4096 and 1x32x16384, not causal then causal. Yields (label, causal, q, k,
    v, o, flop): q, k and v from randn (seed 0), o empty, flop = 4 * B * H * S^2 * D, halved
    for causal."""
    for D in dims:
        for B, H, S in ((4, 32, 4096), (1, 32, 16384)):
            for causal in (False, True):
                torch.manual_seed(0)
                q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16)
                           for _ in range(3))
                flop = 4 * B * H * S * S * D * (0.5 if causal else 1.0)
                yield (f"D{D} {B}x{H}x{S} causal={int(causal)}", causal, q, k, v,
                       torch.empty_like(q), flop)


def tflops(flop, ms):
    """TFLOP/s (or TOPS) of `flop` operations in `ms` milliseconds."""
    return flop / ms / 1e9


def gbps(nbytes, ms):
    """GB/s of `nbytes` moved in `ms` milliseconds."""
    return nbytes / ms / 1e6


def relerr(out, ref):
    """||out - ref|| / ||ref|| in float64 (torch tensors)."""
    out, ref = out.double(), ref.double()
    return ((out - ref).norm() / ref.norm().clamp_min(1e-300)).item()


def ratio(peer_ms, kiln_ms):
    """Kiln's speed over a peer's (time of the peer / time of Kiln): > 1, Kiln is faster."""
    try:
        return float(peer_ms) / float(kiln_ms)
    except (TypeError, ZeroDivisionError):
        return math.nan


# ============================================================================ output

def report(key, value, fmt="{:.4f}"):
    """A key=value line (what scripts and bench/report.py read)."""
    print(f"{key}={fmt.format(value) if isinstance(value, float) else value}", flush=True)


def device_name():
    torch = _torch()
    return torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"


def device_line(triton=True):
    """One line of key=value tokens: the GPU (name, compute capability, SMs, memory), and the
    versions of torch, Triton and Kiln in this process."""
    torch = _torch()
    parts = []
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(torch.cuda.current_device())
        parts += [f"device={p.name.replace(' ', '_')}", f"cc={p.major}.{p.minor}",
                  f"sms={p.multi_processor_count}", f"mem_gib={p.total_memory / 2**30:.0f}"]
    else:
        parts.append("device=none")
    parts.append(f"torch={torch.__version__}")
    if triton:
        t, _ = triton_or_none()
        parts.append(f"triton={t.__version__ if t else None}")
    kiln = sys.modules.get("kiln")
    if kiln is not None:
        parts.append(f"kiln={getattr(kiln, '__version__', '?')}")
        if os.environ.get("KILN_ARCH"):
            parts.append(f"KILN_ARCH={os.environ['KILN_ARCH']}")
    return " ".join(parts)


def fmt(x, spec=".1f"):
    """x formatted, '-' for None and nan."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    return format(x, spec) if isinstance(x, (int, float)) else str(x)


def markdown_table(headers, rows, align=None, title=None, file=None):
    """Prints a markdown table; align: a string of 'l'/'r' per column (columns it does not
    cover are right-aligned; default: the first column left, the rest right)."""
    out = file or sys.stdout
    if title:
        print(f"\n### {title}\n", file=out)
    align = ((align or "l") + "r" * len(headers))[:len(headers)]
    print("| " + " | ".join(headers) + " |", file=out)
    print("|" + "|".join("---:" if a == "r" else "---" for a in align) + "|", file=out)
    for r in rows:
        print("| " + " | ".join(str(c) for c in r) + " |", file=out, flush=True)


def cpp_kernels(path=""):
    """libkiln-cpp-kernels.so (bench/cpp_kernels.cpp: the C++ DSL's kernels behind C
    functions) loaded with ctypes: `path`, else build/bench/ or the GPU bundle's bench/
    ($KILN_BUNDLE, default /tmp/kiln-bundle). Each function takes an error buffer and its
    size last and returns 0 or -1; `call(f, *args)` raises RuntimeError with the C++ message."""
    import ctypes
    here = os.path.dirname(os.path.abspath(__file__))
    for cand in ([path] if path else
                 [os.path.join(here, "..", "build", "bench", "libkiln-cpp-kernels.so"),
                  os.path.join(os.environ.get("KILN_BUNDLE", "/tmp/kiln-bundle"), "bench",
                               "libkiln-cpp-kernels.so")]):
        if os.path.exists(cand):
            lib = ctypes.CDLL(cand)
            break
    else:
        raise FileNotFoundError("libkiln-cpp-kernels.so not found (ninja -C build "
                                "kiln-cpp-kernels, or give its path)")
    err = ctypes.create_string_buffer(1024)

    def call(f, *args):
        if f(*args, err, len(err)) != 0:
            raise RuntimeError(err.value.decode())
    lib.call = call
    return lib
