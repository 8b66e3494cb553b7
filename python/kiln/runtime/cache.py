"""kiln.runtime.cache: the front end's disk cache and the version its keys carry.

A @kiln.jit miss looks here before it runs the code generator: the key (the front end's
version, the kernel's source and callees, its specialization and launch options) names the
kernel's IR and the indices of the parameters it takes, stored as JSON under
``$KILN_CACHE_DIR/ir``. The compiled code itself is cached by the C++ runtime (its own
directories under the same root); the autotuner's choices under ``$KILN_CACHE_DIR/autotune``
(kiln.runtime.autotuner), keyed by the same front-end version.
"""

import functools
import hashlib
import json
import os

from .. import _C

__all__ = ["frontend_version", "ir_cache_dir", "load_ir", "store_ir"]


@functools.lru_cache(maxsize=None)
def frontend_version():
    """Identifies this front end: the library build, the extension and the package sources."""
    h = hashlib.sha256(_C.build_id().encode())
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the kiln package
    for root, _, files in sorted(os.walk(here)):
        for f in sorted(files):
            if f.endswith(".py"):
                with open(os.path.join(root, f), "rb") as fh:
                    h.update(f.encode() + b"\0" + fh.read())
    try:
        st = os.stat(_C.__file__)
        h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    except OSError:
        pass
    return h.hexdigest()


# ---------------------------------------------------------------------------------------
# Front-end disk cache: key (source, callees, specialization, options) -> kernel IR
# ---------------------------------------------------------------------------------------

def ir_cache_dir():
    return os.path.join(_C.cache_dir(), "ir")


def load_ir(key):
    """(the kernel's MLIR text, its arg_params) stored under `key`, or None."""
    try:
        with open(os.path.join(ir_cache_dir(), key + ".json"), encoding="utf-8") as f:
            d = json.load(f)
        if d.get("key") != key:
            return None
        return d["mlir"], d["arg_params"]
    except (OSError, ValueError, KeyError):
        return None


def store_ir(key, mlir, arg_params):
    """Stores a kernel's IR under `key` (written to a temporary file, then renamed)."""
    d = ir_cache_dir()
    try:
        os.makedirs(d, exist_ok=True)
        tmp = os.path.join(d, f"{key}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"key": key, "mlir": mlir, "arg_params": arg_params}, f)
        os.replace(tmp, os.path.join(d, key + ".json"))
    except OSError:
        pass  # a cache that cannot be written only costs a rebuild
