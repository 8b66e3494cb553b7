"""Shapes and tolerances shared by the LLM-kernel tests on the GPU (test_llm_kernels.py,
against torch) and on the CPU backend (test_cpu.py, against numpy): both run the same kernels
of kernels/python/kiln_kernels on the same shapes, row lengths that are not powers of two
included. Errors are ||out - ref|| / ||ref|| against fp64 references."""

TOL = {"float32": 1e-5, "bfloat16": 1e-2}

# (shape, max_fused): max_fused forces the looped kernel on short rows
SOFTMAX_SHAPES = [((37, 1000), None), ((8, 1024), None), ((61, 100), None),
                  ((5, 3, 4099), None), ((16, 20000), None), ((6, 70001), None), ((9, 5000), 1024)]
NORM_SHAPES = [(64, 4096), (37, 1000), (3, 7, 2051), (300, 8192)]
CE_SHAPES = [(32, 1000), (17, 32000), (8, 50257), (4, 4096)]  # (rows, vocab)
KL_SHAPES = [(32, 1000), (8, 32000), (3, 5, 4097)]
KL_REDUCTIONS = ["batchmean", "sum", "mean", "none"]
SWIGLU_SHAPES = [(4, 128, 1000), (2, 11008), (1, 3, 14336), (7,)]
ROPE_SHAPES = [(2, 64, 8, 2, 128), (1, 37, 5, 5, 80), (3, 19, 32, 8, 64),
               (2, 16, 3, 1, 96)]  # (B, S, Hq, Hk, D)

# The CPU backend's tests (test_cpu.py) run the same kernels on shapes whose tiles stay at or
# below 4096 elements: compiling a tile for the host takes time that grows faster than its size
# (softmax fp32 forward, measured on the 2-core dev machine: BLOCK 1024 0.2 s, 2048 0.4 s, 4096
# 1.1 s, 8192 4.2 s). The looped kernels are reached with smaller tile caps instead of longer
# rows (max_fused; CPU_CE_BLOCK).
CPU_SOFTMAX_SHAPES = [((37, 1000), None), ((8, 1024), None), ((61, 100), None),
                      ((5, 3, 2051), None), ((9, 5000), 1024), ((6, 7001), 2048)]
CPU_NORM_SHAPES = [(64, 1024), (37, 1000), (3, 7, 2051), (130, 4000)]
CPU_CE_SHAPES = [(32, 1000), (9, 5003), (4, 4096)]
CPU_CE_BLOCK = 2048  # vocabulary tile cap on the CPU (the GPU's is 16384)
CPU_KL_SHAPES = [(32, 1000), (3, 5, 4097)]
