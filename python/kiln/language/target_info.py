"""kiln.language.target_info: what kernels may ask about the target they are compiled for
(Triton's triton.language.target_info): current_target() and the constexpr functions is_cuda,
cuda_capability_geq, is_hip, is_hip_cdna3 and is_hip_cdna4.

Inside a kernel the target is the one the kernel is being compiled for (a GPUTarget of backend
"cuda" and arch 90 for sm_90a, or of backend "cpu" for Kiln's CPU backend), so a kernel that
guards inline PTX with ``cuda_capability_geq(9, 0)`` takes its portable branch on the CPU.
Outside a kernel it is the active driver's target (kiln.runtime.driver.active).
"""

from . import core as _core
from .values import constexpr_function

__all__ = ["current_target", "is_cuda", "cuda_capability_geq", "is_hip", "is_hip_cdna3",
           "is_hip_cdna4"]


def current_target():
    """The GPUTarget being compiled for (in a kernel) or the active one; None without one."""
    from ..runtime.driver import GPUTarget
    gen = getattr(_core._state, "gen", None)
    arch = getattr(gen, "target_arch", None) if gen is not None else None
    if arch is not None:
        if arch == "cpu":
            return GPUTarget("cpu", "cpu", 1)
        digits = "".join(c for c in str(arch) if c.isdigit())
        return GPUTarget("cuda", int(digits) if digits else 90, 32)
    try:
        from ..runtime.driver import active
        return active.get_current_target()
    except Exception:  # no driver: as Triton, no target
        return None


@constexpr_function
def is_cuda():
    """True when compiling for an NVIDIA GPU."""
    target = current_target()
    return target is not None and target.backend == "cuda"


@constexpr_function
def cuda_capability_geq(major, minor=0):
    """True when compiling for an NVIDIA GPU of compute capability >= (major, minor)."""
    target = current_target()
    if target is None or target.backend != "cuda":
        return False
    return target.arch >= major * 10 + minor


@constexpr_function
def is_hip():
    """True when compiling for an AMD GPU (never in Kiln)."""
    target = current_target()
    return target is not None and target.backend == "hip"


@constexpr_function
def is_hip_cdna3():
    """True when compiling for gfx942 (never in Kiln)."""
    target = current_target()
    return target is not None and target.arch == "gfx942"


@constexpr_function
def is_hip_cdna4():
    """True when compiling for gfx950 (never in Kiln)."""
    target = current_target()
    return target is not None and target.arch == "gfx950"
