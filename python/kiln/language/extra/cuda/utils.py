"""Special registers, launch geometry and grid dependency control of kiln.language.extra.cuda.

On the CPU backend: globaltimer is the host's real-time clock in nanoseconds, smid the CPU
core running the program (sched_getcpu), num_threads/num_warps the same constexprs as on the
GPU (the program itself runs on one CPU thread), and gdc_wait/gdc_launch_dependents do nothing
(the host runs launches one after another). convert_custom_float8_sm70/_sm80 convert to and
from tl.float8e4b15, which has no format in Kiln: calling them is a CompilationError."""

from ...core import _dtype, _gen, _t, _unwrap, _wrap, builtin, constexpr, no_format


@builtin
def globaltimer():
    """The GPU's global nanosecond timer (%globaltimer), as int64."""
    return _wrap(_gen().session.hardware_register("globaltimer"))


@builtin
def smid():
    """The index of the multiprocessor running this program (%smid), as int32."""
    return _wrap(_gen().session.hardware_register("smid"))


@builtin
def num_warps():
    """The launch's num_warps, a constexpr."""
    return constexpr(getattr(_gen(), "num_warps", 4))


@builtin
def num_threads():
    """Threads per program, num_warps * 32, a constexpr."""
    return constexpr(getattr(_gen(), "num_warps", 4) * 32)


@builtin
def gdc_wait():
    """Wait until the grids this launch depends on (programmatic dependent launch) have
    completed and their writes are visible (griddepcontrol.wait on sm_90 and later; nothing on
    older GPUs, without dependent launch, and on the CPU backend)."""
    _gen().session.grid_dependency(True)


@builtin
def gdc_launch_dependents():
    """Allow the dependent grid to start launching once every program has called this or
    finished (griddepcontrol.launch_dependents on sm_90 and later; nothing elsewhere)."""
    _gen().session.grid_dependency(False)


def _custom_float8(what, arg, dst_ty, fp_downcast_rounding):
    # Triton's helpers convert float16/float32 to tl.float8e4b15 and back (PTX bit tricks);
    # Kiln has no float8e4b15 values, so the conversion is refused whichever way it goes.
    src = _t(arg).dtype.scalar
    if src.is_fp8e4b15():
        no_format(src, what)
    if src.name in ("fp16", "fp32"):
        _dtype(dst_ty, what)  # raises for float8e4b15, the one target Triton converts to
    raise TypeError(f"{what}: expected a conversion between tl.float16/tl.float32 and "
                    f"tl.float8e4b15, found {src} to {_unwrap(dst_ty)}")


@builtin
def convert_custom_float8_sm80(arg, dst_ty, fp_downcast_rounding=None):
    """Triton's float16/float32 <-> tl.float8e4b15 conversion for sm_80 and later: a
    CompilationError in Kiln (tl.float8e4b15 has no format here)."""
    _custom_float8("tl.extra.cuda.convert_custom_float8_sm80", arg, dst_ty,
                   fp_downcast_rounding)


@builtin
def convert_custom_float8_sm70(arg, dst_ty, fp_downcast_rounding=None):
    """Triton's float16/float32 <-> tl.float8e4b15 conversion for sm_70: a CompilationError in
    Kiln (tl.float8e4b15 has no format here)."""
    _custom_float8("tl.extra.cuda.convert_custom_float8_sm70", arg, dst_ty,
                   fp_downcast_rounding)
