"""One folder per engine behind the engine step: openvino (the CPU engine), relay (in front of
TensorRT-LLM's C++ backend, and the BLS dataflow), pytorch (TensorRT-LLM's LLM API) and
trtllm_standin (a CPU stand-in for the C++ backend, with its request semantics)."""
