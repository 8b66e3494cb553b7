"""@kiln.autotune and kiln.Config: Triton's autotuner for @kiln.jit kernels.

``kernel[grid](*args)`` on an autotuned kernel computes the tuning key: the values of the
`key` arguments and the dtypes of the array arguments. The first launch with a new key
compiles every config (after `prune_configs_by`), times several runs of each (CUDA events on
the GPU through kiln.testing.do_bench, time.perf_counter on the CPU backend) and keeps the
fastest, in memory and on disk under ``$KILN_CACHE_DIR/autotune`` keyed by the front end, the
kernel's source hash, the target, the key and the config list, so that a new process does not
tune again. Every launch then runs with the chosen config's meta-parameters and launch
options. A config that fails to compile or load is skipped and its error kept; when all fail,
AutotuneError lists them.
"""

import hashlib
import inspect
import json
import os
import shutil
import statistics
import sys
import time

from .. import _C
from ..errors import CompilationError, KilnError
from .cache import frontend_version
from .driver import _OnDevice, _device_of
from .jit import JITFunction, _constexpr_key, _device_arch, _parse_device

__all__ = ["Config", "Autotuner", "AutotuneError", "autotune"]

# Triton's benchmarking defaults (triton.testing.do_bench): about 25 ms of warm-up runs, then
# about 100 ms of timed runs per config.
_DEFAULT_WARMUP_MS = 25
_DEFAULT_REP_MS = 100
# On the CPU backend a tiny kernel takes microseconds: bound the number of runs per config.
_MAX_HOST_RUNS = 1000
# What a benchmark returns when asked for quantiles, as Triton's autotuner asks: the median
# first (it decides), then the 20th and 80th percentiles.
_QUANTILES = (0.5, 0.2, 0.8)


class AutotuneError(KilnError):
    """Every config of an autotuned kernel failed. ``errors`` lists (config, exception)."""

    def __init__(self, message, errors=()):
        super().__init__(message)
        self.errors = list(errors)


# ---------------------------------------------------------------------------------------
# Config
# ---------------------------------------------------------------------------------------

class Config:
    """One point of an autotuning space (triton.Config).

    ``kwargs``: the meta-parameters, passed to the kernel as keyword arguments;
    ``num_warps``, ``num_stages``: the launch options; ``pre_hook``: called with the dict of
    the launch's arguments (``all_kwargs()`` included) before every launch with this config,
    in benchmarks and after. ``num_ctas`` must be 1 (Kiln has no thread-block clusters);
    ``maxnreg`` caps the registers per thread (a launch option, as Triton's).
    """

    def __init__(self, kwargs, num_warps=4, num_stages=3, num_ctas=1, maxnreg=None,
                 pre_hook=None):
        if not isinstance(kwargs, dict):
            raise TypeError(f"kiln.Config: expected a dict of meta-parameters, found "
                            f"{type(kwargs).__name__}")
        if num_ctas not in (None, 1):
            raise ValueError(f"kiln.Config: num_ctas={num_ctas!r}: Kiln launches one CTA per "
                             f"program (no thread-block clusters); expected 1")
        self.kwargs = dict(kwargs)
        self.num_warps = num_warps
        self.num_stages = num_stages
        self.num_ctas = num_ctas
        self.maxnreg = maxnreg
        self.pre_hook = pre_hook

    def all_kwargs(self):
        """The meta-parameters and the launch options a launch with this config passes
        (Triton's, less num_ctas, which Kiln's launches do not take)."""
        opts = (("num_warps", self.num_warps), ("num_stages", self.num_stages),
                ("maxnreg", self.maxnreg))
        return {**self.kwargs, **{k: v for k, v in opts if v is not None}}

    def _ident(self):
        """A canonical text of all_kwargs() for keys and for finding a config again."""
        return ",".join(f"{k}={_constexpr_key(v)}"
                        for k, v in sorted(self.all_kwargs().items()))

    def _short(self):
        """BLOCK=128,num_warps=4,num_stages=3: the progress line's spelling."""
        return ",".join(f"{k}={v}" for k, v in self.all_kwargs().items())

    def __str__(self):
        return ", ".join(f"{k}: {v}" for k, v in self.all_kwargs().items())

    def __repr__(self):
        return f"kiln.Config({self.kwargs!r}, num_warps={self.num_warps}, " \
               f"num_stages={self.num_stages})"

    def __eq__(self, other):
        return isinstance(other, Config) and self._ident() == other._ident() and \
            self.pre_hook is other.pre_hook

    def __hash__(self):
        return hash(self._ident())


