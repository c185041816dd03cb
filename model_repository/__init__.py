"""The Triton models' source, by concern:

- `models/<model>/model.py`: the thin Triton adapters (a rendered repository's model.py imports them);
- `text/`: request parsing, tokenization, detokenization, stop strings, postprocessing;
- `engine_step/`: the engine contract every engine shares (inputs, limits, step loop, metrics);
- `engines/<engine>/`: openvino (CPU), relay (to TensorRT-LLM's C++ backend), pytorch (LLM API);
- `triton/`: Triton plumbing (tensors in and out, the close-once response channel, metrics, BLS).

Everything but `models/` and `triton/` imports no Triton and is tested without a server.  Nothing
here imports `build_engines`, `standins` or `tests` (tests/unit/test_product_boundaries.py): the
test doubles of TensorRT-LLM live in `standins/`, outside the product and its images.
"""
