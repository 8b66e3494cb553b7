"""@kiln.heuristics: Triton's triton.heuristics. Meta-parameters computed from a launch's
arguments instead of tuned:

    @kiln.heuristics(values={"EVEN_N": lambda args: args["n"] % args["BLOCK"] == 0})
    @kiln.jit
    def kernel(x_ptr, n, BLOCK: tl.constexpr, EVEN_N: tl.constexpr): ...

Each function of `values` gets the dict of the launch's arguments (positional ones by name,
keywords, and the values computed before it, in order) and returns the value passed to the
kernel as that keyword (a keyword of that name given to the launch is read by the functions,
then replaced, as in Triton). It stacks with @kiln.autotune on either side, as in Triton.
"""

__all__ = ["Heuristics", "heuristics"]

# The launch options a heuristic may compute beside the kernel's parameters.
LAUNCH_OPTIONS = frozenset({"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion"})


class Heuristics:
    """A kernel launched with the meta-parameters `values` computes from its arguments."""

    def __init__(self, fn, arg_names, values):
        self.fn = fn
        self.arg_names = list(arg_names)
        self.values = dict(values)
        self.__name__ = getattr(fn, "__name__", "kernel")
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__module__ = getattr(fn, "__module__", None)
        self.__doc__ = getattr(fn, "__doc__", None)
        # Launch options may be computed too, as in Triton (FlagGems' softmax backward sets
        # num_warps from N).
        unknown = [k for k in self.values if k not in self.arg_names and k not in LAUNCH_OPTIONS]
        if unknown:
            raise ValueError(f"kiln.heuristics of kernel '{self.__name__}': {unknown} are not "
                             f"parameters of the kernel (parameters: {self.arg_names}) nor "
                             f"launch options ({', '.join(sorted(LAUNCH_OPTIONS))})")
        for k, f in self.values.items():
            if not callable(f):
                raise TypeError(f"kiln.heuristics of kernel '{self.__name__}': the value of "
                                f"'{k}' must be a function of the arguments dict, found "
                                f"{type(f).__name__}")

    def _with_values(self, args, kwargs):
        # A keyword the launch passes is overwritten by its computed value, as in Triton (whose
        # users rely on it: unsloth's kernels pass GEMMA=... to a heuristic reading
        # args["GEMMA"]); passed positionally it would be given twice.
        clash = [k for k in self.values if k in self.arg_names[:len(args)]]
        if clash:
            raise ValueError(f"kernel '{self.__name__}': {clash} are computed by "
                             f"kiln.heuristics; pass them as keywords or not at all, not "
                             f"positionally")
        kwargs = dict(kwargs)
        named = {**dict(zip(self.arg_names, args)), **kwargs}
        for k, f in self.values.items():
            named[k] = kwargs[k] = f(named)
        return kwargs

    def run(self, *args, grid, warmup=False, **kwargs):
        """kernel.run(*args, grid=grid, **kwargs), with the computed meta-parameters."""
        return self.fn.run(*args, grid=grid, warmup=warmup, **self._with_values(args, kwargs))

    def warmup(self, *args, grid=None, **kwargs):
        return self.fn.warmup(*args, grid=grid, **self._with_values(args, kwargs))

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.run(*args, grid=grid, **kwargs)

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"kernel '{self.__name__}' is launched with "
                           f"{self.__name__}[grid](...)")

    def __repr__(self):
        return f"Heuristics({self.fn!r}, {sorted(self.values)})"


def heuristics(values):
    """Decorator (triton.heuristics): `values` maps meta-parameter names to functions of the
    launch's arguments dict."""
    if not isinstance(values, dict):
        raise TypeError(f"kiln.heuristics expects a dict of name -> function, found "
                        f"{type(values).__name__}")

    def decorator(fn):
        if not hasattr(fn, "arg_names") or not hasattr(fn, "run"):
            raise TypeError(f"kiln.heuristics decorates a @kiln.jit kernel (put it above "
                            f"@kiln.jit), found {fn!r}")
        return Heuristics(fn, fn.arg_names, values)
    return decorator
