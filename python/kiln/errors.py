"""Kiln's exceptions: CompilationError for user errors in kernels, KilnError for run-time
failures (no GPU, CUDA errors, launch errors)."""

from ._C import KilnError  # noqa: F401  (RuntimeError subclass raised by the C++ runtime)

__all__ = ["CompilationError", "KilnError"]


class CompilationError(Exception):
    """A user error in a @kiln.jit kernel, at a source location.

    Attributes: ``kernel`` (the kernel being compiled), ``file``, ``line`` (1-based),
    ``column`` (1-based), ``message`` (what was expected and found), ``source_line`` (the
    line's text) and ``notes`` (e.g. the call sites of inlined functions).
    """

    def __init__(self, kernel, file, line, column, message, source_line=None, notes=()):
        self.kernel = kernel
        self.file = file
        self.line = line
        self.column = column
        self.message = message
        self.source_line = source_line
        self.notes = list(notes)
        super().__init__(self._format())

    def add_note_line(self, note):
        self.notes.append(note)
        self.args = (self._format(),)

    def _format(self):
        where = f"{self.file}:{self.line}:{self.column}: " if self.file else ""
        kernel = f"in kernel '{self.kernel}': " if self.kernel else ""
        text = f"{where}error: {kernel}{self.message}"
        if self.source_line is not None:
            src = self.source_line.rstrip("\n")
            text += f"\n    {src}\n    {' ' * max(self.column - 1, 0)}^"
        for note in self.notes:
            text += f"\nnote: {note}"
        return text

    def __str__(self):
        return self.args[0] if self.args else self._format()

    def __reduce__(self):
        return (CompilationError, (self.kernel, self.file, self.line, self.column, self.message,
                                   self.source_line, self.notes))