# ---------------------------------------------------------------------------------------
# Arguments: zeroing, saving and restoring arrays of any supported kind
# ---------------------------------------------------------------------------------------

def _is_torch(v):
    return type(v).__module__.startswith("torch") and hasattr(v, "zero_")


def _host_view(v):
    """A numpy view of the memory of a host array (numpy, __array_interface__)."""
    import numpy as np
    a = np.asarray(v)
    if not a.flags.writeable:
        raise TypeError("array is read-only")
    return a


def _zero(v):
    if _is_torch(v):
        v.zero_()
    elif isinstance(v, _C.DeviceArray):
        if v.nbytes % 4 == 0:
            v.fill32(0)
        else:
            import numpy as np
            v.copy_from_host(np.zeros(v.shape, dtype=v.numpy().dtype))
    else:
        _host_view(v)[...] = 0


def _save(v):
    if _is_torch(v):
        return v.clone()
    if isinstance(v, _C.DeviceArray):
        return v.numpy()
    return _host_view(v).copy()


def _restore(v, saved):
    if _is_torch(v):
        v.copy_(saved)
    elif isinstance(v, _C.DeviceArray):
        v.copy_from_host(saved)
    else:
        _host_view(v)[...] = saved


def _key_value(v):
    """A key entry: arrays by dtype and shape (their contents and addresses do not matter),
    other values as they are when hashable."""
    if hasattr(v, "dtype") and hasattr(v, "shape") and not isinstance(v, (int, float)):
        return (str(v.dtype), tuple(int(s) for s in v.shape))
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


# ---------------------------------------------------------------------------------------
# Timing
# ---------------------------------------------------------------------------------------

def _bench_host(fn, warmup, rep):
    """Median time in ms of `fn` on the CPU backend: one run estimates its time, then about
    `warmup` ms of untimed runs and about `rep` ms of timed ones (at least one)."""
    t = time.perf_counter()
    fn()
    estimate = max((time.perf_counter() - t) * 1e3, 1e-3)
    for _ in range(min(int(warmup / estimate), _MAX_HOST_RUNS)):
        fn()
    times = []
    for _ in range(max(1, min(int(rep / estimate), _MAX_HOST_RUNS))):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1e3)
    return statistics.median(times)


class _Progress:
    """The one stderr line of a tuning: rewritten in place on a terminal, only its final
    state elsewhere (logs); nothing when KILN_PRINT_AUTOTUNING=0."""

    def __init__(self):
        self.on = os.environ.get("KILN_PRINT_AUTOTUNING", "1") != "0"
        try:
            self.tty = self.on and sys.stderr.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        self.shown = False

    def show(self, head, tail):
        if self.tty:
            # One terminal row (a wrapped line could not be rewritten from its start): the
            # config is shortened, the status kept.
            width = shutil.get_terminal_size().columns
            text = f"{head} {tail}"
            if len(text) >= width:
                text = f"{head[:max(width - len(tail) - 5, 0)]}... {tail}"
            sys.stderr.write("\r" + text + "\x1b[K")
            sys.stderr.flush()
            self.shown = True

    def finish(self, text):
        if self.on:
            sys.stderr.write(("\r" if self.tty else "") + text +
                             ("\x1b[K" if self.tty else "") + "\n")
            sys.stderr.flush()
        self.shown = False

    def abandon(self):
        """Ends a line left by an exception, so that the traceback starts on its own line."""
        if self.shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
            self.shown = False


# ---------------------------------------------------------------------------------------
# Autotuner
# ---------------------------------------------------------------------------------------

