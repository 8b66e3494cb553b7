"""Special registers, launch geometry and grid dependency control of kiln.language.extra.cuda.

On the CPU backend: globaltimer is the host's real-time clock in nanoseconds, smid the CPU
core running the program (sched_getcpu), num_threads/num_warps the same constexprs as on the
GPU (the program itself runs on one CPU thread), and gdc_wait/gdc_launch_dependents do nothing
(the host runs launches one after another)."""

from ...core import _gen, _wrap, builtin, constexpr


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
