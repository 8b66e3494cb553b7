"""kiln_models: LLM inference on Kiln kernels (issue #24): a Llama-architecture decoder whose hot
path is Kiln kernels only, running on the GPU and on the CPU backend. See docs/models.md."""
