"""kiln.runtime.jit: @kiln.jit, kiln.compile and compiled kernels.

A JITFunction derives from the C++ launcher (kiln._C.Launcher): ``kernel[grid](...)`` binds
the arguments, computes the specialization key, finds the compiled variant and calls
cuLaunchKernel in C++. Only a new variant comes back here (``_compile_variant``), which
builds the kernel through the code generator (kiln.compiler; or reads its IR from the front
end's disk cache, kiln.runtime.cache), compiles and loads it through the runtime's JIT
(memory and disk cache), and says why the variant was new when KILN_LOG_COMPILES=1.
"""

import ast
import functools
import hashlib
import inspect
import os
import re
import sys
import textwrap
import time
from collections.abc import Mapping

from .. import _C
from ..errors import CompilationError
from ..language import core as lc
from .cache import frontend_version, load_ir, store_ir

__all__ = ["jit", "JITFunction", "compile", "CompiledKernel"]


# ---------------------------------------------------------------------------------------
# Source of a jit function
# ---------------------------------------------------------------------------------------

def _annotated(ann, obj, name):
    """Whether a parameter annotation is `obj`, or a string naming it (`"tl.<name>"`)."""
    if ann is obj:
        return True
    return isinstance(ann, str) and ann.replace(" ", "").split(".")[-1] == name


def _is_constexpr_annotation(ann):
    return _annotated(ann, lc.constexpr, "constexpr")


def _is_const_annotation(ann):
    """tl.const (Triton's annotation of a pointer to data the kernel only reads)."""
    from ..language.values import const
    return _annotated(ann, const, "const")


class _CaptureScope(Mapping):
    """The names a function defined inside another one sees beyond its own: the variables it
    closes over, read from their cells when asked (as globals are), then its module's
    globals; Triton's capture scope (its globals and inspect.getclosurevars' nonlocals)."""

    def __init__(self, fn):
        self._cells = dict(zip(fn.__code__.co_freevars, fn.__closure__))
        self._globals = fn.__globals__

    def __getitem__(self, name):
        cell = self._cells.get(name)
        if cell is not None:
            try:
                return cell.cell_contents
            except ValueError:  # not assigned yet in the enclosing function
                pass
        return self._globals[name]

    def __contains__(self, name):
        try:
            self[name]
        except KeyError:
            return False
        return True

    def __iter__(self):
        yield from self._cells
        yield from (n for n in self._globals if n not in self._cells)

    def __len__(self):
        return len(set(self._cells) | set(self._globals))


class FunctionInfo:
    """The source of a @kiln.jit function: text, AST, file and line, parameters."""

    def __init__(self, fn):
        self.fn = fn
        self.name = fn.__name__
        # Names resolve as in Triton: the variables a nested kernel closes over, then globals.
        self.globals = _CaptureScope(fn) if fn.__closure__ else fn.__globals__
        try:
            raw_lines, begin_line = inspect.getsourcelines(fn)
        except (OSError, TypeError) as e:
            raise TypeError(f"@kiln.jit needs the source of '{fn.__qualname__}' ({e}); define "
                            f"kernels in a file") from None
        self.raw_lines = raw_lines
        self.begin_line = begin_line
        src = textwrap.dedent("".join(raw_lines))
        first = src.splitlines(True)[0] if src else ""
        self.col_shift = len(raw_lines[0]) - len(first) if raw_lines else 0
        self.src = src
        self.src_lines = src.splitlines()
        self.file = inspect.getsourcefile(fn) or fn.__code__.co_filename
        self.signature = inspect.signature(fn)
        self.arg_names = list(self.signature.parameters)
        self.constexpr_params = {n for n, p in self.signature.parameters.items()
                                 if _is_constexpr_annotation(p.annotation)}
        self.const_params = {n for n, p in self.signature.parameters.items()
                             if _is_const_annotation(p.annotation)}
        self._tree = None

    @property
    def tree(self):
        if self._tree is None:
            module = ast.parse(self.src)
            defs = [n for n in module.body if isinstance(n, ast.FunctionDef)]
            if not defs:
                raise TypeError(f"@kiln.jit: '{self.name}' is not a function definition")
            self._tree = defs[0]
        return self._tree


# ---------------------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------------------

