"""One folder per engine behind the engine step: openvino (the CPU engine), relay (in front of
TensorRT-LLM's C++ backend, and the BLS dataflow) and pytorch (TensorRT-LLM's LLM API).  The CPU
stand-ins for the C++ backend and the LLM API are test doubles in `standins/`, not here."""
