"""Which names of triton.language (Triton 3.6) Kiln's Python tests exercise, on the CPU
backend and on the GPU.

Run it as a script (``python test/python/language_names.py [-v]``) for a table and the
summary line; test_language_names.py checks it in CI.

TRITON_NAMES is written here from Triton's documentation and sources read through the
project's search tool (names only): the ``__all__`` of triton.language (its
python/triton/language/__init__.py), the functions of triton.language.math, the ``__all__`` of
triton.language.extra.cuda, and ``constexpr_function`` (named by issue 22). The revision read
is recent; a few names may postdate 3.6 (they then show as names Kiln lacks, not failures).
libdevice's ~200 functions count as one name, ``extra.cuda.libdevice`` (test_libdevice.py
checks them one by one).

How a test is found to exercise a name (a simple, sound-enough heuristic):
- only test/python/test_*.py is read, with ``ast`` (never imported); a test is a function
  named ``test_*`` at module level or in a ``Test*`` class, counted once whatever its
  parametrization;
- a name is used by a function when its body (nested kernels included) spells
  ``tl.NAME``, ``tl.math.NAME``, ``tl.extra.cuda.NAME`` / ``tl.extra.libdevice.NAME`` (any
  alias bound by ``import kiln.language as ...``, or ``kiln.language.`` spelled out), or a
  name imported ``from kiln.language[...] import ...``, or ``tl.NAME`` in the source of a
  script the test runs in a subprocess (a string holding ``import kiln.language as tl``);
  tensor methods (``x.sum()``) and operators do not count;
- a test exercises what it uses and what every module-level function or variable it
  references uses, transitively (the @kiln.jit kernels it launches or compiles, their @jit
  helpers, the module's launch helpers, tables of cases), within its file;
- GPU: the test is marked ``pytest.mark.gpu`` or ``gpu2`` (its decorators, its class's, or
  the module's ``pytestmark``); a test parametrized with gpu-marked parameters
  (``pytest.param("gpu", marks=pytest.mark.gpu)``) counts on both; CPU: every other test (it runs in CI without a GPU: the CPU backend, or a
  compile-only or error check).
"""
import ast
import os
import re
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
_GPU_MARK = re.compile(r"mark\.gpu2?\b")  # the `gpu` and `gpu2` markers (conftest.py)
_SCRIPT_NAME = re.compile(r"\btl\.((?:math\.|extra\.(?:cuda\.)?)?\w+)")

# triton.language.__all__ (sorted as Triton lists it)
TRITON_TOP = """
PropagateNan TRITON_MAX_TENSOR_NUMEL load_tensor_descriptor store_tensor_descriptor
make_tensor_descriptor tensor_descriptor abs add advance arange argmax argmin associative_scan
assume atomic_add atomic_and atomic_cas atomic_max atomic_min atomic_or atomic_xchg atomic_xor
bfloat16 bitonic_merge block_type broadcast broadcast_to cat cast cdiv ceil clamp condition
const constexpr constexpr_type cos cumprod cumsum debug_barrier device_assert device_print
div_rn dot dot_scaled dtype erf exp exp2 expand_dims extra fdiv flip float16 float32 float64
float8e4b15 float8e4nv float8e4b8 float8e5 float8e5b16 floor fma full gather histogram
inline_asm_elementwise interleave int1 int16 int32 int64 int8 join load log log2
make_block_ptr map_elementwise math max max_constancy max_contiguous maximum min minimum mul
multiple_of num_programs pair_uniform_to_normal permute philox philox_impl pi32_t pointer_type
program_id rand rand4x randint randint4x randn randn4x range ravel reduce reduce_or reshape
rsqrt slice sigmoid sin softmax sort split sqrt sqrt_rn squeeze static_assert static_print
static_range store sub sum swizzle2d target_info tensor topk to_tensor trans tuple uint16
uint32 uint64 uint8 uint_to_uniform_float umulhi unsqueeze view void where xor_sum zeros
zeros_like
constexpr_function
""".split()
# triton.language.math
TRITON_MATH = """umulhi exp exp2 fma log log2 cos rsqrt sin sqrt sqrt_rn abs fdiv div_rn erf
floor ceil""".split()
# triton.language.extra.cuda.__all__
TRITON_CUDA = """libdevice globaltimer num_threads num_warps smid convert_custom_float8_sm70
convert_custom_float8_sm80 gdc_launch_dependents gdc_wait""".split()
TRITON_NAMES = (TRITON_TOP + ["math." + n for n in TRITON_MATH] +
                ["extra.cuda." + n for n in TRITON_CUDA])