def _constexpr_key(v):
    if isinstance(v, JITFunction):
        return "jit:" + v.cache_key
    if isinstance(v, lc.constexpr):
        return _constexpr_key(v.value)
    if isinstance(v, tuple):
        return "(" + ",".join(_constexpr_key(e) for e in v) + ")"
    return f"{type(v).__name__}:{v!r}"


class _Dependencies(ast.NodeVisitor):
    """Triton's DependenciesFinder: the callees and constexpr globals a function names."""

    def __init__(self, info):
        self.info = info
        self.callees = []
        self.globals = []
        self.plain = []  # module globals of plain Python values (lc.PLAIN_GLOBAL_TYPES)
        self.constexpr_functions = []  # tl.constexpr_function objects (their source is keyed)

    def _resolve(self, node):
        if isinstance(node, ast.Name):
            g = self.info.globals
            return (g, node.id, g[node.id]) if node.id in g else None
        if isinstance(node, ast.Attribute):
            base = self._resolve(node.value)
            if base is None:
                return None
            obj = base[2]
            try:
                return (None, node.attr, getattr(obj, node.attr))
            except AttributeError:
                return None
        return None

    def visit_Name(self, node):
        self._note(self._resolve(node))

    def visit_Attribute(self, node):
        from ..language.values import ConstexprFunction
        r = self._resolve(node)
        if r is not None and isinstance(r[2], (JITFunction, ConstexprFunction)):
            self._note(r)
        self.generic_visit(node)

    def _note(self, r):
        if r is None:
            return
        g, name, v = r
        from ..language.values import ConstexprFunction
        if isinstance(v, JITFunction):
            if v not in self.callees:
                self.callees.append(v)
        elif isinstance(v, ConstexprFunction):
            if v not in self.constexpr_functions:
                self.constexpr_functions.append(v)
        elif g is not None and (isinstance(v, (lc.constexpr, lc.dtype)) or
                                lc.is_constexpr_annotated(g, name, v)):
            self.globals.append((g, name, v))
        elif g is not None and isinstance(v, lc.PLAIN_GLOBAL_TYPES):
            # read by the kernel only with KILN_ALLOW_NON_CONSTEXPR_GLOBALS=1 (see
            # JITFunction._plain_globals)
            self.plain.append((g, name, v))


# ---------------------------------------------------------------------------------------
# Compiled kernels
# ---------------------------------------------------------------------------------------

class _Asm(dict):
    """CompiledKernel.asm: "kiln" (the kernel's MLIR text), "llvm", "ptx", "cubin" made on
    first access (the launch path never needs them): the kernel's module compiled again with
    its variant's options."""

    def __init__(self, source, arch, options, kernel_name):
        super().__init__()
        self._source, self._arch, self._options, self._name = source, arch, options, \
            kernel_name

    def _fill(self):
        try:
            r = _C.compile_module(self._source, self._arch, cubin=True, **self._options)
        except _C.BuildError as e:
            raise _build_error(self._name, e) from None
        self["llvm"], self["ptx"] = r["llvm"], r["ptx"]
        if r["cubin"]:
            self["cubin"] = r["cubin"]
        self.cubin_error = r["cubin_error"]

    def __missing__(self, key):
        if key == "kiln":
            self["kiln"] = self._source.text
            return self["kiln"]
        if key in ("llvm", "ptx", "cubin") and not dict.__contains__(self, "ptx"):
            self._fill()
            if dict.__contains__(self, key):
                return self[key]
        if key == "cubin":
            raise KeyError(f"cubin: {getattr(self, 'cubin_error', 'not available')}")
        raise KeyError(key)

    def _ensure(self):
        self["kiln"]  # noqa: B018 (made on first access)
        if not dict.__contains__(self, "ptx"):
            self._fill()

    def keys(self):
        self._ensure()
        return super().keys()

    def __iter__(self):
        self._ensure()
        return super().__iter__()

    def __contains__(self, key):
        if key in ("kiln", "llvm", "ptx", "cubin"):
            self._ensure()
        return super().__contains__(key)

    def get(self, key, default=None):
        return self[key] if key in self else default


class _HostAsm(dict):
    """CompiledKernel.asm of the host backend: "kiln" (the kernel's MLIR text) only."""

    def __init__(self, source):
        super().__init__()
        self._source = source

    def __missing__(self, key):
        if key != "kiln":
            raise KeyError(key)
        self["kiln"] = self._source.text
        return self["kiln"]

    def _ensure(self):
        self["kiln"]  # noqa: B018 (made on first access)

    def keys(self):
        self._ensure()
        return super().keys()

    def __iter__(self):
        self._ensure()
        return super().__iter__()

    def __contains__(self, key):
        self._ensure()
        return super().__contains__(key)

    def get(self, key, default=None):
        return self[key] if key in self else default


