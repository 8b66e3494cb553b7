"""Shared helpers for the Kiln LLM kernels: launch heuristics and the optional torch import."""
import kiln

try:  # the kernels compile without torch (kiln.compile); the autograd wrappers need it
    import torch
except ImportError:  # pragma: no cover - exercised on machines without torch
    torch = None

MAX_FUSED_SIZE = 32768  # longest row kept in one tile; longer rows loop over tiles


def next_power_of_2(n):
    return kiln.next_power_of_2(int(n))


def num_warps_for(block):
    """Warps per program for a row tile of `block` elements (Liger/Triton tutorial heuristic,
    capped at 16)."""
    if block >= 8192:
        return 16
    if block >= 2048:
        return 8
    return 4


def row_block(n_cols, max_fused=MAX_FUSED_SIZE):
    """(BLOCK, single_tile) for a row of n_cols elements."""
    block = next_power_of_2(n_cols)
    if block <= max_fused:
        return block, True
    return max_fused, False


def as_2d(x):
    """A contiguous-last-dim 2-D view [rows, cols] of x."""
    x2 = x.reshape(-1, x.shape[-1])
    if x2.stride(-1) != 1:
        x2 = x2.contiguous()
    return x2


def require_torch():
    if torch is None:
        raise RuntimeError("kiln_kernels' autograd wrappers need torch")
    return torch


def matrix_descriptor(rows, cols, block_rows):
    """A function of a contiguous tensor of rows * cols elements (of any rank): its
    kiln.TensorDescriptor as a (rows, cols) matrix read in (block_rows, cols) blocks. Kiln's
    lists are built and checked here, once (TensorDescriptor.with_base rebases them per
    call); a library whose descriptor class has no with_base (Triton's, in bench's twins of
    these modules) builds one per call over the tensor's (rows, cols) view."""
    TD = kiln.TensorDescriptor
    shape, strides, block = [rows, cols], [cols, 1], [block_rows, cols]
    if hasattr(TD, "with_base"):
        return TD(None, shape=shape, strides=strides, block_shape=block).with_base
    return lambda x: TD(x.view(rows, cols), shape=shape, strides=strides, block_shape=block)