# Public names of kiln.language that Triton's __all__ does not list, and why they exist.
KILN_ONLY = {
    "builtin": "Triton's decorator of language functions (triton.language.core.builtin), "
               "reachable there too but not in __all__",
    "block_pointer": "the type of tl.make_block_ptr's result (Triton's is a tensor of a "
                     "pointer to a block type)",
    "str_to_ty": "Triton's triton.language.str_to_ty (a module function, not in __all__)",
    "random": "the module triton.language.random (imported by triton.language too)",
}

# Names Kiln tests on neither backend yet, with the reason (test_language_names.py fails on
# a Kiln name without a CPU test unless it is here).
NO_CPU_TEST = {}


def kiln_public_names():
    """kiln.language's public names: what dir() shows, without its submodules other than
    those Triton exposes (math, extra, random, target_info)."""
    import kiln.language as tl
    out = set()
    for n in dir(tl):
        if n.startswith("_"):
            continue
        if isinstance(getattr(tl, n), types.ModuleType) and n not in ("math", "extra",
                                                                        "random",
                                                                        "target_info"):
            continue
        out.add(n)
    import kiln.language.math as tm
    out |= {"math." + n for n in TRITON_MATH if hasattr(tm, n)}
    import kiln.language.extra.cuda as cuda
    out |= {"extra.cuda." + n for n in TRITON_CUDA if hasattr(cuda, n)}
    return out


# ----------------------------------------------------------------------------- scanning