class CompiledKernel:
    """A compiled variant: ``asm`` ("kiln", "llvm", "ptx", "cubin"; "kiln" only for the
    host backend), ``metadata`` (name, num_warps, num_stages, arch: "sm_90" or "cpu",
    debug; shared, all the shared memory a block uses (Triton's: the static scratch and the
    dynamic rings), dynamic_shared, the dynamic part it launches with; filled in by
    kiln.compile: tma_box_rows, per kernel parameter the rows of the TMA boxes its tensor map is to be
    encoded with, 0 where none),
    the parameter ``signature`` and ``constants``."""

    def __init__(self, name, source, arch, num_warps, num_stages, signature, constants,
                 handle=None, asm=None, debug=False, maxnreg=None, enable_fp_fusion=True):
        self.name = name
        if asm is None:
            asm = _HostAsm(source) if arch == _HOST_ARCH else _Asm(
                source, arch, dict(num_warps=num_warps, num_stages=num_stages,
                                   maxnreg=maxnreg or 0, fp_fusion=enable_fp_fusion), name)
        self.asm = asm
        self.metadata = type("Metadata", (), dict(name=name, num_warps=num_warps,
                                                  num_stages=num_stages, arch=arch,
                                                  target=arch, shared=0, dynamic_shared=0,
                                                  tma_box_rows=[],
                                                  debug=debug, maxnreg=maxnreg,
                                                  enable_fp_fusion=enable_fp_fusion))()
        self.signature = signature
        self.constants = constants
        self.handle = handle

    def _init_handles(self):
        """Triton loads a compiled kernel's module lazily, here; a Kiln variant is loaded on
        its device when compiled (n_regs, n_spills and metadata.shared are already known), so
        there is nothing left to do. Kept so that Triton's occupancy code runs unchanged."""

    @property
    def n_regs(self):
        """Registers per thread of the loaded kernel, as the driver reports them (Triton's
        CompiledKernel.n_regs); 0 when it is not loaded (no GPU, host backend)."""
        return self.handle.n_regs if self.handle is not None else 0

    @property
    def n_spills(self):
        """Local memory per thread in 4-byte words (spills and stack), as Triton counts
        n_spills."""
        return self.handle.local_bytes // 4 if self.handle is not None else 0

    def __getitem__(self, grid):
        """Triton's direct launch of a compiled kernel, ``compiled[grid](*args)`` with every
        parameter given (constexprs too, positionally or by name): for a variant that
        ``kernel.warmup(...)`` returned, a launch of its kernel with the warmup's launch
        options (num_warps, num_stages, ...), which selects this variant again when the
        arguments specialize alike."""
        target = getattr(self, "_launch_target", None)
        if target is None:
            raise TypeError(f"kernel '{self.name}': this compiled kernel cannot be launched "
                            f"directly (kiln.compile builds it ahead of time); launch "
                            f"kernel[grid](...), or use the object kernel.warmup(...) returns")
        fn, options = target

        def launch(*args, **kwargs):
            names = fn.info.arg_names
            if len(args) > len(names):
                raise TypeError(f"kernel '{self.name}' takes {len(names)} arguments, "
                                f"{len(args)} given")
            bound = dict(zip(names, args))
            twice = sorted(set(bound) & set(kwargs))
            if twice:
                raise TypeError(f"kernel '{self.name}': got multiple values for {twice}")
            call = dict(options)
            call.update(bound)
            call.update(kwargs)
            return fn[grid](**call)
        return launch

    def __repr__(self):
        return f"CompiledKernel({self.name}, {self.metadata.arch}, num_warps=" \
               f"{self.metadata.num_warps})"


def _check_maxnreg(kernel, maxnreg):
    """maxnreg as an int or None; a TypeError or ValueError naming the kernel otherwise."""
    if maxnreg is None:
        return None
    if isinstance(maxnreg, bool) or not isinstance(maxnreg, int):
        raise TypeError(f"kernel '{kernel}': maxnreg must be an int (registers per thread), "
                        f"found {type(maxnreg).__name__}")
    if not 16 <= maxnreg <= 255:
        raise ValueError(f"kernel '{kernel}': maxnreg={maxnreg}: expected a register count "
                         f"per thread from 16 to 255")
    return maxnreg


