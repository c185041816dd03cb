"""TensorRT-LLM's PyTorch backend (LLM API, no engine compile): the spec section, the plan, the build, and the
`tensorrt_llm_pytorch` model repository."""
