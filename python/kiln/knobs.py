"""kiln.knobs: Kiln's settings as attributes, Triton's `triton.knobs` for the settings Kiln has.

Each knob stands for an environment variable that Kiln reads where it needs it (at a launch,
a compile, a cache lookup), so both ways of setting it agree:

    kiln.knobs.runtime.debug = True        # sets KILN_DEBUG=1 for what runs next
    kiln.knobs.runtime.debug               # reads KILN_DEBUG (or the default)
    with kiln.knobs.runtime.scope():       # every knob of the group back as it was after
        kiln.knobs.autotuning.print = False
    kiln.knobs.runtime.reset()             # back to the environment's values
    kiln.knobs.runtime.knobs               # {name: value}

Groups and knobs (variable, default):

- cache: dir (KILN_CACHE_DIR; $XDG_CACHE_HOME/kiln or ~/.cache/kiln; read when a JIT is made,
  so set it before the first launch)
- compilation: allow_non_constexpr_globals (KILN_ALLOW_NON_CONSTEXPR_GLOBALS, False),
  log_compiles (KILN_LOG_COMPILES, False: print why a new variant compiles), libdevice_path
  (KILN_LIBDEVICE, None: the CUDA toolkit's)
- autotuning: print (KILN_PRINT_AUTOTUNING, True)
- runtime: debug (KILN_DEBUG, False), backend (KILN_BACKEND, None: the GPU when there is one),
  override_arch (KILN_ARCH, None): a kernel reads them at its first launch and keeps them (off
  the per-launch path); set through these knobs (or scope()/reset()), every kernel reads them
  again at its next launch; a launch's own debug=/device= options always win;
  cpu_threads (KILN_CPU_THREADS, None: one per core; read when a launch starts its threads)

A knob set from Python writes its variable (None or `del` unsets it), so the C++ runtime and
subprocesses see it too; a bool reads as the code that uses the variable reads it. Assigning
`kiln.knobs.env` (Triton's way to drop a Python-side value) leaves the variable as it is:
Kiln keeps no value beside it. Setting a knob to a value of the wrong type is a TypeError
naming the knob and its variable.
"""
import contextlib
import os

__all__ = ["env", "cache", "compilation", "autotuning", "runtime", "base_knobs"]


class Env:
    """Triton's `knobs.env`: assigned to a knob, the environment decides (as it always does
    in Kiln)."""


env = Env()


class _knob:
    """A data descriptor over one environment variable. `kind` is bool, int or str; `default`
    is what an unset variable reads as."""

    def __init__(self, key, kind, default, on=lambda raw: raw != "0", relaunch=False):
        self.key, self.kind, self.default, self.on = key, kind, default, on
        self.relaunch = relaunch  # kernels resolve it at their next launch again

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        raw = os.environ.get(self.key)
        if raw is None or raw == "":
            return self.default() if callable(self.default) else self.default
        if self.kind is bool:  # as the code that reads the variable decides
            return self.on(raw)
        if self.kind is int:
            try:
                return int(raw)
            except ValueError:
                raise ValueError(f"kiln.knobs: {self.key}={raw!r} is not an int") from None
        return raw

    def __set__(self, obj, value):
        if isinstance(value, Env):  # the variable decides already: nothing to drop
            return
        if value is None:
            os.environ.pop(self.key, None)
            self._changed()
            return
        ok = isinstance(value, self.kind) and not (self.kind is int and isinstance(value, bool))
        if not ok:
            raise TypeError(f"kiln.knobs.{type(obj).__name__[:-6]}.{self.name} ({self.key}) "
                            f"expects a {self.kind.__name__} or None, found "
                            f"{type(value).__name__}")
        if self.kind is bool:
            os.environ[self.key] = "1" if value else "0"
        else:
            os.environ[self.key] = str(value)
        self._changed()

    def __delete__(self, obj):
        os.environ.pop(self.key, None)
        self._changed()

    def _changed(self):
        if self.relaunch:
            _relaunch()


def _relaunch():
    """Every kernel resolves $KILN_DEBUG, $KILN_BACKEND and $KILN_ARCH again at its next launch
    (the launcher keeps them off the per-launch path otherwise)."""
    from . import _C
    _C._bump_launch_defaults()


class base_knobs:
    """A group of knobs: `knobs` (a dict of their values), `scope()` (a context that puts every
    variable of the group back as it was), `reset()` (the variables back to what they were
    when kiln was imported)."""

    def __init__(self):
        self._initial = {k.key: os.environ.get(k.key) for k in self._descriptors().values()}

    @classmethod
    def _descriptors(cls):
        return {n: d for n, d in vars(cls).items() if isinstance(d, _knob)}

    @property
    def knob_descriptors(self):
        return self._descriptors()

    @property
    def knobs(self):
        return {name: getattr(self, name) for name in self._descriptors()}

    @contextlib.contextmanager
    def scope(self):
        saved = {d.key: os.environ.get(d.key) for d in self._descriptors().values()}
        try:
            yield self
        finally:
            self._put_back(saved)

    def reset(self):
        self._put_back(self._initial)
        return self

    def _put_back(self, values):
        for key, value in values.items():
            _restore(key, value)
        if any(d.relaunch for d in self._descriptors().values()):
            _relaunch()


def _restore(key, value):
    if value is None:
        os.environ.pop(key, None)
    else:
        os.environ[key] = value


def _default_cache_dir():
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "kiln")


class cache_knobs(base_knobs):
    dir = _knob("KILN_CACHE_DIR", str, _default_cache_dir)


class compilation_knobs(base_knobs):
    allow_non_constexpr_globals = _knob("KILN_ALLOW_NON_CONSTEXPR_GLOBALS", bool, False,
                                        on=lambda raw: raw == "1")
    log_compiles = _knob("KILN_LOG_COMPILES", bool, False)
    libdevice_path = _knob("KILN_LIBDEVICE", str, None)
    # sm_90a: a loop's pointer tiles of dot operands copied by the TMA
    # (-kiln-pointer-tiles-to-descriptors); KILN_TMA_POINTER_TILES=0 keeps the pointer loads.
    tma_pointer_tiles = _knob("KILN_TMA_POINTER_TILES", bool, True)
    # with it, also tiles read transposed (K^T by pointers) and bases a program moves
    # (K += off_z * stride_z): the pass's attention-tiles (tutorial 06's pointer forward:
    # +5-13% at D128 on an H100); KILN_TMA_ATTENTION_TILES=0 keeps cp.async rings for them.
    tma_attention_tiles = _knob("KILN_TMA_ATTENTION_TILES", bool, True)


class autotuning_knobs(base_knobs):
    print = _knob("KILN_PRINT_AUTOTUNING", bool, True)


class runtime_knobs(base_knobs):
    debug = _knob("KILN_DEBUG", bool, False, relaunch=True)
    backend = _knob("KILN_BACKEND", str, None, relaunch=True)
    override_arch = _knob("KILN_ARCH", str, None, relaunch=True)
    cpu_threads = _knob("KILN_CPU_THREADS", int, None)


cache = cache_knobs()
compilation = compilation_knobs()
autotuning = autotuning_knobs()
runtime = runtime_knobs()