def _tuple_kinds(v):
    """The NamedTuple types in a tuple argument (the kernel reads their fields by name): part
    of the compile cache's key."""
    if not isinstance(v, tuple):
        return None
    inner = [_tuple_kinds(e) for e in v]
    kind = f"{type(v).__module__}.{type(v).__qualname__}{type(v)._fields}" \
        if hasattr(type(v), "_fields") else None
    return (kind, inner) if kind or any(i is not None for i in inner) else None


def _check_num_warps(kernel, num_warps):
    """num_warps as an int, a power of two from 1 to 32 (a block has at most 1024 threads), on
    every backend as Triton asserts; a TypeError or ValueError naming the kernel otherwise."""
    if isinstance(num_warps, bool) or not isinstance(num_warps, int):
        raise TypeError(f"kernel '{kernel}': num_warps must be an int, found "
                        f"{type(num_warps).__name__}")
    if not 1 <= num_warps <= 32 or num_warps & (num_warps - 1):
        raise ValueError(f"kernel '{kernel}': num_warps={num_warps}: expected a power of two "
                         f"from 1 to 32")
    return num_warps


def _split_specs(names, specs, values):
    """(constants, signature): constexprs, None and ints specialized on == 1 are constants;
    the rest are the kernel's parameters with their types."""
    constants, signature = {}, {}
    for n, s, v in zip(names, specs, values):
        if s == "constexpr":
            constants[n] = v
        elif s == "none":
            constants[n] = None
        elif s.endswith(":1"):
            constants[n] = 1
        else:
            signature[n] = s
    return constants, signature


def _build_error(kernel, e):
    _, file, line, col, message = e.args[:5]
    src = None
    if file and line:
        import linecache
        src = linecache.getline(file, line) or None
    return CompilationError(kernel, file, line, col, message, src)


_HOST_ARCH = "cpu"  # kiln::rt::kHostArch: the host (CPU) backend


def _parse_device(device, what):
    """None, "cpu" or "gpu" (also "host", "cuda", a torch.device) -> None/"cpu"/"gpu"."""
    if device is None:
        return None
    d = getattr(device, "type", device)
    if d in ("cpu", "host"):
        return "cpu"
    if d in ("gpu", "cuda") or (isinstance(d, str) and d.startswith("cuda:")):
        return "gpu"
    raise ValueError(f"{what}: device={device!r}: expected 'cpu' (the host backend) or 'gpu'")


def _device_arch(device=None):
    """The target of JIT compiles: $KILN_ARCH (compile without a GPU: kernel.warmup(...)
    then builds and caches variants), else that of `device` (None: the current one)."""
    return os.environ.get("KILN_ARCH") or _arch_of(
        _C.current_device() if device is None else device)


def _tma_pointer_tiles(arch):
    """Whether the front end hands loops' pointer tiles of dot operands to the TMA (sm_90a,
    unless knobs.compilation.tma_pointer_tiles is off)."""
    from .. import knobs
    return arch == "sm_90a" and bool(knobs.compilation.tma_pointer_tiles)


def _tma_attention_tiles(arch):
    """Whether the TMA also takes pointer tiles read transposed and bases a program moves
    (knobs.compilation.tma_attention_tiles, with _tma_pointer_tiles)."""
    from .. import knobs
    return _tma_pointer_tiles(arch) and bool(knobs.compilation.tma_attention_tiles)


@functools.lru_cache(maxsize=None)
def _arch_of(device):
    return _C.get_arch(device)


# ---------------------------------------------------------------------------------------
# JITFunction
# ---------------------------------------------------------------------------------------

