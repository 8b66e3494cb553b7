"""The error-location helpers the language tests share: a kernel marks the line where its
CompilationError is expected with a `# ERR` comment (or another marker), and the tests check
the error names the kernel and that line."""
import inspect
import re

import pytest

import kiln


def marker_line(fn, marker="# ERR"):
    """The source line of @kiln.jit `fn` that holds `marker` (the first one)."""
    lines, start = inspect.getsourcelines(fn.fn)
    hits = [start + i for i, line in enumerate(lines) if marker in line]
    assert hits, f"no {marker} in {fn.__name__}"
    return hits[0]


def expect_error(fn, signature, message, constexprs=None):
    """Compiles `fn` (kiln.compile, `signature`, `constexprs`): a CompilationError naming the
    kernel, at its `# ERR` line, whose message matches `message` (a regular expression)."""
    with pytest.raises(kiln.CompilationError) as info:
        kiln.compile(fn, signature=signature, constexprs=constexprs or {})
    err = info.value
    assert err.kernel == fn.__name__
    assert err.line == marker_line(fn), str(err)
    assert re.search(message, err.message), err.message
    return err
