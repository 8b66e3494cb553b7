"""kiln_models.ops: the kernels of the model's hot path and their host functions. Each
function launches kernels only (outputs and scratch preallocated, no host sync), on numpy
arrays (CPU backend) or kiln.DeviceArray / torch CUDA tensors (GPU)."""