class JITFunction(_C.Launcher):
    """A @kiln.jit kernel. Launch it with ``kernel[grid](*args, **meta, num_warps=4,
    num_stages=3, maxnreg=None, enable_fp_fusion=True, stream=None, device=None,
    debug=None)``; grid is a tuple or a callable of the meta-parameters; maxnreg (16..255)
    caps the registers per thread on the GPU (the host backend ignores it);
    enable_fp_fusion=False keeps floating-point mul and add apart on the GPU, as Triton's
    option."""

    def __init__(self, fn, do_not_specialize=None, do_not_specialize_on_alignment=None,
                 debug=None, noinline=None, repr=None, launch_metadata=None, device=None):
        super().__init__()
        self.fn = fn
        self.info = FunctionInfo(fn)
        functools.update_wrapper(self, fn)
        self.noinline = noinline
        self.debug = debug
        self.device = _parse_device(device, f"@kiln.jit kernel '{self.info.name}'")
        names = self.info.arg_names
        nospec = set()
        for d in list(do_not_specialize or []) + list(do_not_specialize_on_alignment or []):
            nospec.add(names[d] if isinstance(d, int) else d)
        unknown = nospec - set(names)
        if unknown:
            raise TypeError(f"do_not_specialize names unknown parameters {sorted(unknown)} of "
                            f"'{self.info.name}'")
        self.do_not_specialize = sorted(nospec)
        params = list(self.info.signature.parameters.values())
        for p in params:
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.KEYWORD_ONLY):
                raise TypeError(f"@kiln.jit kernel '{self.info.name}': parameter '{p.name}' "
                                f"must be a plain positional parameter")
        self._setup(self.info.name, names,
                    [n in self.info.constexpr_params for n in names],
                    [n in nospec for n in names],
                    [p.default is not p.empty for p in params],
                    [None if p.default is p.empty else p.default for p in params],
                    self._compile_variant, self.device,
                    None if debug is None else bool(debug))
        self._cache_key = None
        self._dep_globals = None
        self._dep_plain = None
        self._callees = []
        self.compile_log = []
        self._keys = []

    @property
    def arg_names(self):
        return self.info.arg_names

    @property
    def src(self):
        return self.info.src

    def __repr__(self):
        return f"JITFunction({self.fn.__module__}:{self.fn.__qualname__})"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"@kiln.jit function '{self.info.name}' is launched with "
                           f"{self.info.name}[grid](...) or called from another @kiln.jit "
                           f"function")

    # --- keys ------------------------------------------------------------------------

    @property
    def cache_key(self):
        """Hash of this function's source, its callees' keys and the constexpr globals
        they read (Triton's JITFunction.cache_key)."""
        if self._cache_key is None:
            self._cache_key = "..."  # guards recursion through cycles
            deps = _Dependencies(self.info)
            deps.visit(self.info.tree)
            self._callees = [c for c in deps.callees if c is not self]
            h = hashlib.sha256(self.info.src.encode())
            for f in deps.constexpr_functions:
                h.update(b"constexpr_function:" + f.src.encode())
            for c in deps.callees:
                if c is not self:
                    h.update(b"callee:" + c.info.name.encode() + c.cache_key.encode())
            self._dep_globals = list(deps.globals)
            self._dep_plain = list(deps.plain)
            for c in deps.callees:
                if c is not self and c._dep_globals:
                    self._dep_globals.extend(c._dep_globals)
                if c is not self and c._dep_plain:
                    self._dep_plain.extend(c._dep_plain)
            for g, name, v in self._dep_globals:
                h.update(f"global:{name}={_constexpr_key(v)}".encode())
            self._cache_key = h.hexdigest()
        return self._cache_key

    def _plain_globals(self):
        """With KILN_ALLOW_NON_CONSTEXPR_GLOBALS=1, the module globals of plain values that
        this function and its callees name, (globals dict, name, value at key time): the
        kernel may have folded them in, so their values key the IR cache (a changed value
        compiles anew, never an IR with the old one) and are checked at launch. Without the
        flag the code generator rejects them, so none: []."""
        _ = self.cache_key
        if os.environ.get("KILN_ALLOW_NON_CONSTEXPR_GLOBALS") != "1":
            return []
        return list(self._dep_plain or [])

    def _locations(self):
        """file:first-line of this function and of its callees: the kernel's IR carries source
        locations (run-time errors of debug mode and device_assert report them), so the IR
        cache must not serve a kernel whose source moved."""
        _ = self.cache_key
        seen, out, todo = set(), [], [self]
        while todo:
            f = todo.pop()
            if id(f) in seen:
                continue
            seen.add(id(f))
            out.append(f"{f.info.file}:{f.info.begin_line}")
            todo.extend(f._callees)
        return out

    # --- compile on a miss ------------------------------------------------------------

    def _compile_variant(self, specs, values, num_warps, num_stages, host=False, debug=False,
                         maxnreg=None, device=0, fp_fusion=True):
        t0 = time.perf_counter()
        maxnreg = _check_maxnreg(self.info.name, maxnreg)
        _check_num_warps(self.info.name, num_warps)
        names = self.info.arg_names
        def part(s, v):
            if s == "constexpr":
                return _constexpr_key(v)
            kinds = _tuple_kinds(v) if s.startswith("(") else None
            return s if kinds is None else f"{s} {kinds}"
        parts = [(n, part(s, v)) for n, s, v in zip(names, specs, values)]
        plain = self._plain_globals()
        parts += [(f"global {n}", _constexpr_key(g[n] if n in g else v)) for g, n, v in plain]
        parts += [("num_warps", str(num_warps)), ("num_stages", str(num_stages)),
                  ("maxnreg", str(maxnreg)), ("enable_fp_fusion", str(bool(fp_fusion))),
                  ("device", _HOST_ARCH if host else "gpu"), ("debug", str(bool(debug)))]
        arch = _HOST_ARCH if host else _device_arch(device)
        tma, attention_tiles = _tma_pointer_tiles(arch), _tma_attention_tiles(arch)
        parts.append(("tma_pointer_tiles", str(tma)))
        parts.append(("tma_attention_tiles", str(attention_tiles)))
        key = hashlib.sha256(repr((frontend_version(), self.cache_key, self._locations(), arch,
                                   parts)).encode()).hexdigest()
        cached = load_ir(key)
        globals_used = {}
        if cached is not None:
            text, arg_params = cached
            source = _C.KernelSource(text)
            origin = "IR from the disk cache"
        else:
            from ..compiler import CodeGenerator
            gen = CodeGenerator(self.info, debug=debug)
            gen.num_warps = num_warps  # extra.cuda.num_warps()/num_threads() are constexprs
            gen.target_arch = arch  # tl.target_info.current_target()
            gen.tma_pointer_tiles = tma
            gen.tma_attention_tiles = attention_tiles
            source, arg_params = gen.generate(specs, values)
            globals_used = gen.globals_used
            store_ir(key, source.text, arg_params)
            origin = "built"
        try:
            # The module and the options travel apart (the host backend has no register
            # cap and no rings: maxnreg and num_stages are GPU-only).
            handle = _C.jit_load(source, num_warps=num_warps, num_stages=num_stages,
                                 maxnreg=0 if host else (maxnreg or 0), fp_fusion=fp_fusion,
                                 debug=debug, host=host,
                                 device=device)
        except _C.BuildError as e:
            raise _build_error(self.info.name, e) from None
        checks = {(id(g), n): (g, n, v) for g, n, v in self._dep_globals or []}
        # Plain globals the kernel may have read (their values are in the key): checked at
        # every launch like the ones the code generator saw, also when the IR came from disk.
        checks.update({(id(g), n): (g, n, g[n]) for g, n, _ in plain if n in g})
        checks.update(globals_used)
        constants, signature = _split_specs(names, specs, values)
        # The variant keeps the module's text (printed for the JIT's key), not the module:
        # a built module holds its front-end session's MLIRContext (~0.8 MiB a variant, which
        # autotuning multiplies). `asm` recompiles from the text when asked.
        compiled = CompiledKernel(self.info.name, _C.KernelSource(source.text), arch, num_warps,
                                  num_stages, signature, constants, handle, debug=debug,
                                  maxnreg=maxnreg, enable_fp_fusion=fp_fusion)
        # Triton's metadata.shared: all the shared memory a block uses, the static (ops'
        # scratch) and the dynamic (the dots' rings); 0 on the host backend.
        compiled.metadata.dynamic_shared = getattr(handle, "shared_bytes", 0)
        compiled.metadata.shared = compiled.metadata.dynamic_shared + \
            getattr(handle, "static_shared_bytes", 0)
        self._log(parts, origin, time.perf_counter() - t0)
        return handle, list(arg_params), list(checks.values()), compiled

    def _log(self, parts, origin, seconds):
        n = len(self._keys) + 1
        if not self._keys:
            why = "first variant: " + " ".join(f"{k}={v}" for k, v in parts)
        else:
            def diff(old):
                return [(k, a, b) for (k, a), (_, b) in zip(old, parts) if a != b]
            changes = min((diff(old) for old in self._keys), key=len)
            what = []
            for k, a, b in changes:
                kind = "launch option" if k in ("num_warps", "num_stages", "maxnreg", "device",
                                                "debug", "enable_fp_fusion") else \
                    "constexpr" if self.info.arg_names.count(k) and \
                    k in self.info.constexpr_params else "specialization"
                what.append(f"{k} {a} -> {b} ({kind})")
            why = "new " + "; ".join(what) if what else "same key (cache cleared)"
        self._keys.append(parts)
        line = f"kiln: compiled {self.info.name} variant {n} in {seconds * 1e3:.1f} ms " \
               f"({origin}): {why}"
        self.compile_log.append(line)
        if os.environ.get("KILN_LOG_COMPILES", "0") not in ("", "0"):
            print(line, file=sys.stderr)

    # --- Triton's entry points ----------------------------------------------------------

    def run(self, *args, grid, warmup=False, **kwargs):
        """kernel.run(*args, grid=grid, **kwargs): kernel[grid](*args, **kwargs)."""
        if warmup:
            return self.warmup(*args, grid=grid, **kwargs)
        return self._launch(grid, *args, **kwargs)

    def warmup(self, *args, grid=None, **kwargs):
        """Compiles (and loads) the variant these arguments select, without launching; the
        CompiledKernel it returns launches as ``compiled[grid](*all_args)`` (Triton's)."""
        compiled = self._launch((0,), *args, **kwargs)
        if isinstance(compiled, CompiledKernel):
            names = set(self.info.arg_names[:len(args)])
            compiled._launch_target = (self, {k: v for k, v in kwargs.items() if k not in names})
        return compiled

    @property
    def num_variants(self):
        return self._num_variants()