class Autotuner:
    """An autotuned kernel (what @kiln.autotune returns). Launch it as the kernel it wraps,
    ``kernel[grid](*args, **kwargs)``, without the tuned meta-parameters.

    Attributes as Triton's: ``fn`` (the wrapped kernel), ``base_fn``, ``arg_names``,
    ``configs``, ``keys``, ``cache`` (tuning key -> chosen Config), ``best_config`` (the
    config of the last launch), ``configs_timings`` (Config -> ms of the last tuning),
    ``bench_time`` (seconds it took), ``nargs``; and ``configs_errors`` (Config -> the
    exception of each config that failed in the last tuning).
    """

    def __init__(self, fn, arg_names, configs, key, reset_to_zero=None, restore_value=None,
                 pre_hook=None, post_hook=None, prune_configs_by=None, warmup=None, rep=None,
                 use_cuda_graph=False, do_bench=None, cache_results=False):
        self.fn = fn
        self.base_fn = fn
        while hasattr(self.base_fn, "fn") and not isinstance(self.base_fn, JITFunction):
            self.base_fn = self.base_fn.fn
        self.arg_names = list(arg_names)
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__module__ = getattr(fn, "__module__", None)
        self.__doc__ = getattr(fn, "__doc__", None)
        name = self.__name__
        what = f"kiln.autotune of kernel '{name}'"

        self.configs = list(configs) if configs else [Config({})]
        for c in self.configs:
            if not isinstance(c, Config):
                raise TypeError(f"{what}: expected kiln.Config objects in configs, found "
                                f"{type(c).__name__}")
            unknown = [k for k in c.kwargs if k not in self.arg_names]
            if unknown:
                raise ValueError(f"{what}: config {{{c}}} sets {unknown}, which are not "
                                 f"parameters of the kernel (parameters: {self.arg_names})")

        def names(arg, label):
            arg = [arg] if isinstance(arg, str) else list(arg or [])
            unknown = [k for k in arg if k not in self.arg_names]
            if unknown:
                raise ValueError(f"{what}: {label} {unknown} not parameters of the kernel "
                                 f"(parameters: {self.arg_names})")
            return arg

        # Triton ignores key names that are not parameters (its tutorial 08 has such a typo):
        # a warning names them, and they are left out of the tuning key.
        keys = [key] if isinstance(key, str) else list(key or [])
        stray = [k for k in keys if k not in self.arg_names]
        if stray:
            import warnings
            warnings.warn(f"{what}: key names {stray} are not parameters of the kernel "
                          f"(parameters: {self.arg_names}); ignored, as Triton does",
                          stacklevel=3)
        self.keys = names([k for k in keys if k in self.arg_names], "key names are")
        self.reset_to_zero = names(reset_to_zero, "reset_to_zero names are")
        self.restore_value = names(restore_value, "restore_value names are")
        self._key_pos = [(k, self.arg_names.index(k)) for k in self.keys]
        self._defaults = {}
        try:
            params = inspect.signature(getattr(self.base_fn, "fn", self.base_fn)).parameters
            self._defaults = {n: p.default for n, p in params.items()
                              if p.default is not p.empty}
        except (TypeError, ValueError):
            pass
        self._tuned_names = set()
        for c in self.configs:
            self._tuned_names.update(c.all_kwargs())

        # Hooks: the user's replace the defaults that zero and restore arguments (Triton's).
        self._restore_copies = []
        self.pre_hook = pre_hook if pre_hook is not None else \
            (self._default_pre_hook if self.reset_to_zero or self.restore_value else None)
        self.post_hook = post_hook if post_hook is not None else \
            (self._default_post_hook if self.restore_value else None)

        self.perf_model = self.early_config_prune = None
        self.configs_top_k = 1.0
        if prune_configs_by:
            extra = set(prune_configs_by) - {"perf_model", "top_k", "early_config_prune"}
            if extra:
                raise ValueError(f"{what}: prune_configs_by takes 'perf_model', 'top_k' and "
                                 f"'early_config_prune', found {sorted(extra)}")
            self.perf_model = prune_configs_by.get("perf_model")
            self.configs_top_k = prune_configs_by.get("top_k", 1.0)
            self.early_config_prune = prune_configs_by.get("early_config_prune")

        self.warmup_ms = _DEFAULT_WARMUP_MS if warmup is None else warmup
        self.rep_ms = _DEFAULT_REP_MS if rep is None else rep
        self.use_cuda_graph = use_cuda_graph  # accepted; runs are timed without CUDA graphs
        self.do_bench = do_bench
        self.cache_results = cache_results  # accepted; Kiln always caches results on disk

        self.cache = {}
        self.best_config = None
        self.configs_timings = None
        self.configs_errors = {}
        self.bench_time = None
        self.nargs = None

    def __repr__(self):
        return f"Autotuner({self.fn!r}, {len(self.configs)} configs, key={self.keys})"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"autotuned kernel '{self.__name__}' is launched with "
                           f"{self.__name__}[grid](...)")

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, warmup=False, **kwargs)

    @property
    def cache_key(self):
        return getattr(self.fn, "cache_key", None)

    # --- hooks -----------------------------------------------------------------------

    def _arg(self, nargs, name):
        return nargs[name] if name in nargs else self._defaults.get(name)

    def _default_pre_hook(self, nargs, reset_only=False):
        for name in self.reset_to_zero:
            v = self._arg(nargs, name)
            if v is not None:
                self._apply(_zero, v, name, "reset_to_zero")
        if not reset_only:
            self._restore_copies = [
                (name, v, self._apply(_save, v, name, "restore_value"))
                for name in self.restore_value
                for v in [self._arg(nargs, name)] if v is not None]

    def _default_post_hook(self, nargs, exception):
        for name, v, saved in self._restore_copies:
            self._apply(_restore, v, name, "restore_value", saved)
        self._restore_copies = []

    def _apply(self, op, v, name, label, *extra):
        try:
            return op(v, *extra)
        except (TypeError, ValueError, AttributeError) as e:
            raise TypeError(f"kernel '{self.__name__}': {label} argument '{name}' is a "
                            f"{type(v).__name__} ({e}); expected an array (numpy array, "
                            f"torch tensor, kiln.DeviceArray)") from None

    # --- keys and targets ---------------------------------------------------------------

    def _key(self, args, kwargs):
        """Triton's key: the values of the key arguments, then the dtype of every argument
        that has one."""
        key = []
        for name, i in self._key_pos:
            if i < len(args):
                key.append(_key_value(args[i]))
            elif name in kwargs:
                key.append(_key_value(kwargs[name]))
            elif name in self._defaults:
                key.append(_key_value(self._defaults[name]))
        values = list(args) + [v for k, v in kwargs.items() if k in self.arg_names]
        for v in values:
            dtype = getattr(v, "dtype", None)
            if dtype is not None and not isinstance(v, (int, float)):
                key.append(str(dtype))
        return tuple(key)

    def _key_text(self, args, kwargs):
        parts = []
        for name, i in self._key_pos:
            if i < len(args):
                parts.append(f"{name}={_key_value(args[i])}")
            elif name in kwargs:
                parts.append(f"{name}={_key_value(kwargs[name])}")
        return ", ".join(parts)

    def _target(self, kwargs, device=None):
        """"cpu" or the GPU architecture the launch will compile for, resolved as the
        launcher does: the launch's device=, the decorator's, $KILN_BACKEND, $KILN_ARCH, the
        presence of a GPU; on the GPU, the architecture of `device` (None: the current
        one)."""
        where = f"kernel '{self.__name__}'"
        d = kwargs.get("device")
        d = _parse_device(d, where) if d is not None else getattr(self.base_fn, "device",
                                                                       None)
        if d is None:
            env, arch = os.environ.get("KILN_BACKEND"), os.environ.get("KILN_ARCH")
            if env:
                d = _parse_device(env, "KILN_BACKEND")
            elif arch:
                d = "cpu" if arch == "cpu" else "gpu"
            else:
                d = "gpu" if _C.has_gpu() else "cpu"
        if d == "cpu":
            return "cpu:threads=" + os.environ.get("KILN_CPU_THREADS", str(os.cpu_count()))
        return _device_arch(device)

    # --- disk cache ---------------------------------------------------------------------

    def _disk_key(self, key, target):
        source = self.cache_key
        if source is None:
            try:
                source = inspect.getsource(getattr(self.base_fn, "fn", self.base_fn))
            except (OSError, TypeError):
                source = repr(self.fn)
        text = repr((frontend_version(), source, self.__name__, target,
                     [_constexpr_key(k) for k in key],
                     [c._ident() for c in self.configs]))
        return hashlib.sha256(text.encode()).hexdigest()

    @staticmethod
    def _disk_path(digest):
        return os.path.join(_C.cache_dir(), "autotune", digest + ".json")

    def _disk_load(self, digest, candidates):
        """The config the disk cache chose for this key, found in the lists `candidates()`
        yields, or None."""
        try:
            with open(self._disk_path(digest), encoding="utf-8") as f:
                d = json.load(f)
            if d.get("key") != digest:
                return None
            best = d["best"]
        except (OSError, ValueError, KeyError, TypeError):
            return None  # missing or corrupt: tune again
        for configs in candidates():
            for c in configs:
                if c._ident() == best:
                    return c
        return None

    def _disk_store(self, digest, key_text, best, timings):
        path = self._disk_path(digest)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp"
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump({"key": digest, "kernel": self.__name__, "tuning_key": key_text,
                           "best": best._ident(),
                           "timings_ms": {c._ident(): t for c, t in timings.items()}}, f,
                          indent=1)
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written only costs a new tuning

    # --- pruning ------------------------------------------------------------------------

    def prune_configs(self, kwargs, nargs=None):
        """The configs to time: early_config_prune(configs, nargs, **kwargs), then the
        top_k (a count, or a fraction of the configs) by perf_model(**nargs, **kwargs,
        **config.all_kwargs())."""
        nargs = self.nargs if nargs is None else nargs
        nargs = nargs or {}
        configs = self.configs
        if self.early_config_prune:
            configs = list(self.early_config_prune(self.configs, nargs, **kwargs))
            if not configs:
                raise ValueError(f"kiln.autotune of kernel '{self.__name__}': "
                                 f"early_config_prune left no configs")
        if self.perf_model:
            top_k = self.configs_top_k
            if isinstance(top_k, float) and top_k <= 1.0:
                top_k = max(1, int(len(self.configs) * top_k))
            elif not isinstance(top_k, int):
                raise TypeError(f"kiln.autotune of kernel '{self.__name__}': top_k must be an "
                                f"int or a float <= 1.0, found {top_k!r}")
            if len(configs) > top_k:
                est = [(self.perf_model(**nargs, **kwargs, **c.all_kwargs()), i)
                       for i, c in enumerate(configs)]
                configs = [configs[i] for _, i in sorted(est)[:top_k]]
        return configs

    # --- launching ----------------------------------------------------------------------

    def run(self, *args, grid, warmup=False, **kwargs):
        """kernel.run(*args, grid=grid, **kwargs): kernel[grid](*args, **kwargs)."""
        if warmup:
            return self.warmup(*args, grid=grid, **kwargs)
        if kwargs:
            clash = self._tuned_names.intersection(kwargs)
            if clash:
                raise ValueError(f"autotuned kernel '{self.__name__}': conflicting "
                                 f"meta-parameters {sorted(clash)}: the autotuner's configs "
                                 f"set them; do not pass them to the launch")
        self.nargs = dict(zip(self.arg_names, args))
        try:
            key = self._key(args, kwargs)
            config = self.cache.get(key)
            if config is None:
                config = self._choose(key, args, kwargs, grid)
                self.cache[key] = config
            self.best_config = config
            if config.pre_hook is not None:
                config.pre_hook({**self.nargs, **kwargs, **config.all_kwargs()})
            return self.fn.run(*args, grid=grid, warmup=False, **kwargs, **config.all_kwargs())
        finally:
            self.nargs = None

    def warmup(self, *args, grid=None, **kwargs):
        """Compiles the variant of every (pruned) config, without launching."""
        self.nargs = dict(zip(self.arg_names, args))
        try:
            return [self.fn.warmup(*args, grid=grid, **kwargs, **c.all_kwargs())
                    for c in self.prune_configs(kwargs)]
        finally:
            self.nargs = None

    def _choose(self, key, args, kwargs, grid):
        """The config for a key not yet in memory: the only one, the disk cache's, or the
        fastest of a new tuning."""
        if len(self.configs) == 1:
            return self.configs[0]
        # Tuned where it will run: on the device of the tensor arguments.
        device = _device_of(list(args) + list(kwargs.values()))
        target = self._target(kwargs, device)
        digest = self._disk_key(key, target)

        def candidates():
            yield self.configs
            yield self.prune_configs(kwargs)  # early_config_prune may make new configs

        config = self._disk_load(digest, candidates)
        if config is not None:
            return config
        pruned = self.prune_configs(kwargs)
        if len(pruned) == 1:
            return pruned[0]
        key_text = self._key_text(args, kwargs)
        with _OnDevice(None if target.startswith("cpu") else device):
            best, timings = self._tune(pruned, args, kwargs, grid, target, key_text)
        self._disk_store(digest, key_text, best, timings)
        return best

    def _tune(self, configs, args, kwargs, grid, target, key_text):
        name, n = self.__name__, len(configs)
        host = target.startswith("cpu")
        progress = _Progress()
        timings, errors = {}, {}
        t0 = time.perf_counter()
        try:
            for i, config in enumerate(configs, 1):
                label = f"kiln.autotune: {name} [{i}/{n}] {config._short()}"
                progress.show(label, "compiling")
                try:
                    ms = self._bench(config, args, kwargs, grid, host)
                except (CompilationError, KilnError) as e:
                    errors[config] = e
                    progress.show(label, "failed: " + type(e).__name__)
                    continue
                timings[config] = ms
                progress.show(label, f"{ms:.3f} ms")
        except BaseException:
            progress.abandon()
            raise
        self.bench_time = time.perf_counter() - t0
        self.configs_timings = timings
        self.configs_errors = errors
        where = f" ({key_text})" if key_text else ""
        if not timings:
            progress.finish(f"kiln.autotune: {name} [{n}/{n}] every config failed")
            lines = [f"kiln.autotune: every config of kernel '{name}'{where} failed:"]
            for i, (config, e) in enumerate(errors.items(), 1):
                text = f"{type(e).__name__}: {e}".replace("\n", "\n      ")
                lines.append(f"  [{i}] {config}: {text}")
            raise AutotuneError("\n".join(lines), list(errors.items()))
        best = min(timings, key=timings.get)
        failed = f", {len(errors)} failed" if errors else ""
        progress.finish(f"kiln.autotune: {name} [{n}/{n}] best {best._short()} "
                        f"{timings[best]:.3f} ms ({n} configs in {self.bench_time:.2f} s"
                        f"{failed}){' for ' + key_text if key_text else ''}")
        if os.environ.get("TRITON_PRINT_AUTOTUNING") == "1":
            print(f"Kiln autotuning for function {name} finished after "
                  f"{self.bench_time:.2f}s; best config selected: {best};")
        # The launch that follows must see the arguments as its caller left them.
        if self.pre_hook is not None:
            self.pre_hook({**self.nargs, **kwargs, **best.all_kwargs()}, reset_only=True)
        return best, timings

    def _bench(self, config, args, kwargs, grid, host):
        """The median time in ms of launches with `config`, after a first launch that
        compiles it."""
        launch = {**kwargs, **config.all_kwargs()}
        full = {**self.nargs, **launch}

        def call():
            if config.pre_hook is not None:
                config.pre_hook(full)
            if self.pre_hook is not None:
                self.pre_hook(full)
            try:
                self.fn.run(*args, grid=grid, warmup=False, **launch)
            except BaseException as e:
                if self.post_hook is not None:
                    self.post_hook(full, e)
                raise
            if self.post_hook is not None:
                self.post_hook(full, None)

        call()
        if not host:
            _C.synchronize()
        if self.do_bench is not None:
            r = self.do_bench(call, quantiles=_QUANTILES)
        elif host:
            r = _bench_host(call, self.warmup_ms, self.rep_ms)
        else:
            from ..testing import do_bench
            r = do_bench(call, warmup=self.warmup_ms, rep=self.rep_ms, quantiles=_QUANTILES)
        return float(r[0] if isinstance(r, (list, tuple)) else r)