def _chain(node):
    """['tl', 'math', 'exp'] for the expression tl.math.exp; None if not a name chain."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return parts[::-1]
    return None


def _language_name(parts):
    """The TRITON_NAMES entry of a chain below kiln.language (['math', 'exp'] -> 'math.exp'),
    the module entry for a bare module, or None."""
    if not parts:
        return None
    if parts[0] == "math":
        return "math." + parts[1] if len(parts) > 1 else "math"
    if parts[0] == "extra":
        rest = parts[1:]
        if rest[:1] == ["cuda"]:
            rest = rest[1:]
        if not rest:
            return "extra"
        if rest[0] == "libdevice":
            return "extra.cuda.libdevice"
        return "extra.cuda." + rest[0]
    return parts[0]


class _Module:
    """One test file: its aliases of kiln.language, its functions and their uses."""

    def __init__(self, path):
        with open(path) as f:
            self.tree = ast.parse(f.read(), path)
        self.aliases = {}  # local name -> path below kiln.language (list)
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name == "kiln.language" or a.name.startswith("kiln.language."):
                        if a.asname:
                            self.aliases[a.asname] = a.name.split(".")[2:]
            elif isinstance(node, ast.ImportFrom) and node.module:
                mod = node.module.split(".")
                if mod[:2] == ["kiln", "language"] or mod == ["kiln"]:
                    for a in node.names:
                        below = mod[2:] + [a.name] if mod[:2] == ["kiln", "language"] else \
                            ([] if a.name == "language" else None)
                        if below is not None:
                            self.aliases[a.asname or a.name] = below
        self.functions = {}  # module-level functions and assigned names -> their nodes
        self.tests = []  # (name, node, gpu)
        module_gpu = self._module_gpu()
        for node in self.tree.body:
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name):
                            self.functions[n.id] = node
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.functions[node.name] = node
                if node.name.startswith("test_"):
                    self.tests.append((node.name, node, module_gpu or self._gpu(node)))
            elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
                cls_gpu = module_gpu or self._gpu(node)
                for m in node.body:
                    if isinstance(m, ast.FunctionDef) and m.name.startswith("test_"):
                        self.tests.append((f"{node.name}.{m.name}", m,
                                           cls_gpu or self._gpu(m)))
        self._uses = {}

    def _gpu(self, node):
        """True: marked gpu; "both": some parameters are gpu-marked (pytest.param(...,
        marks=pytest.mark.gpu), in the decorator or a module-level list it names), the
        others run without a GPU; False: no GPU."""
        if _marked_gpu(node):
            return True
        for d in node.decorator_list:
            text = ast.unparse(d)
            for n in ast.walk(d):
                if isinstance(n, ast.Name) and isinstance(self.functions.get(n.id), ast.Assign):
                    text += ast.unparse(self.functions[n.id])
            if "parametrize" in text and re.search(r"marks=.*mark\.gpu", text):
                return "both"
        return False

    def _module_gpu(self):
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
                return bool(_GPU_MARK.search(ast.unparse(node.value)))
        return False

    def uses(self, node):
        """(language names, referenced module-level function names) of a function."""
        key = id(node)
        if key in self._uses:
            return self._uses[key]
        names, refs = set(), set()
        for n in ast.walk(node):
            if isinstance(n, ast.Attribute):
                parts = _chain(n)
                if parts and parts[0] in self.aliases:
                    name = _language_name(self.aliases[parts[0]] + parts[1:])
                    if name:
                        names.add(name)
                elif parts and parts[:2] == ["kiln", "language"]:
                    name = _language_name(parts[2:])
                    if name:
                        names.add(name)
            elif isinstance(n, ast.Constant) and isinstance(n.value, str) and \
                    "import kiln.language as tl" in n.value:
                # the source of a script the test runs in a subprocess (as test_gpu_debug.py
                # does): its kernels spell the names through `tl`
                for chain in _SCRIPT_NAME.findall(n.value):
                    name = _language_name(chain.split("."))
                    if name:
                        names.add(name)
            elif isinstance(n, ast.Name):
                if n.id in self.aliases and self.aliases[n.id]:
                    name = _language_name(self.aliases[n.id])
                    if name:
                        names.add(name)
                if n.id in self.functions:
                    refs.add(n.id)
        self._uses[key] = (names, refs)
        return names, refs

    def exercised(self, test_node):
        """The language names a test exercises, through the functions it references."""
        seen, todo, names = set(), [test_node], set()
        while todo:
            node = todo.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            n, refs = self.uses(node)
            names |= n
            todo.extend(self.functions[r] for r in refs)
        return names


def _marked_gpu(node):
    return any(_GPU_MARK.search(ast.unparse(d)) for d in node.decorator_list)


def scan(test_dir=HERE):
    """{name: [cpu tests], [gpu tests]} over TRITON_NAMES and the names tests use, and the
    number of tests read."""
    cover = {}
    total = 0
    for fname in sorted(os.listdir(test_dir)):
        if not (fname.startswith("test_") and fname.endswith(".py")):
            continue
        mod = _Module(os.path.join(test_dir, fname))
        for test, node, gpu in mod.tests:
            total += 1
            for name in mod.exercised(node):
                cpu_tests, gpu_tests = cover.setdefault(name, ([], []))
                if gpu:
                    gpu_tests.append(f"{fname}::{test}")
                if gpu != True:  # noqa: E712  ("both" counts for each)
                    cpu_tests.append(f"{fname}::{test}")
    return cover, total


def report(verbose=False):
    """Prints a line per Triton name (with -v) and the summary line; returns the numbers."""
    cover, total = scan()
    kiln_names = kiln_public_names()
    rows = []
    for name in TRITON_NAMES:
        cpu_tests, gpu_tests = cover.get(name, ([], []))
        rows.append((name, name in kiln_names, len(cpu_tests), len(gpu_tests)))
    if verbose:
        for name, has, c, g in rows:
            print(f"{name:34} {'kiln' if has else 'MISSING':8} cpu {c:4}  gpu {g:4}")
    n = len(rows)
    m = sum(1 for r in rows if r[2])
    k = sum(1 for r in rows if r[3])
    missing = [r[0] for r in rows if not r[1]]
    print(f"{n} names, {m} with CPU tests, {k} with GPU tests, {total} tests "
          f"(Kiln lacks {len(missing)}: {' '.join(missing)})")
    return n, m, k, total, missing


if __name__ == "__main__":
    sys.path.insert(0, os.path.join(HERE, "..", "..", "build", "python"))
    report(verbose="-v" in sys.argv)