def jit(fn=None, *, do_not_specialize=None, do_not_specialize_on_alignment=None, debug=None,
        noinline=None, repr=None, launch_metadata=None, device=None):
    """Decorator: compile a function written with kiln.language as a kernel.

    device: "gpu" or "cpu" (the host backend: kernels take numpy arrays and CPU tensors and
    run on this machine's CPU); None: $KILN_BACKEND, else the GPU when there is one (or
    $KILN_ARCH is set), else the CPU. A launch may also pass device=... .
    debug: compile with tl.device_assert active and, on the CPU backend, every unmasked load
    and store checked against the launch's arrays; None: $KILN_DEBUG=1. A launch may also
    pass debug=... ."""
    def decorator(f):
        return JITFunction(f, do_not_specialize=do_not_specialize,
                           do_not_specialize_on_alignment=do_not_specialize_on_alignment,
                           debug=debug, noinline=noinline, repr=repr,
                           launch_metadata=launch_metadata, device=device)
    return decorator(fn) if fn is not None else decorator


# ---------------------------------------------------------------------------------------
# kiln.compile: ahead of time, no GPU needed
# ---------------------------------------------------------------------------------------

def _descriptor_spec(where, s):
    """Triton's signature spelling of a tensor descriptor, "tensordesc<fp16[64, 64]>", as the
    launcher's spec "tensordesc:fp16:64x64:--" (extents not known to be multiples of 16)."""
    m = re.fullmatch(r"tensordesc<\s*(\w+)\s*\[([\d,\s]+)\]\s*>", s)
    if not m:
        raise TypeError(f"kiln.compile: {where}: expected a tensor descriptor "
                        f"spelled 'tensordesc<fp16[64, 64]>', found '{s}'")
    block = [int(b) for b in m.group(2).split(",") if b.strip()]
    if not 1 <= len(block) <= 5 or any(b <= 0 or b & (b - 1) for b in block):
        raise TypeError(f"kiln.compile: {where}: expected a block of rank 1 to 5 whose sizes are "
                        f"powers of two, found {block} in '{s}'")
    try:
        d = lc.str_to_ty(m.group(1))
    except ValueError:
        raise TypeError(f"kiln.compile: {where}: unknown element type "
                        f"'{m.group(1)}' in '{s}'") from None
    return f"tensordesc:{d.name}:{'x'.join(map(str, block))}:{'-' * len(block)}"


