"""The engine step's contract, shared by every engine: the typed engine inputs and their
arrays, TensorRT-LLM's word-list layout, checks against the engine's limits, the in-flight
batching step loop over a generation backend, and the llm_* metrics it records."""
