"""kiln.compiler: the @kiln.jit front end's code generator (the Python AST of a kernel to
kiln::Builder calls), as triton.compiler.code_generator. kiln.compile, which compiles a kernel
ahead of time, is in kiln.runtime.jit beside the JIT."""

from .code_generator import CodeGenerator

__all__ = ["CodeGenerator"]