def _spec_from_signature(where, s):
    if isinstance(s, (tuple, list)):  # a tuple parameter: its elements' types (nested too)
        elems = [_spec_from_signature(f"{where}[{k}]", e) for k, e in enumerate(s)]
        if any(e.startswith("tensordesc") for e in elems):
            raise TypeError(f"kiln.compile: {where}: expected a tuple of scalars, pointers and "
                            f"tuples of them (no tensor descriptors inside), found {s!r}")
        return "(" + ",".join(elems) + ")"
    if not isinstance(s, str):
        s = str(s)
    s = s.strip()
    if s.startswith("tensordesc"):
        return _descriptor_spec(where, s)
    ty, _, div = s.partition(":")
    try:
        d = lc.str_to_ty(ty)
    except ValueError:
        raise TypeError(f"kiln.compile: {where}: unknown type '{s}' (expected "
                        f"'*fp32', 'i32', 'fp16', ... with an optional ':16')") from None
    if div and div not in ("16", "1"):
        raise TypeError(f"kiln.compile: {where}: expected ':16' (divisibility) or "
                        f"':1', found ':{div}'")
    short = {"int1": "i1", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64",
             "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64"}
    if isinstance(d, lc.pointer_type):
        spelled = "*" + d.element_ty.name
    else:
        spelled = short.get(d.name, d.name)
    return spelled + (":" + div if div else "")