def autotune(configs, key, prune_configs_by=None, reset_to_zero=None, restore_value=None,
             pre_hook=None, post_hook=None, warmup=None, rep=None, use_cuda_graph=False,
             do_bench=None, cache_results=False):
    """Decorator for a @kiln.jit kernel (triton.autotune): times every config of `configs`
    for each new value of the `key` arguments (and argument dtypes), and launches with the
    fastest.

    prune_configs_by: {"early_config_prune": f(configs, nargs, **kwargs) -> configs,
    "perf_model": f(**nargs, **kwargs, **config.all_kwargs()) -> estimated time, "top_k":
    how many (or what fraction) of the configs by the model to time}.
    reset_to_zero / restore_value: names of array arguments zeroed before each timed run /
    restored after it. pre_hook(nargs, reset_only) / post_hook(nargs, exception) replace
    those defaults. warmup, rep: ms of warm-up and of timed runs per config (25, 100).
    do_bench(fn, quantiles) replaces the timer. use_cuda_graph and cache_results are
    accepted and have no effect (runs are timed without graphs; results are always cached
    on disk)."""
    def decorator(fn):
        if not hasattr(fn, "arg_names") or not hasattr(fn, "run"):
            raise TypeError(f"kiln.autotune decorates a @kiln.jit kernel (put it above "
                            f"@kiln.jit), found {fn!r}")
        return Autotuner(fn, fn.arg_names, configs, key, reset_to_zero, restore_value,
                         pre_hook=pre_hook, post_hook=post_hook,
                         prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                         use_cuda_graph=use_cuda_graph, do_bench=do_bench,
                         cache_results=cache_results)
    return decorator
