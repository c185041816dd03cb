"""TensorRT-LLM's TensorRT-engine flow: the spec section and its rules (upstream's, from the conformance tables), the
plan, the build, and the `tensorrt_llm` model repository."""