def compile(fn, signature, constexprs=None, target=None, num_warps=4, num_stages=3,
            maxnreg=None, enable_fp_fusion=True):
    """Compiles `fn` ahead of time for `target` ("sm_90"; the GPU's when None) and returns a
    CompiledKernel whose ``asm`` holds "kiln", "llvm", "ptx" and, where nvJitLink is
    available, "cubin". `signature` maps parameters to types ("*fp32", "i32", "fp16";
    ":16" declares 16-divisibility like Triton's specialization); `constexprs` maps
    tl.constexpr parameters to values; `maxnreg` (16..255) caps the registers per thread
    on the GPU; `enable_fp_fusion=False` keeps floating-point mul and add apart (Triton's
    option; on by default, as there)."""
    if not isinstance(fn, JITFunction):
        raise TypeError("kiln.compile expects a @kiln.jit function")
    maxnreg = _check_maxnreg(fn.info.name, maxnreg)
    _check_num_warps(fn.info.name, num_warps)
    constexprs = dict(constexprs or {})
    signature = dict(signature or {})
    specs, values = [], []
    for name in fn.info.arg_names:
        if name in constexprs:
            specs.append("constexpr")
            values.append(constexprs.pop(name))
        elif name in signature:
            s = signature.pop(name)
            where = f"kernel '{fn.info.name}', parameter '{name}'"
            if s == "constexpr" or name in fn.info.constexpr_params:
                raise TypeError(f"kiln.compile: {where} is a tl.constexpr: give its value in "
                                f"constexprs, not a type in signature")
            specs.append(_spec_from_signature(where, s))
            values.append(None)
        else:
            p = fn.info.signature.parameters[name]
            if p.default is not p.empty and name in fn.info.constexpr_params:
                specs.append("constexpr")
                values.append(p.default)
                continue
            raise TypeError(f"kiln.compile: parameter '{name}' of '{fn.info.name}' needs a "
                            f"type in signature or a value in constexprs")
    extra = set(signature) | set(constexprs)
    if extra:
        raise TypeError(f"kiln.compile: '{fn.info.name}' has no parameters {sorted(extra)}")
    if target is None:
        target = _device_arch() if _C.has_gpu() else "sm_90"
    from ..compiler import CodeGenerator
    gen = CodeGenerator(fn.info)
    gen.num_warps = num_warps
    gen.target_arch = target
    gen.tma_pointer_tiles = _tma_pointer_tiles(target)
    gen.tma_attention_tiles = _tma_attention_tiles(target)
    source, _ = gen.generate(specs, values)
    try:
        r = _C.compile_module(source, target, num_warps=num_warps, num_stages=num_stages,
                              maxnreg=maxnreg or 0, fp_fusion=bool(enable_fp_fusion),
                              cubin=True)
    except _C.BuildError as e:
        raise _build_error(fn.info.name, e) from None
    asm = {"kiln": source.text, "llvm": r["llvm"], "ptx": r["ptx"]}
    if r["cubin"]:
        asm["cubin"] = r["cubin"]
    constants, sig = _split_specs(fn.info.arg_names, specs, values)
    kernel = CompiledKernel(r["name"], source, target, num_warps, num_stages, sig, constants,
                            asm=asm, maxnreg=maxnreg, enable_fp_fusion=bool(enable_fp_fusion))
    kernel.metadata.dynamic_shared = r["shared"]
    kernel.metadata.shared = r["shared"] + r.get("static_shared", 0)
    kernel.metadata.tma_box_rows = list(r["tma_box_rows"])
    return kernel
